"""The setup every notebook of the kit shares, in one call.

Why: the four notebooks are stored with their outputs, so whatever a library prints on its own
(per-map progress bars, which are widgets and store as clutter; a deprecation warning TRL 1.16
triggers on every training run) ends up in the repository. And a stored output must say what
it came from: a smoke run (``KIT_SMOKE=1``, tiny step counts, as the tests run it) or a full run.
:func:`setup` quiets the first, prints the second, pins torch's CPU threads so that a notebook's
run repeats the runbook's, and starts trackio when asked.
"""

from __future__ import annotations


def setup(run: str, smoke: bool, trackio: bool = False, project: str = "kit") -> str:
    """Prepare a notebook run named ``run``; return the trainers' ``report_to``.

    Turns off the progress bars of ``datasets`` and ``transformers`` and the FutureWarning about
    transformers' renamed gradient-checkpointing API (TRL 1.16 still calls the old one); with
    ``trackio=True`` starts an offline trackio run (an SQLite file under ``$TRACKIO_DIR``;
    ``trackio show`` serves the dashboard) with ``embed=False``, since TRL's own ``init`` would
    embed a dashboard, on Colab behind a public link. Prints one line saying whether this is a
    smoke run or a full run, so that a stored output says which it is. Pins torch's CPU threads
    at the count it chose (``kit.runs.pin_threads``), so that a notebook's run on a CPU repeats
    ``python -m kit.demo``'s at the same count (``scripts/run_notebooks.sh`` sets two, the
    demo's default).
    """
    from kit.runs import pin_threads, quiet_libraries

    quiet_libraries()
    pin_threads()
    report_to = "none"
    if trackio:
        import trackio as tracker

        tracker.init(project=project, name=run, embed=False)
        report_to = "trackio"
    mode = (
        "smoke run (KIT_SMOKE=1): tiny step counts, the figures mean nothing"
        if smoke
        else "full run"
    )
    print(f"{run}: {mode}; logging to {report_to}")
    return report_to
