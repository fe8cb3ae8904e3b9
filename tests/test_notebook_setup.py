"""``kit.notebook``: the setup cell's trackio run, the arguments that keep every trainer in it,
the evaluation table logged into it, and the checkpoint folder that outlives a Colab runtime.

Why each matters: transformers' ``TrackioCallback`` opens a trackio run whenever a trainer
starts, from the trainer's own arguments (``project``, ``run_name``, ``trackio_space_id``);
left at their defaults it logs to the project ``"huggingface"`` under a made-up name, one run
per trainer, and in a notebook embeds a dashboard. So the arguments are checked against the
real callback, and one real, offline run (two tiny trainings, an evaluation table) is read back
from trackio's SQLite store. And a recycled Colab runtime wipes ``/content``: the checkpoints
that a rerun would continue from must be able to live on Google Drive.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from kit import notebook
from kit.notebook import checkpoints, setup

ROOT = Path(__file__).resolve().parents[1]


class FakeTrackio(types.SimpleNamespace):
    """The parts of trackio that ``kit.runs`` and transformers' callback call, recording them."""

    def __init__(self) -> None:
        calls: list[tuple[str, dict]] = []

        def init(**kwargs: object) -> types.SimpleNamespace:
            calls.append(("init", kwargs))
            return types.SimpleNamespace(project=kwargs["project"], id="1", config={})

        super().__init__(
            calls=calls,
            init=init,
            Api=lambda: types.SimpleNamespace(runs=lambda project: []),
            log=lambda metrics, step=None: calls.append(("log", metrics)),
            finish=lambda: calls.append(("finish", {})),
            Table=lambda **kwargs: ("Table", kwargs),
            config=types.SimpleNamespace(update=lambda *a, **k: None),
            context_vars=types.SimpleNamespace(
                current_space_id=types.SimpleNamespace(get=lambda: None)
            ),
            __version__="0.43.0",
            # transformers and accelerate ask importlib whether trackio is installed
            __spec__=importlib.machinery.ModuleSpec("trackio", None),
        )


@pytest.fixture
def fake_trackio(monkeypatch) -> FakeTrackio:
    fake = FakeTrackio()
    monkeypatch.setitem(sys.modules, "trackio", fake)
    return fake


def test_setup_without_trackio_reports_nowhere_and_says_which_run_it_is(capsys, fake_trackio):
    import datasets

    datasets.enable_progress_bars()
    assert setup("01_x", smoke=True) == {"report_to": "none"}
    assert not datasets.is_progress_bar_enabled()
    assert capsys.readouterr().out == (
        "01_x: smoke run (KIT_SMOKE=1): tiny step counts, the figures mean nothing; "
        "logging to none\n"
    )
    assert fake_trackio.calls == []  # no run opened


def test_setup_with_trackio_opens_one_named_run_in_the_kits_project(capsys, fake_trackio):
    tracking = setup("02_y", smoke=False, trackio=True)
    assert tracking == {"report_to": "trackio", "project": "kit", "run_name": "02_y"}
    # embed=False: the first init of a project in a notebook would embed a dashboard; log({}):
    # trackio lists a run (which the trainers then resume by name) once it has logged
    assert fake_trackio.calls == [
        ("init", {"project": "kit", "name": "02_y", "space_id": None, "embed": False}),
        ("log", {}),
    ]
    assert capsys.readouterr().out == '02_y: full run; logging to trackio (project "kit")\n'


def test_setup_passes_a_space_to_trackio_and_to_every_trainer(capsys, fake_trackio):
    tracking = setup("03_z", smoke=False, trackio=True, project="mine", space_id="me/kit-runs")
    assert tracking == {
        "report_to": "trackio",
        "project": "mine",
        "run_name": "03_z",
        "trackio_space_id": "me/kit-runs",
        "trackio_static_space_id": False,  # no frozen copy of the Space per trainer
    }
    assert fake_trackio.calls[0] == (
        "init",
        {"project": "mine", "name": "03_z", "space_id": "me/kit-runs", "embed": False},
    )
    assert "Space me/kit-runs" in capsys.readouterr().out
    with pytest.raises(ValueError, match="trackio=True"):
        setup("03_z", smoke=False, space_id="me/kit-runs")


