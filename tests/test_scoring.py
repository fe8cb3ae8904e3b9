"""``kit.train.score_by_length``: a GRPO trainer's rollouts scored in passes of similar length,
right-padded and without a mask, give TRL's log-probs, entropies and gradients, and read fewer
positions.

Compared against TRL's own ``GRPOTrainer._get_per_token_logps_and_entropies`` on the same
trainer (the tiny model in fp32, TRL's fused LM head at the recipe's temperature), on a batch laid
out as TRL lays one out: prompts padded on the left, completions on the right.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from kit.models import tiny_model  # noqa: E402
from kit.train import score_by_length  # noqa: E402

PROMPTS = (9, 3, 12, 7, 5, 12, 8, 4, 10)
COMPLETIONS = (6, 14, 2, 9, 11, 1, 14, 5, 7)


def trainer(tmp_path: Any, lora: bool = False) -> Any:
    """A real GRPO trainer of the runbook's recipe on Catch, untrained; with ``lora``, training
    the kit's LoRA adapters (a ``PeftModel``, as a pretrained model trains on a CPU)."""
    from trl import GRPOTrainer

    from kit.defaults import lora_config
    from kit.envs import ENVS
    from kit.rewards import default_reward
    from kit.tasks import task_dataset
    from kit.train import grpo_args

    model, tokenizer = tiny_model()
    args = grpo_args(
        "catch", 1, 0, tmp_path, per_device_train_batch_size=8, num_generations=4, report_to=[]
    )
    return GRPOTrainer(
        model=model,
        args=args,
        reward_funcs=default_reward("catch"),
        train_dataset=task_dataset("catch", "train", num_tasks=2, seed=0),
        processing_class=tokenizer,
        environment_factory=ENVS["catch"],
        peft_config=lora_config() if lora else None,
    )


# GRPO's groups: rows of one task share their prompt. Group 0 holds rows 0, 2 and 6 (not side by
# side), group 1 rows 4 and 5 (each a prompt of one token: nothing before its last to share),
# group 2 rows 7 and 8; rows 1 and 3 are alone.
GROUPS = {0: 0, 2: 0, 6: 0, 4: 1, 5: 1, 7: 2, 8: 2}
SHARED_PROMPTS = (9, 3, 9, 7, 1, 1, 9, 4, 4)


