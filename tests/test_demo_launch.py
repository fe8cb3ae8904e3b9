"""``python -m kit.demo``, the one pipeline, as a script of its own and under ``accelerate``
with two processes on the CPU (issue 8 §3): every rank trains on its own share of each GRPO
batch and records it per rank; rank 0 saves the checkpoints and evaluates.

``accelerate launch --cpu --num_processes 2`` starts one process in accelerate 1.15 (its simple
launcher: several CPU processes need mpirun and a hostfile), so two processes are launched the
way a multi-GPU run is, with ``ACCELERATE_USE_CPU=1``: torchrun, the gloo backend, DDP on CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("accelerate")

SMALL = [
    "--sft_steps", "2",
    "--grpo_steps", "1",
    "--grpo", "per_device_train_batch_size=4", "num_generations=4",
    "--max_completion_length", "64",
    "--eval_generations", "1",
    "--threads", "1",
]  # fmt: skip


def _run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_CPU": "1"}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.mark.slow
def test_the_script_trains_evaluates_and_hands_on_checkpoints(tmp_path):
    from kit.models import load

    out = tmp_path / "run"
    command = [sys.executable, "-m", "kit.demo", *SMALL]
    done = _run([*command, "--out", str(out)], tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    players = [row["player"] for row in summary["evaluation"]]
    assert players == ["base", "SFT", "SFT + GRPO"]
    assert all(row["tasks"] == 10 for row in summary["evaluation"])
    assert summary["grpo"]["per_device_train_batch_size"] == 4  # --grpo sized the batch
    assert sum(summary["grpo"]["tasks"].values()) == 4  # one group of 4 rollouts
    for name in ("sft-model", "grpo-model"):
        load(out / name)  # complete checkpoints
    assert not list(out.glob("captured-rank*.json"))  # one process: the summary counts them
    assert "python -m kit.demo --game catch --sft-steps 2" in done.stdout
    again = subprocess.run(
        [*command, "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert again.returncode != 0 and "not empty" in again.stderr + again.stdout  # never overwrites


@pytest.mark.slow
def test_two_processes_share_each_batch_and_capture_per_rank(tmp_path):
    launcher = shutil.which("accelerate")
    if launcher is None:
        pytest.skip("the accelerate command is not on PATH")
    out = tmp_path / "run"
    command = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", "-m", "kit.demo"]
    done = _run([*command, *SMALL, "--out", str(out)], tmp_path)
    ranks = {p.name: json.loads(p.read_text()) for p in sorted(out.glob("captured-rank*.json"))}
    assert list(ranks) == ["captured-rank0.json", "captured-rank1.json"]
    tasks = []
    for captured in ranks.values():
        assert len(captured) == 4  # per_device_train_batch_size rollouts each
        (task,) = {json.dumps(t["task"], sort_keys=True) for t in captured}  # one group
        tasks.append(task)
    assert tasks[0] != tasks[1]  # two shares of one batch, not one batch twice
    assert (out / "grpo-model" / "model.safetensors").is_file()
    assert not [p for p in out.parent.iterdir() if p != out]  # one folder for both ranks
    # rank 0 alone evaluated and reported: one summary, one results table
    summary = json.loads((out / "summary.json").read_text())
    assert [row["player"] for row in summary["evaluation"]] == ["base", "SFT", "SFT + GRPO"]
    assert done.stdout.count("GRPO against its SFT starting point") == 1


def test_the_readmes_deepspeed_and_fsdp_configs_ship_with_trl():
    import trl

    folder = Path(trl.__file__).parent / "accelerate_configs"
    for name in ("zero2.yaml", "zero3.yaml", "fsdp2.yaml", "multi_gpu.yaml"):
        assert (folder / name).is_file(), name
    gpu = (Path(__file__).resolve().parents[1] / "docs" / "gpu.md").read_text()
    assert "/accelerate_configs/zero2.yaml" in gpu
