"""What every served game shares: the wire models and ``KitEnvironment``, a kit engine as an OpenEnv env.

Why a server at all: OpenEnv is how the ecosystem deploys environments (a local ``uvicorn``, a
Docker image, a Hugging Face Space reached by URL), and TRL's OpenEnv examples train through
clients written for OpenEnv's official servers (``textarena_env`` for Wordle and Sudoku,
``openspiel_env`` for Catch, ``echo_env``). So each game here speaks its official server's schema,
as a superset: the official fields (``messages``, ``info_state``, ``echoed_message``...) that those
clients read, plus the kit's own (``text``: what this call adds, exactly as the engine returns it;
``metadata``: the step's info, ``episode_id``, ``step_count`` and the game's public state), which
``kit.remote`` reads. Two behaviours follow the official servers because clients rely on them: a
bare ``reset()`` draws a task (TRL's classes never name one), and a step before any reset plays
on a drawn board (TRL's echo class never resets). A client that names a task gets exactly that
board, which is what lets the rollouts of a GRPO group share one.

The engine underneath is the same ``kit.games`` engine the in-process envs use, so a game played
through a server returns the same text, rewards and ``done`` byte for byte.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any, ClassVar

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, Field

import kit
from kit.envs import ENVS
from kit.games import Game, Step, check_action, make

BOOKKEEPING = (
    *("episode_id", "step_count", "game"),
    *("env_id", "turn", "raw_messages", "reward_signals", "original_message"),  # official keys
)
"""Observation metadata keys the server adds; every other key is the game's step info."""

TASK_SEED_RANGE = 2**31
"""A drawn task is ``{"seed": n}`` with ``n`` below this, so it can be replayed by naming it."""


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


class TextArenaState(KitState):
    """The kit's state plus the fields of ``textarena_env``'s (``raw_state``, TextArena's own
    internal dump, is left empty: the kit's ``data`` holds the game)."""

    env_id: str = ""
    num_players: int = 1
    max_turns: int | None = None
    turn: int = 0
    last_reward: float = 0.0
    last_info: dict[str, Any] = Field(default_factory=dict)
    raw_state: dict[str, Any] = Field(default_factory=dict)


class TextArenaMessage(BaseModel):
    """One message of TextArena's observation, as OpenEnv's ``textarena_env`` sends it."""

    sender_id: int
    content: str
    category: str


class TextArenaObservation(KitObservation):
    """OpenEnv's ``textarena_env`` observation (Wordle, Sudoku) plus the kit's ``text``.

    ``messages[0].content`` is the whole transcript so far (TRL's Wordle and Sudoku classes read
    it and slice off what they saw); ``prompt`` is the first observation until the first valid
    move, then the env id, as the official server sends them.
    """

    prompt: str = ""
    messages: list[TextArenaMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=lambda: [0])
    info: dict[str, Any] = Field(default_factory=dict)


