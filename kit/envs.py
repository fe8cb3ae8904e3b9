"""Tool-method environments: what ``GRPOTrainer(environment_factory=...)`` trains through.

TRL 1.16 builds one instance per rollout with no arguments, calls ``reset(**row)`` with every
dataset column before each batch (instances are pooled and reused), and exposes every public
function of the class other than ``reset``/``get_reward`` as a tool whose JSON schema
transformers builds from the type hints and the Google-style ``Args:`` docstring. So:

* ``reset`` is a pure function of the row: the task comes from columns (``secret``, ``seed``,
  ``puzzle``, ``ball_col``, ...), never from the env's own randomness, because the G rollouts of
  a group must see the same board (in vLLM server mode they are all prompted from the first).
* The only public methods are the tools. State for reward functions is exposed as properties
  (``done``, ``won``, ``reward``, ``invalid_calls``, ``game``, ...), which TRL does not turn into
  tools.
* A tool returns only the text the move adds. Bad input raises ``ValueError`` with a message
  that tells the model what to do next: TRL shows it to the model as ``{'error': '...'}`` and
  counts it in ``tools/failure_frequency``. A move the game itself rejects also counts under the
  game's rules (the reference's one-warning rule: a second invalid move in a row ends the game).
  Every call is recorded in ``calls``, failed or not, and no input makes a tool raise anything
  else or return text a tokenizer cannot encode: a string with a lone surrogate (``"\\ud800"``,
  legal in JSON) is refused, since TRL's tokenisation of such a tool result fails outside its
  tool-error handling and ends the training step (``tests/test_tool_fuzz.py``).

This module holds what every tool env shares: ``GameEnv``, the argument checks a tool runs on
whatever a model sent (``as_int``, ``as_text``, ``shown``), ``env_tools`` and ``ENVS``. Each
game's env class lives in its game's module, beside its prompt, tasks and reward
(``kit.builtin.catch.CatchEnv``, ...), and is importable from here too
(``from kit.envs import CatchEnv``). Variants are subclasses:
``class LongWordleEnv(WordleEnv): options = {"word_length": 7}``. A game of your own subclasses
``GameEnv`` (``game_name``, ``task_keys``, and its tools, each of which checks its arguments and
hands the move to ``_play``) and is registered with its engine in ``kit.registry`` (see
``examples/guess_number.py``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, ClassVar

from kit import registry
from kit.games import Game, Step, check_action, make
from kit.trajectory import ToolCall

# TRL never exposes these as tools (grpo_trainer.py, the environment pool set-up).
NOT_TOOLS = ("reset", "get_reward")
# What a tool replies after the move that ends the game (``GameEnv._reply``).
GAME_OVER = "The game is over."


def env_tools(env: Any) -> list[Callable[..., Any]]:
    """The tools TRL exposes for an env instance, in TRL's order (alphabetical, bound methods).

    Every public function on the class except ``reset`` and ``get_reward``; properties and
    private helpers are not tools.
    """
    if isinstance(env, type):
        raise ValueError(f"env_tools needs an instance of {env.__name__}, not the class")
    return [
        getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in NOT_TOOLS and not name.startswith("_")
    ]


class GameEnv:
    """What every tool env shares; a game's env subclasses it and adds its tools (public
    methods), each of which checks its arguments and hands the move to ``_play``."""

    game_name: ClassVar[str]
    task_keys: ClassVar[tuple[str, ...]]  # columns that name the task: a row needs one of them
    setting_keys: ClassVar[tuple[str, ...]] = ()  # columns that adjust it (Sudoku's difficulty)
    options: ClassVar[dict[str, Any]] = {}
    task_required: ClassVar[bool] = True

    def __init__(self) -> None:
        self._game: Game = self._new_game()
        self._calls: list[ToolCall] = []
        self._observation = ""

    def reset(self, **row: Any) -> str:
        """Start the task named by the row's task columns; other columns (``prompt``, ...) are ignored."""
        task = {key: row[key] for key in self.task_keys if row.get(key) is not None}
        if self.task_required and not task:
            raise ValueError(
                f"{type(self).__name__}.reset needs one of the columns {list(self.task_keys)} "
                f"in the dataset row; got columns {sorted(row)}"
            )
        task.update({key: row[key] for key in self.setting_keys if row.get(key) is not None})
        game = self._new_game()  # a fresh engine: a bad row leaves the old one intact
        observation = game.reset(**task)
        self._game, self._calls, self._observation = game, [], observation
        return observation

    def _new_game(self) -> Game:
        """A fresh engine for the next episode; ``kit.remote`` returns one played on a server."""
        return make(self.game_name, **self.options)

    # -- state for reward functions and visualisers (properties: TRL does not expose them as tools)
    @property
    def game(self) -> Game:
        """The engine underneath, for game-specific state (``guesses``, ``board``, ...)."""
        return self._game

    @property
    def done(self) -> bool:
        return self._game.done

    @property
    def won(self) -> bool:
        return self._game.won

    @property
    def reward(self) -> float:
        """The reward the reference paid for the last move (0.0 before the game ends, except
        Echo's, which pays every message); final once ``done``."""
        return self._game.reward

    @property
    def calls(self) -> list[ToolCall]:
        """Every tool call of this episode, failed ones included."""
        return list(self._calls)

    @property
    def invalid_calls(self) -> int:
        """Tool calls that raised: what TRL counts in ``tools/failure_frequency`` for this env."""
        return sum(call.error is not None for call in self._calls)

    @property
    def transcript(self) -> str:
        """The whole observation text so far: the reset text plus every move's text."""
        return self._observation

    def __repr__(self) -> str:
        state = "done" if self.done else "playing"
        return f"{type(self).__name__}({state}, calls={len(self._calls)}, reward={self.reward:g})"

    # -- the one path every tool takes
    def _play(
        self,
        tool: str,
        arguments: dict[str, Any],
        action: str | None,
        problem: str | None,
        hint: str | None = None,
    ) -> str:
        """Apply ``action`` (built from ``arguments``), or refuse with ``problem``; record either
        way. ``hint`` goes before the game's own explanation if the game rejects the move: the
        reference's texts can mislead a model that called a tool (Sudoku answers ``place(-1, 3,
        4)`` with "Invalid move format")."""
        if self._game.done:
            problem = (
                "The game is over; no more moves are accepted. Stop calling tools and give your "
                "final answer."
            )
        step: Step | None = None
        if problem is None and action is not None:
            try:
                check_action(self.game_name, action)
            except ValueError as error:
                problem = str(error)
        if problem is None:
            try:
                step = self._game.step(action)
            except ValueError as error:
                # The engine's own refusal (a call before any reset) is a failed call too:
                # TRL counts it in tools/failure_frequency, so invalid_calls must as well.
                self._calls.append(ToolCall(tool, dict(arguments), None, str(error)))
                raise
            self._observation += step.observation
            if not step.info.get("valid", True):
                problem = self._explain(step) if hint is None else f"{hint}\n{self._explain(step)}"
        reply = None if problem else self._reply(step)
        self._calls.append(ToolCall(tool, dict(arguments), reply, problem))
        if problem is not None:
            raise ValueError(problem)
        return reply

    @staticmethod
    def _reply(step: Step) -> str:
        """The move's text, and on the move that ends the game, :data:`GAME_OVER` after it.

        The system prompt tells the model to stop calling tools once the game is over, and the
        references' texts never say so: a Catch board just loses its ball, a Wordle reply just
        repeats the guess. A small model that cannot read that off the board learns instead to
        stop after as many calls as the training games took, and on a held-out board height
        stops too early (docs/results.md, "Does it learn?")."""
        if not step.done:
            return step.observation
        separator = "" if step.observation.endswith("\n") or not step.observation else "\n"
        return f"{step.observation}{separator}{GAME_OVER}"

    @staticmethod
    def _explain(step: Step) -> str:
        # The reference's text for a game-ending invalid move omits the reason: put it back.
        problem = step.observation.strip()
        reason = step.info.get("reason")
        if reason and reason not in problem:
            problem = f"{problem}\n{reason}".strip()
        if step.done:
            problem += "\nThe game is over; no more moves are accepted."
        # The reference echoes the whole move: a 10 MB guess would come back as a 10 MB error.
        return "\n".join(_clipped(line, _LONGEST_LINE) for line in problem.splitlines())


