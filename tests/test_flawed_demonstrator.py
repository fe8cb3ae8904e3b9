"""SFT data from a demonstrator of your own: ``kit.sft``'s ``policy=``, ``kit.train``'s SFT on a
dataset, and the flawed Catch demonstrator of ``examples/flawed_demonstrator.py``."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest

from kit.builtin.wordle import wordle_secrets
from kit.episode import assistant_message
from kit.evaluate import evaluate
from kit.sft import sft_examples
from kit.solvers.policies import noisy_policy, random_policy, solver_policy


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return importlib.import_module("examples.flawed_demonstrator")


def _moves(row: dict) -> list[str]:
    return [
        call["function"]["arguments"].get("direction", "STAY")
        for message in row["messages"]
        for call in message.get("tool_calls", ())
    ]


def test_the_policy_plays_the_games_and_the_default_is_the_solver() -> None:
    solver = sft_examples("catch", num_games=6, seed=3, reasoning=False)
    assert sft_examples("catch", num_games=6, seed=3, policy=solver_policy()) == solver
    played = sft_examples("catch", num_games=6, seed=3, policy=random_policy())
    assert [row["task"] for row in played] == [row["task"] for row in solver]  # same tasks
    assert [_moves(row) for row in played] != [_moves(row) for row in solver]  # another player
    assert any(row["messages"][-1]["content"] == "Missed the ball." for row in played)


def test_a_policy_is_not_configured_twice() -> None:
    for options in ({"noise": 0.3}, {"reasoning": False}, {"reasoning": True}, {"habit": True}):
        with pytest.raises(ValueError, match="configure the solver; a policy= plays as it is"):
            sft_examples("catch", num_games=1, policy=noisy_policy(0.3), **options)


def test_a_policy_that_shows_an_eval_task_is_refused() -> None:
    secret = wordle_secrets("eval")[0]

    def peeker(env_cls: type, seed: int):
        solver = solver_policy(words=wordle_secrets("train"))(env_cls, seed)

        def policy(messages: list) -> dict:
            if any(message["role"] == "assistant" for message in messages):
                return solver(messages)
            return assistant_message("", [("guess", {"guess": f"[{secret}]"})])  # a peek

        return policy

    with pytest.raises(ValueError, match=f"show eval tasks: .*{secret}"):
        sft_examples("wordle", num_games=1, policy=peeker)
    # the same player on the eval split shows eval words by design
    assert sft_examples("wordle", num_games=1, split="eval", policy=peeker)


def test_the_edge_shy_demonstrator_misses_exactly_the_edge_columns(example) -> None:
    played = evaluate(example.edge_shy_policy(), "catch", num_generations=1)
    # OpenSpiel's paddle starts in the middle column; two held-out heights per column
    assert example.catches_by_column(played) == ["0/2", "2/2", "2/2", "2/2", "0/2"]
    rows = sft_examples("catch", num_games=30, policy=example.edge_shy_policy())
    missed = [row for row in rows if row["messages"][-1]["content"] == "Missed the ball."]
    assert missed and all(row["task"]["ball_col"] in (0, 4) for row in missed)
    assert all(row["task"]["ball_col"] not in (0, 4) for row in rows if row not in missed)


def test_sft_trains_on_a_dataset_of_your_own(tmp_path, example) -> None:
    pytest.importorskip("trl")
    from kit.models import tiny_model
    from kit.sft import sft_dataset
    from kit.train import sft_trainer

    data = sft_dataset("catch", 3, policy=example.edge_shy_policy())
    model, tokenizer = tiny_model()
    trainer = sft_trainer(model, tokenizer, data, 1, 0, tmp_path)
    assert trainer.train_dataset.num_rows == 3  # these rows, not the shipped 200
    assert trainer.train_dataset[0]["messages"] == data[0]["messages"]


def test_the_script_refuses_bad_arguments_before_training(tmp_path, example, capsys) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "summary.json").write_text("{}")  # another run's output: never written over
    for argv, error in (
        (["--out", str(taken)], "is not empty"),
        (["--out", str(taken / "summary.json")], "is a file"),
        (["--grpo_steps", "0"], "--grpo_steps must be at least 1"),
    ):
        with pytest.raises(SystemExit) as exit_:
            example.main(argv)
        assert exit_.value.code == 2 and error in capsys.readouterr().err
    assert (taken / "summary.json").read_text() == "{}"


@pytest.mark.slow
def test_the_script_runs_end_to_end_and_writes_every_figure(tmp_path, example) -> None:
    pytest.importorskip("trl")
    out = tmp_path / "run"
    argv = ["--sft_steps", "2", "--grpo_steps", "1", "--eval_generations", "1", "--num_games", "4"]
    summary = example.main([*argv, "--out", str(out)])
    written = json.loads((out / "summary.json").read_text())
    assert written["catches_by_column"] == summary["catches_by_column"]
    players = ["edge-shy demonstrator", "SFT on its games", "SFT + GRPO"]
    assert list(written["catches_by_column"]) == players
    assert written["catches_by_column"]["edge-shy demonstrator"] == [
        "0/2",
        "2/2",
        "2/2",
        "2/2",
        "0/2",
    ]
    assert [r["player"] for r in written["evaluation"]] == players
    assert written["args"]["grpo_steps"] == 1 and (out / "grpo").is_dir()
    comparison = written["grpo_vs_sft"]
    assert comparison["metric"] == "win_rate" and comparison["before"] == pytest.approx(
        written["evaluation"][1]["win_rate"]
    )
    assert comparison["difference_low"] <= comparison["difference"] <= comparison["difference_high"]
