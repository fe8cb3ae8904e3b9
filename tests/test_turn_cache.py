"""A rollout's KV cache kept from one turn to the next writes what a fresh read writes, and reads
less: ``kit.rollout._TransformersGenerate`` (the kit's evaluations and rollouts) and
``kit.rollout.reuse_turn_caches`` (``kit.train.grpo``'s trainer).

Both compare against the path without the cache on the tiny model in fp32, where a reused row
sees the very tokens and positions a fresh read does, so the sampled tokens must be equal.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

import kit.rollout  # noqa: E402
from kit.models import tiny_model  # noqa: E402
from kit.rollout import _TransformersGenerate  # noqa: E402
from tests.sampling import grpo_generation_config  # noqa: E402


def count_read(model: Any) -> list[int]:
    """A one-element list that counts the token positions every forward pass of ``model`` reads."""
    read = [0]

    def hook(_module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        read[0] += ids.numel()

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return read


def play_turns(generate: _TransformersGenerate, prompts: list[list[int]], fresh: bool):
    """Three turns: each prompt grows by its completion and a few 'tool' tokens of its own."""
    turns = []
    for turn in range(3):
        if fresh:
            generate.forget()
        with generate.seeded():
            completions = generate(prompts)
        turns.append(completions)
        prompts = [
            p + c + [40 + turn] * (1 + i)
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
    return turns


def test_a_kept_cache_writes_what_a_fresh_read_writes_and_reads_only_the_new_tokens():
    model, tokenizer = tiny_model()
    config = grpo_generation_config(tokenizer, max_new_tokens=12, temperature=1.0)
    # Prompts of different lengths (left padding), and a second stop id the random model writes
    # often, so that some completions stop early and leave masked positions in the kept rows.
    prompts = [tokenizer("catch the ball " * n)["input_ids"] for n in (1, 3, 2, 3)]
    first = _TransformersGenerate(model, config, [tokenizer.eos_token_id], 0, seed=0)
    with first.seeded():
        written = [t for c in first(prompts) for t in c]
    stop = [tokenizer.eos_token_id, max(set(written), key=written.count)]
    config.eos_token_id = stop
    read = count_read(model)
    fresh = play_turns(_TransformersGenerate(model, config, stop, 0, seed=0), prompts, fresh=True)
    fresh_read, read[0] = read[0], 0
    kept = play_turns(_TransformersGenerate(model, config, stop, 0, seed=0), prompts, fresh=False)
    assert kept == fresh
    assert any(len(c) < 12 for turn in kept for c in turn)  # early stops were in play
    assert read[0] < 0.6 * fresh_read, (read[0], fresh_read)


def test_a_prompt_that_extends_no_kept_row_is_read_afresh():
    model, tokenizer = tiny_model()
    config = grpo_generation_config(tokenizer, max_new_tokens=6, temperature=1.0)
    generate = _TransformersGenerate(model, config, [tokenizer.eos_token_id], 0, seed=0)
    a, b = tokenizer("move left")["input_ids"], tokenizer("stay put now")["input_ids"]
    with generate.seeded():
        generate([a, b])
    with generate.seeded():
        mixed = generate([b + [5], a + [7, 8]])  # reordered: still each extends a kept row
    with generate.seeded():
        unrelated = generate([[9, 10, 11]])  # extends nothing: a fresh read
    fresh = _TransformersGenerate(model, config, [tokenizer.eos_token_id], 0, seed=0)
    with fresh.seeded():
        assert fresh([b + [5], a + [7, 8]]) == mixed
    fresh.forget()
    with fresh.seeded():
        assert fresh([[9, 10, 11]]) == unrelated


@pytest.mark.slow
def test_grpo_with_kept_caches_and_tool_suffixes_trains_on_trls_episodes(tmp_path, monkeypatch):
    """``kit.train.grpo`` with ``reuse_turn_caches`` and ``render_tools_once`` plays and trains
    on the very episodes TRL's own turn and tool-suffix code gives, reading fewer positions and
    rendering the chat template fewer times."""
    from kit.runs import pin_threads
    from kit.train import grpo, warm_up

    model, tokenizer = tiny_model()
    renders = [0]
    template = tokenizer.apply_chat_template

    def counted(*args: Any, **kwargs: Any) -> Any:
        renders[0] += 1
        return template(*args, **kwargs)

    threads = torch.get_num_threads()
    pin_threads(2)
    try:
        # enough SFT for calls: episodes of several turns, which is where a cache is reused
        warm_up(model, tokenizer, "catch", 200, 0, tmp_path / "sft")
        monkeypatch.setattr(tokenizer, "apply_chat_template", counted)
        runs = {}
        for reuse in (True, False):
            if not reuse:
                monkeypatch.setattr(kit.rollout, "reuse_turn_caches", lambda trainer: None)
                monkeypatch.setattr(kit.rollout, "render_tools_once", lambda trainer: None)
            student = copy.deepcopy(model)
            read = count_read(student)
            renders[0] = 0
            trainer, capture = grpo(
                student,
                tokenizer,
                "catch",
                2,
                0,
                tmp_path / f"grpo-{reuse}",
                per_device_train_batch_size=8,
                num_generations=4,
            )
            episodes = [
                (t.prompt_ids, t.completion_ids, t.tool_mask)
                for b in capture.batches
                for t in b.trajectories
            ]
            losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
            turns = max(
                sum(m["role"] == "assistant" for m in t.messages)
                for b in capture.batches
                for t in b.trajectories
            )
            runs[reuse] = episodes, losses, read[0], renders[0], turns
            if reuse:  # the prompts were rendered and the turns parsed with the tools' schemas
                from transformers.utils import get_json_schema

                from kit.envs import CatchEnv, env_tools

                schemas = [get_json_schema(tool) for tool in env_tools(CatchEnv())]
                assert list(trainer._env_tools.values()) == [schemas]
    finally:
        torch.set_num_threads(threads)
    kept, kept_losses, kept_read, kept_renders, turns = runs[True]
    trl, trl_losses, trl_read, trl_renders, _ = runs[False]
    assert turns > 2
    assert kept == trl and kept_losses == trl_losses
    assert kept_read < trl_read
    assert kept_renders < trl_renders


def test_a_first_turn_reads_each_distinct_prompt_once_and_writes_what_generate_writes():
    model, tokenizer = tiny_model()
    config = grpo_generation_config(tokenizer, max_new_tokens=10, temperature=1.0)
    a, b = tokenizer("catch the ball " * 3)["input_ids"], tokenizer("move left")["input_ids"]
    prompts = [a, b, a, a, b, [7, 8, 9]]  # GRPO's groups, of different lengths, and one alone
    read = count_read(model)
    generate = _TransformersGenerate(model, config, [tokenizer.eos_token_id], 0, seed=0)
    with generate.seeded():
        ours = generate(prompts)
    ours_read, read[0] = read[0], 0
    ids, mask = kit.rollout._left_padded(prompts, 0, model.device)
    with generate.seeded(), torch.no_grad():  # transformers reading every copy of every prompt
        output = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    theirs = [kit.rollout._cut_at_eos(r.tolist(), [tokenizer.eos_token_id]) for r in output]
    assert ours == [row[ids.shape[1] :] for row in theirs]
    assert ours_read < read[0]
    # the three distinct prompts but their last column, then the last column of every row
    assert generate.prompt_tokens == len(a) - 1 + len(b) - 1 + 2 + len(prompts)


def test_a_growing_layer_keeps_what_a_dynamic_layer_keeps():
    from transformers.cache_utils import DynamicLayer

    g = torch.Generator().manual_seed(0)
    ours, theirs = kit.rollout._growing_layer()(), DynamicLayer()
    steps = [("update", 5), ("update", 1), ("update", 70), ("select", [2, 0]), ("update", 1)]
    steps += [("crop", -3), ("update", 2), ("select", [1]), ("update", 100)]
    for op, arg in steps:
        if op == "update":
            rows = ours.keys.shape[0] if ours.is_initialized and ours.keys.numel() else 3
            k, v = torch.randn(rows, 2, arg, 4, generator=g), torch.randn(rows, 2, arg, 4)
            for layer in (ours, theirs):
                out = layer.update(k, v)
            assert torch.equal(out[0], theirs.keys) and torch.equal(out[1], theirs.values)
        elif op == "select":
            for layer in (ours, theirs):
                layer.batch_select_indices(torch.tensor(arg))
        else:
            for layer in (ours, theirs):
                layer.crop(arg)
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)
        assert ours.get_seq_length() == theirs.get_seq_length()
