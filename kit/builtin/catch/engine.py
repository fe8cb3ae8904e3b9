"""Catch, as OpenSpiel's ``catch`` game plays it (open_spiel 2.0.2, ``pyspiel.load_game("catch")``).

Rules (OpenSpiel ``games/catch/catch.cc``): a board of ``rows`` x ``columns`` (default 10 x 5).
A chance move drops the ball into row 0 of a uniformly random column; the paddle starts at column
``columns // 2`` of the bottom row. Every action moves the ball down one row and the paddle by
-1 (``LEFT``, id 0), 0 (``STAY``, id 1) or +1 (``RIGHT``, id 2), clamped to the board. The game
ends when the ball reaches the bottom row, after exactly ``rows - 1`` actions; player 0 then gets
+1 if the paddle is under the ball, else -1, and 0 before the end.

Text: ``reset()`` and every ``step().observation`` are ``str(state)`` (= ``observation_string(0)``)
of the new state: one line per row, ``.`` empty, ``o`` ball, ``x`` paddle (``x`` also when the
paddle catches the ball), each line ending in a newline. OpenEnv's ``openspiel_env`` serves the
same state as ``observation_tensor`` through OpenSpiel's ``rl_environment``; the text is the
same board drawn by OpenSpiel itself.

Actions: ``LEFT``, ``STAY``, ``RIGHT`` (OpenSpiel's ``action_to_string`` names) or the ids ``0``,
``1``, ``2``, case-insensitive, with surrounding whitespace and one surrounding pair of square
brackets ignored (``" [right] "`` is RIGHT). OpenSpiel has no invalid-move rule (``apply_action``
even accepts ids past 2), so this engine adds one: any other text is an invalid move that does
not advance the game, pays 0.0, returns an error line as its observation and counts in
``invalid_moves``; invalid moves never end the game.

Task: ``reset(ball_col=k)`` applies chance outcome ``k``; ``reset(seed=s)`` draws the column with
``random.Random(s)``; ``reset()`` draws it from the engine's own generator (not reproducible).
``rows=`` and ``columns=`` play that one episode on another board (OpenSpiel's game parameters of
the same names), so that a task set can hold boards a model never trained on; without them the
episode uses the board the engine was made with.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from kit.games import Step

ACTIONS = ("LEFT", "STAY", "RIGHT")
_IDS = {name: i for i, name in enumerate(ACTIONS)} | {str(i): i for i in range(len(ACTIONS))}
_SHOWN = 40  # longest action echoed back in an error message


def _check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    # bool is an int subclass, but `ball_col=True` is a bug in the caller, not column 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def parse_action(action: str) -> int | None:
    """The action id (0, 1, 2) that ``action`` names, or None if it names none."""
    move = _IDS.get(action)  # the common, exact spelling, without building new strings
    if move is not None:
        return move
    text = action.strip()
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        text = text[1:-1].strip()
    # Without the ASCII check str.upper() would map look-alikes such as "ſtay" onto "STAY".
    return _IDS.get(text.upper()) if text.isascii() else None


class Catch:
    """OpenSpiel's Catch for one player; see the module docstring for rules and text."""

    OPTIONS: tuple[str, ...] = ("rows", "columns")
    ACTIONS: tuple[str, ...] = ACTIONS
    # A whole board row ("..o..") is one piece of text for the kit's tiny tokenizer
    # (``kit.models.tiny_tokenizer``). GPT-2's split cuts it into "..", "o", "..", and a 2-layer
    # model trained on the solver's games then never learns which column the ball is in
    # (docs/results.md, "Does it learn?"); as one token, a row's identity is the column.
    LINE_PATTERN: str = r"[.ox]+"

    def __init__(self, rows: int = 10, columns: int = 5) -> None:
        # OpenSpiel also builds boards with fewer than 2 rows: they end before any action.
        self.rows = self._rows = _check_int("rows", rows, 2)
        self.columns = self._columns = _check_int("columns", columns, 1)
        self._rng: random.Random | None = None  # made on first use: seeding costs 5x a reset
        self._started = False
        self._set(ball_col=0)

    def _set(self, ball_col: int) -> None:
        self.ball_row = 0
        self.ball_col = ball_col
        self.paddle_col = self.columns // 2
        self.done = False
        self.won = False
        self.reward = 0.0
        self.num_steps = 0
        self.invalid_moves = 0

    def reset(self, **task: Any) -> str:
        """Start a game; task ``ball_col=k`` or ``seed=s`` (or neither), optionally on a board of
        ``rows`` x ``columns``. Returns the board."""
        unknown = sorted(set(task) - {"ball_col", "seed", "rows", "columns"})
        if unknown:
            raise ValueError(
                f"unknown task keys {unknown}; Catch takes ball_col or seed, and rows, columns"
            )
        ball_col, seed = task.get("ball_col"), task.get("seed")
        if ball_col is not None and seed is not None:
            raise ValueError("pass ball_col or seed, not both")
        # Everything is checked before any state changes: a bad task leaves the last game intact.
        rows = _check_int("rows", task.get("rows", self._rows), 2)
        columns = _check_int("columns", task.get("columns", self._columns), 1)
        if ball_col is not None:
            column = _check_int("ball_col", ball_col, 0, columns - 1)
        elif seed is not None:
            column = random.Random(_check_int("seed", seed)).randrange(columns)
        else:
            if self._rng is None:
                self._rng = random.Random()
            column = self._rng.randrange(columns)
        self.rows, self.columns = rows, columns
        self._set(column)
        self._started = True
        return self.render()

    def step(self, action: str) -> Step:
        """Apply one action; the observation is the new board, or an error line if invalid."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, got {type(action).__name__}")
        if not self._started:
            raise ValueError("call reset() before step()")
        if self.done:
            raise ValueError("the game is over; call reset() to start a new one")
        self.num_steps += 1
        move = parse_action(action)
        if move is None:
            self.invalid_moves += 1
            shown = action if len(action) <= _SHOWN else action[: _SHOWN - 3] + "..."
            reason = f"Invalid action {shown!r}: choose LEFT, STAY or RIGHT (or 0, 1, 2)."
            return Step(reason + "\n", 0.0, False, {"valid": False, "reason": reason})
        self.ball_row += 1
        paddle = self.paddle_col + move - 1
        if 0 <= paddle < self.columns:  # else the paddle stays against the wall
            self.paddle_col = paddle
        if self.ball_row == self.rows - 1:
            self.done = True
            self.won = self.paddle_col == self.ball_col
            self.reward = 1.0 if self.won else -1.0
        return Step(self.render(), self.reward, self.done, {"valid": True, "reason": None})

    def render(self) -> str:
        """The board as OpenSpiel's ``str(state)`` draws it."""
        return _draw(self.rows, self.columns, self.ball_row, self.ball_col, self.paddle_col)


# Drawing is most of a step's cost and a 10 x 5 game has only 250 boards: keep them.
@functools.lru_cache(maxsize=4096)
def _draw(rows: int, columns: int, ball_row: int, ball_col: int, paddle_col: int) -> str:
    board = [["."] * columns for _ in range(rows)]
    board[ball_row][ball_col] = "o"
    # Drawn last, the paddle hides the ball it catches, as in OpenSpiel's BoardAt.
    board[rows - 1][paddle_col] = "x"
    return "".join("".join(row) + "\n" for row in board)
