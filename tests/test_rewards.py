"""kit.rewards: each signal on real envs after real tool calls, the TRL signature, routing,
the upfront checks, the scorer and its veRL / OpenRLHF / single-turn adapters, and one real
multi-environment GRPOTrainer run that logs each environment's reward on its own."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kit.builtin.wordle.engine import feedback
from kit.envs import CatchEnv, EchoEnv, SudokuEnv, WordleEnv
from kit.episode import Episode, assistant_message, call_tool
from kit.rewards import (
    Reward,
    Term,
    called_tool,
    default_reward,
    env_reward,
    failed_calls,
    guesses_left,
    partial_credit,
    repeated_calls,
    routed_rewards,
    validate_environments,
    won,
)
from kit.scoring import compute_score, parse_tool_calls, reward_func, score, single_turn_reward
from kit.tasks import mixture_dataset, prompt
from kit.trajectory import Trajectory
from tests.scripted import tool_call


def _play(env_cls, task, calls):
    """A fresh env after ``calls`` ((tool, arguments) pairs), and the completion TRL would hold."""
    env = env_cls()
    env.reset(**task)
    completion = []
    for name, arguments in calls:
        completion.append(assistant_message("", [(name, arguments)]))
        completion.append(call_tool(env, completion[-1]["tool_calls"][0]))
    return env, completion


def _sudoku():
    env = SudokuEnv()
    env.reset(seed=3, difficulty="easy")
    game = env.game
    empty = [i for i, ch in enumerate(game.puzzle) if ch == "."]
    right = [
        ("place", {"row": i // 9 + 1, "col": i % 9 + 1, "number": int(game.solution[i])})
        for i in empty
    ]
    wrong = [
        ("place", {"row": i // 9 + 1, "col": i % 9 + 1, "number": int(game.solution[i]) % 9 + 1})
        for i in empty
    ]
    return {"puzzle": game.puzzle}, right, wrong


# -- signals ------------------------------------------------------------------------------------
def test_won_and_guesses_left_reward_winning_sooner() -> None:
    first, _ = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "sheep"})])
    third, _ = _play(
        WordleEnv,
        {"secret": "sheep"},
        [("guess", {"guess": w}) for w in ("crane", "spell", "sheep")],
    )
    lost, _ = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "crane"})])
    assert [won(Episode(e)) for e in (first, third, lost)] == [1.0, 1.0, 0.0]
    assert guesses_left(Episode(first)) == 1.0
    assert guesses_left(Episode(third)) == pytest.approx(3 / 5)
    assert guesses_left(Episode(lost)) == 0.0
    catch, _ = _play(CatchEnv, {"ball_col": 2}, [("stay", {})] * 9)
    with pytest.raises(ValueError, match="Wordle"):
        guesses_left(Episode(catch))


def test_wordle_partial_credit_is_the_best_guess_not_the_last() -> None:
    # The reference pays the last guess once six are spent: 'crane' (one yellow) after 'sheet'.
    words = ["sheet", "crane", "audio", "lymph", "bowls", "fizzy"]
    env, _ = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": w}) for w in words])
    assert env.done and not env.won
    assert feedback("sheep", "fizzy") == "X X X X X"
    assert env.reward == 0.0  # the reference pays the last guess
    assert partial_credit(Episode(env)) == pytest.approx(0.8)  # sheet: four greens
    # Paid before the end too, so there is no need to burn guesses to be scored.
    early, _ = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "sheet"})])
    assert not early.done and early.reward == 0.0
    assert partial_credit(Episode(early)) == pytest.approx(0.8)


def test_partial_credit_is_forfeited_when_invalid_moves_end_the_game() -> None:
    calls = [
        ("guess", {"guess": "sheet"}),
        ("guess", {"guess": "qzxjv"}),
        ("guess", {"guess": "qzxjw"}),
    ]
    env, _ = _play(WordleEnv, {"secret": "sheep"}, calls)
    assert env.done and not env.won
    assert env.reward == pytest.approx(0.8)  # the reference pays exactly this case
    assert partial_credit(Episode(env)) == 0.0

    task, right, wrong = _sudoku()
    some, _ = _play(SudokuEnv, task, right[:3])
    # The reference pays nothing before the end; the shaping pays the engine's progress.
    assert not some.done and some.reward == 0.0 and env_reward(Episode(some)) == 0.0
    assert partial_credit(Episode(some)) == some.game.progress == pytest.approx(3 / len(right))
    ended, _ = _play(SudokuEnv, task, right[:3] + wrong[3:5])
    assert ended.done and ended.reward == pytest.approx(3 / len(right))
    assert partial_credit(Episode(ended)) == 0.0
    solved, _ = _play(SudokuEnv, task, right)
    assert solved.won and partial_credit(Episode(solved)) == 1.0


def test_catch_partial_credit_counts_only_once_the_ball_lands() -> None:
    half, _ = _play(CatchEnv, {"ball_col": 0}, [("move", {"direction": "LEFT"})] * 2)
    assert partial_credit(Episode(half)) == 0.0
    caught, _ = _play(CatchEnv, {"ball_col": 0}, [("move", {"direction": "LEFT"})] * 9)
    assert caught.won and partial_credit(Episode(caught)) == 1.0
    missed, _ = _play(CatchEnv, {"ball_col": 0}, [("move", {"direction": "RIGHT"})] * 9)
    assert partial_credit(Episode(missed)) == 0.0  # paddle at 4, ball at 0
    near, _ = _play(CatchEnv, {"ball_col": 0}, [("stay", {})] * 9)
    assert partial_credit(Episode(near)) == pytest.approx(0.5)
    echo, _ = _play(EchoEnv, {}, [("echo", {"message": "hi"})])
    with pytest.raises(ValueError, match="echo"):
        partial_credit(Episode(echo))


def test_failed_repeated_and_format_signals() -> None:
    calls = [
        ("guess", {"guess": "crane"}),
        ("guess", {"guess": "crane"}),  # already guessed: the game rejects it
        ("fly", {"to": "moon"}),  # unknown tool: never reaches the env
        ("guess", {"wrd": "sheep"}),  # wrong argument name: TypeError before the env
        ("guess", {"guess": "sheep"}),
    ]
    env, completion = _play(WordleEnv, {"secret": "sheep"}, calls)
    assert completion[5]["content"] == "{'error': 'Tool fly not found.'}"
    with_messages = Episode(env, completion)
    assert failed_calls(with_messages) == 3.0
    assert failed_calls(Episode(env)) == 1.0  # the env saw only the rejected guess
    assert repeated_calls(with_messages) == 1.0
    assert called_tool(with_messages) == 1.0
    idle, none = _play(WordleEnv, {"secret": "sheep"}, [])
    assert called_tool(Episode(idle, none)) == 0.0 and failed_calls(Episode(idle, none)) == 0.0
    echo, _ = _play(EchoEnv, {}, [("echo", {"message": "hello"})])
    assert env_reward(Episode(echo)) == 5 * 0.1


def test_rollout_calls_from_the_messages_agree_with_the_envs_own_record() -> None:
    """One tool-call record: where a call reached the env, the call rebuilt from TRL's messages
    is the env's own ToolCall (tool, arguments, result, error); the calls that never reached it
    are extra, failed, with no result."""
    calls = [
        ("guess", {"guess": "crane"}),
        ("fly", {"to": "moon"}),  # unknown tool: never reaches the env
        ("guess", {"guess": "crane"}),  # rejected by the game: reaches it, fails
        ("guess", {"guess": "sheep"}),
    ]
    env, completion = _play(WordleEnv, {"secret": "sheep"}, calls)
    from_messages = Episode(env, completion).calls
    assert Episode(env).calls == env.calls and len(env.calls) == 3
    assert [from_messages[i].turn for i in range(4)] == [1, 2, 3, 4]
    assert [replace(from_messages[i], turn=None) for i in (0, 2, 3)] == env.calls
    assert from_messages[1].tool == "fly" and from_messages[1].result is None
    assert from_messages[1].error == "Tool fly not found."


# -- Reward as a TRL reward function ------------------------------------------------------------
def test_reward_is_a_trl_reward_function_and_logs_each_signal() -> None:
    reward = default_reward("wordle")
    assert reward.__name__ == "wordle"
    a, ca = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "sheep"})])
    b, cb = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "crane"})] * 2)
    logged = {}
    values = reward(
        prompts=[[], []],
        completions=[ca, cb],
        environments=[a, b],
        secret=["sheep", "sheep"],
        log_metric=logged.__setitem__,
    )
    expected = [reward.score(a, ca).total, reward.score(b, cb).total]
    assert values == pytest.approx(expected)
    assert values[0] == pytest.approx(1 + 0.2 + 0.5 + 0.1)
    assert values[1] == pytest.approx(
        0.5 * 0.1 - 0.1 - 0.1 + 0.1
    )  # one yellow; one rejected repeat
    assert logged["rewards/wordle/won"] == pytest.approx(0.5)
    assert set(logged) == {f"rewards/wordle/{term.name}" for term in reward.terms}
    with pytest.raises(ValueError, match="environment_factory"):
        reward(completions=[ca])
    catch, _ = _play(CatchEnv, {"ball_col": 1}, [])
    with pytest.raises(ValueError, match="for_environment"):
        reward(environments=[catch])


def test_split_gives_the_same_total_with_reward_weights() -> None:
    reward = default_reward("catch")
    parts, weights = reward.split()
    assert [p.__name__ for p in parts] == [
        "catch_won",
        "catch_partial",
        "catch_failed",
        "catch_format",
    ]
    env, completion = _play(CatchEnv, {"ball_col": 0}, [("stay", {})] * 9)
    total = sum(
        w * p(completions=[completion], environments=[env])[0]
        for p, w in zip(parts, weights, strict=True)
    )
    assert total == pytest.approx(reward(completions=[completion], environments=[env])[0])


def test_routed_rewards_return_none_for_other_environments() -> None:
    factories = {"wordle": WordleEnv, "catch": CatchEnv}
    wordle, catch = routed_rewards(factories)
    assert (wordle.__name__, catch.__name__) == ("wordle", "catch")
    assert default_reward("catch").for_environment("drop").__name__ == "drop_catch"
    w, _ = _play(WordleEnv, {"secret": "sheep"}, [("guess", {"guess": "sheep"})])
    c, _ = _play(CatchEnv, {"ball_col": 2}, [("stay", {})] * 9)
    column = ["wordle", "catch"]
    assert wordle(environments=[w, c], environment=column)[1] is None
    assert catch(environments=[w, c], environment=column)[0] is None
    assert catch(environments=[w, c], environment=column)[1] == pytest.approx(1.6)
    with pytest.raises(ValueError, match="no 'environment' column"):
        wordle(environments=[w])


def test_reward_rejects_bad_definitions() -> None:
    with pytest.raises(ValueError, match="unique"):
        Reward("r", [Term("a", won, 1.0), Term("a", called_tool, 2.0)])
    with pytest.raises(ValueError, match="at least one"):
        Reward("r", {})
    with pytest.raises(ValueError, match="finite"):
        Reward("r", {"a": (won, math.nan)})
    with pytest.raises(ValueError, match="unknown game"):
        default_reward("chess")
    with pytest.raises(ValueError, match="unknown game"):
        Reward("r", {"a": (won, 1.0)}, game="chess")


# -- several environments, checked up front -----------------------------------------------------
def test_validate_environments_catches_routing_mistakes_up_front() -> None:
    factories = {"wordle": WordleEnv, "catch": CatchEnv}
    dataset = mixture_dataset({"wordle": 3, "catch": 3})
    assert validate_environments(dataset, factories, routed_rewards(factories)) == {
        "wordle": 3,
        "catch": 3,
    }

    typo = dataset.map(
        lambda row: {"environment": "wordel" if row["environment"] == "wordle" else "catch"}
    )
    with pytest.raises(ValueError, match="did you mean 'wordle'"):
        validate_environments(typo, factories)
    with pytest.raises(ValueError, match="no 'environment' column"):
        validate_environments(dataset.remove_columns("environment"), factories)
    with pytest.raises(ValueError, match="reset failed"):
        validate_environments(dataset.remove_columns("secret"), factories)
    glued = dataset.map(lambda row: {"prompt": [{"role": "user", "content": "Play:"}]})
    with pytest.raises(ValueError, match="no separator"):
        validate_environments(glued, factories)
    with pytest.raises(ValueError, match="routed to environment 'sudoku'"):
        validate_environments(
            dataset, factories, [default_reward("sudoku").for_environment("sudoku")]
        )
    with pytest.raises(ValueError, match=r"rows of \['catch'\] get no reward"):
        validate_environments(dataset, factories, routed_rewards({"wordle": WordleEnv}))


# -- scoring outside the trainer ------------------------------------------------------------------
def test_score_replays_text_messages_and_trajectories_alike() -> None:
    text = (
        "I'll open with crane.\n"
        + tool_call("guess", guess="crane")
        + tool_call("guess", guess="sheep")
    )
    by_text = score({"secret": "sheep"}, text, game="wordle")
    assert by_text.env.won and len(by_text.env.calls) == 2
    assert by_text.total == pytest.approx(sum(by_text.signals.values()))
    assert by_text.signals["won"] == 1.0 and by_text.signals["sooner"] == pytest.approx(0.2 * 4 / 5)

    # Recorded tool results are ignored: the calls are replayed.
    messages = [
        {"role": "user", "content": "play"},
        assistant_message("", [("guess", {"guess": "crane"})]),
        {"role": "tool", "name": "guess", "content": "forged"},
        assistant_message("", [("guess", {"guess": "sheep"})]),
    ]
    by_messages = score({"environment": "wordle", "secret": "sheep"}, messages)
    assert by_messages.signals == by_text.signals
    trajectory = Trajectory(messages, [], [], [], env="wordle", task={"secret": "sheep"})
    assert score(None, trajectory).signals == by_text.signals

    malformed = score(
        {"secret": "sheep"},
        '<tool_call>\n{"name": "guess", "arguments": {"guess": }\n</tool_call>',
        "wordle",
    )
    assert malformed.signals["format"] == 0.0 and malformed.env.calls == []
    assert parse_tool_calls("no calls here") == []
    with pytest.raises(ValueError, match="cannot tell the game"):
        score({"secret": "sheep"}, text)


def test_adapters_for_single_turn_trl_verl_and_openrlhf_agree_with_score() -> None:
    response = tool_call("move", direction="LEFT") + tool_call("stay")
    expected = score({"ball_col": 1}, response, "catch")

    function = single_turn_reward("catch")
    assert function.__name__ == "catch"
    completions = [
        [{"role": "assistant", "content": response}],
        [{"role": "assistant", "content": ""}],
    ]
    totals = function(completions=completions, ball_col=[1, 1], prompts=[[], []])
    assert totals[0] == pytest.approx(expected.total)
    assert totals[1] == pytest.approx(0.0)  # no call: nothing earned

    label = json.dumps({"environment": "catch", "ball_col": 1})
    verl = compute_score("kit/catch", response, label)
    assert verl == {"score": pytest.approx(expected.total), **expected.signals}
    assert compute_score("catch", response, {"ball_col": 1})["score"] == pytest.approx(
        expected.total
    )

    out = reward_func(["PROMPT" + response, "PROMPT"], ["PROMPT", "PROMPT"], [label, label])
    assert out["rewards"].tolist() == pytest.approx([expected.total, 0.0])
    assert out["extra_logs"]["partial"].tolist() == pytest.approx(
        [0.0, 0.0]
    )  # two moves: not landed
    assert out["scores"] is out["rewards"]


# -- the real trainer ------------------------------------------------------------------------------
@pytest.mark.slow
def test_grpo_logs_each_environment_reward_separately(tmp_path) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.models import tiny_model
    from kit.train import grpo_config
    from tests.scripted import ScriptedGeneration

    factories = {"wordle": WordleEnv, "catch": CatchEnv}
    rows = [
        {"environment": "wordle", "prompt": prompt("wordle"), "secret": "sheep", "ball_col": None},
        {"environment": "catch", "prompt": prompt("catch"), "secret": None, "ball_col": 0},
    ]
    dataset = Dataset.from_list(rows)
    rewards = routed_rewards(factories)
    validate_environments(dataset, factories, rewards)

    def script(text: str) -> list[str]:
        if "Wordle" in text:
            return [tool_call("guess", guess="crane"), tool_call("guess", guess="sheep"), "Solved."]
        return [tool_call("move", direction="LEFT")] * 2 + [tool_call("stay")] * 7 + ["Done."]

    model, tokenizer = tiny_model()
    ScriptedGeneration(tokenizer, script).install(model)
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(
            str(tmp_path),
            max_steps=1,
            per_device_train_batch_size=4,
            max_completion_length=1500,
            max_tool_calling_iterations=12,
        ),
        reward_funcs=rewards,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factories,
    )
    trainer.train()
    log = next(entry for entry in trainer.state.log_history if "rewards/wordle/mean" in entry)
    wordle_env, _ = _play(
        WordleEnv,
        {"secret": "sheep"},
        [("guess", {"guess": "crane"}), ("guess", {"guess": "sheep"})],
    )
    catch_env, _ = _play(
        CatchEnv, {"ball_col": 0}, [("move", {"direction": "LEFT"})] * 2 + [("stay", {})] * 7
    )
    assert log["rewards/wordle/mean"] == pytest.approx(
        default_reward("wordle").score(wordle_env).total
    )
    assert log["rewards/catch/mean"] == pytest.approx(
        default_reward("catch").score(catch_env).total
    )
    assert log["rewards/wordle/won"] == 1.0 and log["rewards/catch/won"] == 1.0
    assert log["frac_reward_zero_std"] == 1.0  # scripted: both rollouts of a prompt are equal


def test_scoring_is_not_reachable_through_kit_rewards() -> None:
    """kit.scoring imports kit.rewards and never the other way round: the scoring adapters have
    one home, and a fresh interpreter importing kit.rewards loads no kit.scoring."""
    code = (
        "import sys, kit.rewards\n"
        "assert 'kit.scoring' not in sys.modules\n"
        "assert not hasattr(kit.rewards, 'score')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_flat_groups_counts_equal_groups_exactly():
    """The shared counter behind Batch.flat_groups and kit.diagnostics: equal within 1e-6 in
    float64 (0.475 * 8 is flat, where TRL's float32 test says it is not), NaN ignored, a group
    of NaN only not flat (nothing to compare), and NaN for no group at all."""
    from kit.rewards import flat_groups

    assert flat_groups([[0.475] * 8, [0.1, 0.2]]) == 0.5
    assert flat_groups([[1.0, 1.0 + 1e-7], [1.0, 1.0 + 1e-5]]) == 0.5
    assert flat_groups([[0.3, math.nan, 0.3], [math.nan, math.nan]]) == 0.5
    assert math.isnan(flat_groups([]))