class KitEnvironment(Environment[KitAction, KitObservation, KitState]):
    """A kit game as an OpenEnv environment; subclasses name the game and add the official fields.

    ``reset(seed=None, episode_id=None, **task)`` is a pure function of its task (``seed``,
    ``secret``, ``puzzle``, ``ball_col``), as in ``kit.envs``; without one it draws
    ``{"seed": n}`` from ``task_rng`` (the server's, seeded by ``build_app(seed=...)``) and the
    state records it. ``step(action)`` plays the game's text action. A move the game rejects is an
    observation with ``metadata["valid"] == False`` (it counts under the game's rules); a request
    the engine cannot take at all (a bad task, a move after the end) raises ``ValueError``, which
    the server sends back as an ``EXECUTION_ERROR`` frame, and nothing changes.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    game_name: ClassVar[str]
    action_cls: ClassVar[type[Action]] = KitAction
    observation_cls: ClassVar[type[KitObservation]] = KitObservation
    state_cls: ClassVar[type[KitState]] = KitState
    options: ClassVar[dict[str, Any]] = {}  # the variant, e.g. {"word_length": 7}
    public: ClassVar[tuple[str, ...]] = ()  # engine fields every observation carries
    hidden: ClassVar[tuple[str, ...]] = ()  # engine fields only the state carries (secrets)
    reader: ClassVar[type[OfficialReader]]  # how kit.remote plays the official server
    # Task keys whose reset must search or check what a client chose (Sudoku's ``puzzle``): see
    # ``costly``. Every other call is bounded by construction and answers inline.
    costly_tasks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, task_rng: random.Random | None = None) -> None:
        super().__init__()
        self._task_rng = task_rng if task_rng is not None else random.Random()
        self._game: Game | None = None
        self._task: dict[str, Any] = {}
        self._episode_id: str | None = None
        self._step_count = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **task: Any
    ) -> KitObservation:
        task = self.task(seed, **task)
        game, text = play_reset(self.game_name, self.options, task)  # raises before any change
        return self.start(game, text, task, episode_id)

    def task(self, seed: int | None = None, **task: Any) -> dict[str, Any]:
        """The task a reset plays: the one given, or a drawn ``{"seed": n}`` if it names none."""
        task = {key: value for key, value in {"seed": seed, **task}.items() if value is not None}
        spec = ENVS[self.game_name]
        if spec.task_required and not any(key in task for key in spec.task_keys):
            task = {**task, "seed": self._task_rng.randrange(TASK_SEED_RANGE)}
        return task

    def costly(self, task: dict[str, Any]) -> bool:
        """Whether resetting to ``task`` may cost more than a bounded few microseconds: it names
        a key of ``costly_tasks``. The server runs such a reset in a worker process, under its
        CPU budget, so that it delays only the session that asked (``kit/serve/websocket.py``)."""
        return any(key in task for key in self.costly_tasks)

    def start(
        self, game: Game, text: str, task: dict[str, Any], episode_id: str | None
    ) -> KitObservation:
        """Make ``game``, just reset to ``task`` (returning ``text``), this session's episode."""
        if episode_id is not None and not isinstance(episode_id, str):
            raise ValueError(f"episode_id must be a str or None, not {type(episode_id).__name__}")
        self._game, self._task, self._step_count = game, task, 0
        self._episode_id = episode_id or uuid.uuid4().hex
        return self._observe(text, game.reward, game.done, {}, action=None)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> KitObservation:
        move = self.move(action)  # a malformed action raises before a drawn board is dealt
        check_action(self.game_name, move)  # as the tool envs do: the same text, nothing played
        if self._game is None:
            self.reset()  # as the official servers do: a step before any reset plays a drawn board
        step = self._game.step(move)
        self._step_count += 1
        return self._observe(step.observation, step.reward, step.done, step.info, action=move)

    def move(self, action: Action) -> str:
        """The game's text action an action model stands for (subclasses map official actions)."""
        return action.message

    @property
    def state(self) -> KitState:
        game = self._game
        if game is None:
            return self.state_cls(game=self.game_name, **self.official_state())
        return self.state_cls(
            episode_id=self._episode_id,
            step_count=self._step_count,
            game=self.game_name,
            task=dict(self._task),
            **self._summary(game),
            data={name: copy.deepcopy(getattr(game, name)) for name in self.public + self.hidden},
            **self.official_state(),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        doc = (ENVS[self.game_name].__doc__ or "").strip()
        return EnvironmentMetadata(
            name=f"kit-{self.game_name}",
            description=" ".join(doc.split("\n\n")[0].split()),
            version=kit.__version__,
        )

    def official(
        self, text: str, reward: float, done: bool, info: dict[str, Any], action: str | None
    ) -> dict[str, Any]:
        """The official server's fields for this observation; ``reward``/``metadata`` override."""
        return {}

    def official_state(self) -> dict[str, Any]:
        """The official server's state fields (``state_cls`` declares them)."""
        return {}

    def _observe(
        self, text: str, reward: float, done: bool, info: dict[str, Any], action: str | None
    ) -> KitObservation:
        game = self._game
        snapshot = self._summary(game)
        # Copies: an in-process caller keeps the observation while the engine plays on.
        snapshot.update({name: copy.deepcopy(getattr(game, name)) for name in self.public})
        fields = self.official(text, reward, done, info, action)
        # Written last: neither an engine's info key nor an official field can pass for the
        # bookkeeping the client checks.
        metadata = {**fields.pop("metadata", {}), **info}
        metadata |= {"episode_id": self._episode_id, "step_count": self._step_count}
        metadata["game"] = snapshot
        fields.setdefault("reward", reward)
        return self.observation_cls(text=text, done=done, metadata=metadata, **fields)

    @staticmethod
    def _summary(game: Game) -> dict[str, Any]:
        return {
            "done": game.done,
            "won": game.won,
            "reward": game.reward,
            "num_steps": game.num_steps,
            "invalid_moves": game.invalid_moves,
        }


class TextArenaEnvironment(KitEnvironment):
    """A kit game behind OpenEnv's ``textarena_env`` schema (Wordle, Sudoku)."""

    observation_cls = TextArenaObservation
    state_cls = TextArenaState
    reader: ClassVar[type[OfficialReader]]  # set below: the class is defined after this one
    env_id: ClassVar[str]  # TextArena's id, e.g. "Wordle-v0"
    _last: tuple[float, dict[str, Any]] = (0.0, {})  # the last step's reward and info, for state
    _transcript = ""  # the episode's whole text so far: what TextArena's one message holds

    def official(
        self, text: str, reward: float, done: bool, info: dict[str, Any], action: str | None
    ) -> dict[str, Any]:
        transcript = self._transcript = text if action is None else self._transcript + text
        # TextArena's prompt is the first observation until the first accepted move.
        turn = self._turn()
        signals = self.reward_signals(action, transcript, reward) if action is not None else {}
        message = {"sender_id": -1, "content": transcript, "category": "MESSAGE"}
        metadata: dict[str, Any] = {"env_id": self.env_id, "turn": turn, "raw_messages": [message]}
        if signals:
            metadata["reward_signals"] = signals
        official_info = {"reward_signals": signals} if signals else {}
        self._last = (reward if action is not None else 0.0, official_info)
        return {
            "prompt": transcript.strip() if turn == 0 else self.env_id,
            "messages": [TextArenaMessage(**message)],
            "info": official_info,
            "metadata": metadata,
        }

    def official_state(self) -> dict[str, Any]:
        last_reward, last_info = self._last
        return {
            "env_id": self.env_id,
            "turn": self._turn(),
            "last_reward": last_reward,
            "last_info": last_info,
        }

    def _turn(self) -> int:
        """TextArena's turn: the moves accepted so far (an invalid move does not advance it)."""
        game = self._game
        return game.num_steps - game.invalid_moves if game is not None else 0

    def reward_signals(self, action: str, transcript: str, reward: float) -> dict[str, float]:
        """The official server's per-step auxiliary rewards (``metadata["reward_signals"]``)."""
        return {}


def play_reset(game_name: str, options: dict[str, Any], task: dict[str, Any]) -> tuple[Game, str]:
    """A new engine of ``game_name`` reset to ``task``, and its first text: the part of a reset
    a server may run in a worker process (the engine is plain Python, so it travels back)."""
    game = make(game_name, **options)
    return game, game.reset(**task)


class OfficialReader:
    """How ``kit.remote`` plays this game on its *official* OpenEnv server, which sends no ``text``.

    The official servers (``textarena_env``, ``openspiel_env``, ``echo_env``: the Hub Spaces
    TRL's examples train on) send their own fields only. A reader turns them back into the kit's
    ``Step`` (the text the engine would have returned) and keeps the engine's counters, so a
    ``kit.envs`` tool env plays either server. One reader per episode; subclasses per protocol.
    """

    server: ClassVar[str] = "the game's official server"  # as kit.remote's errors name it
    fields: ClassVar[tuple[str, ...]] = ()  # what that server's reset observation always carries

    def __init__(self) -> None:
        self.done = False
        self.won = False
        self.reward = 0.0
        self.num_steps = 0
        self.invalid_moves = 0

    def payload(self, action: str) -> dict[str, Any]:
        """The step frame's data for the game's text action."""
        return {"message": action}

    def reset(self, observation: Any) -> str:
        """The first observation's text."""
        raise NotImplementedError

    def step(self, action: str, observation: Any, reward: float | None, done: bool) -> Step:
        """The ``Step`` the engine would have returned; raises ``LookupError`` if the reply
        cannot continue this episode (the server's session was replaced)."""
        raise NotImplementedError

    def _count(self, reward: float | None, done: bool, valid: bool) -> None:
        self.num_steps += 1
        self.invalid_moves += not valid
        self.reward, self.done = float(reward or 0.0), done
        self.won = done and self.reward == 1.0


class TextArenaReader(OfficialReader):
    """``textarena_env``: the text is what ``messages[0].content`` gained since the last reply."""

    server = "textarena_env"
    fields = ("messages",)
    INVALID = "You attempted an invalid move"

    def reset(self, observation: Any) -> str:
        self._transcript = self._content(observation)
        return self._transcript

    def step(self, action: str, observation: Any, reward: float | None, done: bool) -> Step:
        content = self._content(observation)
        if not content.startswith(self._transcript):
            raise LookupError("the reply's transcript does not continue this episode's")
        text, self._transcript = content[len(self._transcript) :], content
        valid = self.INVALID not in text
        self._count(reward, done, valid)
        return Step(text, self.reward, done, {"valid": valid})

    @staticmethod
    def _content(observation: Any) -> str:
        messages = getattr(observation, "messages", None) or [{}]
        first = messages[0]
        return str(first.get("content", "") if isinstance(first, dict) else first.content)


TextArenaEnvironment.reader = TextArenaReader
