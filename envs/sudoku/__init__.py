"""The kit's Sudoku as an OpenEnv environment: ``uvicorn envs.sudoku.server:app``."""
