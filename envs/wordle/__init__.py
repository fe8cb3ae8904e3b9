"""The kit's Wordle as an OpenEnv environment: ``uvicorn envs.wordle.server:app``."""
