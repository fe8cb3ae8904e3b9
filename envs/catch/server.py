"""The kit's Catch as an OpenEnv server: ``uvicorn envs.catch.server:app`` (what the Dockerfile runs).

The environment and its wire schema live in ``kit/serve/catch.py``, inside the wheel;
``python -m kit.serve catch`` serves the same app without this folder.
"""

from kit.serve import build_app
from kit.serve.catch import CatchEnvironment

app = build_app(CatchEnvironment)
