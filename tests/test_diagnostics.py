"""kit.diagnostics and the policies under it: the default rewards rank the players, the report
catches a reward that does not, the episodes are TRL's, and a model can be a player."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from kit.builtin.catch.solver import CatchSolver
from kit.diagnostics import TOTAL, diagnose
from kit.envs import ENVS, CatchEnv, WordleEnv
from kit.episode import assistant_message, replay, run_episode
from kit.rewards import Reward, called_tool, default_reward, won
from kit.rollout import model_policy
from kit.solvers.policies import noisy_policy, random_policy, to_tool_call

ROW = {"prompt": [{"role": "user", "content": "Play.\n\n"}]}


@pytest.mark.parametrize("game", sorted(ENVS))
def test_default_reward_ranks_solver_over_noisy_over_random(game: str) -> None:
    report = diagnose(game)
    assert report.ordered == {game: True}
    assert report.policies == ["solver", "noisy", "random"]
    means = [report.row(game, policy)["mean"] for policy in report.policies]
    assert means == sorted(means, reverse=True)
    for row in report.rows:
        assert 0.0 <= row["flat_groups"] <= 1.0
        assert row["episodes"] == 8 * 4
    if game != "echo":  # the solvers are deterministic: every group's rewards are equal
        assert report.row(game, "solver")["flat_groups"] == 1.0
        assert report.players["solver"]["win_rate"] == 1.0
    assert report.row(game, "random")["flat_groups"] < 1.0
    assert "flat_groups" in report.table()


def test_a_reward_that_cannot_tell_players_apart_is_reported() -> None:
    format_only = Reward("format_only", {"format": (called_tool, 1.0)})
    report = diagnose(
        "catch", rewards=[format_only, default_reward("catch")], reward_weights=[1.0, 2.0]
    )
    assert report.rewards == ["format_only", "catch", TOTAL]
    assert report.ordered == {"format_only": False, "catch": True, TOTAL: True}
    assert all(report.row("format_only", p)["flat_groups"] == 1.0 for p in report.policies)
    assert all(report.row("format_only", p)["std"] == 0.0 for p in report.policies)
    for policy in report.policies:  # the total is TRL's weighted sum
        parts = report.row("format_only", policy)["mean"] + 2 * report.row("catch", policy)["mean"]
        assert report.row(TOTAL, policy)["mean"] == pytest.approx(parts)
    assert "format_only NO" in report.table()


def test_same_seed_same_report_and_plot() -> None:
    first = diagnose("wordle", groups=3, num_generations=2, seed=5)
    assert first.rows == diagnose("wordle", groups=3, num_generations=2, seed=5).rows
    assert first.rows != diagnose("wordle", groups=3, num_generations=2, seed=6).rows
    figure = first.plot()
    assert len(figure.axes) == 1 and figure.axes[0].get_title() == "wordle (ordered)"
    assert "| wordle | solver |" in first._repr_markdown_()


def test_diagnose_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="env must be"):
        diagnose("chess")
    with pytest.raises(ValueError, match="groups"):
        diagnose("catch", groups=0)
    with pytest.raises(ValueError, match="reward_weights"):
        diagnose("catch", reward_weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="returned 1 rewards"):
        diagnose("catch", rewards=lambda environments, **_: [0.0])
    with pytest.raises(ValueError, match="noise"):
        noisy_policy(1.5)


def test_run_episode_builds_trl_messages_and_errors() -> None:
    calls = iter(
        [
            assistant_message("hi", [("guess", {"guess": "crane"}), ("fly", {"to": "moon"})]),
            assistant_message("", [("guess", {"wrd": "sheep"})]),
            assistant_message("done"),
        ]
    )
    env = WordleEnv()
    episode = run_episode(
        env, {**ROW, "secret": "sheep", "environment": "wordle"}, lambda messages: next(calls)
    )
    assert episode.prompt[-1]["content"] == "Play.\n\n" + WordleEnv().reset(secret="sheep")
    roles = [m["role"] for m in episode.completion]
    assert roles == ["assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert episode.completion[2] == {
        "role": "tool",
        "name": "fly",
        "content": "{'error': 'Tool fly not found.'}",
    }
    assert episode.completion[4]["content"].startswith(
        "{'error': "
    )  # TypeError, caught as TRL does
    assert "wrd" in episode.completion[4]["content"]
    assert len(env.calls) == 1 and not episode.truncated

    # TRL's max_tool_calling_iterations: the call asked for after the last round is not run.
    looping = run_episode(
        CatchEnv(), {**ROW, "ball_col": 0}, lambda m: assistant_message("", [("stay", {})]), 3
    )
    assert looping.truncated and len(looping.env.calls) == 3
    with pytest.raises(ValueError, match="max_tool_calling_iterations"):
        run_episode(CatchEnv(), {**ROW, "ball_col": 0}, lambda m: assistant_message(), 0)


def test_replay_runs_an_episodes_calls_again_up_to_the_cap() -> None:
    """One replay serves scoring, evaluation and SFT checks: it rebuilds what TRL's loop did."""
    episode = run_episode(CatchEnv(), {**ROW, "ball_col": 1}, noisy_policy(0.5)(CatchEnv, 3))
    turns = [m for m in episode.completion if m["role"] == "assistant"]
    fresh = CatchEnv()
    fresh.reset(ball_col=1)
    assert replay(fresh, turns) == episode.completion
    assert (fresh.transcript, fresh.calls) == (episode.env.transcript, episode.env.calls)

    turns = [
        assistant_message("", [("move", {"direction": "LEFT"})]),
        assistant_message("", [("stay", {}), ("move", {"direction": "UP"})]),
        assistant_message("Done."),
    ]
    env = CatchEnv()
    env.reset(ball_col=0)
    roles = [m["role"] for m in replay(env, turns)]
    assert roles == ["assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert (len(env.calls), env.invalid_calls) == (3, 1)
    capped = CatchEnv()
    capped.reset(ball_col=0)
    completion = replay(capped, turns, max_tool_calling_iterations=1)
    assert [m["role"] for m in completion] == ["assistant", "tool", "assistant", "assistant"]
    assert completion[2] is turns[1] and len(capped.calls) == 1  # kept, its calls unrun


def test_noisy_solver_plays_on_from_the_board_it_is_shown() -> None:
    blunders = 0
    for seed in range(20):
        env = CatchEnv()
        episode = run_episode(
            env, {**ROW, "ball_col": seed % 5}, noisy_policy(0.5, reasoning=True)(CatchEnv, seed)
        )
        replay = CatchEnv()
        observation = replay.reset(ball_col=seed % 5)
        for message in episode.completion:
            if message["role"] == "tool":
                observation = message["content"]
                continue
            call = message["tool_calls"][0]["function"]
            if message["content"].startswith("Let me try"):
                blunders += 1
            else:  # not a blunder: the solver's move for the real board, blunders included
                best = to_tool_call("catch", CatchSolver().act(observation))
                assert (call["name"], call["arguments"]) == best
            getattr(replay, call["name"])(**call["arguments"])
    assert blunders > 10


def _against_the_solver(**options: Any) -> Iterator[tuple[dict, Any, Any]]:
    """Each move of ``noisy_policy(**options)`` in 20 Catch games (every column four times):
    the assistant message, its call, and the solver's move for the board it saw."""
    for seed in range(20):
        player = noisy_policy(**options)(CatchEnv, seed)
        episode = run_episode(CatchEnv(), {**ROW, "ball_col": seed % 5}, player)
        observation = CatchEnv().reset(ball_col=seed % 5)
        for message in episode.completion:
            if message["role"] == "tool":
                observation = message["content"]
                continue
            call = message["tool_calls"][0]["function"]
            best = to_tool_call("catch", CatchSolver().act(observation))
            yield message, (call["name"], call["arguments"]), best


def test_a_habit_plays_the_other_direction_and_states_the_solvers_reason() -> None:
    """noisy_policy(habit=True): where it errs, Catch's demonstrator reads the board right (its
    stated reason is the solver's) and moves the other way; it stays where the solver stays."""
    habits = solver_moves = 0
    for message, call, best in _against_the_solver(noise=0.5, reasoning=True, habit=True):
        said = "stay" if best[0] == "stay" else f"must go {best[1]['direction'].lower()}"
        assert message["content"].startswith("The ball is in column")
        assert said in message["content"]
        if call == best:
            solver_moves += 1
        else:
            assert best[0] == "move" and call[0] == "move"
            assert {best[1]["direction"], call[1]["direction"]} == {"LEFT", "RIGHT"}
            habits += 1
    assert habits > 5 and solver_moves > 5
    always = noisy_policy(1.0, habit=True)(CatchEnv, 0)
    lost = run_episode(CatchEnv(), {**ROW, "ball_col": 0}, always)
    assert not lost.env.won  # always the other way: never under a ball off the centre
    with pytest.raises(ValueError, match="wordle has no habit move"):
        noisy_policy(0.5, habit=True)(WordleEnv, 0)
    with pytest.raises(ValueError, match="catch has no habit 'yes': its habits are both, left"):
        noisy_policy(0.5, habit="yes")(CatchEnv, 0)
    with pytest.raises(ValueError, match="habit must be True, False or a habit's name"):
        noisy_policy(0.5, habit=1)


def test_a_habit_on_the_left_turns_right_there_and_plays_the_solver_elsewhere() -> None:
    """noisy_policy(habit="left"): where the solver moves LEFT it errs to RIGHT; its RIGHT and
    its stays are the solver's. So it loses a ball on the left and catches one on the right."""
    turned = 0
    for _, call, best in _against_the_solver(noise=0.5, habit="left"):
        if call != best:
            assert best == ("move", {"direction": "LEFT"})
            assert call == ("move", {"direction": "RIGHT"})
            turned += 1
    assert turned > 5
    always = noisy_policy(1.0, habit="left")(CatchEnv, 0)
    assert not run_episode(CatchEnv(), {**ROW, "ball_col": 0}, always).env.won
    assert run_episode(CatchEnv(), {**ROW, "ball_col": 4}, always).env.won


def test_random_policy_makes_only_well_formed_calls() -> None:
    for game, task in [("wordle", {"secret": "sheep"}), ("catch", {"ball_col": 1}), ("echo", {})]:
        env = ENVS[game]()
        run_episode(env, {**ROW, **task}, random_policy()(ENVS[game], 3), 6)
        assert env.calls and env.invalid_calls == 0
    report = diagnose("sudoku", policies={"random": random_policy()}, groups=2, num_generations=2)
    assert report.players["random"]["win_rate"] == 0.0


@pytest.mark.slow
def test_a_model_is_a_player() -> None:
    from kit.models import tiny_model
    from tests.scripted import ScriptedGeneration, tool_call

    model, tokenizer = tiny_model()
    # A random tiny model never calls a tool: every reward in every group is the same.
    report = diagnose(
        "wordle",
        policies={"model": model_policy(model, tokenizer, max_new_tokens=8)},
        groups=2,
        num_generations=2,
    )
    assert report.row("wordle", "model")["flat_groups"] == 1.0
    assert report.players["model"]["calls"] == 0.0

    ScriptedGeneration(
        tokenizer,
        lambda text: [
            tool_call("guess", guess="crane"),
            tool_call("guess", guess="sheep"),
            "Done.",
        ],
    ).install(model)
    wins = Reward("won", {"won": (won, 1.0)})
    tasks = [{**ROW, "secret": "sheep"}]
    scripted = diagnose(
        "wordle",
        rewards=wins,
        policies={"model": model_policy(model, tokenizer)},
        groups=1,
        num_generations=2,
        tasks=tasks,
    )
    assert scripted.row("won", "model")["mean"] == 1.0
    assert scripted.players["model"]["calls"] == 2.0
    assert not math.isnan(scripted.row("won", "model")["std"])
