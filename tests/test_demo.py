"""`python -m kit.demo` runs end to end as a researcher runs it, and what it writes adds up.

Tiny settings (5 SFT steps, 1 GRPO step): the point is the pipeline and the bookkeeping, not
the learning, whose figures README.md reports with their command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from kit.evaluate import evaluate  # noqa: E402
from kit.models import load, tiny_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 96  # tokens per episode: short, so the untrained model's rambling ends soon


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [sys.executable, "-m", "kit.demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run"
    done = _run(
        *("--sft-steps", "5", "--grpo-steps", "1", "--max-completion-length", str(BUDGET)),
        *("--seed", "3", "--out", str(out)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_the_demo_writes_every_output_and_says_where(demo):
    out, stdout, summary = demo
    command = (
        "python -m kit.demo --game catch --sft-steps 5 --grpo-steps 1 "
        f"--max-completion-length {BUDGET} --seed 3 --out {out}"
    )
    assert summary["command"] == command and summary["seed"] == 3
    assert stdout.rstrip().endswith(f"reproduce: {command}")
    html = Path(summary["html"])
    assert html == out / "trajectory.html" and str(html) in stdout
    page = html.read_text(encoding="utf-8")
    # the last captured batch: one group of four rollouts, each token view present
    assert page.count("rollout ") == summary["grpo"]["captured_episodes"] == 4
    assert "model: sampled, trained" in page
    for line in ("random init (catch)", "after SFT (catch)", "valid-call rate", "GRPO   step 1"):
        assert line in stdout


@pytest.mark.slow
def test_the_figures_are_coherent(demo):
    _, _, summary = demo
    before, after = summary["evaluation"]
    for record in (before, after):
        assert record["game"] == "catch" and record["episodes"] == 5 and record["seed"] == 3
        assert 0 < record["tokens"] <= BUDGET
        assert 0 <= record["valid_calls"] <= record["executed_calls"]
        if record["executed_calls"] == 0:
            assert record["valid_call_rate"] is None  # undefined, written as null, not NaN
        assert record["win_rate_low"] <= record["win_rate"] <= record["win_rate_high"]
    losses = summary["sft"]["losses"]
    assert [entry["step"] for entry in losses] == [1, 2, 3, 4, 5]
    assert losses[-1]["loss"] < losses[0]["loss"]  # five steps of SFT already lower the loss
    (step,) = summary["grpo"]["log"]
    assert step["step"] == 1 and {"loss", "reward", "tools/call_frequency"} <= set(step)
    assert summary["seconds"] >= summary["sft"]["seconds"] + summary["grpo"]["seconds"]


@pytest.mark.slow
def test_the_figures_reproduce_from_the_seed_and_the_checkpoint(demo):
    """The 'before' row is the seed's tiny model; the 'after' row is the saved checkpoint."""
    out, _, summary = demo
    before, after = summary["evaluation"]
    model, tokenizer = tiny_model(seed=3)
    again = evaluate(model, "catch", tokenizer, seed=3, max_completion_length=BUDGET).records()[0]
    warmed, warmed_tokenizer = load(str(out / "sft-model"))
    reloaded = evaluate(
        warmed, "catch", warmed_tokenizer, seed=3, max_completion_length=BUDGET
    ).records()[0]
    for recorded, fresh in ((before, again), (after, reloaded)):
        for key in ("win_rate", "executed_calls", "valid_calls", "tokens", "mean_reward"):
            assert recorded[key] == pytest.approx(fresh[key]), key


def test_bad_options_are_refused_with_a_reason(capsys):
    from kit.demo import main

    for argv, message in (
        (["--sft-steps", "0"], "--sft-steps must be at least 1"),
        (["--game", "chess"], "invalid choice: 'chess'"),
        (["--max-completion-length", "-4"], "--max-completion-length must be at least 1"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_demo_never_overwrites_an_earlier_run(demo):
    out, _, summary = demo
    again = _run("--sft-steps", "1", "--out", str(out))
    assert again.returncode == 2 and "is not empty" in again.stderr
    assert json.loads((out / "summary.json").read_text()) == summary
