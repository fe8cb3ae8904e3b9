"""Catch solver: read the ball and the paddle off the board text, move the paddle under the ball.

The ball falls straight down, so moving toward its column at once and staying there catches it
whenever the board allows (always on OpenSpiel's 10 x 5 board: the paddle is at most 2 columns
away and has 9 moves).
"""

from __future__ import annotations

import re

_BOARD_LINE = re.compile(r"[.ox]+")


class CatchSolver:
    """Plays ``LEFT`` / ``STAY`` / ``RIGHT`` from the newest board it was shown."""

    def __init__(self, rows: int = 10, columns: int = 5) -> None:
        # The board's size is read from the text; the variant options are taken so that
        # `solver("catch", rows=..., columns=...)` mirrors `make("catch", ...)`.
        del rows, columns
        self._ball_col: int | None = None
        self._paddle_col: int | None = None

    def act(self, observation: str) -> str:
        """The action for the newest board in ``observation``, else for the last board seen.

        A text with no board (an invalid-move message) leaves the state as it was, since an
        invalid move does not advance the game.
        """
        board = last_board(observation)
        if board is not None:
            self._ball_col, self._paddle_col = board
        if self._ball_col is None or self._paddle_col is None:
            return "STAY"
        if self._ball_col < self._paddle_col:
            return "LEFT"
        if self._ball_col > self._paddle_col:
            return "RIGHT"
        return "STAY"


def last_board(text: str) -> tuple[int, int] | None:
    """(ball column, paddle column) of the last complete board drawn in ``text``."""
    block: list[str] = []
    found: tuple[int, int] | None = None
    for line in text.splitlines() + [""]:
        if _BOARD_LINE.fullmatch(line):
            block.append(line)
            continue
        # A board ends at the first line that is not a board row; its last row holds the paddle.
        if block and "x" in block[-1]:
            paddle = block[-1].index("x")
            balls = [row.index("o") for row in block if "o" in row]
            # No "o" means the paddle has caught the ball and hides it.
            found = (balls[-1] if balls else paddle, paddle)
        block = []
    return found
