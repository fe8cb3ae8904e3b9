"""The CPU runbook: does training work? Base -> SFT -> GRPO, measured on held-out tasks.

    python -m kit.demo                                   # Catch, seed 0, about 13 minutes
    python -m kit.demo --game wordle --sft-steps 400     # any game, more warm-up
    python -m kit.demo --sft-control 500                 # would more SFT have done as well?
    python -m kit.demo --where ball_col=0 --eval-generations 32  # no need to read the board
    python -m kit.demo --hidden-size 256 --layers 4         # a larger tiny model (slower)
    python -m kit.demo --table runs/demo/*/summary.json  # the README's table of those runs

What a researcher asks of a GRPO kit first is "does it learn?", and on a laptop CPU the only
honest answer is a measured one. So the runbook trains the offline tiny model in the two phases
every tool-calling recipe uses and measures the model after each, on tasks no phase trained on
(``kit.tasks.HELD_OUT``: for Catch, whole board heights), always with the same decoding:

1. evaluate the randomly initialised model: it never makes a tool call;
2. SFT warm-up on the shipped solver-played conversations (``kit.train.warm_up``), because GRPO
   learns nothing from a model that never calls a tool (every reward of a group is equal);
3. evaluate again;
4. GRPO from the warmed-up model with the game's default reward (``kit.train.grpo``), every
   batch recorded by ``kit.capture.Capture``;
5. evaluate again, and compare GRPO with its own SFT starting point, paired over the same
   tasks (``kit.evaluate.compare``: difference, 95% interval, p-value), and, where the game
   names a column to split by (``GameSpec.breakdown``; Catch's ball column), each model's win
   rate per value of it (``kit.evaluate.by_task``): a pooled gain can hide a column that lost.

Every evaluation samples ``--eval-generations`` episodes per task at ``--temperature``, the
temperature GRPO samples at: a sampled policy is what GRPO trains, and several episodes per task
are what separates two models on ten tasks. The run writes the two checkpoints (``sft-model/``,
``grpo-model/``; ``kit.models.load`` reads them), the last captured batch token by token
(``trajectory.html``) and ``summary.json`` with every figure, into a new folder, and ends with
the command that reproduces it.

``--sft-control STEPS`` adds the baseline a sceptical reader asks for first: the SFT checkpoint
trained ``STEPS`` more steps with the same recipe instead of GRPO (a fresh learning-rate
schedule), evaluated the same way and compared, paired, with the SFT start and with GRPO. Its
checkpoint is ``sft-control-model/``.

``--where KEY=VALUE`` narrows GRPO's tasks and every evaluation's to those whose reset column
``KEY`` is ``VALUE`` (the SFT data stays the shipped set, and held-out stays held out: Catch's
eval boards still have heights no phase trained on). With ``ball_col=0`` the ball always falls in
the left column, so a player wins without reading the board: the control that tells a model
that cannot learn from one that cannot see (README, "Does it learn?").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kit import registry
from kit.envs import ENVS
from kit.evaluate import BUDGETS, Comparison, Evaluation, by_task, compare, evaluate, text_table
from kit.models import TINY_HIDDEN_SIZE, TINY_LAYERS, tiny_config
from kit.runs import finite, quiet_libraries
from kit.tasks import HELD_OUT, TaskProvider
from kit.train import GRPO, GRPO_STEPS, SFT, SFT_STEPS

GRPO_FIGURES = (
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "tools/call_frequency",
    "tools/failure_frequency",
    "entropy",
)
COMPARED = ("win_rate", "finished", "mean_reward")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runbook; returns the summary it writes. Offline: it never downloads anything (set
    here, not at import, so that ``kit.train`` can be used with hub models)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = _parse(argv)
    if args.table:
        table = seeds_table([json.loads(Path(path).read_text()) for path in args.table])
        print(table)
        return {"table": table}
    started = time.perf_counter()
    quiet_libraries()
    import torch

    # GRPO on a CPU repeats exactly only at the same number of threads (the sums in a matmul are
    # split differently); one thread by default, so that the README's tables repeat anywhere.
    torch.set_num_threads(args.threads)

    from kit.models import load, save, tiny_model
    from kit.train import grpo, warm_up

    game, seed, out = args.game, args.seed, args.out
    size = f"{args.hidden_size} wide, {args.layers} layers"
    print(f"kit.demo: {game}, seed {seed}, tiny model ({size}), CPU, offline -> {out}", flush=True)
    print(f"held out: {HELD_OUT[game]}", flush=True)
    where = args.where
    # every held-out task, or those --where selects (None: evaluate's own default, the same)
    tasks = [t.row() for t in TaskProvider(game, "eval", where=where)] if where else None
    print(f"tasks: {f'only those with {where}' if where else 'all'}\n", flush=True)
    model, tokenizer = tiny_model(args.hidden_size, args.layers, seed=seed)
    seconds: dict[str, float] = {}

    def measure(name: str, player: Any = None) -> Evaluation:
        clock = time.perf_counter()
        result = evaluate(
            model if player is None else player,
            game,
            tokenizer,
            tasks=tasks,
            num_generations=args.eval_generations,
            greedy=False,
            temperature=args.temperature,
            seed=seed,
            max_completion_length=args.max_completion_length,
            name=name,
            batch_size=256,  # one batch: the tiny model's step costs the same for 8 or 80 rows
        )
        seconds[f"evaluate {name}"] = time.perf_counter() - clock
        print(f"   {_headline(result, game)}  ({seconds[f'evaluate {name}']:.0f} s)\n", flush=True)
        return result

    print("1. evaluate the random tiny model", flush=True)
    base = measure("base")

    print(f"2. SFT warm-up: {args.sft_steps} steps on kit.sft.load_sft({game!r})", flush=True)
    clock = time.perf_counter()
    losses = warm_up(model, tokenizer, game, args.sft_steps, seed, out / "sft")
    seconds["SFT"] = time.perf_counter() - clock
    save(model, tokenizer, out / "sft-model")
    print(f"   {seconds['SFT']:.0f} s; checkpoint {out / 'sft-model'}\n", flush=True)

    print("3. evaluate the warmed-up model", flush=True)
    sft = measure("SFT")

    print(f"4. GRPO: {args.grpo_steps} steps, default_reward({game!r}), Capture", flush=True)
    clock = time.perf_counter()
    trainer, capture = grpo(
        model,
        tokenizer,
        game,
        args.grpo_steps,
        seed,
        out / "grpo",
        where=where,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
    )
    seconds["GRPO"] = time.perf_counter() - clock
    save(model, tokenizer, out / "grpo-model")
    # TRL's frac_reward_zero_std misses flat groups whose rewards' float32 mean is inexact
    # (kit.capture.Batch.flat_groups); the captured rewards give the true share per step.
    flat = {
        batch.step + 1: batch.flat_groups(trainer.args.num_generations)
        for batch in capture.batches
        if batch.mode == "train"
    }
    grpo_log = [
        {
            "step": entry["step"],
            **{k: entry[k] for k in GRPO_FIGURES if k in entry},
            **({"flat_groups": flat[entry["step"]]} if entry["step"] in flat else {}),
        }
        for entry in trainer.state.log_history
        if "loss" in entry
    ]
    print(f"   {seconds['GRPO']:.0f} s; checkpoint {out / 'grpo-model'}\n", flush=True)

    print("5. evaluate the GRPO model", flush=True)
    after = measure("SFT + GRPO")
    comparisons = [compare(sft, after, game, metric, seed) for metric in COMPARED]
    evaluations = [base, sft, after]
    control: dict[str, Any] | None = None
    control_comparisons: list[tuple[str, Comparison]] = []
    if args.sft_control:
        print(f"6. control: {args.sft_control} more SFT steps from {out / 'sft-model'}", flush=True)
        clock = time.perf_counter()
        more, _ = load(out / "sft-model")
        control_losses = warm_up(more, tokenizer, game, args.sft_control, seed, out / "sft-control")
        seconds["SFT control"] = time.perf_counter() - clock
        save(more, tokenizer, out / "sft-control-model")
        print(f"   {seconds['SFT control']:.0f} s; checkpoint {out / 'sft-control-model'}\n")
        longer = measure("SFT + more SFT", more)
        evaluations.append(longer)
        control_comparisons = [
            ("more SFT against SFT", compare(sft, longer, game, "win_rate", seed)),
            ("GRPO against more SFT", compare(longer, after, game, "win_rate", seed)),
        ]
        control = {
            "steps": args.sft_control,
            "losses": control_losses,
            **{
                key: _comparison_record(comparison)
                for key, (_, comparison) in zip(
                    ("more_sft_vs_sft", "grpo_vs_more_sft"), control_comparisons, strict=True
                )
            },
        }

    # Where the change came from, where the game names a column to split by (kit.evaluate.by_task)
    column = registry.game(game).breakdown
    breakdown = None
    if column:
        rows = by_task(evaluations[1:], game, "win_rate", by=column).to_dict("records")
        breakdown = {"metric": "win_rate", "column": column, "rows": rows}

    from kit.viz import save_html

    batch = capture.batches[-1]
    html = save_html(batch.trajectories, tokenizer, out / "trajectory.html")
    seconds["total"] = time.perf_counter() - started
    summary = {
        "command": args.command,
        "seed": seed,
        "game": game,
        "model": {"hidden_size": args.hidden_size, "layers": args.layers},
        "held_out": HELD_OUT[game],
        "where": where,
        "max_completion_length": args.max_completion_length,
        "eval_generations": args.eval_generations,
        "temperature": args.temperature,
        "evaluation": [record for e in evaluations for record in e.records()],
        "grpo_vs_sft": [_comparison_record(c) for c in comparisons],
        "breakdown": breakdown,
        "sft_control": control,
        "sft": {"steps": args.sft_steps, "losses": losses, **SFT},
        "grpo": {
            "steps": args.grpo_steps,
            "log": grpo_log,
            "html_step": batch.step,
            **GRPO,
            "temperature": args.temperature,
        },
        "seconds": seconds,
        "html": str(html),
        "checkpoints": {
            "sft": str(out / "sft-model"),
            "grpo": str(out / "grpo-model"),
            **({"sft_control": str(out / "sft-control-model")} if control else {}),
        },
    }
    (out / "summary.json").write_text(json.dumps(finite(summary), indent=1) + "\n")
    _report(summary, evaluations, comparisons, control_comparisons)
    return summary


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    from kit.runs import run_dir

    parser = argparse.ArgumentParser(
        prog="python -m kit.demo",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--game", default="catch", choices=sorted(ENVS))
    parser.add_argument("--sft-steps", type=int, default=SFT_STEPS, help="SFT warm-up steps")
    parser.add_argument(
        "--grpo-steps", type=int, default=GRPO_STEPS, help="GRPO steps after the warm-up"
    )
    parser.add_argument(
        "--eval-generations",
        type=int,
        default=8,
        help="episodes per held-out task in every evaluation (evaluate's num_generations)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=GRPO["temperature"],
        help="sampling temperature of GRPO and of every evaluation",
    )
    parser.add_argument(
        "--sft-control",
        type=int,
        default=0,
        metavar="STEPS",
        help="also train the SFT checkpoint STEPS more SFT steps instead of GRPO, and compare",
    )
    parser.add_argument("--seed", type=int, default=0, help="model init, training and sampling")
    parser.add_argument(
        "--hidden-size",
        type=int,
        default=TINY_HIDDEN_SIZE,
        help="width of the tiny model (kit.models.tiny_config): a positive multiple of 8",
    )
    parser.add_argument(
        "--layers", type=int, default=TINY_LAYERS, help="decoder layers of the tiny model"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; a CPU run repeats exactly only at the same count",
    )
    parser.add_argument(
        "--max-completion-length",
        type=int,
        help="token budget of an episode, in evaluation and GRPO (default: kit.evaluate.BUDGETS)",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GRPO and the evaluations play only the tasks whose reset column KEY is VALUE "
        "(a JSON value, else a string), e.g. ball_col=0; repeatable",
    )
    parser.add_argument(
        "--out", type=Path, help="output folder, new or empty (default: runs/demo/<time stamp>)"
    )
    parser.add_argument(
        "--table",
        nargs="+",
        type=Path,
        metavar="SUMMARY",
        help="train nothing: print the README's table of these runs' summary.json files",
    )
    args = parser.parse_args(argv)
    if args.table:
        missing = [str(path) for path in args.table if not path.is_file()]
        if missing:
            parser.error(f"--table: no such file: {', '.join(missing)}")
        return args
    try:
        args.where = _where(args.where)
        for split in ("train", "eval"):
            TaskProvider(args.game, split, where=args.where)  # some task of each split matches
    except ValueError as error:
        parser.error(f"--where: {error}")
    for name in (
        "sft_steps",
        "grpo_steps",
        "eval_generations",
        "max_completion_length",
        "threads",
        "layers",
    ):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:
        tiny_config(args.hidden_size, args.layers)
    except ValueError as error:
        parser.error(f"--hidden-size / --layers: {error}")
    if args.sft_control < 0:
        parser.error("--sft-control must be 0 (no control) or more")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        parser.error("--temperature must be a positive number")
    args.max_completion_length = args.max_completion_length or BUDGETS[args.game]
    try:
        args.out = run_dir(args.out)  # a new folder: a run never writes over another's files
    except ValueError as error:
        parser.error(f"--out: {error}")
    args.command = (
        f"python -m kit.demo --game {args.game} --sft-steps {args.sft_steps} "
        f"--grpo-steps {args.grpo_steps} --eval-generations {args.eval_generations} "
        f"--temperature {args.temperature:g} --max-completion-length "
        f"{args.max_completion_length} --seed {args.seed} --threads {args.threads}"
        + (
            f" --hidden-size {args.hidden_size} --layers {args.layers}"
            if (args.hidden_size, args.layers) != (TINY_HIDDEN_SIZE, TINY_LAYERS)
            else ""
        )
        + "".join(f" --where {k}={json.dumps(v)}" for k, v in args.where.items())
        + (f" --sft-control {args.sft_control}" if args.sft_control else "")
    )
    return args


def _where(pairs: Sequence[str]) -> dict[str, Any]:
    """``["ball_col=0"]`` -> ``{"ball_col": 0}``: each value is read as JSON, else kept as text."""
    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        if key in where:
            raise ValueError(f"{key!r} is given twice")
        try:
            where[key] = json.loads(text)
        except ValueError:
            where[key] = text
    return where


def seeds_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """The README's table of runs (one row per ``summary.json``, usually one per seed), as
    Markdown: each model's win rate with its Wilson interval, and the paired comparisons with
    their intervals and p-values; the control's columns when every run has one."""

    def number(value: float, signed: bool = False) -> str:
        text = f"{abs(value):.2f}"
        if text == "0.00":
            return text
        return f"−{text}" if value < 0 else f"+{text}" if signed else text

    def rate(record: Mapping[str, Any]) -> str:
        low, high = record["win_rate_low"], record["win_rate_high"]
        return f"{number(record['win_rate'])} [{number(low)}, {number(high)}]"

    def difference(c: Mapping[str, Any]) -> str:
        p = c["p_value"]
        shown = "p < 0.0005" if p < 0.0005 else f"p {p:.3f}" if p < 0.01 else f"p {p:.2f}"
        low, high = number(c["difference_low"], True), number(c["difference_high"], True)
        return f"{number(c['difference'], True)} [{low}, {high}], {shown}"

    control = all(s.get("sft_control") for s in summaries)
    header = ["seed", "SFT win rate", "SFT + GRPO", "GRPO − SFT"]
    if control:
        header[3:3] = ["SFT + more SFT"]
        header += ["more SFT − SFT", "GRPO − more SFT"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for s in summaries:
        models = {record["player"]: record for record in s["evaluation"]}
        (win,) = [c for c in s["grpo_vs_sft"] if c["metric"] == "win_rate"]
        row = [str(s["seed"]), rate(models["SFT"]), rate(models["SFT + GRPO"]), difference(win)]
        if control:
            row[3:3] = [rate(models["SFT + more SFT"])]
            more = s["sft_control"]
            row += [difference(more["more_sft_vs_sft"]), difference(more["grpo_vs_more_sft"])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _headline(result: Evaluation, game: str) -> str:
    row = result[game]
    return (
        f"{row.episodes} episodes: won {row.win_rate}, finished {row.finished}, "
        f"{row.valid_calls} of {row.executed_calls} tool calls valid"
    )


def _comparison_record(comparison: Comparison) -> dict[str, Any]:
    """``Comparison.record`` with the runbook's names for the two means, ``sft`` and ``grpo``,
    which every ``summary.json`` written so far uses."""
    names = {"before": "sft", "after": "grpo"}
    return {names.get(key, key): value for key, value in comparison.record().items()}


def _report(
    summary: dict[str, Any],
    evaluations: list[Evaluation],
    comparisons: list[Comparison],
    controls: Sequence[tuple[str, Comparison]] = (),
) -> None:
    sft, grpo_run, seconds = summary["sft"], summary["grpo"], summary["seconds"]
    print("=" * 100)
    print(f"held out: {summary['held_out']}")
    print(text_table(evaluations, transpose=True))
    print("\nGRPO against its SFT starting point, on the same held-out tasks:")
    for comparison in comparisons:
        print(f"  {comparison}")
    if controls:
        print(f"\nThe control, {summary['sft_control']['steps']} more SFT steps instead of GRPO:")
        for label, comparison in controls:
            print(f"  {label}: {comparison}")
    if summary["breakdown"]:
        column, rows = summary["breakdown"]["column"], summary["breakdown"]["rows"]
        names = [e.name for e in evaluations[1:]]
        print(f"\nWin rate by {column}, the same held-out episodes:")
        print(f"  {column:<10}{'episodes':>9}" + "".join(f"{name:>16}" for name in names))
        for row in rows:
            cells = "".join(f"{row[name]:>16.2f}" for name in names)
            print(f"  {row[column]!s:<10}{row['episodes']:>9}{cells}")
    print(
        f"\nSFT    {sft['steps']} steps, batch {sft['per_device_train_batch_size']}, "
        f"lr {sft['learning_rate']:g}: loss {sft['losses'][0]['loss']:.3f} (step "
        f"{sft['losses'][0]['step']}) -> {sft['losses'][-1]['loss']:.3f}"
    )
    log = grpo_run["log"]
    tenth = max(1, len(log) // 10)
    print(
        f"GRPO   {grpo_run['steps']} steps, {grpo_run['per_device_train_batch_size']} rollouts "
        f"({grpo_run['num_generations']} per task), lr {grpo_run['learning_rate']:g}, "
        f"T={grpo_run['temperature']:g}; mean of each tenth of the run:"
    )
    for start in range(0, len(log), tenth):
        chunk = log[start : start + tenth]
        figures = "  ".join(
            f"{key.split('/')[-1]} {sum(e.get(key, 0.0) for e in chunk) / len(chunk):.3f}"
            for key in ("reward", "flat_groups", "tools/call_frequency")
        )
        print(f"       steps {chunk[0]['step']:>4}-{chunk[-1]['step']:<4} {figures}")
    print("\nwall time: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items()))
    print(f"HTML view of the last captured GRPO batch: {summary['html']}")
    print(f"checkpoints (kit.models.load): {', '.join(summary['checkpoints'].values())}")
    print(f"every figure: {Path(summary['html']).with_name('summary.json')}")
    print(f"reproduce: {summary['command']}")


if __name__ == "__main__":
    main(sys.argv[1:])