# -- argument checks every tool can use: a model sends any JSON value as any argument ---------
# How much of a model's input an error message shows: enough to recognise it, never all of it.
_SHOWN = 40
_LONGEST_LINE = 200
# Whole numbers a tool accepts: anything longer is no cell, row or column of any game here, and
# Python refuses to print an int of over 4,300 digits.
_MOST_DIGITS = 18


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _surrogate(text: str) -> str | None:
    """The first lone surrogate in ``text`` as ``U+D800``, or None: JSON can carry one
    (``"\\ud800"``), but it is not text, and no tokenizer encodes it."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"U+{ord(text[error.start]):04X}"
    return None


def shown(value: Any) -> str:
    """A short description of a tool argument for an error message, whatever the model sent:
    never the whole of a long string, never a lone surrogate, never ``str()`` of a structure
    (a list nested 5,000 deep raises ``RecursionError``) or of a 5,000-digit number."""
    if isinstance(value, str):
        text = _clipped(value, _SHOWN)
        return ascii(text) if _surrogate(text) else repr(text)
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        digits = _digits(value)
        return repr(value) if digits <= _MOST_DIGITS else f"a {digits}-digit number"
    return f"a {type(value).__name__}"


def _json_kind(value: Any) -> str:
    """What a model sent, in JSON's words (it wrote JSON, not Python): "a number", "null"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has, without ``str()`` of a huge one (Python refuses
    past 4,300 digits)."""
    if value.bit_length() < 64:
        return len(str(abs(value)))
    return math.floor(math.log10(abs(value))) + 1


def as_int(name: str, value: Any) -> tuple[int | None, str | None]:
    """``(the whole number, None)``, or ``(None, why not)`` for the tool argument ``name``.

    Models send numbers as ints, floats or strings; accept exact integers of any spelling
    (decimal digits of any script, as ``int()`` reads them) up to 18 digits."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in ("+", "-") else text
        if digits.isdecimal() and len(digits) <= _MOST_DIGITS:
            return int(text), None
    elif isinstance(value, int) and not isinstance(value, bool):
        if _digits(value) <= _MOST_DIGITS:
            return value, None
    return None, f"{name} must be a whole number like 3, not {shown(value)}."


def as_text(name: str, value: Any) -> str | None:
    """Why ``value`` is no text argument ``name`` (not a string, or a lone surrogate in it, which
    no tokenizer encodes), or None if it is one."""
    if not isinstance(value, str):
        return f"{name} must be a string, not {_json_kind(value)}."
    surrogate = _surrogate(value)
    if surrogate:
        return (
            f"{name} contains a lone surrogate ({surrogate}), which is not a character: write "
            "the text itself, not an escape such as \\ud800."
        )
    return None


# The tool env of every game, by name (each game's GameSpec.env): games registered later are in
# it too. A dict, as TRL wants a multi-environment environment_factory.
ENVS = registry.View("env")


def __getattr__(name: str) -> Any:
    # The built-in games' env classes live in their game's module (kit.builtin.<game>), beside
    # the rest of what the kit knows about the game; importable from here, as TRL's examples
    # import an env class.
    if name.endswith("Env") and not name.startswith("_"):
        for env_cls in ENVS.values():
            if env_cls.__name__ == name:
                return env_cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def env_name(env_cls: type) -> str:
    """The ``ENVS`` key of an env class (``"wordle"``), else the class name (a variant's)."""
    return next((name for name, cls in ENVS.items() if cls is env_cls), env_cls.__name__)
