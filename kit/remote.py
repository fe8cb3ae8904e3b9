"""Play a game served over OpenEnv through the same tool methods as ``kit.envs``.

Why: the engines are fastest in-process, but a game behind an OpenEnv server (``envs/``: a local
``uvicorn``, a Docker container, a Hugging Face Space) can be shared by many trainers, scaled on
its own machines and reached by URL, which is how the OpenEnv ecosystem ships environments.
``env("wordle", url)`` returns a class that ``GRPOTrainer(environment_factory=...)`` takes just as
it takes ``kit.envs.WordleEnv``: the same tools with the same schemas, the same argument checks and
errors (made here, before anything is sent), the same properties; only the engine is elsewhere.

The wire models come from ``kit.serve``, so the servers and this client share one definition of
the protocol; the client tolerates fields it does not know. It also plays the *official* OpenEnv
server of each game (the Hub Spaces TRL's examples train on), through the game's
``OfficialReader``; those servers ignore the task, which this client warns about.

One pitfall shapes the design: OpenEnv's client silently reopens a dropped WebSocket, and the
server gives the new socket a *fresh* environment, so the episode is gone and nothing says so.
Every observation therefore carries the episode id and step count, and any answer that does not
continue this episode raises ``SessionLostError`` instead of playing on a board the model never saw.
"""

from __future__ import annotations

import inspect
import json
import urllib.request
import warnings
import weakref
from typing import Any, ClassVar

from pydantic import ConfigDict

from kit.envs import ENVS, GameEnv
from kit.games import Step

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from websockets.exceptions import ConnectionClosed

    from kit.serve import ENVIRONMENTS, environment_class, resolve_env
    from kit.serve.base import BOOKKEEPING, KitAction, KitObservation, KitState, OfficialReader
except ImportError as error:  # the serve extra is optional; the rest of the kit does not need it
    raise ImportError("kit.remote needs OpenEnv: pip install 'kit[serve]'") from error


class ServedObservation(KitObservation):
    """An observation as any server sends it: the kit's fields, and every other field kept as is.

    Unknown fields are allowed, not refused: a richer server (a later kit, an official OpenEnv
    server) must not break the client, and the official fields (``messages``, ``info_state``,
    ``echoed_message``) read as attributes.
    """

    model_config = ConfigDict(extra="allow")


class ServedState(KitState):
    """A state as any server sends it; unknown fields kept, as in ``ServedObservation``."""

    model_config = ConfigDict(extra="allow")


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


class UnsupportedServerError(RuntimeError):
    """The server is neither a kit server nor an official server of the game that this client
    reads (an MCP server, say: OpenEnv's current ``echo_env``)."""


class SessionLostError(RuntimeError):
    """The server no longer holds this episode (the connection dropped); reset to start anew."""


