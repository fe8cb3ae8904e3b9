"""kit.rollout plays the episodes ``GRPOTrainer`` plays, and its task sampling is seeded.

The identity test replays the scripted runs of ``tests/test_masks.py`` (one real trainer step per
env, captured) with ``rollout`` and the same scripted model: ids, masks, messages, tool calls,
env states and the truncation flag must all be the trainer's, including the episode whose
turns are not in the template's canonical form (``rollout`` never re-tokenises). The other tests
use the random tiny model unscripted, or small scripts.
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from kit.envs import ENVS, CatchEnv, EchoEnv  # noqa: E402
from kit.rollout import TaskSampler, rollout  # noqa: E402
from kit.trajectory import ToolCall  # noqa: E402
from tests.sampling import (  # noqa: E402
    EXPLICIT,
    grpo_generation_config,
    qwen_like_model,
    record_processors,
)
from tests.scripted import ScriptedGeneration  # noqa: E402
from tests.test_masks import (  # noqa: E402
    BUDGET,
    CAP,
    MASKED,
    call,
    case_of,
    case_trajectories,
    install_script,
    tiny,
    trainer_run,
    turn,
)


@pytest.mark.slow
@pytest.mark.parametrize("game", list(ENVS))
def test_rollout_matches_the_trainer(game):
    run = trainer_run(game)
    install_script(run.model, run.tokenizer, run.scripts)
    played = rollout(
        run.model,
        ENVS[game],
        run.tokenizer,
        run.rows,
        num_generations=2,
        max_completion_length=BUDGET,
        max_tool_calling_iterations=CAP,
        mask_truncated_completions=game in MASKED,
        batch_size=4,
        progress=False,
    )
    assert len(played) == 2 * len(run.rows)
    trained = case_trajectories(run)
    for episode in played:
        case = case_of(episode.messages[0]["content"])
        for reference in trained[case]:
            assert episode.prompt_ids == reference.prompt_ids, case
            assert episode.completion_ids == reference.completion_ids, case
            assert episode.tool_mask == reference.tool_mask, case
            assert episode.completion_mask == reference.completion_mask
            assert episode.messages == reference.messages
            assert episode.tool_calls == reference.tool_calls
            assert episode.states == reference.states
            assert (episode.truncated, episode.done, episode.won) == (
                reference.truncated,
                reference.done,
                reference.won,
            )
            assert episode.reward == pytest.approx(reference.rewards["env_reward"])
            assert episode.env == game and episode.task == reference.task


def _script(plays: dict[str, list[str]]):
    """The shared tiny model, scripted; a one-case script also plays rows with no case tag."""
    model, tokenizer = tiny()
    (only,) = plays.values() if len(plays) == 1 else (None,)
    ScriptedGeneration(tokenizer, lambda text: only or plays[case_of(text)]).install(model)
    return model, tokenizer


def _prompt(case: str) -> list[dict]:
    return [{"role": "user", "content": f"Play the game with the tools. Case {case}.\n\n"}]


def test_groups_share_their_task_and_each_episode_has_its_own_env():
    model, tokenizer = _script({"a": [turn(call("stay")), turn(text="Done.")]})
    rows = [{"prompt": _prompt("a"), "ball_col": 0}, 3]  # an int task is a seed
    played = rollout(
        model, "catch", tokenizer, rows, num_generations=3, progress=False, batch_size=2
    )
    assert [e.task for e in played] == [{"ball_col": 0}] * 3 + [{"seed": 3}] * 3
    for episode in played[:3]:
        assert [m["role"] for m in episode.messages] == ["user", "assistant", "tool", "assistant"]
        assert len(episode.states) == 2 and episode.states[0] == episode.states[1]
        assert episode.states[0] != CatchEnv().reset(ball_col=0)  # the paddle stayed, the ball fell
        assert episode.env == "catch" and not episode.done and episode.reward == 0.0
    # the seeded rows show the model TRL's empty user message plus the board
    assert played[3].messages[0]["content"] == CatchEnv().reset(seed=3)
    assert rows[0]["prompt"] == _prompt("a")  # the caller's rows are left alone


def test_sampled_play_is_seeded_and_greedy_play_is_deterministic():
    model, tokenizer = tiny_model_unscripted()
    settings = dict(num_generations=2, max_completion_length=12, progress=False)
    before = torch.random.get_rng_state()
    first = rollout(model, EchoEnv, tokenizer, [{}], seed=1, **settings)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is untouched
    again = rollout(model, EchoEnv, tokenizer, [{}], seed=1, **settings)
    other = rollout(model, EchoEnv, tokenizer, [{}], seed=2, **settings)
    ids = [e.completion_ids for e in first]
    assert ids == [e.completion_ids for e in again]
    assert ids != [e.completion_ids for e in other]
    assert ids[0] != ids[1]  # sampled: the two generations of a group differ
    greedy = rollout(model, EchoEnv, tokenizer, [{}], greedy=True, seed=5, **settings)
    assert greedy[0].completion_ids == greedy[1].completion_ids
    for episode in first + greedy:
        assert 1 <= len(episode.completion_ids) <= 12
        assert episode.truncated == (episode.completion_ids[-1] != tokenizer.eos_token_id)


def tiny_model_unscripted():
    """The shared tiny model with its real ``generate`` back (the identity tests script it)."""
    model, tokenizer = tiny()
    model.__dict__.pop("generate", None)
    return model, tokenizer


def test_without_a_cap_the_budget_ends_the_episode():
    model, tokenizer = _script({"loop": [turn(call("echo", message="again"))] * 50})
    (episode,) = rollout(
        model,
        EchoEnv,
        tokenizer,
        [{"prompt": _prompt("loop")}],
        max_completion_length=200,
        max_tool_calling_iterations=None,
        progress=False,
    )
    turns = sum(m["role"] == "assistant" for m in episode.messages)
    assert turns > CAP + 1 and episode.truncated and len(episode.completion_ids) <= 200
    assert len(episode.states) == turns


def test_progress_bar_on_request(capsys):
    model, tokenizer = _script({"a": [turn(text="Done.")]})
    rows = [{"prompt": _prompt("a")}]
    rollout(model, EchoEnv, tokenizer, rows, progress=False)
    assert "rollout echo" not in capsys.readouterr().err
    rollout(model, EchoEnv, tokenizer, rows, num_generations=3, progress=True)
    err = capsys.readouterr().err
    assert "rollout echo: 100%" in err and "3/3" in err


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(env_cls="chess"), "unknown env 'chess'"),
        (dict(env_cls=object), "env class"),
        (dict(tasks=[]), "tasks is empty"),
        (dict(tasks=["seed 1"]), "a task is a dataset row"),
        (dict(num_generations=0), "num_generations"),
        (dict(max_completion_length=0), "max_completion_length"),
        (dict(max_tool_calling_iterations=-1), "max_tool_calling_iterations"),
        (dict(temperature=0.0), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_k=-1), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(min_p=1.5), "min_p"),
        (dict(repetition_penalty=0.0), "repetition_penalty"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_rollout_rejects_bad_settings(kwargs, error):
    model, tokenizer = tiny()
    arguments = dict(env_cls=EchoEnv, tasks=[{}], progress=False) | kwargs
    with pytest.raises(ValueError, match=error):
        rollout(model, tokenizer=tokenizer, **arguments)


def test_rollout_takes_its_arguments_in_evaluates_order():
    """``rollout(model, env, tokenizer, tasks)`` as ``evaluate(player, game, tokenizer)``; the
    tokenizer where the env goes (the order before) is refused, not played."""
    model, tokenizer = tiny()
    with pytest.raises(ValueError, match="env_cls must be an env class"):
        rollout(model, tokenizer, EchoEnv, [{}], progress=False)


# -- TaskSampler ---------------------------------------------------------------------------------


def test_task_sampler_orders_are_seeded_per_epoch_permutations():
    rows = [{"seed": k} for k in range(10)]
    sampler = TaskSampler(rows, seed=0)
    orders = [sampler.order(epoch) for epoch in range(3)]
    assert all(sorted(order) == list(range(10)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3  # reshuffled every epoch
    assert orders == [TaskSampler(rows, seed=0).order(epoch) for epoch in range(3)]
    assert orders[0] != TaskSampler(rows, seed=1).order(0)
    assert TaskSampler(rows, shuffle=False).order(4) == list(range(10))


def test_task_sampler_take_crosses_epochs_and_replays():
    rows = [{"secret": w} for w in ("sheep", "apple", "crane", "pious")]
    sampler = TaskSampler(rows, seed=7)
    drawn = sampler.take(3) + sampler.take(3) + sampler.take(2)
    assert (sampler.epoch, sampler.position) == (2, 0)
    expected = [rows[i] for i in sampler.order(0) + sampler.order(1)]
    assert drawn == expected
    replay = TaskSampler(rows, seed=7)
    assert [next(iter(replay)) for _ in range(8)] == drawn
    drawn[0]["secret"] = "zzzzz"  # rows handed out are copies
    assert TaskSampler(rows, seed=7).take(1)[0]["secret"] != "zzzzz"
    assert TaskSampler([1, 2]).rows == [{"seed": 1}, {"seed": 2}]


@pytest.mark.parametrize(
    "args, error",
    [
        (([],), "at least one row"),
        ((["a"],), "a task is a dataset row"),
        (([{}], "0"), "seed must be an int"),
        (([{}], False), "seed must be an int"),
    ],
)
def test_task_sampler_rejects_bad_input(args, error):
    with pytest.raises(ValueError, match=error):
        TaskSampler(*args)
    with pytest.raises(ValueError, match="n must be"):
        TaskSampler([{}]).take(-1)


def test_rollout_plays_sampled_tasks():
    model, tokenizer = _script({"a": [turn(call("echo", message="hi")), turn(text="ok")]})
    sampler = TaskSampler([{"prompt": _prompt("a"), "tag": k} for k in range(3)], seed=0)
    played = rollout(model, EchoEnv, tokenizer, sampler.take(2), num_generations=2, progress=False)
    tags = [e.task["tag"] for e in played]
    assert tags[0] == tags[1] and tags[2] == tags[3] and tags[0] != tags[2]
    assert played[0].tool_calls == [ToolCall("echo", {"message": "hi"}, "hi", None, turn=1)]


# -- model_policy: a model turn by turn, for the message-level loop -----------------------------


def test_model_policy_turns_are_seeded_and_leave_the_callers_rng_alone():
    from kit.episode import run_episode
    from kit.rollout import model_policy

    model, tokenizer = tiny_model_unscripted()  # real sampling from random weights
    factory = model_policy(model, tokenizer, max_new_tokens=12)
    row = {"prompt": [{"role": "user", "content": "Say something.\n\n"}]}
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = run_episode(EchoEnv(), row, factory(EchoEnv, 5), max_tool_calling_iterations=2)
    assert torch.equal(torch.rand(3), expected)  # the caller's stream went on untouched
    again = run_episode(EchoEnv(), row, factory(EchoEnv, 5), max_tool_calling_iterations=2)
    assert first.completion == again.completion and first.completion[0]["role"] == "assistant"


# -- sampling: as GRPOTrainer samples, whatever the model's own generation config says ---------


@pytest.mark.parametrize("settings", [{}, EXPLICIT], ids=["grpo-defaults", "explicit"])
def test_rollout_samples_as_grpo_does_not_as_the_models_generation_config(settings):
    """Every turn is sampled with the processors GRPOTrainer's GenerationConfig gives the same
    model: ``top_k=0`` is no top-k and ``repetition_penalty=1.0`` none, never the model's 20 and
    1.3 (the model's own config, the sanity check, does apply them)."""
    model, tokenizer = qwen_like_model()
    seen = record_processors(model)
    (episode,) = rollout(
        model, EchoEnv, tokenizer, [{}], max_completion_length=4, progress=False, **settings
    )
    played = list(seen)
    prompt = torch.tensor([episode.prompt_ids])
    mask = torch.ones_like(prompt)
    reference = grpo_generation_config(tokenizer, 4, **settings)
    model.generate(input_ids=prompt, attention_mask=mask, generation_config=reference)
    grpo = seen[-1]
    model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=4)
    own = seen[-1]
    assert ("TopKLogitsWarper", ("top_k", 20)) in [(n, kv) for n, attrs in own for kv in attrs]
    assert own != grpo
    assert played and all(turn == grpo for turn in played), (played, grpo)


