"""The kit's Wordle as an OpenEnv server: ``uvicorn envs.wordle.server:app`` (what the Dockerfile runs).

The environment and its wire schema live in ``kit/builtin/wordle/serve.py``, inside the wheel;
``python -m kit.serve wordle`` serves the same app without this folder.
"""

from kit.builtin.wordle.serve import WordleEnvironment
from kit.serve import build_app

app = build_app(WordleEnvironment)
