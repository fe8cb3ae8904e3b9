"""Where did GRPO move the policy? A ``kit.demo`` run's SFT and GRPO models on Catch, per ball
column, on the boards GRPO trained on and on the held-out ones.

    python -m kit.demo --seed 0 --out runs/seed0               # the run to look into
    python examples/grpo_by_column.py --run runs/seed0         # about 3 minutes on a CPU

A pooled win rate says how much a model changed, not where. The paddle starts in the middle
column of every board, so the first move decides the side: LEFT for a ball in column 0 or 1,
stay for 2, RIGHT for 3 or 4. This script plays the run's two checkpoints on every train task
and every held-out task, as the run evaluated them (its episodes per task, temperature, token
budget and seed; so the held-out episodes are the run's own, figure for figure), and prints per
ball column each model's win rate (``kit.evaluate.by_task``) and its first moves. It writes
every figure to ``by_column.json`` in the run's folder (refusing to overwrite one).

What it found (docs/results.md, "Does it learn?"): GRPO sharpens the first move the warmed-up model
already prefers in each column. Where that move is the right one, the column's win rate rises;
where it is the wrong one, GRPO makes the column worse. A seed whose SFT model prefers a wrong
move in some column gains less than its wins elsewhere suggest, or nothing.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.builtin.catch import CATCH_COLUMNS
from kit.trajectory import Trajectory

MOVES = ("LEFT", "stay", "RIGHT", "none")  # "none": no tool call at all


@dataclass
class Args:
    run: str = field(metadata={"help": "a kit.demo run folder (its summary.json and checkpoints)"})


def first_move(trajectory: Trajectory) -> str:
    """The episode's first tool call: LEFT, RIGHT or stay; "none" without a call."""
    if not trajectory.tool_calls:
        return "none"
    call = trajectory.tool_calls[0]
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    return arguments.get("direction", call.tool)


def first_moves(evaluation: Any) -> dict[int, dict[str, int]]:
    """Per ball column, how many of an evaluation's Catch episodes began with each move."""
    counts: dict[int, collections.Counter] = {
        c: collections.Counter() for c in range(CATCH_COLUMNS)
    }
    for trajectory in evaluation.trajectories:
        counts[trajectory.task["ball_col"]][first_move(trajectory)] += 1
    return {column: dict(counter) for column, counter in counts.items()}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import HfArgumentParser

    from kit.models import missing_files
    from kit.runs import finite, pin_threads, quiet_libraries

    parser = HfArgumentParser(Args)
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    run = Path(args.run)
    if not (run / "summary.json").is_file():
        parser.error(f"--run: {run} has no summary.json; give a folder kit.demo wrote")
    run_summary = json.loads((run / "summary.json").read_text())
    if run_summary.get("game") != "catch" or run_summary.get("where"):
        parser.error(f"--run: {run} is not a kit.demo run of Catch on all its tasks")
    # a run made with --sft-from trained GRPO from another run's warm-up, which stays there
    warm_up = run_summary.get("sft", {}).get("from")
    checkpoints = {
        "SFT": (Path(warm_up) if warm_up else run) / "sft-model",
        "SFT + GRPO": run / "grpo-model",
    }
    for path in checkpoints.values():
        if missing_files(path):
            parser.error(f"--run: {path} is not a complete checkpoint")
    out = run / "by_column.json"
    if out.exists():
        parser.error(f"{out} exists; move it away first")
    from kit.evaluate import by_task, evaluate
    from kit.models import load

    quiet_libraries()
    pin_threads(1)  # as docs/results.md measured it: a CPU run repeats at one thread count
    clock = time.perf_counter()
    seed = run_summary["seed"]
    models = {name: load(path) for name, path in checkpoints.items()}
    summary: dict[str, Any] = {
        "command": "python examples/grpo_by_column.py " + " ".join(argv or ()),
        "args": dataclasses.asdict(args),
        "run_command": run_summary["command"],
        "seed": seed,
        "eval_generations": run_summary["eval_generations"],
        "temperature": run_summary["temperature"],
        "splits": {},
    }
    for split in ("train", "eval"):
        evaluations = [
            evaluate(
                model,
                "catch",
                tokenizer,
                split=split,
                num_generations=run_summary["eval_generations"],
                greedy=False,
                temperature=run_summary["temperature"],
                seed=seed,
                max_completion_length=run_summary["max_completion_length"],
                name=name,
                batch_size=256,
            )
            for name, (model, tokenizer) in models.items()
        ]
        rows = by_task(evaluations, "catch", "win_rate", by="ball_col").to_dict("records")
        moves = {e.name: first_moves(e) for e in evaluations}
        label = "boards GRPO trained on" if split == "train" else "held-out boards"
        print(
            f"\n{label} ({split} split), seed {seed}: win rate, first moves ({' / '.join(MOVES)})"
        )
        print(f"  {'ball column':<13}{'episodes':>9}" + "".join(f"{n:>28}" for n in models))
        for row in rows:
            column = row["ball_col"]
            cells = "".join(
                f"{row[n]:>10.2f}  "
                + f"{' / '.join(str(moves[n][column].get(m, 0)) for m in MOVES):>16}"
                for n in models
            )
            print(f"  {column:<13}{row['episodes']:>9}{cells}")
        whole = "  ".join(f"{e.name} {e['catch'].win_rate}" for e in evaluations)
        print(f"  all columns: {whole}   ({time.perf_counter() - clock:.0f} s)")
        summary["splits"][split] = {
            "win_rate_by_ball_col": rows,
            "first_moves_by_ball_col": moves,
            "evaluation": [record for e in evaluations for record in e.records()],
        }
    summary["seconds"] = time.perf_counter() - clock
    out.write_text(json.dumps(finite(summary), indent=1) + "\n")
    print(f"\nwall time {summary['seconds']:.0f} s; every figure: {out}")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
