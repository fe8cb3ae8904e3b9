"""The kit's Catch as an OpenEnv server: ``uvicorn envs.catch.server:app`` (what the Dockerfile runs).

The environment and its wire schema live in ``kit/builtin/catch/serve.py``, inside the wheel;
``python -m kit.serve catch`` serves the same app without this folder.
"""

from kit.builtin.catch.serve import CatchEnvironment
from kit.serve import build_app

app = build_app(CatchEnvironment)
