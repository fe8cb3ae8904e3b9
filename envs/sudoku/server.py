"""Sudoku (TextArena ``Sudoku-v0``) served over OpenEnv: ``uvicorn envs.sudoku.server:app``.

Task: ``reset(puzzle="53..7....")`` (81 characters) or ``reset(seed=n, difficulty=...)``.
Action: ``{"message": "[5 3 7]"}`` (row, column, digit).
"""

from envs.common import KitEnvironment, build_app


class SudokuEnvironment(KitEnvironment):
    game_name = "sudoku"
    public = ("puzzle", "board", "empty_cells", "correct_cells", "difficulty", "seed")
    hidden = ("solution",)


app = build_app(SudokuEnvironment)
