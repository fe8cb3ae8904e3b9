"""Run folders: one new folder per run, never shared and never overwritten; the two things every
run does to what it prints and writes (``quiet_libraries``, ``finite``); and its CPU threads,
pinned so that a run repeats (``pin_threads``).

Why: a run writes a checkpoint, a summary and logs into its folder. A default name made of the
time stamp alone (``runs/demo/<YYYYmmdd-HHMMSS>``) is the same for two runs started in the same
second (a sweep launched from a script, two terminals), and then the second run writes over the
first one's checkpoint while the first is still training. Checking "does it exist?" and then
creating it does not help: both runs check before either creates. So the creation itself is the
lock: ``mkdir`` without ``exist_ok`` succeeds for exactly one caller, and a loser takes the next
name (``-2``, ``-3``, ...). A folder named by the user (``--out``) must be new or empty, so that
nothing of an earlier run is mixed into, or lost under, the new one.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from pathlib import Path
from typing import Any

STAMP = "%Y%m%d-%H%M%S"


def run_dir(out: Path | None, base: Path = Path("runs/demo")) -> Path:
    """Create and return the folder a run writes into.

    With ``out=None``: a new folder ``base/<YYYYmmdd-HHMMSS>``, or ``<stamp>-2``, ``<stamp>-3``,
    ... when another run (another process too) took that name first; two callers never get the
    same folder. With ``out``: that folder, created with its parents, which must not be a file
    or a folder with anything in it. Raises ``ValueError`` with a message meant for the user (a
    CLI passes it to ``parser.error``).
    """
    if out is not None:
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise ValueError(f"{out} is a file, not a folder; name a new folder")
        if out.is_dir() and any(out.iterdir()):
            raise ValueError(f"{out} is not empty; name a new folder")
        _mkdir(out, exist_ok=True)
        return out
    base = Path(base)
    _mkdir(base, exist_ok=True)
    stamp = time.strftime(STAMP)
    for n in itertools.count(1):
        folder = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()  # the lock: exactly one caller creates it
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


def _mkdir(folder: Path, exist_ok: bool) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=exist_ok)
    except (FileExistsError, NotADirectoryError) as error:  # a file in the way
        raise ValueError(f"cannot create the folder {folder}: {error.strerror}") from error


def quiet_libraries() -> None:
    """Keep a run's output to its own lines: no per-map progress bars from ``datasets`` and
    ``transformers``, and no warning about transformers' renamed gradient-checkpointing API,
    which TRL 1.16 still calls on every training run."""
    import datasets
    from transformers.utils import logging

    datasets.disable_progress_bars()
    logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*checkpointing.*")


def pin_threads(threads: int | None = None) -> int:
    """Set torch's CPU threads to ``threads`` (None: the count torch chose, from
    ``OMP_NUM_THREADS`` or the cores) and return the count.

    Why: a CPU run repeats exactly only at the same thread count (a matmul splits its sums by
    thread), and only once the count is set, not merely defaulted. ``torch.set_num_threads`` also
    turns MKL's dynamic threading off (which may give a small matrix fewer threads), so the same
    two threads sum differently before and after it: measured, 150 SFT steps of the tiny model
    at two threads ended up to 1.5e-6 apart in a weight, and notebook 2's GRPO run left
    ``python -m kit.demo``'s at step 17. ``kit.demo`` and ``kit.notebook.setup`` both call this.
    """
    import torch

    count = torch.get_num_threads() if threads is None else threads
    if type(count) is not int or count < 1:
        raise ValueError(f"threads must be a whole number of at least 1, not {count!r}")
    torch.set_num_threads(count)
    return count


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (an undefined rate: no trials) replaced by None,
    for a ``summary.json``: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value
