"""Play a game served over OpenEnv through the same tool methods as ``kit.envs``.

Why: the engines are fastest in-process, but a game behind an OpenEnv server (``envs/``: a local
``uvicorn``, a Docker container, a Hugging Face Space) can be shared by many trainers, scaled on
its own machines and reached by URL, which is how the OpenEnv ecosystem ships environments.
``env("wordle", url)`` returns a class that ``GRPOTrainer(environment_factory=...)`` takes just as
it takes ``kit.envs.WordleEnv``: the same tools with the same schemas, the same argument checks and
errors (made here, before anything is sent), the same properties; only the engine is elsewhere.

This module also holds the wire models (``KitAction``, ``KitObservation``, ``KitState``), so the
servers in ``envs/`` and this client share one definition of the protocol.

One pitfall shapes the design: OpenEnv's client silently reopens a dropped WebSocket, and the
server gives the new socket a *fresh* environment, so the episode is gone and nothing says so.
Every observation therefore carries the episode id and step count, and any answer that does not
continue this episode raises ``SessionLostError`` instead of playing on a board the model never saw.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from pydantic import Field

from kit.envs import ENVS, _GameEnv
from kit.games import Step

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.types import Action, Observation, State
    from websockets.exceptions import ConnectionClosed
except ImportError as error:  # the serve extra is optional; the rest of the kit does not need it
    raise ImportError("kit.remote needs OpenEnv: pip install 'kit[serve]'") from error

BOOKKEEPING = ("episode_id", "step_count", "game")
"""Observation metadata keys the server adds; every other key is the game's step info."""


class KitAction(Action):
    """One move, as the game's text action: ``"[crane]"``, ``"LEFT"``, ``"[5 3 7]"``, a message."""

    # Named as in OpenEnv's textarena_env and echo_env actions.
    message: str


class KitObservation(Observation):
    """What a reset or a step adds, with the game's public state.

    ``text`` is the text only this call adds (a reset: the whole first observation), exactly as
    the in-process engine returns it. ``metadata`` holds the step's info (``valid``, ``reason``,
    ...), the ``episode_id`` and ``step_count`` that prove the episode continues, and ``game``:
    ``done``, ``won``, ``reward`` (the episode's so far), ``num_steps``, ``invalid_moves`` and the
    game's public fields (``guesses``, ``board``, ...). Secrets (``secret``, ``solution``) stay in
    the state, so an observation can be shown to a model whole.
    """

    text: str = ""


class KitState(State):
    """The whole server-side state of a session, secrets included (for reward functions)."""

    game: str = ""
    task: dict[str, Any] = Field(default_factory=dict)
    done: bool = False
    won: bool = False
    reward: float = 0.0
    num_steps: int = 0
    invalid_moves: int = 0
    data: dict[str, Any] = Field(default_factory=dict)


