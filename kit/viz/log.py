"""A training run's log, seen: ``plot_log`` draws each logged figure per step with its trailing
mean, ``log_table`` gives the same trend as a few rows of numbers a text can quote. Both read
``trainer.state.log_history`` as TRL's trainers write it (one entry per logged step)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


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
