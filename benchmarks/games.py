"""Every engine against its reference, in one process, as ratios.

    python benchmarks/games.py            # about 2 s per engine and reference
    python benchmarks/games.py --seconds 5

Each game's module (benchmarks/<game>.py) times the kit engine and the reference on the same
workload, alternating between them so the load of a shared machine hits both alike; this script
prints one table. Goals: Wordle >= 5x TextArena, Catch >= 5x OpenSpiel's rl_environment,
Sudoku >= 10x TextArena. A missing reference (textarena / open-spiel not installed) is skipped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault(
    "NLTK_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data")
)

GAMES = ("wordle", "catch", "sudoku", "echo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing budget per engine")
    args = parser.parse_args()
    print(
        f"{'game':<18}{'kit steps/s':>14}{'ref steps/s':>14}{'ratio':>8}{'kit reset ms':>14}{'ref reset ms':>14}"
    )
    for game in GAMES:
        rows = importlib.import_module(game).run(args.seconds)
        by_label: dict[str, dict[str, dict]] = {}
        for row in rows:
            label = row.get("difficulty") or row.get("game", game)
            by_label.setdefault(str(label), {})[row["engine"]] = row
        for label, engines in by_label.items():
            kit, ref = engines.get("kit"), engines.get("reference")
            ratio = f"{kit['steps_per_s'] / ref['steps_per_s']:.1f}x" if kit and ref else "-"
            print(
                f"{game + ('' if label == game else ' ' + label):<18}"
                f"{kit['steps_per_s']:>14,.0f}"
                f"{ref['steps_per_s'] if ref else float('nan'):>14,.0f}{ratio:>8}"
                f"{kit['reset_ms']:>14.4f}{ref['reset_ms'] if ref else float('nan'):>14.4f}"
            )


if __name__ == "__main__":
    main()