class RemoteError(RuntimeError):
    """The server answered with an error frame; ``code`` is OpenEnv's (``EXECUTION_ERROR``, ...)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.code = str(data.get("code", "UNKNOWN"))
        self.message = str(data.get("message", "unknown error"))
        if data.get("errors"):  # a VALIDATION_ERROR lists what was wrong with the message
            self.message += f": {data['errors']}"
        if self.code == "CAPACITY_REACHED":
            self.message += " Serve with a larger MAX_CONCURRENT_ENVS (see envs/README.md)."
        super().__init__(f"{self.message} (code: {self.code})")


class SessionLostError(RuntimeError):
    """The server no longer holds this episode (the connection dropped); reset to start anew."""


class KitClient(EnvClient[KitAction, KitObservation, KitState]):
    """OpenEnv's WebSocket client for the kit servers; ``KitClient(url).sync()`` to use it raw."""

    def _step_payload(self, action: KitAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[KitObservation]:
        observation = KitObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload["done"],
            }
        )
        return StepResult(observation, observation.reward, observation.done, observation.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> KitState:
        return KitState.model_validate(payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        # EnvClient's own version flattens an error frame into RuntimeError text; the code is what
        # tells a refused move (EXECUTION_ERROR) from a full server or a malformed message.
        try:
            await self._send(message)
        except ConnectionClosed:
            pass  # a refused session sends its error frame, then closes: read it below
        response = await self._receive()
        if response.get("type") == "error":
            raise RemoteError(response.get("data", {}))
        return response


class _Connection:
    """One WebSocket session, opened at first use and shared by the games of one env instance."""

    def __init__(self, base_url: str, options: dict[str, Any]) -> None:
        self.base_url = base_url
        self._options = options
        self._client: Any = None  # a SyncEnvClient once connected
        self.episode_id: str | None = None  # the episode the server holds for this session

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = KitClient(self.base_url, **self._options).sync()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self.episode_id = None


class RemoteGame:
    """One episode played on a server, shaped like a local engine (``kit.games.Game``).

    ``done``, ``won``, ``reward``, ``num_steps`` and ``invalid_moves`` are the server's after the
    last call; the game's public fields (``guesses``, ``board``, ...) read as attributes too.
    ``state()`` asks the server for everything, secrets included.
    """

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self._episode_id: str | None = None
        self._steps = 0
        self._game: dict[str, Any] = {"done": False, "won": False, "reward": 0.0}
        self._lost: str | None = None

    done = property(lambda self: self._game["done"])
    won = property(lambda self: self._game["won"])
    reward = property(lambda self: self._game["reward"])
    num_steps = property(lambda self: self._game.get("num_steps", 0))
    invalid_moves = property(lambda self: self._game.get("invalid_moves", 0))

    def __getattr__(self, name: str) -> Any:
        game = self.__dict__.get("_game", {})
        if name.startswith("_") or name not in game:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return game[name]

    def reset(self, **task: Any) -> str:
        """Start the episode ``task`` names on the server; return its first observation."""
        for attempt in range(2):
            try:
                result = self._connection.client.reset(**task)
                break
            except ConnectionClosed as error:
                # Reset depends on nothing before it: a socket that died while idle (a proxy's
                # timeout between batches) costs one retry, which reconnects, not an error.
                if attempt:
                    raise SessionLostError(f"{self._connection.base_url}: {error}") from error
            except RemoteError as error:
                raise _as_value_error(error) from error
        metadata = result.observation.metadata
        self._episode_id = self._connection.episode_id = metadata["episode_id"]
        self._steps, self._game, self._lost = 0, metadata["game"], None
        return result.observation.text

    def step(self, action: str) -> Step:
        """Play ``action`` on the server; return what the engine returned, byte for byte."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, got {type(action).__name__}")
        self._check_current()
        try:
            result = self._connection.client.step(KitAction(message=action))
        except ConnectionClosed as error:
            raise self._lose(f"the connection closed during the step ({error})") from error
        except RemoteError as error:
            self._check_session()
            raise _as_value_error(error) from error
        metadata = result.observation.metadata
        where = (metadata.get("episode_id"), metadata.get("step_count"))
        if where != (self._episode_id, self._steps + 1):
            raise self._lose(f"the server answered with step {where[1]} of episode {where[0]}")
        self._steps, self._game = self._steps + 1, metadata["game"]
        info = {key: value for key, value in metadata.items() if key not in BOOKKEEPING}
        return Step(result.observation.text, result.reward, result.done, info)

    def state(self) -> KitState:
        """The server's whole state of this episode, secrets (``secret``, ``solution``) included."""
        self._check_current()
        return self._check_session()

    def _check_current(self) -> None:
        if self._lost is not None:
            raise SessionLostError(self._lost)
        if self._episode_id is None:
            raise ValueError("call reset() first")
        if self._connection.episode_id != self._episode_id:
            raise ValueError("this game's session was closed, or replaced by a later reset()")

    def _check_session(self) -> KitState:
        """Ask the server which episode it holds; raise SessionLostError if not this one."""
        try:
            state = self._connection.client.state()
        except ConnectionClosed as error:
            raise self._lose(f"the connection closed ({error})") from error
        if state.episode_id != self._episode_id:
            raise self._lose(f"the server's session holds episode {state.episode_id}, not this one")
        return state

    def _lose(self, why: str) -> SessionLostError:
        self._lost = (
            f"episode {self._episode_id} on {self._connection.base_url} is lost after "
            f"{self._steps} steps: {why}. OpenEnv's client reopens a dropped WebSocket to a "
            "fresh environment; call reset() to start a new episode."
        )
        return SessionLostError(self._lost)


def _as_value_error(error: RemoteError) -> Exception:
    # The engine's ValueError (a bad task, a move after the end) crosses the wire as
    # EXECUTION_ERROR; give it back as the ValueError the in-process env raises.
    if error.code in ("EXECUTION_ERROR", "VALIDATION_ERROR"):
        return ValueError(error.message)
    return error


class _RemoteEnv:
    """Mixin: a ``kit.envs`` class whose engine runs on an OpenEnv server."""

    base_url: ClassVar[str]
    client_options: ClassVar[dict[str, Any]]

    def __init__(self) -> None:
        self._connection = _Connection(self.base_url, self.client_options)
        super().__init__()

    def _new_game(self) -> RemoteGame:
        return RemoteGame(self._connection)

    def __enter__(self) -> _RemoteEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # No public close(): TRL would turn it into a tool. The socket also closes at exit.
        self._connection.close()


_SCHEMES = ("http://", "https://", "ws://", "wss://")


def env(game: str | type[_GameEnv], base_url: str, **client_options: Any) -> type[_GameEnv]:
    """A ``kit.envs`` class whose games are played on the OpenEnv server at ``base_url``.

    ``game`` is a name (``"wordle"``, ``"catch"``, ``"sudoku"``, ``"echo"``) or a ``kit.envs``
    class (a variant's tools and docstrings); the server decides the variant it plays.
    ``client_options`` go to OpenEnv's ``EnvClient`` (``headers={"Authorization": ...}`` for a
    private Space, ``message_timeout_s=...``). The class takes no arguments, as TRL's
    ``environment_factory`` wants; each instance opens its own session at its first ``reset``::

        RemoteWordle = kit.remote.env("wordle", "http://127.0.0.1:8000")
        trainer = GRPOTrainer(..., environment_factory=RemoteWordle)
    """
    if isinstance(game, str):
        if game not in ENVS:
            raise ValueError(f"unknown game {game!r}; choose one of {sorted(ENVS)}")
        base = ENVS[game]
    elif isinstance(game, type) and issubclass(game, _GameEnv):
        base = game
    else:
        raise ValueError(f"game must be a game name or a kit.envs class, not {game!r}")
    if not isinstance(base_url, str) or not base_url.startswith(_SCHEMES):
        raise ValueError(
            f"base_url must be a URL starting with one of {_SCHEMES}, not {base_url!r}"
        )
    accepted = set(inspect.signature(EnvClient.__init__).parameters) - {"self", "base_url"}
    unknown = sorted(set(client_options) - accepted)
    if unknown:
        raise ValueError(f"unknown client options {unknown}; EnvClient takes {sorted(accepted)}")
    return type(
        f"Remote{base.__name__}",
        (_RemoteEnv, base),
        {
            "base_url": base_url,
            "client_options": dict(client_options),
            "__module__": __name__,
            "__doc__": base.__doc__,
        },
    )
