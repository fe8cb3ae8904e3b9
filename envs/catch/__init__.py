"""The kit's Catch as an OpenEnv environment: ``uvicorn envs.catch.server:app``."""
