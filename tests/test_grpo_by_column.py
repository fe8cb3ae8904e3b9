"""``examples/grpo_by_column.py`` on a real (smoke-sized) ``kit.demo`` run: its per-column figures
add up to the evaluations they come from, and it refuses what is not a run or would overwrite."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest

pytest.importorskip("trl")

from kit.builtin.catch import CATCH_COLUMNS  # noqa: E402
from kit.demo import main as demo  # noqa: E402
from kit.runs import finite  # noqa: E402

# kit.demo at smoke size (tests/test_demo.py's settings): the bookkeeping, not the learning
SMOKE = ["--sft-steps", "5", "--grpo-steps", "1", "--eval-generations", "2"]


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return importlib.import_module("examples.grpo_by_column")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("by-column") / "run"
    demo([*SMOKE, "--max-completion-length", "96", "--seed", "2", "--out", str(out)])
    return out


@pytest.mark.slow
def test_the_columns_add_up_to_the_evaluations(example, run, capsys) -> None:
    summary = example.main(["--run", str(run)])
    written = json.loads((run / "by_column.json").read_text())
    assert written == json.loads(json.dumps(finite(summary)))  # what it returned, it wrote
    assert summary["seed"] == 2 and summary["eval_generations"] == 2
    for split, tasks in (("train", 30), ("eval", 10)):
        figures = summary["splits"][split]
        rows = figures["win_rate_by_ball_col"]
        assert [row["ball_col"] for row in rows] == list(range(CATCH_COLUMNS))
        assert sum(row["tasks"] for row in rows) == tasks
        for record in figures["evaluation"]:
            name = record["player"]
            assert record["split"] == split and record["episodes"] == 2 * tasks
            won = sum(row[name] * row["episodes"] for row in rows)
            assert won == pytest.approx(record["win_rate"] * record["episodes"])
            moves = figures["first_moves_by_ball_col"][name]
            assert [sum(moves[column].values()) for column in moves] == [
                row["episodes"] for row in rows
            ]
    # the held-out episodes are the run's own: same seed, same sampling, same figures
    recorded = json.loads((run / "summary.json").read_text())["evaluation"]
    replayed = summary["splits"]["eval"]["evaluation"]
    for name in ("SFT", "SFT + GRPO"):
        (was,) = [r for r in recorded if r["player"] == name]
        (now,) = [r for r in replayed if r["player"] == name]
        for key in ("win_rate", "finished", "tokens", "executed_calls"):
            assert now[key] == pytest.approx(was[key]), (name, key)
    printed = capsys.readouterr().out
    assert "boards GRPO trained on (train split), seed 2" in printed
    assert "held-out boards (eval split)" in printed
    with pytest.raises(SystemExit):  # a second look would overwrite the first's figures
        example.main(["--run", str(run)])
    assert "by_column.json exists" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_from_another_runs_warm_up_reads_that_warm_up(example, run, tmp_path) -> None:
    """A ``kit.demo --sft-from`` run has no SFT checkpoint of its own: the script plays the one
    the run started from, so its held-out SFT figures are the run's own."""
    out = tmp_path / "from"
    options = ["--max-completion-length", "96", "--seed", "2", "--out", str(out)]
    demo(["--sft-from", str(run), *SMOKE[2:], *options])
    assert not (out / "sft-model").exists()
    summary = example.main(["--run", str(out)])
    recorded = json.loads((out / "summary.json").read_text())["evaluation"]
    replayed = summary["splits"]["eval"]["evaluation"]
    assert [r["player"] for r in replayed] == ["SFT", "SFT + GRPO"]
    for was, now in zip(recorded, replayed, strict=True):
        for key in ("win_rate", "finished", "tokens", "executed_calls"):
            assert now[key] == pytest.approx(was[key]), (was["player"], key)


def test_what_is_not_a_catch_run_is_refused(example, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        example.main(["--run", str(tmp_path)])
    assert "has no summary.json" in capsys.readouterr().err
    (tmp_path / "summary.json").write_text(json.dumps({"game": "wordle", "where": None}))
    with pytest.raises(SystemExit):
        example.main(["--run", str(tmp_path)])
    assert "not a kit.demo run of Catch on all its tasks" in capsys.readouterr().err
    (tmp_path / "summary.json").write_text(json.dumps({"game": "catch", "where": None}))
    with pytest.raises(SystemExit):
        example.main(["--run", str(tmp_path)])
    assert "sft-model is not a complete checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "by_column.json").exists()


def test_first_move_reads_the_first_call_whatever_the_model_wrote(example) -> None:
    from kit.trajectory import ToolCall, Trajectory

    def episode(*calls: ToolCall) -> Trajectory:
        return Trajectory([], [], [], [], task={"ball_col": 0}, tool_calls=list(calls))

    assert example.first_move(episode()) == "none"
    assert example.first_move(episode(ToolCall("stay", {}, "board", None))) == "stay"
    left = ToolCall("move", {"direction": "LEFT"}, "board", None)
    assert example.first_move(episode(left, ToolCall("stay", {}, "b", None))) == "LEFT"
    # a call whose arguments never parsed to a dict is named by its tool
    assert example.first_move(episode(ToolCall("move", '{"direction": ', None, "bad"))) == "move"
