"""Every engine, its tool env and its reference, in one process, as ratios.

    python benchmarks/games.py                            # 7 rounds, 2 s per contender and workload
    python benchmarks/games.py --seconds 5 --rounds 7
    python benchmarks/games.py --difficulties very-easy   # Sudoku at one difficulty only

Each game's module (benchmarks/<game>.py) times the kit's engine, the tool env TRL trains
through (``kit.envs``) and the reference on the same workloads, in alternation over rounds
(``harness``: min / median / max per contender, the ratio of the medians and the range of the
per-round ratios); this script runs them all and prints the load average before and after.
Goals, on the engine's moves per second (each module's ``GOAL``): Wordle >= 5x TextArena,
Catch >= 5x OpenSpiel's rl_environment, Sudoku >= 10x TextArena at every difficulty. The last
lines say which goals are missed. A missing reference (textarena / open-spiel not installed) is
skipped, and its goal reported as not checked. Figures of a full run: benchmarks/README.md.
"""

from __future__ import annotations

import catch
import echo
import harness
import sudoku
import wordle


def main() -> None:
    options = harness.parser(__doc__)
    sudoku.difficulties(options)
    args = options.parse_args()
    harness.header(args.seconds, args.rounds)
    results = []
    for run in (
        wordle.run,
        catch.run,
        lambda seconds, rounds: sudoku.run(seconds, rounds, tuple(args.difficulties)),
        echo.run,
    ):
        for result in run(args.seconds, args.rounds):
            # Printed as it comes: a full run takes minutes.
            print("\n".join(harness.lines(result)) + "\n", flush=True)
            results.append(result)
    harness.summary(results)


if __name__ == "__main__":
    main()