class KitClient(EnvClient[KitAction, ServedObservation, ServedState]):
    """OpenEnv's WebSocket client for the kit servers; ``KitClient(url).sync()`` to use it raw."""

    def _step_payload(self, action: KitAction | dict[str, Any]) -> dict[str, Any]:
        # A dict is sent as is: the official Catch server takes OpenSpiel's action ids.
        return action if isinstance(action, dict) else {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ServedObservation]:
        observation = ServedObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload["done"],
            }
        )
        return StepResult(observation, observation.reward, observation.done, observation.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> ServedState:
        return ServedState.model_validate(payload)

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

    On an official OpenEnv server of the game (one that sends no kit bookkeeping), the game's
    ``OfficialReader`` rebuilds the text and the counters from the official fields instead; the
    public fields and secrets are then not available.
    """

    def __init__(self, connection: _Connection, game_name: str) -> None:
        self._connection = connection
        self._game_name = game_name
        self._episode_id: str | None = None
        self._steps = 0
        self._game: dict[str, Any] = {"done": False, "won": False, "reward": 0.0}
        self._official: OfficialReader | None = None
        self._lost: str | None = None

    done = property(lambda self: self._counter("done"))
    won = property(lambda self: self._counter("won"))
    reward = property(lambda self: self._counter("reward"))
    num_steps = property(lambda self: self._counter("num_steps"))
    invalid_moves = property(lambda self: self._counter("invalid_moves"))

    def _counter(self, name: str) -> Any:
        if self._official is not None:
            return getattr(self._official, name)
        return self._game.get(name, 0)

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
        self._steps, self._lost = 0, None
        if "episode_id" not in metadata:  # an official server: no kit fields to read
            return self._reset_official(result, task)
        self._official = None
        self._episode_id = self._connection.episode_id = metadata["episode_id"]
        self._game = metadata["game"]
        return result.observation.text

    def _reset_official(self, result: StepResult, task: dict[str, Any]) -> str:
        if task:
            warnings.warn(
                f"{self._connection.base_url} is not a kit server: it ignores the task {task} and "
                "draws its own board, so the rollouts of a GRPO group will not share one (serve "
                "the game with kit.serve to choose the board)",
                stacklevel=4,
            )
        reader = getattr(ENVIRONMENTS[self._game_name], "reader", None)
        observation = result.observation
        fields = reader.fields if reader is not None else ("episode_id",)
        missing = [name for name in fields if getattr(observation, name, None) is None]
        if reader is None or missing:
            self._connection.close()
            raise UnsupportedServerError(
                f"{self._connection.base_url} is not a server kit.remote can play "
                f"{self._game_name} on: its reset answered with {_fields(observation)}, without "
                f"{missing}. kit.remote plays kit.serve's servers (python -m kit.serve "
                f"{self._game_name}) and these official OpenEnv servers: {_supported()}. MCP "
                "servers (OpenEnv's current echo_env, whose tools are called with call_tool) are "
                "not among them."
            )
        self._official = reader()
        self._episode_id = self._connection.episode_id = object()  # official replies carry none
        self._game = {}
        return self._official.reset(result.observation)

    def step(self, action: str) -> Step:
        """Play ``action`` on the server; return what the engine returned, byte for byte."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, got {type(action).__name__}")
        self._check_current()
        official = self._official
        if official is not None and official.done:
            raise ValueError("the game is over; call reset() to start a new one")
        payload = official.payload(action) if official is not None else KitAction(message=action)
        try:
            result = self._connection.client.step(payload)
        except ConnectionClosed as error:
            raise self._lose(f"the connection closed during the step ({error})") from error
        except RemoteError as error:
            if official is None:
                self._check_session()
            raise _as_value_error(error) from error
        if official is not None:
            try:
                return official.step(action, result.observation, result.reward, result.done)
            except LookupError as error:
                raise self._lose(str(error)) from error
        metadata = result.observation.metadata
        where = (metadata.get("episode_id"), metadata.get("step_count"))
        if where != (self._episode_id, self._steps + 1):
            raise self._lose(f"the server answered with step {where[1]} of episode {where[0]}")
        self._steps, self._game = self._steps + 1, metadata["game"]
        info = {key: value for key, value in metadata.items() if key not in BOOKKEEPING}
        return Step(result.observation.text, result.reward, result.done, info)

    def state(self) -> ServedState:
        """The server's whole state of this episode, secrets (``secret``, ``solution``) included."""
        self._check_current()
        if self._official is not None:
            return self._connection.client.state()  # the official server's own state model
        return self._check_session()

    def _check_current(self) -> None:
        if self._lost is not None:
            raise SessionLostError(self._lost)
        if self._episode_id is None:
            raise ValueError("call reset() first")
        if self._connection.episode_id != self._episode_id:
            raise ValueError("this game's session was closed, or replaced by a later reset()")

    def _check_session(self) -> ServedState:
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


def _fields(observation: ServedObservation) -> list[str]:
    sent = observation.model_dump(exclude_unset=True, exclude={"text"})
    return sorted(sent) + [f"metadata.{key}" for key in sorted(observation.metadata)]


def _supported() -> str:
    readers: dict[str, list[str]] = {}
    for name in ENVIRONMENTS:
        reader = getattr(ENVIRONMENTS[name], "reader", None)  # a game of one's own may have none
        if reader is not None:
            readers.setdefault(reader.server, []).append(name)
    return "; ".join(f"{server} ({', '.join(games)})" for server, games in readers.items())


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
        # An env dropped without `with` must not hold its server session until the server
        # restarts: the socket closes when the env is garbage-collected.
        weakref.finalize(self, self._connection.close)
        super().__init__()

    def _new_game(self) -> RemoteGame:
        return RemoteGame(self._connection, self.game_name)

    def __enter__(self) -> _RemoteEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # No public close(): TRL would turn it into a tool. The socket also closes at exit.
        self._connection.close()


_SCHEMES = ("http://", "https://", "ws://", "wss://")


def env(game: str | type[GameEnv], base_url: str, **client_options: Any) -> type[GameEnv]:
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
    elif isinstance(game, type) and issubclass(game, GameEnv):
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


def spec_to_factory(spec: str, *, game: str | None = None, **client_options: Any) -> type:
    """A zero-argument class for ``GRPOTrainer(environment_factory=...)`` playing ``spec``.

    ``spec`` as in ``resolve_env`` (a server started here lives as long as the process; its
    ``Server`` is the class's ``server`` attribute). The game is the served environment's, or
    for a URL the one its ``/metadata`` names (``game=`` for a server that is not the kit's).
    ``client_options`` go to :func:`env`.
    """
    url, server = resolve_env(spec)
    if game is None:
        game = environment_class(spec).game_name if server is not None else _served_game(url)
    factory = env(game, url, **client_options)
    factory.server = server
    return factory


def _served_game(url: str) -> str:
    http = url.replace("ws://", "http://", 1).replace("wss://", "https://", 1).rstrip("/")
    with urllib.request.urlopen(f"{http}/metadata", timeout=30) as response:
        name = json.load(response).get("name", "")
    game = name.removeprefix("kit-")
    if not name.startswith("kit-") or game not in ENVIRONMENTS:
        raise ValueError(
            f"{url} serves {name!r}, not a kit game: pass game= (one of {sorted(ENVIRONMENTS)})"
        )
    return game