@pytest.mark.parametrize("space_id", [None, "me/kit-runs"])
def test_transformers_trackio_callback_joins_the_setup_run(fake_trackio, tmp_path, space_id):
    """The fields setup returns are the ones transformers' callback reads: it resumes the very
    run setup opened (same project, name and Space) instead of opening one of its own."""
    from transformers import TrainerState
    from transformers.integrations.integration_utils import TrackioCallback
    from trl import SFTConfig

    tracking = setup("01_sft", smoke=True, trackio=True, space_id=space_id)
    opened = fake_trackio.calls[0][1]
    args = SFTConfig(output_dir=str(tmp_path), use_cpu=True, **tracking)
    TrackioCallback().setup(args, TrainerState(), model=None)
    joined = fake_trackio.calls[-1][1]
    assert joined["project"] == opened["project"] == "kit"
    assert joined["name"] == opened["name"] == "01_sft"
    assert joined["space_id"] == opened["space_id"] == space_id
    assert joined["resume"] == "allow"


def test_log_evaluation_logs_one_table_and_is_a_no_op_without_trackio(fake_trackio):
    from kit.evaluate import evaluate
    from kit.solvers.policies import solver_policy

    results = [evaluate(solver_policy(), "catch", seed=0, name="solver")]
    notebook.log_evaluation(results, {"report_to": "none"})
    assert fake_trackio.calls == []
    tracking = {"report_to": "trackio", "project": "kit", "run_name": "04_e"}
    notebook.log_evaluation(results, tracking)
    (init, kwargs), (log, metrics) = fake_trackio.calls
    assert (init, log) == ("init", "log")
    assert kwargs == {
        "project": "kit",
        "name": "04_e",
        "space_id": None,
        "resume": "allow",  # the run setup opened, which a trainer may have finished since
        "embed": False,
    }
    kind, table = metrics["evaluation"]
    assert kind == "Table"
    assert table["columns"][:2] == ["player", "game"]
    assert [row[:2] for row in table["data"]] == [["solver", "catch"]]
    assert "win_rate_low" in table["columns"]


def test_tracking_names_the_run_for_every_integration():
    from kit.runs import tracking

    assert tracking("none", "r") == {"report_to": "none"}
    assert tracking("trackio", "r") == {"report_to": "trackio", "project": "kit", "run_name": "r"}
    assert tracking("trackio", "r", "p")["project"] == "p"
    assert tracking("tensorboard", "r") == {"report_to": "tensorboard", "run_name": "r"}
    with pytest.raises(ValueError, match="name the run"):
        tracking("trackio", "")


def test_checkpoints_default_and_named_folders_are_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert checkpoints(None) == Path("runs/notebooks")
    assert (tmp_path / "runs" / "notebooks").is_dir()
    assert checkpoints("runs/notebooks") == Path("runs/notebooks")  # there already: fine
    assert checkpoints(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        checkpoints(tmp_path / "file")


def test_checkpoints_on_drive_outside_colab_says_what_to_pass_instead(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "google.colab", None)  # import fails, as off Colab
    with pytest.raises(ValueError, match="only a Colab runtime") as error:
        checkpoints("drive")
    assert "give a folder" in str(error.value)
    assert not (tmp_path / "drive").exists()


def test_checkpoints_on_colab_mount_google_drive(tmp_path, monkeypatch):
    mounted = []

    def mount(where: str) -> None:
        mounted.append(where)
        (Path(where) / "MyDrive").mkdir(parents=True)

    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mount)
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(notebook, "DRIVE", tmp_path / "content" / "drive")
    folder = checkpoints("drive")
    assert mounted == [str(tmp_path / "content" / "drive")]
    assert folder == tmp_path / "content" / "drive" / "MyDrive" / "kit-runs"
    assert folder.is_dir()


