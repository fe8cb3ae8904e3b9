"""Echo: kit's engine and its tool env, with no reference (OpenEnv's echo env runs only behind
its server, so there is none to time in-process). Messages are those of the echo solver.

    python benchmarks/echo.py [--seconds 2] [--rounds 7]

Workloads: ``games``, messages per second over 20-message games, resets included (a batch: 5
games); ``reset``, one reset alone (a batch: 100). Contenders: the ``engine`` (``reset()``,
``step(message)``) and the ``env`` TRL trains through (``EchoEnv``: ``reset()``, which builds a
fresh engine, then the tool ``echo(message)``), timed in alternation (``harness``). No goal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import harness
from harness import ENGINE, ENV, Contender, Move

from kit.builtin.echo.engine import Echo
from kit.builtin.echo.solver import EchoSolver
from kit.envs import EchoEnv

GAME = "echo"
_EPISODE = 20
_MESSAGES = [EchoSolver(seed=0).act("") for _ in range(_EPISODE)]

Sides = tuple[harness.Batch, harness.Batch]  # (a batch of games, a batch of resets)


def _sides(reset: Callable[[], object], moves: Sequence[Move]) -> Sides:
    # Echo has no task: the task slot of each game and reset is None.
    return (
        harness.games(lambda _: reset(), [(None, moves)] * 5),
        harness.resets(lambda _: reset(), [None] * 100),
    )


def run(seconds: float = 2.0, rounds: int = 7) -> list[harness.Result]:
    """Time the engine and the env on both workloads."""
    game, env = Echo(), EchoEnv()
    sides = {
        ENGINE: _sides(game.reset, [functools.partial(game.step, m) for m in _MESSAGES]),
        ENV: _sides(env.reset, [functools.partial(env.echo, message=m) for m in _MESSAGES]),
    }
    return [
        harness.compare(
            GAME,
            f"games ({_EPISODE} messages), resets included",
            "messages/s",
            [Contender(name, play) for name, (play, _) in sides.items()],
            seconds,
            rounds,
            notes=["no reference: OpenEnv's echo env runs only behind its server"],
        ),
        harness.compare(
            GAME,
            "reset",
            harness.MS,
            [Contender(name, resets) for name, (_, resets) in sides.items()],
            seconds,
            rounds,
        ),
    ]


if __name__ == "__main__":
    harness.run_main(__doc__, run)
