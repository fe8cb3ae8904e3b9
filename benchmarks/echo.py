"""Echo throughput: kit's engine alone (OpenEnv's echo env runs only behind its server, so there
is no in-process reference to time). Messages are those of the echo solver.

``steps_per_s`` counts messages per second over 20-message episodes, resets included; ``reset_ms``
is the mean time of one reset alone. Run ``python benchmarks/echo.py``.
"""

from __future__ import annotations

import time

from kit.games.echo import Echo
from kit.solvers.echo import EchoSolver

GAME = "echo"
_EPISODE = 20
_MESSAGES = [EchoSolver(seed=0).act("") for _ in range(_EPISODE)]


def run(seconds: float = 2.0) -> list[dict]:
    """Time kit's Echo for ``seconds``; one row (there is no reference row)."""
    game = Echo()
    resets, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds / 4:
        for _ in range(100):
            game.reset()
        resets += 100
    reset_ms = 1000 * elapsed / resets
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < 3 * seconds / 4:
        game.reset()
        for message in _MESSAGES:
            game.step(message)
        steps += _EPISODE
    return [{"game": GAME, "engine": "kit", "steps_per_s": steps / elapsed, "reset_ms": reset_ms}]


if __name__ == "__main__":
    for row in run():
        rate, reset_ms = row["steps_per_s"], row["reset_ms"]
        print(f"{row['engine']:>9}: {rate:>12,.0f} steps/s  {reset_ms:.4f} ms/reset")
