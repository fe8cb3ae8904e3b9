"""The CPU runbook: what a researcher runs first, offline, on the tiny model.

    python -m kit.demo                                  # Catch, seed 0
    python -m kit.demo --game wordle --sft-steps 400    # any game, more warm-up

Why these steps, in this order: GRPO learns nothing from a model that never calls a tool (every
reward in a group is equal, so every advantage is zero), and a random or off-the-shelf small
model never does. So the runbook measures that, fixes it, measures again, and only then trains
with RL, recording what the loss actually saw:

1. evaluate the random tiny model on the game's held-out tasks (``kit.evaluate``): no tool calls;
2. SFT warm-up on the shipped solver-played conversations (``kit.data.load_sft``), assistant
   turns only (``kit.train.sft_config``);
3. evaluate again, same tasks, same greedy decoding: the valid-tool-call rate before and after;
4. a few GRPO steps from the warmed-up model with the game's default reward
   (``kit.rewards.default_reward``), every batch recorded by ``kit.masks.Capture``;
5. the last captured batch as a token-by-token HTML view (``kit.viz.save_html``), the
   warmed-up checkpoint, and ``summary.json`` with every figure, under ``--out``.

Everything is seeded by ``--seed``; the summary ends with the command that reproduces it. The
SFT recipe (:data:`SFT`: one whole conversation per step at learning rate 2e-3) was measured on
Catch: 150 steps were the fewest that made all 45 calls of the 5 eval episodes valid for seeds
0-3 (at 120, two seeds of four made no call at all), so the default of 200 keeps a margin;
README.md has the figures. The notebooks reuse :func:`warm_up`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kit.data import TURN_LIMITS, load_sft, task_dataset
from kit.envs import ENVS
from kit.evaluate import BUDGETS, Evaluation, evaluate, text_table

# The warm-up recipe: one whole conversation per step (2048 tokens hold a Catch game with the
# tiny tokenizer; at 1024 only its first turns are learnt, and later calls come out malformed).
SFT = {"per_device_train_batch_size": 1, "learning_rate": 2e-3, "max_length": 2048}
# One group of four rollouts per GRPO step: the smallest batch with a spread of rewards.
GRPO = {"per_device_train_batch_size": 4, "num_generations": 4}


def warm_up(
    model: Any,
    tokenizer: Any,
    games: str | Sequence[str],
    steps: int,
    seed: int,
    output_dir: str | Path,
    **overrides: Any,
) -> list[dict[str, float]]:
    """SFT ``model`` in place for ``steps`` steps on the shipped solver conversations of one game
    or several (shuffled together); ``overrides`` change the recipe (:data:`SFT`), e.g. a
    smaller ``learning_rate`` for a pretrained model. Return the logged losses."""
    from datasets import concatenate_datasets
    from trl import SFTTrainer

    from kit.train import sft_config

    games = [games] if isinstance(games, str) else list(games)
    data = concatenate_datasets([load_sft(game) for game in games])
    if len(games) > 1:
        data = data.shuffle(seed=seed)
    recipe = {"logging_steps": max(1, steps // 8), **SFT, **overrides}
    args = sft_config(str(output_dir), max_steps=steps, seed=seed, **recipe)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    _quiet(trainer, "sft", steps)
    trainer.train()
    return [
        {"step": entry["step"], "loss": entry["loss"]}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]


def grpo(
    model: Any,
    tokenizer: Any,
    game: str,
    steps: int,
    seed: int,
    budget: int,
    output_dir: str | Path,
) -> tuple[Any, Any]:
    """``steps`` GRPO steps on ``game``'s train tasks with its default reward and ``budget``
    tokens per episode, every batch captured; return ``(trainer, capture)``."""
    from trl import GRPOTrainer

    from kit.masks import Capture
    from kit.rewards import default_reward
    from kit.train import grpo_config

    args = grpo_config(
        str(output_dir),
        max_steps=steps,
        seed=seed,
        max_completion_length=budget,
        max_tool_calling_iterations=TURN_LIMITS[game],
        **GRPO,
    )
    trainer = GRPOTrainer(
        model=model,
        args=args,
        reward_funcs=default_reward(game),
        train_dataset=task_dataset(game, "train", seed=seed),
        processing_class=tokenizer,
        environment_factory=ENVS[game],
    )
    _quiet(trainer, "grpo", steps)
    capture = Capture(trainer)
    trainer.train()
    capture.close()
    return trainer, capture


GRPO_FIGURES = ("loss", "reward", "reward_std", "tools/call_frequency", "tools/failure_frequency")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runbook; returns the summary it writes. Offline: it never downloads anything (set
    here, not at import, so that ``warm_up`` and ``grpo`` can be used with hub models)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = argparse.ArgumentParser(
        prog="python -m kit.demo",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--game", default="catch", choices=sorted(ENVS))
    parser.add_argument("--sft-steps", type=int, default=200, help="SFT warm-up steps")
    parser.add_argument("--grpo-steps", type=int, default=2, help="GRPO steps after the warm-up")
    parser.add_argument("--seed", type=int, default=0, help="model init, training and sampling")
    parser.add_argument(
        "--max-completion-length",
        type=int,
        help="token budget of an episode, in evaluation and GRPO (default: kit.evaluate.BUDGETS)",
    )
    parser.add_argument(
        "--out", type=Path, help="output folder, new or empty (default: runs/demo/<time stamp>)"
    )
    args = parser.parse_args(argv)
    # A new folder per run: a second run never overwrites the checkpoint of the first.
    args.out = args.out or Path("runs/demo") / time.strftime("%Y%m%d-%H%M%S")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out {args.out} is not empty; name a new folder")
    budget = args.max_completion_length or BUDGETS[args.game]
    for name in ("sft_steps", "grpo_steps", "max_completion_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    command = (
        f"python -m kit.demo --game {args.game} --sft-steps {args.sft_steps} "
        f"--grpo-steps {args.grpo_steps} --max-completion-length {budget} --seed {args.seed} "
        f"--out {args.out}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _hush()

    from kit.models import tiny_model

    print(f"kit.demo: {args.game}, seed {args.seed}, tiny model, CPU, offline\n", flush=True)
    model, tokenizer = tiny_model(seed=args.seed)

    # 1. The random model on the held-out tasks: it never makes a tool call.
    print("1. evaluate the random tiny model (greedy, eval split)", flush=True)
    clock = time.perf_counter()
    before = evaluate(
        model,
        args.game,
        tokenizer,
        seed=args.seed,
        max_completion_length=budget,
        name="random init",
    )
    print(f"   {_calls(before, args.game)}  ({time.perf_counter() - clock:.0f} s)\n", flush=True)

    # 2. SFT warm-up on the solver's conversations, assistant turns only.
    print(
        f"2. SFT warm-up: {args.sft_steps} step(s) on kit.data.load_sft({args.game!r})", flush=True
    )
    clock = time.perf_counter()
    losses = warm_up(model, tokenizer, args.game, args.sft_steps, args.seed, args.out / "sft")
    sft_seconds = time.perf_counter() - clock
    model.save_pretrained(args.out / "sft-model")
    tokenizer.save_pretrained(args.out / "sft-model")
    print(f"   done in {sft_seconds:.0f} s; checkpoint {args.out / 'sft-model'}\n", flush=True)

    # 3. The same evaluation after the warm-up.
    print("3. evaluate the warmed-up model (same tasks, same decoding)", flush=True)
    clock = time.perf_counter()
    after = evaluate(
        model, args.game, tokenizer, seed=args.seed, max_completion_length=budget, name="after SFT"
    )
    print(f"   {_calls(after, args.game)}  ({time.perf_counter() - clock:.0f} s)\n", flush=True)

    # 4. GRPO from the warmed-up model, recording what the loss trains on.
    print(f"4. GRPO: {args.grpo_steps} step(s), default_reward({args.game!r}), Capture", flush=True)
    clock = time.perf_counter()
    trainer, capture = grpo(
        model, tokenizer, args.game, args.grpo_steps, args.seed, budget, args.out / "grpo"
    )
    grpo_seconds = time.perf_counter() - clock
    grpo_log = [
        {"step": entry["step"], **{k: entry[k] for k in GRPO_FIGURES if k in entry}}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]
    print(f"   done in {grpo_seconds:.0f} s; {len(capture.trajectories)} episodes captured\n")

    # 5. What the loss saw, as HTML; every figure, as a table and as JSON.
    from kit.viz import save_html

    batch = capture.batches[-1]
    html = save_html(batch.trajectories, tokenizer, args.out / "trajectory.html")
    summary = {
        "command": command,
        "seed": args.seed,
        "game": args.game,
        "max_completion_length": budget,
        "evaluation": before.records() + after.records(),
        "sft": {"steps": args.sft_steps, "seconds": sft_seconds, "losses": losses, **SFT},
        "grpo": {
            "steps": args.grpo_steps,
            "seconds": grpo_seconds,
            "log": grpo_log,
            "captured_episodes": len(capture.trajectories),
            "html_step": batch.step,
            **GRPO,
        },
        "html": str(html),
        "checkpoint": str(args.out / "sft-model"),
        "seconds": time.perf_counter() - started,
    }
    (args.out / "summary.json").write_text(json.dumps(_finite(summary), indent=1) + "\n")
    _report(summary, before, after)
    return summary


def _calls(result: Evaluation, game: str) -> str:
    row = result[game]
    return (
        f"{row.episodes} episodes, {row.executed_calls} tool calls run, {row.valid_calls} valid; "
        f"won {row.win_rate.value:.0%}"
    )


def _report(summary: dict[str, Any], before: Evaluation, after: Evaluation) -> None:
    sft, grpo_run = summary["sft"], summary["grpo"]
    print("=" * 100)
    print(text_table([before, after], transpose=True))
    print(
        f"\nSFT    {sft['steps']} steps, batch {sft['per_device_train_batch_size']}, "
        f"lr {sft['learning_rate']:g}: loss {sft['losses'][0]['loss']:.3f} (step "
        f"{sft['losses'][0]['step']}) -> {sft['losses'][-1]['loss']:.3f} (step "
        f"{sft['losses'][-1]['step']}), {sft['seconds']:.0f} s"
    )
    for entry in grpo_run["log"]:
        figures = "  ".join(f"{k} {v:+.3f}" for k, v in entry.items() if k != "step")
        print(f"GRPO   step {entry['step']}: {figures}")
    print(f"GRPO   {grpo_run['seconds']:.0f} s, {grpo_run['captured_episodes']} episodes captured")
    print(f"\nHTML view of the last captured batch: {summary['html']}")
    print(f"warmed-up checkpoint (kit.models.load): {summary['checkpoint']}")
    print(f"every figure: {Path(summary['html']).with_name('summary.json')}")
    print(f"total {summary['seconds']:.0f} s, seed {summary['seed']}")
    print(f"reproduce: {summary['command']}")


def _hush() -> None:
    """Keep the runbook's output to its own lines: no per-map progress bars, and no warnings
    about transformers' renamed gradient-checkpointing API, which TRL 1.16 still calls."""
    import datasets
    from transformers.utils import logging

    datasets.disable_progress_bars()
    logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*checkpointing.*")


def _quiet(trainer: Any, label: str, steps: int) -> None:
    """Replace the trainer's progress bars and per-log dict dumps (in a terminal or a notebook)
    with one short line per logging step."""
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from transformers.utils.notebook import NotebookProgressCallback

    class Line(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "loss" in logs:
                print(
                    f"   {label} step {state.global_step}/{steps}  loss {logs['loss']:.4f}  "
                    f"({time.perf_counter() - self.started:.0f} s)",
                    flush=True,
                )

    for callback in (PrinterCallback, ProgressCallback, NotebookProgressCallback):
        trainer.remove_callback(callback)
    trainer.add_callback(Line())


def _finite(value: Any) -> Any:
    """JSON has no NaN: an undefined figure (a rate with no trials) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


if __name__ == "__main__":
    main(sys.argv[1:])
