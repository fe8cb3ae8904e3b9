"""Catch (OpenSpiel ``catch``) served over OpenEnv: ``uvicorn envs.catch.server:app``.

Task: ``reset(ball_col=k)`` or ``reset(seed=n)``. Action: ``{"message": "LEFT"}`` (or
``"STAY"``, ``"RIGHT"``).
"""

from envs.common import KitEnvironment, build_app


class CatchEnvironment(KitEnvironment):
    game_name = "catch"
    public = ("ball_row", "ball_col", "paddle_col", "rows", "columns")


app = build_app(CatchEnvironment)
