"""A Sudoku player that reads the board from TextArena's text and fills one cell per move.

It plays like a careful human: each move fills the empty cell with the fewest candidates left
(a cell whose digit is forced, when there is one), reading the row, column and box from the
board it was last shown. The digit comes from the puzzle's unique solution, so every move is
correct and every game is won.
"""

from __future__ import annotations

from typing import Any

from kit.builtin.sudoku.engine import DIFFICULTIES, solutions

# Only the game writes these: TextArena strips "[GAME]" from echoed actions.
_MARKERS = ("[GAME] Game Board:\n", "[GAME] Board state: \n")


class SudokuSolver:
    """``act(observation)`` -> ``"[row col num]"``; ``difficulty`` is accepted and not needed."""

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - {"difficulty"}
        if unknown:
            raise ValueError(
                f"unknown Sudoku options {sorted(unknown)}; the only one is difficulty"
            )
        if options.get("difficulty", "default") not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {options['difficulty']!r}")
        self._board: list[int] | None = None
        self._solution = ""

    def act(self, observation: str) -> str:
        """The next move, given the text the game added since the last call."""
        board = last_board(observation)
        if board is not None:
            self._board = board
        if self._board is None:
            raise ValueError("no Sudoku board in the observations seen so far")
        board = self._board
        if not self._solution or any(
            v and str(v) != s for v, s in zip(board, self._solution, strict=True)
        ):
            found = solutions("".join(str(v) if v else "." for v in board), 1)
            if not found:
                raise ValueError("the board shown has no solution")
            self._solution = found[0]
        cell = min((i for i in range(81) if not board[i]), key=lambda i: _candidates(board, i))
        return f"[{cell // 9 + 1} {cell % 9 + 1} {self._solution[cell]}]"


def _candidates(board: list[int], i: int) -> int:
    """How many digits the row, column and box of cell ``i`` still allow."""
    r, c = divmod(i, 9)
    r0, c0 = r - r % 3, c - c % 3
    seen = {board[9 * r + k] for k in range(9)} | {board[9 * k + c] for k in range(9)}
    seen |= {board[9 * (r0 + a) + c0 + b] for a in range(3) for b in range(3)}
    return 10 - len(seen | {0})


def last_board(text: str) -> list[int] | None:
    """The last board the game printed in ``text``, row by row (0 = empty), or None."""
    start = max(text.rfind(marker) + len(marker) if marker in text else -1 for marker in _MARKERS)
    if start < 0:
        return None
    rows = [line for line in text[start:].split("\n")[:13] if line.startswith("R")]
    cells = [token for line in rows for token in line.split()[1:] if token != "|"]
    if len(rows) != 9 or len(cells) != 81:
        raise ValueError("malformed Sudoku board in the observation")
    return [0 if token == "." else int(token) for token in cells]
