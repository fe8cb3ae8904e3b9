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

Variants are subclasses: ``class LongWordleEnv(WordleEnv): options = {"word_length": 7}``.
A game of your own subclasses ``GameEnv`` (``game_name``, ``task_keys``, and its tools, each of
which checks its arguments and hands the move to ``_play``) and is registered with its engine in
``kit.registry`` (see ``examples/guess_number.py``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, ClassVar

from kit import registry
from kit.games import Game, Step, make
from kit.games.echo import EMPTY_MESSAGE
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
        stops too early (README, "Does it learn?")."""
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


def _shown(value: Any) -> str:
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


def _as_int(name: str, value: Any) -> tuple[int | None, str | None]:
    """Models send numbers as ints, floats or strings; accept exact integers of any spelling
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
    return None, f"{name} must be a whole number like 3, not {_shown(value)}."


def _as_text(name: str, value: Any) -> str | None:
    """Why ``value`` is no text argument, or None if it is one."""
    if not isinstance(value, str):
        return f"{name} must be a string, not {_json_kind(value)}."
    surrogate = _surrogate(value)
    if surrogate:
        return (
            f"{name} contains a lone surrogate ({surrogate}), which is not a character: write "
            "the text itself, not an escape such as \\ud800."
        )
    return None


class WordleEnv(GameEnv):
    """Wordle (TextArena ``Wordle-v0``): guess the secret five-letter word in six tries.

    Task columns: ``secret`` (a word) or ``seed`` (picks a secret). Reward: 1 for a win, else
    partial credit of the last guess as TextArena pays it (see ``kit.games.wordle``).
    """

    game_name = "wordle"
    task_keys = ("secret", "seed")

    def guess(self, word: str) -> str:
        """Guess the secret word. The reply scores each letter: G = right letter, right place;
        Y = in the word, elsewhere; X = not in the word.

        Args:
            word: A five-letter English word, for example "crane".
        """
        problem = _as_text("word", word)
        # TextArena reads a guess as `[word]`; a model that already wrote the brackets is forgiven.
        guess = None if problem else word.strip().strip("[]")
        action = None if guess is None else f"[{guess}]"
        hint = None
        if guess is not None and not (guess.isascii() and guess.isalpha()):
            # TextArena would say "use squared brackets", which the tool already adds.
            hint = (
                f"A guess is one word of letters only, like crane (the tool adds the square "
                f"brackets); got {_shown(word)}."
            )
        return self._play("guess", {"word": word}, action, problem, hint)


class CatchEnv(GameEnv):
    """Catch (OpenSpiel ``catch``): a ball falls one row per move; end under it with the paddle.

    Task columns: ``ball_col`` or ``seed``, and optionally the board's ``rows`` and ``columns``
    (default 10 x 5). Reward: +1 caught, -1 missed, at the last move (the ninth on 10 rows).
    """

    game_name = "catch"
    task_keys = ("ball_col", "seed")
    setting_keys = ("rows", "columns")

    def move(self, direction: str) -> str:
        """Move the paddle one column; the ball falls one row.

        Args:
            direction: Which way to move the paddle. (choices: ["LEFT", "RIGHT"])
        """
        problem = _as_text("direction", direction)
        if problem is None and direction.strip().upper() not in ("LEFT", "RIGHT"):
            problem = (
                f"direction must be LEFT or RIGHT, not {_shown(direction)}; call stay() to keep "
                "the paddle where it is."
            )
        action = None if problem else direction.strip().upper()
        return self._play("move", {"direction": direction}, action, problem)

    def stay(self) -> str:
        """Keep the paddle where it is; the ball falls one row."""
        return self._play("stay", {}, "STAY", None)


class SudokuEnv(GameEnv):
    """Sudoku (TextArena ``Sudoku-v0``): fill the 9x9 grid so every row, column and box holds 1-9.

    Task columns: ``puzzle`` (81 characters, ``.`` for empty) or ``seed`` with ``difficulty``.
    Reward: 1 when solved; if two invalid moves in a row end the game, the fraction of the
    originally empty cells filled correctly; 0.0 before the end (the fraction so far is
    ``game.progress``).
    """

    game_name = "sudoku"
    task_keys = ("puzzle", "seed")
    setting_keys = ("difficulty",)

    def place(self, row: int, col: int, number: int) -> str:
        """Write a number into an empty cell.

        Args:
            row: Row of the cell, 1 (top) to 9 (bottom).
            col: Column of the cell, 1 (left) to 9 (right).
            number: The digit to place, 1 to 9.
        """
        arguments = {"row": row, "col": col, "number": number}
        values, problem = [], None
        for name, value in arguments.items():
            number_value, problem = _as_int(name, value)
            if problem:
                break
            values.append(number_value)
        action = None if problem else "[{} {} {}]".format(*values)
        hint = None
        if action is not None and not all(1 <= value <= 9 for value in values):
            # The move still goes to the game, whose rules count it; but for a negative number
            # TextArena's own text says only "Invalid move format".
            hint = (
                "row, col and number must each be a whole number from 1 to 9; got "
                + ", ".join(f"{k}={v}" for k, v in zip(arguments, values, strict=True))
                + "."
            )
        return self._play("place", arguments, action, problem, hint)


class EchoEnv(GameEnv):
    """Echo (OpenEnv's echo env, TRL's first example): every message comes back.

    No task columns. Reward of a message: ``len(message) * 0.1``. Never done. An empty message
    is refused (a failed call), as the reference refuses it.
    """

    game_name = "echo"
    task_keys = ()
    task_required = False

    def echo(self, message: str) -> str:
        """Send a message; the environment echoes it back.

        Args:
            message: The text to send.
        """
        problem = _as_text("message", message)
        if problem is None and not message:
            problem = EMPTY_MESSAGE  # the engine's own refusal, raised before it is reached
        return self._play("echo", {"message": message}, None if problem else message, problem)


# The tool env of every game, by name (each game's GameSpec.env): games registered later are in
# it too. A dict, as TRL wants a multi-environment environment_factory.
ENVS = registry.View("env")


def env_name(env_cls: type) -> str:
    """The ``ENVS`` key of an env class (``"wordle"``), else the class name (a variant's)."""
    return next((name for name, cls in ENVS.items() if cls is env_cls), env_cls.__name__)
