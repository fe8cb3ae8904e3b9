"""benchmarks/ keeps working: every script runs end to end with tiny counts, and the harness
alternates contenders and judges goals as its docstring says, on made-up figures.

No speed is asserted here: a speed is a ratio measured in one run on one machine
(``python benchmarks/games.py``, figures in benchmarks/README.md), never a timed test.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    # Loaded from its file under its own name: putting benchmarks/ on sys.path would make its
    # `catch`, `echo`, ... importable as top-level modules for every later test.
    spec = importlib.util.spec_from_file_location("benchmarks_harness", BENCHMARKS / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_round_runs_every_contender_once_in_a_rotating_order(harness):
    calls: list[str] = []

    def contender(name: str) -> object:
        return harness.Contender(
            name, lambda: calls.append(name) or 1, lambda: calls.append(f"setup {name}")
        )

    # With no time to spend, a slice is exactly one batch: the calls show the order.
    rates = harness.measure([contender(name) for name in "abc"], seconds=0.0, rounds=4)
    batches = [call for call in calls if not call.startswith("setup")]
    warm_up, rounds = batches[:3], [batches[i : i + 3] for i in range(3, len(batches), 3)]
    assert warm_up == list("abc")
    assert rounds == [list("abc"), list("bca"), list("cab"), list("abc")]
    # The setup runs before every batch, its own contender's.
    assert calls[::2] == [f"setup {name}" for name in batches]
    assert {name: len(per_round) for name, per_round in rates.items()} == dict.fromkeys("abc", 4)


def _result(harness, engine, reference, unit="moves/s", goal=5.0, name="ref"):
    return harness.Result("game", "work", unit, {"engine": engine, name: reference}, name, goal)


def test_a_missed_goal_is_said_plainly(harness, capsys):
    missed = _result(harness, [31.0, 30.0, 32.0], [10.0, 10.0, 10.0])
    assert missed.speedups("engine") == (3.1, [3.1, 3.0, 3.2])
    assert "goal: engine >= 5x ref: MISSED (3.1x on the medians)" in harness.lines(missed)[-1]
    assert "engine / ref: 3.1x on the medians (rounds 3.0x to 3.2x)" in harness.lines(missed)[-2]
    harness.summary([missed, _result(harness, [60.0] * 3, [10.0] * 3)])
    out = capsys.readouterr().out
    assert "Goals: 1 of 2 MISSED or not checked:" in out
    assert "game | work: engine >= 5x ref: MISSED (3.1x on the medians)" in out


def test_a_goal_met_on_the_medians_only_says_so(harness):
    shaky = _result(harness, [60.0, 40.0, 60.0], [10.0, 10.0, 10.0])
    text, missed = harness.verdict(shaky)
    assert not missed
    assert text == "engine >= 5x ref: met on the medians, not in every round (lowest 4.0x)"


def test_times_per_reset_are_compared_the_right_way_up(harness):
    # 1 ms against 10 ms is ten times as fast.
    fast = _result(harness, [1.0, 1.0, 2.0], [10.0, 10.0, 10.0], unit=harness.MS)
    assert fast.speedups("engine") == (10.0, [10.0, 10.0, 5.0])
    assert harness.verdict(fast) == ("engine >= 5x ref: met (every round)", False)


def test_a_goal_without_its_reference_is_not_met(harness, capsys):
    alone = harness.Result("game", "work", "moves/s", {"engine": [1.0]}, None, 5.0)
    assert harness.verdict(alone) == (
        "engine >= 5x the reference: NOT CHECKED, no reference ran",
        True,
    )
    harness.summary([alone])
    assert "Goals: 1 of 1 MISSED or not checked:" in capsys.readouterr().out


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_games_script_runs_every_game_and_contender(request):
    references = {"TextArena": "textarena", "OpenSpiel": "open_spiel"}
    present = {name for name, module in references.items() if importlib.util.find_spec(module)}
    if "TextArena" in present:
        request.getfixturevalue("nltk_data")  # TextArena's Wordle loads NLTK's corpora
    out = _run(
        "benchmarks/games.py", "--seconds", "0.01", "--rounds", "2", "--difficulties", "easy"
    )
    assert out.startswith("2 rounds of about 0.005 s")
    assert "Load average (1, 5, 15 min) at the start:" in out
    for game, workloads in {
        "wordle": ["games (GRPO groups of 8)", "reset (GRPO", "reset, new seeds"],
        "catch": ["games (10 x 5)", "reset"],
        "sudoku easy": ["moves, resets excluded", "reset(seed=)", "reset(puzzle=)"],
        "echo": ["games (20 messages)", "reset"],
    }.items():
        for workload in workloads:
            assert f"{game} | {workload}" in out
    for contender in ["engine", "env", *present]:
        assert f"\n    {contender} " in out
    assert "very-easy" not in out  # --difficulties reached the Sudoku benchmark
    # Wordle's, Catch's and Sudoku's at "easy": met, missed, or not checked without a reference.
    assert re.search(r"\nGoals: (all 3 met\.|[123] of 3 MISSED or not checked:)\n", out)
    assert "Load average (1, 5, 15 min) at the end:" in out


@pytest.mark.parametrize(
    "script", [["catch.py"], ["echo.py"], ["sudoku.py", "--difficulties", "very-easy"]]
)
@pytest.mark.slow
def test_each_game_script_runs_alone(script):
    out = _run(f"benchmarks/{script[0]}", *script[1:], "--seconds", "0.01", "--rounds", "1")
    assert "Goals:" in out and "Load average (1, 5, 15 min) at the end:" in out


@pytest.mark.slow
def test_the_precision_benchmark_times_both_precisions():
    out = _run(
        "benchmarks/precision.py", "--rows", "2", "--tokens", "16", "--rounds", "2", "--layers", "1"
    )
    assert "fp32: median" in out and "bf16: median" in out and "fp32 / bf16: " in out


@pytest.mark.slow
def test_the_grpo_step_benchmark_splits_a_step_into_phases(tmp_path):
    """Two GRPO steps of a random tiny model (the first untimed); every phase TRL's step goes
    through is reported, and the shares add up to the whole timed step."""
    out = _run(
        "benchmarks/grpo_step.py", "--sft-steps", "1", "--steps", "1", "--threads", "1",
        "--out", str(tmp_path),
        "--grpo", "per_device_train_batch_size=4", "num_generations=2", "max_completion_length=16",
    )  # fmt: skip
    assert "1 timed steps" in out
    shares = {
        line[:48].strip(): float(line[48:].split()[1].rstrip("%"))
        for line in out.splitlines()
        if re.match(r".{48} +[-\d.]+ +[-\d.]+% +\d+$", line)
    }
    for phase in ("generation, first turn", "backward and the rest of training_step",
                  "forward (loss)", "optimizer step", "kit capture", "rewards"):  # fmt: skip
        assert phase in shares, phase
    assert sum(shares.values()) == pytest.approx(100.0, abs=0.5)
    assert shares["generation, first turn"] > 0


@pytest.mark.slow
def test_the_scoring_benchmark_scores_a_real_batch_each_way(tmp_path):
    """One GRPO step's batch of a barely warmed-up tiny model, scored by TRL's method and the
    kit's at two pass sizes: each contender is reported as a ratio to TRL's."""
    out = _run(
        "benchmarks/scoring.py", "--sft-steps", "1", "--steps", "1", "--rounds", "1",
        "--rows", "4", "2", "--threads", "1", "--out", str(tmp_path),
        "--grpo", "per_device_train_batch_size=4", "num_generations=2", "max_completion_length=16",
    )  # fmt: skip
    assert "1 batches of 4 rollouts" in out
    ratios = dict(re.findall(r"^(TRL|kit, \d a pass) +[\d.]+ s +([\d.]+)x TRL's$", out, re.M))
    assert set(ratios) == {"TRL", "kit, 4 a pass", "kit, 2 a pass"}
    assert float(ratios["TRL"]) == 1.0


@pytest.mark.slow
def test_the_endpoint_benchmark_times_both_paths_on_one_model():
    """One round of the tiny model (a few SFT steps) in-process and behind transformers serve:
    both contenders play, and the ratio is reported."""
    out = _run(
        "benchmarks/endpoint.py", "--sft-steps", "2", "--seconds", "0.1", "--rounds", "1",
        "--threads", "1", "--concurrency", "2",
    )  # fmt: skip
    assert "in-process" in out and "endpoint / in-process:" in out and "episodes/s" in out


@pytest.mark.slow
def test_the_sft_reading_benchmark_probes_every_decision_of_the_held_out_games(tmp_path):
    """Two SFT steps of a random tiny model, probed before and after: each probe reads every
    decision of the 10 held-out solver games (the first move of each, off centre or not, and
    the later ones), with --reasoning every column the solver states, ball and paddle, and on
    boards redrawn a cell to a token (--spaced) the same decisions."""
    for extra in ([], ["--reasoning"], ["--first-turns", "--spaced"]):
        out = _run(
            "benchmarks/sft_reading.py", "--steps", "2", "--every", "2", "--threads", "1",
            "--out", str(tmp_path / "-".join(["run", *extra])), *extra,
        )  # fmt: skip
        probes = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert [p["step"] for p in probes] == [0, 2]
        for p in probes:
            first = [p["first move, ball off centre"], p["first move, ball in the centre"]]
            assert [int(f.split("/")[1]) for f in first] == [8, 2]  # 10 boards, 2 centred
            later = int(p["later moves"].split("/")[1]) + int(p["later stays"].split("/")[1])
            assert later == 70  # 8 + 10 rows, 5 columns each: 80 moves, 10 of them first
            assert 0.0 <= p["p_first"] <= 1.0
            keys = ("ball's column stated, first turn", "ball's column stated, later turns",
                    "paddle's column stated")  # fmt: skip
            stated = [p.get(key, "") for key in keys]
            if "--reasoning" in extra:  # one reason a move: the ball's column, then the paddle's
                assert [s.split("/")[1] for s in stated] == ["10", "70", "80"]
            else:
                assert stated == ["", "", ""]
