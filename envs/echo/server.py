"""Echo (OpenEnv's echo env) served over OpenEnv: ``uvicorn envs.echo.server:app``.

No task: ``reset()``. Action: ``{"message": "hello"}``; reward ``len(message) * 0.1``.
"""

from envs.common import KitEnvironment, build_app


class EchoEnvironment(KitEnvironment):
    game_name = "echo"
    public = ("messages",)


app = build_app(EchoEnvironment)
