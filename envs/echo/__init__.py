"""The kit's Echo as an OpenEnv environment: ``uvicorn envs.echo.server:app``."""
