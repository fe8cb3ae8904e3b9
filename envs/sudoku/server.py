"""The kit's Sudoku as an OpenEnv server: ``uvicorn envs.sudoku.server:app`` (what the Dockerfile runs).

The environment and its wire schema live in ``kit/builtin/sudoku/serve.py``, inside the wheel;
``python -m kit.serve sudoku`` serves the same app without this folder.
"""

from kit.builtin.sudoku.serve import SudokuEnvironment
from kit.serve import build_app

app = build_app(SudokuEnvironment)
