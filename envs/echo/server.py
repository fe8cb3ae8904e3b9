"""The kit's Echo as an OpenEnv server: ``uvicorn envs.echo.server:app`` (what the Dockerfile runs).

The environment and its wire schema live in ``kit/builtin/echo/serve.py``, inside the wheel;
``python -m kit.serve echo`` serves the same app without this folder.
"""

from kit.builtin.echo.serve import EchoEnvironment
from kit.serve import build_app

app = build_app(EchoEnvironment)
