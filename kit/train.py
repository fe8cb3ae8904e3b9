"""Trainer configs that work the same on a laptop CPU and a Colab GPU, and the kit's recipes.

TRL's configs default to bf16 and to logging integrations found on the machine; on a CPU the
first fails and the second may try the network. ``grpo_config`` and ``sft_config`` pick safe
defaults for the device at hand and leave every field overridable, so a notebook states only
what it studies. ``warm_up`` (SFT on the shipped solver games) and ``grpo`` (GRPO on a game's
train tasks, every batch captured) are the two training phases that ``python -m kit.demo`` and
the notebooks run, with the recipes :data:`SFT` and :data:`GRPO` measured there.
``checkpoint`` loads a phase's saved model or makes and saves it, which is how the notebooks hand
checkpoints on without any of them needing another to have run; ``plot_log`` and ``log_table``
show a run's logged figures step by step.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _device_defaults() -> dict[str, Any]:
    gpu = _on_gpu()
    return {
        "bf16": gpu,
        "use_cpu": not gpu,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "seed": 0,
        "dataloader_num_workers": 0,
    }


def grpo_config(output_dir: str, **overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` with device-appropriate defaults; ``overrides`` win."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig

    defaults = {
        **_device_defaults(),
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 256,
        "max_tool_calling_iterations": 8,
        "learning_rate": 1e-5,
    }
    return GRPOConfig(output_dir=output_dir, **{**defaults, **overrides})


def sft_config(output_dir: str, **overrides: Any) -> Any:
    """A ``trl.SFTConfig`` that trains only the assistant turns of tool-call conversations."""
    from trl import SFTConfig

    defaults = {
        **_device_defaults(),
        "per_device_train_batch_size": 4,
        "assistant_only_loss": True,
        "learning_rate": 1e-3,
    }
    return SFTConfig(output_dir=output_dir, **{**defaults, **overrides})


# -- the recipes the runbook and the notebooks share ------------------------------------------
# SFT warm-up: one whole conversation per step (a Catch game is 554 to 1,006 tokens with the tiny
# tokenizer; a conversation cut short teaches only its first turns, and later calls come out
# malformed). Learning rate 5e-4: at 2e-3 the tiny model learnt the format and when to stay, and
# never which side to move to, not even after 1,500 steps (its first move went LEFT or RIGHT
# whatever the ball's column); at 5e-4 it reads the side of the board.
SFT = {"per_device_train_batch_size": 1, "learning_rate": 5e-4, "max_length": 2048}
# 1,000 steps, five passes over the 200 shipped games: the side of the board is learnt last (it
# decides one or two moves of a game, the format every token of it), and 1,000 steps at 5e-4 take
# the held-out win rate from random play's 0.20 to 0.72 on seed 0 (README, "Does it learn?").
SFT_STEPS = 1000
# GRPO from the warmed-up tiny model, as measured on Catch (README, "Does it learn?"): four
# groups of 8 rollouts per step (four tasks), sampled at temperature 0.5, learning rate 5e-5, a
# tenth of SFT's. Four tasks per step keep one task from steering a step; 8 rollouts per task give
# each group a spread. At 2e-4 the first update broke the tool-call format of the model warmed up
# at 5e-4 (no tool call at all in a third of the next steps): Adam's first steps move every weight
# by about the learning rate, whatever the gradient. At temperature 1.0 earlier warm-ups broke
# their tool-call JSON within a few turns in most episodes. No gradient checkpointing: the tiny
# model's activations fit, and recomputing them cost a tenth of a step.
GRPO = {
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "learning_rate": 5e-5,
    "temperature": 0.5,
    "gradient_checkpointing": False,
}
GRPO_STEPS = 40


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

    from kit.data import load_sft

    games = [games] if isinstance(games, str) else list(games)
    data = concatenate_datasets([load_sft(game) for game in games])
    if len(games) > 1:
        data = data.shuffle(seed=seed)
    recipe = {"logging_steps": max(1, steps // 8), **SFT, **overrides}
    args = sft_config(str(output_dir), max_steps=steps, seed=seed, **recipe)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    quiet(trainer, "sft", steps)
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
    output_dir: str | Path,
    where: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> tuple[Any, Any]:
    """``steps`` GRPO steps on ``game``'s train tasks with its default reward, every batch
    recorded by ``kit.masks.Capture``; ``where`` keeps only the tasks with these column values
    (``kit.data.TaskProvider``); ``overrides`` change the recipe (:data:`GRPO`) or any
    ``GRPOConfig`` field (``max_completion_length`` defaults to ``kit.evaluate.BUDGETS``).
    Return ``(trainer, capture)``; the model is trained in place."""
    from trl import GRPOTrainer

    from kit.data import TURN_LIMITS, task_dataset
    from kit.envs import ENVS
    from kit.evaluate import BUDGETS
    from kit.masks import Capture
    from kit.rewards import default_reward

    recipe = {
        "max_completion_length": BUDGETS[game],
        "max_tool_calling_iterations": TURN_LIMITS[game],
        **GRPO,
        **overrides,
    }
    args = grpo_config(str(output_dir), max_steps=steps, seed=seed, **recipe)
    # Enough rows for every step: a step takes batch / num_generations rows of the task set.
    rows = max(1, steps * args.per_device_train_batch_size // args.num_generations)
    trainer = GRPOTrainer(
        model=model,
        args=args,
        reward_funcs=default_reward(game),
        train_dataset=task_dataset(game, "train", num_tasks=rows, seed=seed, where=where),
        processing_class=tokenizer,
        environment_factory=ENVS[game],
    )
    quiet(trainer, "grpo", steps)
    capture = Capture(trainer)
    try:
        trainer.train()
    finally:
        capture.close()
    return trainer, capture


def checkpoint(
    path: str | Path, make: Callable[[], tuple[Any, Any]], **load_kwargs: Any
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from the checkpoint at ``path``; if there is none yet, ``make()``
    them, save them there (``kit.models.save``) and return them. Says which in one line.

    Why: the notebooks hand checkpoints on (notebook 1 saves the SFT model, 2 reads it and saves
    the GRPO model, 4 reads both), yet each must also run alone, under papermill or on a fresh
    Colab runtime. ``make`` is the recipe of the notebook that would have written the checkpoint,
    so a notebook run alone measures the same thing. A folder at ``path`` that is neither a
    complete checkpoint nor empty is refused before ``make`` trains anything. ``load_kwargs`` go
    to ``kit.models.load``.
    """
    from kit.models import load, missing_files, save

    path = Path(path)
    if not missing_files(path):
        print(f"loaded the checkpoint {path}", flush=True)
        return load(path, **load_kwargs)
    if path.exists() and not (path.is_dir() and not any(path.iterdir())):
        raise ValueError(
            f"{path} is neither a checkpoint (no {'; no '.join(missing_files(path))}) nor an "
            "empty folder: move it away or name another folder"
        )
    print(f"no checkpoint at {path} yet: making it", flush=True)
    model, tokenizer = make()
    save(model, tokenizer, path)
    print(f"saved the checkpoint {path}", flush=True)
    return model, tokenizer


