"""Catch throughput: kit's engine against OpenSpiel's ``rl_environment`` (the path OpenEnv's
``openspiel_env`` serves), on the same workload: whole 10 x 5 games of the same random actions.

``steps_per_s`` counts actions per second over whole episodes, resets included; ``reset_ms`` is
the mean time of one reset alone. The engines take turns in short slices, so that a change in
the machine's load hits both alike. Run ``python benchmarks/catch.py``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from kit.games.catch import ACTIONS, Catch

GAME = "catch"
ROUNDS = 8
_POOL = [[random.Random(i).randrange(3) for _ in range(9)] for i in range(64)]

Engine = tuple[Callable[[int], object], Callable[[int], object]]  # reset(column), step(move id)


def _kit() -> Engine:
    game = Catch()
    return (lambda col: game.reset(ball_col=col)), (lambda move: game.step(ACTIONS[move]))


def _reference() -> Engine | None:
    try:
        from open_spiel.python import rl_environment
    except ImportError:
        return None
    env = rl_environment.Environment("catch")
    env.seed(0)
    # rl_environment draws the ball column itself; the column does not change the cost.
    return (lambda col: env.reset()), (lambda move: env.step([move]))


def _slice(engine: Engine, seconds: float, totals: list[float]) -> None:
    """Add to totals [reset seconds, resets, episode seconds, steps] one slice of each."""
    reset, step = engine
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds / 4:
        for i in range(100):
            reset(i % 5)
        totals[1] += 100
    totals[0] += elapsed
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < 3 * seconds / 4:
        for i, episode in enumerate(_POOL):
            reset(i % 5)
            for move in episode:
                step(move)
            totals[3] += len(episode)
    totals[2] += elapsed


def run(seconds: float = 2.0) -> list[dict]:
    """Time kit and (if installed) OpenSpiel's rl_environment, about ``seconds`` each."""
    engines = {"kit": _kit(), "reference": _reference()}
    engines = {name: engine for name, engine in engines.items() if engine is not None}
    totals = {name: [0.0, 0, 0.0, 0] for name in engines}
    for _ in range(ROUNDS):
        for name, engine in engines.items():
            _slice(engine, seconds / ROUNDS, totals[name])
    return [
        {
            "game": GAME,
            "engine": name,
            "steps_per_s": steps / episode_s,
            "reset_ms": 1000 * reset_s / resets,
        }
        for name, (reset_s, resets, episode_s, steps) in totals.items()
    ]


if __name__ == "__main__":
    results = run()
    for row in results:
        rate, reset_ms = row["steps_per_s"], row["reset_ms"]
        print(f"{row['engine']:>9}: {rate:>12,.0f} steps/s  {reset_ms:.4f} ms/reset")
    if len(results) == 2:
        print(f"kit / reference: {results[0]['steps_per_s'] / results[1]['steps_per_s']:.1f}x")
