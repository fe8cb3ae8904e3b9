"""Sudoku: the kit engine against TextArena's Sudoku-v0 variants, in one process.

    python benchmarks/sudoku.py [seconds]

Per difficulty and engine, ``seconds`` of steps and ``seconds`` of resets (at least 3 resets).
Steps: the same games in both engines (kit puzzles, fed to TextArena through its
``_generate_board``), each the solver's winning moves with an invalid ``[0 0 0]`` after every
fourth; a TextArena step includes ``get_observation()``, since the kit's step returns the text.
Resets: ``reset(seed=...)`` for seeds 0, 1, 2, ... in both; TextArena generates its puzzle there,
the kit picks one from its bank.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from kit.games.sudoku import DIFFICULTIES, Sudoku
from kit.solvers import play


def _workload(difficulty: str, games: int = 8) -> list[tuple[str, str, list[str]]]:
    out = []
    for seed in range(games):
        game = Sudoku(difficulty=difficulty)
        game.reset(seed=seed)
        moves = play("sudoku", seed=seed, difficulty=difficulty)
        actions = []
        for k, move in enumerate(moves, 1):
            actions += [move, "[0 0 0]"] if k % 4 == 0 and k < len(moves) else [move]
        out.append((game.puzzle, game.solution, actions))
    return out


def _kit(difficulty: str, workload: list, seconds: float) -> tuple[float, list[float]]:
    game = Sudoku(difficulty=difficulty)
    steps, spent = 0, 0.0
    while spent < seconds:
        for puzzle, _, actions in workload:
            game.reset(puzzle=puzzle)
            start = time.perf_counter()
            for action in actions:
                game.step(action)
            spent += time.perf_counter() - start
            steps += len(actions)
    resets, seed, deadline = [], 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(resets) < 3:
        start = time.perf_counter()
        game.reset(seed=seed)
        resets.append(time.perf_counter() - start)
        seed += 1
    return steps / spent, resets


def _reference(difficulty: str, workload: list, seconds: float) -> tuple[float, list[float]]:
    import textarena as ta

    def grid(cells: str) -> list[list[int]]:
        return [[0 if ch == "." else int(ch) for ch in cells[r : r + 9]] for r in range(0, 81, 9)]

    env_id = DIFFICULTIES[difficulty][0]
    steps, spent = 0, 0.0
    while spent < seconds:
        for puzzle, solution, actions in workload:
            env = ta.make(env_id)
            inner = env.env.env
            inner._generate_board = lambda p=puzzle, s=solution: (grid(s), grid(p))
            env.reset(num_players=1, seed=0)
            env.get_observation()
            start = time.perf_counter()
            for action in actions:
                env.step(action)
                env.get_observation()
            spent += time.perf_counter() - start
            steps += len(actions)
    env = ta.make(env_id)
    resets, seed, deadline = [], 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(resets) < 3:
        start = time.perf_counter()
        env.reset(num_players=1, seed=seed)
        env.get_observation()
        resets.append(time.perf_counter() - start)
        seed += 1
    return steps / spent, resets


def run(seconds: float = 2.0) -> list[dict[str, Any]]:
    """Rows per difficulty and engine: steps/s, mean and median reset ms, resets timed."""
    try:
        import textarena  # noqa: F401

        engines = {"kit": _kit, "reference": _reference}
    except ImportError:
        engines = {"kit": _kit}
    rows = []
    for difficulty in DIFFICULTIES:
        workload = _workload(difficulty)
        for engine, measure in engines.items():
            steps_per_s, resets = measure(difficulty, workload, seconds)
            rows.append(
                {
                    "game": "sudoku",
                    "difficulty": difficulty,
                    "engine": engine,
                    "steps_per_s": steps_per_s,
                    "reset_ms": 1000 * statistics.fmean(resets),
                    "reset_ms_median": 1000 * statistics.median(resets),
                    "reset_ms_max": 1000 * max(resets),
                    "resets": len(resets),
                }
            )
    return rows


if __name__ == "__main__":
    rows = run(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
    for row in rows:
        print(
            f"{row['difficulty']:>9} {row['engine']:>9} {row['steps_per_s']:>10.0f} steps/s"
            f"  reset mean {row['reset_ms']:9.3f} ms  median {row['reset_ms_median']:9.3f} ms"
            f"  max {row['reset_ms_max']:9.3f} ms  ({row['resets']} resets)"
        )
    kit = {r["difficulty"]: r for r in rows if r["engine"] == "kit"}
    for row in rows:
        if row["engine"] == "reference":
            mine = kit[row["difficulty"]]
            print(
                f"{row['difficulty']:>9}: steps x{mine['steps_per_s'] / row['steps_per_s']:.0f}, "
                f"reset x{row['reset_ms'] / mine['reset_ms']:.0f} (mean), "
                f"x{row['reset_ms_median'] / mine['reset_ms_median']:.0f} (median)"
            )