def _logged(log_history: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict]:
    """The training steps' log entries (those with a ``loss``), checked for ``keys``."""
    steps = [dict(entry) for entry in log_history if "loss" in entry and "step" in entry]
    if not steps:
        raise ValueError("the log has no training step (no entry with a loss)")
    missing = [key for key in keys if not any(key in entry for entry in steps)]
    if missing or not keys or isinstance(keys, str):
        logged = sorted({key for entry in steps for key in entry})
        raise ValueError(f"never logged: {missing or keys!r}; the log has {logged}")
    return steps


def _value(entry: Mapping[str, Any], key: str) -> float:
    value = entry.get(key)
    return float(value) if isinstance(value, (int, float)) else math.nan


def plot_log(
    log_history: Sequence[Mapping[str, Any]], keys: Sequence[str], window: int = 10
) -> Any:
    """One panel per logged figure (``trainer.state.log_history``): its value at each training
    step as dots, and its mean over the last ``window`` steps as a line.

    Why both: a GRPO step on a CPU batch is a handful of episodes, so a single step's reward
    jumps by more than a whole run moves it; the trailing mean shows the trend, the dots show
    how much to trust it. Steps where a figure was not logged, or is NaN (a routed reward
    whose environment had no row in that batch), are skipped, not drawn as 0. Returns a
    matplotlib ``Figure`` that shows itself as PNG.
    """
    from matplotlib.ticker import MaxNLocator

    from kit.viz.plots import new_figure

    steps = _logged(log_history, keys)
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    columns = min(3, len(keys))
    rows = -(-len(keys) // columns)
    figure = new_figure(3.6 * columns, 2.6 * rows)
    grid = figure.subplots(rows, columns, squeeze=False)
    for axes, key in zip(grid.flat, keys, strict=False):
        points = [(e["step"], _value(e, key)) for e in steps]
        points = [(step, value) for step, value in points if math.isfinite(value)]
        xs = [step for step, _ in points]
        values = [value for _, value in points]
        trailing = [
            sum(values[max(0, i - window + 1) : i + 1]) / min(i + 1, window)
            for i in range(len(values))
        ]
        axes.plot(xs, values, "o", markersize=2.5, alpha=0.45, color="#3884ff")
        axes.plot(xs, trailing, color="#1c4f9c", linewidth=1.6, label=f"mean of {window} steps")
        axes.set_title(key, fontsize=10)
        axes.set_xlabel("step", fontsize=8)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.tick_params(labelsize=8)
    for axes in list(grid.flat)[len(keys) :]:
        axes.set_visible(False)
    grid.flat[0].legend(fontsize=7)
    return figure


def log_table(
    log_history: Sequence[Mapping[str, Any]], keys: Sequence[str], parts: int = 10
) -> Any:
    """The mean of each logged figure over each ``parts``-th of the run, one row per part
    labelled with its steps: a run's trend in a few lines of numbers a text can quote. A pandas
    ``DataFrame``; NaN steps are left out of a mean, as in :func:`plot_log`."""
    import pandas as pd

    steps = _logged(log_history, keys)
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    parts = min(parts, len(steps))
    rows = []
    for i in range(parts):
        chunk = steps[i * len(steps) // parts : (i + 1) * len(steps) // parts]
        row: dict[str, Any] = {"steps": f"{chunk[0]['step']}-{chunk[-1]['step']}"}
        for key in keys:
            values = [v for v in (_value(e, key) for e in chunk) if math.isfinite(v)]
            row[key] = sum(values) / len(values) if values else math.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("steps")


# By class name: importing transformers' NotebookProgressCallback needs IPython, which the
# `train` extra (what the main command installs) does not have.
_PROGRESS_CALLBACKS = ("PrinterCallback", "ProgressCallback", "NotebookProgressCallback")


def quiet(trainer: Any, label: str, steps: int) -> None:
    """Replace the trainer's progress bars and per-log dict dumps (in a terminal or a notebook)
    with one short line per logging step."""
    from transformers import TrainerCallback

    class Line(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "loss" in logs:
                extra = "".join(
                    f"  {name} {logs[key]:.3f}"
                    for key, name in (("reward", "reward"), ("tools/call_frequency", "calls"))
                    if key in logs
                )
                print(
                    f"   {label} step {state.global_step}/{steps}  loss {logs['loss']:.4f}"
                    f"{extra}  ({time.perf_counter() - self.started:.0f} s)",
                    flush=True,
                )

    for callback in list(trainer.callback_handler.callbacks):
        if type(callback).__name__ in _PROGRESS_CALLBACKS:
            trainer.remove_callback(callback)
    trainer.add_callback(Line())
