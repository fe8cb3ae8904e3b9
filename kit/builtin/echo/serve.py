"""Echo served as OpenEnv's ``echo_env`` serves it (the version TRL's echo example was written for).

No task: ``reset()``. Action: ``{"message": "hello"}`` (at least one character, as the reference
requires); reward ``len(message) * 0.1``. The observation carries the official
``echoed_message`` and ``message_length`` beside the kit's ``text``. Each reply is as long as its
message: the engine's history stays in the state, so replies do not grow over an episode.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action
from pydantic import Field

from kit.games import Step
from kit.serve.base import KitEnvironment, KitObservation, OfficialReader


class EchoAction(Action):
    """OpenEnv's echo action: the message to echo, at least one character."""

    message: str = Field(min_length=1)


class EchoObservation(KitObservation):
    """OpenEnv's echo observation plus the kit's ``text``."""

    echoed_message: str = ""
    message_length: int = 0


class EchoEnvironment(KitEnvironment):
    game_name = "echo"
    action_cls = EchoAction
    observation_cls = EchoObservation
    hidden = ("messages",)

    def official(
        self, text: str, reward: float, done: bool, info: dict[str, Any], action: str | None
    ) -> dict[str, Any]:
        if action is None:
            return {"echoed_message": text, "message_length": 0}
        return {
            "echoed_message": text,
            "message_length": len(action),
            "metadata": {"original_message": action},
        }


class EchoReader(OfficialReader):
    """``echo_env`` (before MCP): the text is ``echoed_message``."""

    server = "echo_env before MCP"
    fields = ("echoed_message",)

    def reset(self, observation: Any) -> str:
        return str(observation.echoed_message)

    def step(self, action: str, observation: Any, reward: float | None, done: bool) -> Step:
        self._count(reward, done, valid=True)
        self.won = False  # echo has no win
        info = {"valid": True, "reason": None, "message_length": observation.message_length}
        return Step(str(observation.echoed_message), self.reward, done, info)


EchoEnvironment.reader = EchoReader
