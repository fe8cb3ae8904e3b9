"""Sudoku served as OpenEnv's ``textarena_env`` serves TextArena's ``Sudoku-v0``.

Task: ``reset(puzzle="53..7....")`` (81 characters) or ``reset(seed=n, difficulty=...)``; a bare
``reset()`` draws a seed. Action: ``{"message": "[5 3 7]"}`` (row, column, digit). The
observation carries TextArena's ``prompt`` and cumulative ``messages`` (TRL's Sudoku example
reads the board from them) beside the kit's ``text`` and public state.
"""

from __future__ import annotations

from kit.serve.base import TextArenaEnvironment


class SudokuEnvironment(TextArenaEnvironment):
    game_name = "sudoku"
    env_id = "Sudoku-v0"
    public = ("puzzle", "board", "empty_cells", "correct_cells", "progress", "difficulty", "seed")
    hidden = ("solution",)
    # A client's own puzzle is searched for a unique solution: up to 100,000 nodes, 0.2-0.3 s.
    costly_tasks = ("puzzle",)