def batch(
    seed: int = 0, prompts: tuple[int, ...] = PROMPTS, groups: dict[int, int] | None = None
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(input_ids, attention_mask, logits_to_keep)``: prompts of ``prompts`` tokens padded on
    the left, completions of COMPLETIONS tokens padded on the right, pad id 1 everywhere padded;
    rows of one of ``groups`` have the same prompt."""
    g = torch.Generator().manual_seed(seed)
    p, c = max(prompts), max(COMPLETIONS)
    ids = torch.randint(10, 1000, (len(prompts), p + c), generator=g)
    leaders: dict[int, int] = {}
    for row, group in (groups or {}).items():
        ids[row, :p] = ids[leaders.setdefault(group, row), :p]
    mask = torch.zeros_like(ids)
    for row, (prompt, completion) in enumerate(zip(prompts, COMPLETIONS, strict=True)):
        mask[row, p - prompt : p + completion] = 1
    return ids.masked_fill(mask == 0, 1), mask, c


def scored(score: Any, model: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any, list[Any]]:
    """Log-probs, entropies and the gradient of a loss over both, from a scoring method."""
    model.zero_grad()
    logps, entropies, _ = score(model, *args, compute_entropy=True, **kwargs)
    (logps.sum() + 0.1 * entropies.sum()).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    return logps.detach(), entropies.detach(), grads


def positions_read(model: Any) -> list[tuple[int, ...]]:
    """The shape of every ``input_ids`` the model's backbone reads from now on."""
    shapes: list[tuple[int, ...]] = []
    backbone = model.get_base_model().model if hasattr(model, "get_base_model") else model.model
    backbone.register_forward_pre_hook(
        lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    return shapes


def total(shapes: list[tuple[int, ...]]) -> int:
    return sum(rows * columns for rows, columns in shapes)


@pytest.mark.parametrize(
    "rows, batch_size, lora, shared",
    [
        (8, None, False, False),
        (4, None, False, False),
        (3, 2, False, False),
        (32, None, False, False),
        (4, None, True, False),
        (8, None, False, True),
        (2, None, False, True),
        (4, None, True, True),
    ],
)
def test_scoring_by_length_is_trls_scoring_with_fewer_positions(
    tmp_path, rows, batch_size, lora, shared
):
    t = trainer(tmp_path, lora)
    model = t.model
    prompts = SHARED_PROMPTS if shared else PROMPTS
    ids, mask, keep = batch(prompts=prompts, groups=GROUPS if shared else None)
    trl = scored(type(t)._get_per_token_logps_and_entropies.__get__(t), model, ids, mask, keep)
    read = positions_read(model)
    score_by_length(t, rows=rows)
    kit = scored(t._get_per_token_logps_and_entropies, model, ids, mask, keep, batch_size)
    completion = mask[:, -keep:].bool()
    for ours, theirs in zip(kit[:2], trl[:2], strict=True):
        assert ours.shape == theirs.shape == completion.shape
        torch.testing.assert_close(ours[completion], theirs[completion], atol=2e-5, rtol=1e-5)
        assert torch.equal(ours[~completion], theirs[~completion])  # zeros where TRL has them
        assert ours[completion].abs().sum() > 0
    for ours, theirs in zip(kit[2], trl[2], strict=True):  # to float rounding, at each's scale
        torch.testing.assert_close(ours, theirs, atol=1e-4 * float(theirs.abs().max()), rtol=0)
    # each pass runs to its own longest row: fewer positions than the batch's padded width
    assert total(read) <= sum(prompts) + sum(COMPLETIONS) + (len(prompts) - 1) * 20
    assert total(read) < ids.numel()
    if shared:  # groups 0 and 2 read their prompt but its last token once, group 1 has none
        assert sorted(shape for shape in read if shape[0] == 1)[:2] == [(1, 3), (1, 8)]
        assert sum(rows for rows, _ in read) == len(prompts) + 2
        del t._get_per_token_logps_and_entropies  # TRL's method again
        score_by_length(t, rows=rows, share_prompts=False)
        read.clear()
        alone = scored(t._get_per_token_logps_and_entropies, model, ids, mask, keep, batch_size)
        assert sum(rows for rows, _ in read) == len(prompts)  # every row read on its own
        for ours, theirs in zip(kit[:2], alone[:2], strict=True):
            torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-5)


def test_a_model_that_recomputes_its_activations_reads_every_prompt(tmp_path):
    # transformers keeps no cache in training under checkpointing: each row reads its prompt
    t = trainer(tmp_path)
    model = t.model
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids, mask, keep = batch(prompts=SHARED_PROMPTS, groups=GROUPS)
    trl = scored(type(t)._get_per_token_logps_and_entropies.__get__(t), model, ids, mask, keep)
    read = positions_read(model)
    score_by_length(t)
    kit = scored(t._get_per_token_logps_and_entropies, model, ids, mask, keep)
    assert sum(rows for rows, _ in read) == len(SHARED_PROMPTS)  # no pass over a prompt alone
    for ours, theirs in zip(kit[:2], trl[:2], strict=True):
        torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("broken", ["a hole", "no prompt"])
def test_a_mask_with_a_hole_or_a_row_without_prompt_goes_to_trls_own_scoring(tmp_path, broken):
    t = trainer(tmp_path)
    model = t.model
    ids, mask, keep = batch()
    if broken == "a hole":  # inside row 1's completion: the row is not one run of tokens
        mask[1, -keep + 5] = 0
    else:  # row 3's prompt all padding: nothing to score its first completion token from
        mask[3, :-keep] = 0
    trl_score = type(t)._get_per_token_logps_and_entropies.__get__(t)
    trl = scored(trl_score, model, ids, mask, keep)
    read = positions_read(model)
    score_by_length(t)
    kit = scored(t._get_per_token_logps_and_entropies, model, ids, mask, keep)
    assert read == [tuple(ids.shape)]  # one pass over the whole padded batch: TRL's
    for ours, theirs in zip(kit[:2], trl[:2], strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("rows", [0, -1, 2.0, True])
def test_score_by_length_refuses_a_bad_pass_size(tmp_path, rows):
    with pytest.raises(ValueError, match="rows must be a positive integer"):
        score_by_length(object(), rows=rows)
