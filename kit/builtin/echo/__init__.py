"""Echo (OpenEnv's echo env, TRL's first example) in the kit: its tool env, prompt, reward and
texts.

Echo has no task, so nothing to hold out: every task is the empty one, and a row that carries
task columns is reported as a leak. The game never ends; its prompt asks for one message.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterator, Mapping
from typing import Any

from kit.builtin.echo.engine import EMPTY_MESSAGE, Echo
from kit.builtin.echo.solver import EchoSolver
from kit.envs import GameEnv, as_text
from kit.registry import GameSpec, Move, MoveContext, register
from kit.rewards import called_tool, env_reward, repeated_calls
from kit.tasks import task_of


def _random_move(context: MoveContext) -> Move:
    """1-10 random letters."""
    letters = [
        context.rng.choice(string.ascii_lowercase) for _ in range(context.rng.randint(1, 10))
    ]
    return "echo", {"message": "".join(letters)}


def _leaks(row: Mapping[str, Any]) -> Iterator[str]:
    task = task_of(row)
    if task:
        yield f"echo has no task, yet the row carries {task}"


class EchoEnv(GameEnv):
    """Echo (OpenEnv's echo env, TRL's first example): every message comes back.

    No task columns. Reward of a message: ``len(message) * 0.1``. Never done. An empty message
    is refused (a failed call), as the reference refuses it.
    """

    game_name = "echo"
    task_keys = ()
    task_required = False

    def echo(self, message: str) -> str:
        """Send a message; the environment echoes it back.

        Args:
            message: The text to send.
        """
        problem = as_text("message", message)
        if problem is None and not message:
            problem = EMPTY_MESSAGE  # the engine's own refusal, raised before it is reached
        return self._play("echo", {"message": message}, None if problem else message, problem)


SPEC = register(
    GameSpec(
        name="echo",
        env=EchoEnv,
        engine=Echo,
        solver=EchoSolver,
        prompt="Send one short, friendly message with the echo tool, then stop.\n\n",
        turn_limit=1,  # Echo never ends, and its prompt asks for one message
        # Each reply carries the message three times (echoed_message, text, original_message):
        # 16,384 characters keep it under the 1 MiB frame limit even at 6 JSON bytes a character.
        max_action_chars=16_384,
        budget=256,
        reward={
            "env": (env_reward, 1.0),
            "repeated": (repeated_calls, -0.1),
            "format": (called_tool, 0.1),
        },
        tasks=lambda split: None,
        task=lambda value: ({}, ""),
        to_tool_call=lambda action: ("echo", {"message": action}),
        random_move=_random_move,
        closing=lambda env: "Message sent.",
        held_out="nothing to hold out: Echo has no task",
        split_card=lambda split: "Echo has no task.",
        draw=lambda rng, difficulty: itertools.repeat(None),
        sizes={"train": 100, "eval": 20},
        ends=False,
        reason=lambda messages, call: "I'll send a short, friendly message.",
        leaks=_leaks,
        sft={"num_games": 200, "seed": 0, "noise": 0.0},
        server="kit.builtin.echo.serve:EchoEnvironment",
    )
)