def test_vllm_sampling_params_are_trls():
    """The ``vllm.SamplingParams`` fields mirror TRL's colocated vLLM generation (``min_p`` None
    is 0.0, ``top_k`` 0 stays 0: vLLM's "no top-k"), greedy is temperature 0, and each prompt of
    each call gets a seed of its own (one per-request seed for the whole batch would make the
    ``num_generations`` samples of a task identical), the same on every replay."""
    from kit.rollout import _vllm_sampling, _VLLMSeeds

    fields = _vllm_sampling(
        max_new_tokens=16, eos=[2], greedy=False, generation_kwargs=None, **EXPLICIT
    )
    assert fields == {
        "n": 1,
        "repetition_penalty": 1.1,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 5,
        "min_p": 0.05,
        "max_tokens": 16,
        "stop_token_ids": [2],
    }
    defaults = dict(temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0)
    plain = _vllm_sampling(
        max_new_tokens=8, eos=[2], greedy=False, generation_kwargs=None, **defaults
    )
    assert (plain["top_k"], plain["min_p"], plain["temperature"]) == (0, 0.0, 1.0)
    greedy = _vllm_sampling(
        max_new_tokens=8, eos=[2], greedy=True, generation_kwargs={"top_p": 0.5}, **defaults
    )
    assert greedy["temperature"] == 0.0 and greedy["top_p"] == 0.5  # generation_kwargs on top
    seeds = _VLLMSeeds(3)
    first, second = seeds.take(4), seeds.take(4)
    assert len(set(first + second)) == 8
    again = _VLLMSeeds(3)
    assert [again.take(4), again.take(4)] == [first, second]
    assert _VLLMSeeds(4).take(4) != first