# -- a real trackio run, offline ------------------------------------------------------------------
RUN = """
from kit.evaluate import evaluate
from kit.models import tiny_model
from kit.notebook import log_evaluation, setup
from kit.solvers.policies import random_policy, solver_policy
from kit.train import warm_up

TRACKING = setup("01_sft_warmup", smoke=True, trackio=True)
model, tokenizer = tiny_model()
# two trainings, as notebook 4 makes two missing checkpoints: both must land in the one run
warm_up(model, tokenizer, "catch", 2, 0, "{out}/sft", **TRACKING)
warm_up(model, tokenizer, "catch", 1, 0, "{out}/more", **TRACKING)
results = [
    evaluate(solver_policy(), "catch", seed=0, name="solver"),
    evaluate(random_policy(), "catch", seed=0, name="random"),
]
log_evaluation(results, TRACKING)
"""


# the notebook run again, as after a lost runtime: a run of its own, the first one left alone
RERUN = """
from kit.models import tiny_model
from kit.notebook import setup
from kit.train import warm_up

TRACKING = setup("01_sft_warmup", smoke=True, trackio=True)
model, tokenizer = tiny_model()
warm_up(model, tokenizer, "catch", 1, 0, "{out}/rerun", **TRACKING)
"""


def _run_offline(script: str, store: Path, out: Path) -> None:
    """Run ``script`` in a Python of its own, its trackio store ``store`` (read when trackio is
    imported), offline."""
    env = {
        **os.environ,
        "TRACKIO_DIR": str(store),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script).format(out=out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]


def _logged(store: Path) -> dict[str, list[dict]]:
    """Each run's entries in the project "kit", by run id, in step order."""
    with sqlite3.connect(store / "kit.db") as db:
        rows = db.execute("SELECT run_id, run_name, step, metrics FROM metrics").fetchall()
    assert {name for _, name, _, _ in rows} == {"01_sft_warmup"}
    runs: dict[str, list[dict]] = {}
    for run_id, _, _, metrics in sorted(rows, key=lambda row: row[2]):
        runs.setdefault(run_id, []).append(json.loads(metrics))
    return runs


def _losses(entries: list[dict]) -> list[float]:
    return [entry["train/loss"] for entry in entries if "train/loss" in entry]


@pytest.mark.slow
def test_a_notebook_run_is_one_trackio_run_with_its_trainings_and_evaluation(tmp_path):
    store = tmp_path / "trackio"
    _run_offline(RUN, store, tmp_path)
    assert sorted(path.name for path in store.glob("*.db")) == ["kit.db"]  # no "huggingface"
    ((run_id, logged),) = _logged(store).items()
    assert len(_losses(logged)) == 3  # 2 steps, then 1, each step logged (logging_steps 1)
    tables = [entry["evaluation"] for entry in logged if "evaluation" in entry]
    assert len(tables) == 1 and tables[0]["_type"] == "trackio.table"
    assert [(row["player"], row["game"]) for row in tables[0]["_value"]] == [
        ("solver", "catch"),
        ("random", "catch"),
    ]
    assert tables[0]["_value"][0]["win_rate"] == 1.0
    # the run keeps the trainers' arguments (the callback's config), the table logged after them
    with sqlite3.connect(store / "kit.db") as db:
        ((configured, config),) = db.execute("SELECT run_id, config FROM configs").fetchall()
    assert configured == run_id
    assert json.loads(config)["project"] == "kit"
    assert json.loads(config)["run_name"] == "01_sft_warmup"

    _run_offline(RERUN, store, tmp_path)
    runs = _logged(store)
    assert runs[run_id] == logged  # the first run, untouched
    (rerun,) = set(runs) - {run_id}
    assert len(_losses(runs[rerun])) == 1
