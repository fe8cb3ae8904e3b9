"""kit.runs.run_dir: a new folder per run, even for runs started in the same second."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.runs import run_dir

ROOT = Path(__file__).resolve().parents[1]
STAMP = "20250101-120000"


def test_default_folder_is_a_new_time_stamp_under_base(tmp_path):
    base = tmp_path / "runs" / "demo"
    folder = run_dir(None, base)
    assert folder.parent == base and folder.is_dir() and list(folder.iterdir()) == []
    assert re.fullmatch(r"\d{8}-\d{6}", folder.name)
    assert run_dir(None, base) != folder  # the next one, even within the same second


def test_the_same_second_gives_numbered_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda *args: STAMP)
    names = [run_dir(None, tmp_path).name for _ in range(3)]
    assert names == [STAMP, f"{STAMP}-2", f"{STAMP}-3"]


def test_threads_racing_in_one_second_get_distinct_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda *args: STAMP)
    n = 8
    start = threading.Barrier(n)
    got: list[Path] = []

    def one() -> None:
        start.wait()
        got.append(run_dir(None, tmp_path))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == n and len(set(got)) == n
    assert {p.name for p in got} == {STAMP} | {f"{STAMP}-{i}" for i in range(2, n + 1)}


RACER = """
import sys, time
from pathlib import Path
from kit.runs import run_dir
time.strftime = lambda *args: {stamp!r}
while time.time() < {at!r}:  # all start together
    pass
print(run_dir(None, Path(sys.argv[1])))
"""


@pytest.mark.slow
def test_processes_racing_in_one_second_get_distinct_folders(tmp_path):
    n = 4
    code = RACER.format(stamp=STAMP, at=time.time() + 2.0)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(n)
    ]
    got = [Path(racer.communicate(timeout=120)[0].strip()) for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert len(set(got)) == n and all(p.parent == tmp_path and p.is_dir() for p in got)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in got)


def test_out_new_or_empty_is_used(tmp_path):
    new = tmp_path / "a" / "b"
    assert run_dir(new) == new and new.is_dir()
    assert run_dir(new) == new  # still empty: fine


def test_out_with_something_in_it_is_refused_and_left_alone(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="is not empty; name a new folder"):
        run_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_out_pointing_at_a_file_is_refused(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_dir(file)
    with pytest.raises(ValueError, match="cannot create the folder"):
        run_dir(file / "run")  # a file where a parent folder should be
    with pytest.raises(ValueError, match="cannot create the folder"):
        run_dir(None, base=file)
    assert file.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


# Twenty SFT steps of the tiny model at two threads, in a fresh process: as kit.demo pins them,
# as a notebook does (kit.notebook.setup under OMP_NUM_THREADS=2), or left to torch's default.
TRAIN = """
import sys
import torch
if sys.argv[1] == "demo":
    from kit.runs import pin_threads
    pin_threads(2)
elif sys.argv[1] == "notebook":
    from kit.notebook import setup
    setup("threads", smoke=True)
from kit.models import tiny_model
from kit.train import warm_up
model, tokenizer = tiny_model(seed=0)
warm_up(model, tokenizer, "catch", 20, 0, sys.argv[2])
torch.save(model.state_dict(), sys.argv[3])
"""


def _train(how: str, tmp_path: Path, **env: str) -> dict:
    import torch

    weights = tmp_path / f"{how}.pt"
    subprocess.run(
        [sys.executable, "-c", TRAIN, how, str(tmp_path / how), str(weights)],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        timeout=600,
    )
    return torch.load(weights)


@pytest.mark.slow
def test_a_notebook_trains_weight_for_weight_as_the_demo_at_the_same_thread_count(tmp_path):
    """Why kit.notebook.setup pins the threads: notebook 2's GRPO run must be the runbook's, step
    for step. Without the pin, the same two threads sum differently on an MKL build (MKL's dynamic
    threading stays on), and the weights drift apart in their last bits."""
    demo = _train("demo", tmp_path)
    notebook = _train("notebook", tmp_path, OMP_NUM_THREADS="2")
    assert demo.keys() == notebook.keys()
    assert all(demo[name].equal(notebook[name]) for name in demo)


def test_pin_threads_sets_the_count_and_refuses_nonsense():
    import torch

    from kit.runs import pin_threads

    before = torch.get_num_threads()
    try:
        assert pin_threads() == before == torch.get_num_threads()
        assert pin_threads(1) == 1 == torch.get_num_threads()
        for bad in (0, -2, 1.5, True, "2"):
            with pytest.raises(ValueError, match="threads must be a whole number"):
                pin_threads(bad)
            assert torch.get_num_threads() == 1  # left as it was
    finally:
        torch.set_num_threads(before)
