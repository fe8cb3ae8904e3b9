"""The setup every notebook of the kit shares, in one call, and where its checkpoints live.

Why: the four notebooks are stored with their outputs, so whatever a library prints on its own
(per-map progress bars, which are widgets and store as clutter; a deprecation warning TRL 1.16
triggers on every training run) ends up in the repository. And a stored output must say what
it came from: a smoke run (``KIT_SMOKE=1``, tiny step counts, as the tests run it) or a full run.
:func:`setup` quiets the first, prints the second, pins torch's CPU threads so that a notebook's
run repeats the runbook's, and starts trackio when asked, returning the arguments that keep
every trainer of the notebook in that one trackio run. :func:`checkpoints` puts the checkpoints
the notebooks hand on where they survive: a recycled Colab runtime loses ``/content``, and with
it the checkpoint a rerun would have continued from, unless they are on Google Drive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.runs import TRACKIO_PROJECT, log_evaluation

__all__ = ["DEFAULT_CHECKPOINTS", "DRIVE", "checkpoints", "log_evaluation", "setup"]

DEFAULT_CHECKPOINTS = Path("runs/notebooks")  # beside the notebooks, where Jupyter starts them
DRIVE = Path("/content/drive")  # where Colab mounts Google Drive
DRIVE_FOLDER = "kit-runs"  # the folder in "My Drive" that holds the checkpoints


def setup(
    run: str,
    smoke: bool,
    trackio: bool = False,
    project: str = TRACKIO_PROJECT,
    space_id: str | None = None,
) -> dict[str, Any]:
    """Prepare a notebook run named ``run``; return the trainer arguments that log it.

    Turns off the progress bars of ``datasets`` and ``transformers`` and the FutureWarning about
    transformers' renamed gradient-checkpointing API (TRL 1.16 still calls the old one). Prints
    one line saying whether this is a smoke run or a full run, so that a stored output says
    which it is. Pins torch's CPU threads at the count it chose (``kit.runs.pin_threads``), so
    that a notebook's run on a CPU repeats ``python -m kit.demo``'s at the same count
    (``scripts/run_notebooks.sh`` sets two, the demo's default).

    Returns ``kit.runs.tracking``'s fields, to splat into every trainer of the notebook
    (``warm_up(..., **TRACKING)``, ``grpo``, ``sft_trainer``, ``grpo_config``): ``{"report_to":
    "none"}``, or with ``trackio=True`` ``{"report_to": "trackio", "project": project,
    "run_name": run}``. With ``trackio=True`` it also opens that run (``kit.runs.start_trackio``:
    a new run each time, ``embed=False``), which each trainer then resumes by name instead of
    opening one of its own in transformers' default project ``"huggingface"``; hand the same
    dict to :func:`log_evaluation` to log an evaluation table into it. The run is stored
    offline, an SQLite file per project under ``$TRACKIO_DIR`` (``trackio show`` serves the
    dashboard), which a recycled Colab runtime loses.

    ``space_id`` (trackio's: ``"user/name"``, or ``"name"`` in your own account) also syncs the
    run, as it logs, to that Hugging Face Space, which trackio creates if need be: the figures
    outlive the runtime and can be watched from elsewhere. It needs a Hugging Face login with
    write access (on Colab: ``from huggingface_hub import notebook_login; notebook_login()``),
    and the Space is public unless your account's default is private. Every trainer gets it as
    ``trackio_space_id``, so they all log to the same Space.
    """
    from kit.runs import pin_threads, quiet_libraries, start_trackio, tracking

    quiet_libraries()
    pin_threads()
    report_to = "trackio" if trackio else "none"
    arguments = tracking(report_to, run, project, space_id)
    start_trackio(arguments)
    mode = (
        "smoke run (KIT_SMOKE=1): tiny step counts, the figures mean nothing"
        if smoke
        else "full run"
    )
    where = ""
    if trackio:
        where = f' (project "{project}"' + (f", Space {space_id})" if space_id else ")")
    print(f"{run}: {mode}; logging to {report_to}{where}")
    return arguments


def checkpoints(folder: str | Path | None = None) -> Path:
    """Create and return the folder the notebooks keep their checkpoints in.

    ``None``: ``runs/notebooks`` (relative to the notebook's folder, where Jupyter starts it).
    ``"drive"``: on Colab, mounts Google Drive (Colab asks you to allow it) and uses
    ``/content/drive/MyDrive/kit-runs``. Any other string or path: that folder.

    Why: a notebook saves what it trained there, and the next notebook, or a rerun, loads it
    (``kit.train.checkpoint``) instead of training again. A recycled Colab runtime wipes
    ``/content``, so a checkpoint saved under it is gone by the time the rerun looks; one on
    Drive is still there. Trainer outputs placed under it too (``f"{CHECKPOINTS}/{RUN}"``) also
    keep the mid-training checkpoints a GPU recipe saves, which ``kit.train.train`` continues
    from. Outside Colab ``"drive"`` raises ``ValueError`` saying what to pass instead, rather
    than create a folder named ``drive``.
    """
    if folder is None:
        path = DEFAULT_CHECKPOINTS
    elif str(folder) == "drive":
        try:
            from google.colab import drive
        except ImportError as error:
            raise ValueError(
                'CHECKPOINTS = "drive" mounts Google Drive, which only a Colab runtime can: '
                "outside Colab give a folder instead (a synced or mounted one keeps the "
                "checkpoints the same way), or None for runs/notebooks"
            ) from error
        drive.mount(str(DRIVE))
        path = DRIVE / "MyDrive" / DRIVE_FOLDER
    else:
        path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is a file, not a folder: name a folder for the checkpoints")
    path.mkdir(parents=True, exist_ok=True)
    return path
