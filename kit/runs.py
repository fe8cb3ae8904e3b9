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

And a run's figures go to one trackio run of one project (``tracking``, ``start_trackio``,
``log_evaluation``), training curves and evaluation tables alike, rather than to the project
``"huggingface"`` that transformers defaults to, in as many runs as the run has trainers.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
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


def peak_rss_gb() -> float:
    """The process's peak resident memory so far, in GB (Linux reports KiB, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * (1 if sys.platform == "darwin" else 1024) / 1e9


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


# -- trackio: one project, one named run, the trainers' callback and the evaluations in it -------
TRACKIO_PROJECT = "kit"


def tracking(
    report_to: str, run: str, project: str = TRACKIO_PROJECT, space_id: str | None = None
) -> dict[str, Any]:
    """The ``TrainingArguments`` fields that send a run's trainers to ``report_to`` under the
    name ``run``: for ``"trackio"``, ``{"report_to": "trackio", "project": project, "run_name":
    run}``, plus ``trackio_space_id`` and ``trackio_static_space_id=False`` with ``space_id``;
    for ``"none"``, ``{"report_to": "none"}``; for another integration, it and ``run_name``.
    Splat them into every trainer of the run (``warm_up(..., **tracking)``, ``grpo``,
    ``sft_trainer``, ``grpo_config``), and give them to :func:`start_trackio` and
    :func:`log_evaluation`.

    Why these fields: transformers' ``TrackioCallback`` calls ``trackio.init(project=args.project,
    name=args.run_name, space_id=args.trackio_space_id, resume="allow", ...)`` when a trainer
    starts and ``trackio.finish()`` when it ends. Left at their defaults, every trainer logs to
    the project ``"huggingface"``, in a run named after nothing the user chose, and in a notebook
    the first ``init`` of a project embeds a dashboard (on Colab, behind a public link). With
    them, each trainer resumes the run :func:`start_trackio` opened, by its name, in the same
    project and Space. ``space_id`` (``"user/name"`` or ``"name"``: trackio's, created if need be,
    public unless your account's default is private, and needing a Hugging Face login) syncs the
    run to that Space as it logs; ``trackio_static_space_id=False`` stops the callback from
    freezing a new static copy of it after every training (a Space per trainer, each with a
    random name).
    """
    if not run:
        raise ValueError("name the run: trackio files a run's figures under its name")
    if space_id is not None and report_to != "trackio":
        raise ValueError(
            f"a trackio Space ({space_id!r}) syncs a trackio run: it needs report_to='trackio' "
            f"(trackio=True in kit.notebook.setup), not {report_to!r}"
        )
    if report_to == "none":
        return {"report_to": "none"}
    if report_to != "trackio":
        return {"report_to": report_to, "run_name": run}
    args: dict[str, Any] = {"report_to": "trackio", "project": project, "run_name": run}
    if space_id is not None:
        from transformers import TrainingArguments

        fields = TrainingArguments.__dataclass_fields__
        if "trackio_space_id" not in fields:
            raise ValueError(
                "this transformers has no trackio_space_id: upgrade it to sync to a Space"
            )
        args["trackio_space_id"] = space_id
        if "trackio_static_space_id" in fields:
            args["trackio_static_space_id"] = False
    return args


def start_trackio(tracking: Mapping[str, Any]) -> None:
    """Open the run :func:`tracking` names, before any trainer does; a no-op unless it reports
    to trackio. Call it once per run, on the main process only.

    Why: the trainers' callback opens its run with ``resume="allow"``, by name, so it joins
    whatever run of that name is newest, and, were it the first to open the project in a
    notebook, would embed a dashboard. Opening the run here first, with ``embed=False`` and one
    empty entry written (trackio lists a run only once it has logged something), makes it a new
    run each time (a notebook run again starts a second run of the same name, not a
    continuation of the first), the one every trainer and :func:`log_evaluation` then resumes.
    """
    if tracking.get("report_to") != "trackio":
        return
    import trackio

    trackio.init(
        project=tracking["project"],
        name=tracking["run_name"],
        space_id=tracking.get("trackio_space_id"),
        embed=False,
    )
    trackio.log({})


def log_evaluation(
    evaluations: Sequence[Any], tracking: Mapping[str, Any], key: str = "evaluation"
) -> None:
    """Log ``evaluations`` (``kit.evaluate.Evaluation``) to the run :func:`tracking` names, as one
    ``trackio.Table`` under ``key``: a row per (player, game), every figure with its ``_low``
    and ``_high`` bounds (``Evaluation.records``; an undefined one, such as the valid-call rate
    of a player that made no call, empty). A no-op unless the run reports to trackio.

    Why it opens the run again: each trainer's callback finishes the run when its training
    ends, so an evaluation that follows a training would have no run to log to. Resumed by
    name, as the callback does it, the table lands in the same run as the training's figures,
    and the run keeps the trainers' arguments as its config (trackio would otherwise replace
    them with the resumed run's empty one).
    """
    if tracking.get("report_to") != "trackio":
        return
    import trackio

    rows = [finite(record) for evaluation in evaluations for record in evaluation.records()]
    if not rows:
        raise ValueError("give at least one Evaluation")
    columns = list(rows[0])
    run = trackio.init(
        project=tracking["project"],
        name=tracking["run_name"],
        space_id=tracking.get("trackio_space_id"),
        resume="allow",
        embed=False,
    )
    # A resumed run writes its config afresh with its first entry: keep the trainers' arguments
    # that the callback stored (read from the local store; a run kept only on a Space has none).
    try:
        stored = next((r.config for r in trackio.Api().runs(run.project) if r.id == run.id), None)
    except ValueError:  # no local store for the project
        stored = None
    run.config.update({k: v for k, v in (stored or {}).items() if not k.startswith("_")})
    table = trackio.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
    trackio.log({key: table})
