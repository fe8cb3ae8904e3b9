"""kit.models: the tiny offline model TRL accepts, and the loading path GPU users take."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from trl.chat_template_utils import add_response_schema, supports_tool_calling  # noqa: E402

from kit.models import SPECIAL_TOKENS, load, tiny_model, tiny_tokenizer, trl_chat_template  # noqa: E402

CONVERSATION = [
    {"role": "user", "content": "Play."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "guess", "arguments": {"word": "crane"}}}
        ],
    },
    {"role": "tool", "name": "guess", "content": "X X Y X G"},
]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def test_trl_recognises_the_tiny_tokenizer(tiny):
    _, tokenizer = tiny
    assert supports_tool_calling(tokenizer)
    parsed = add_response_schema(tokenizer)  # raises "Unrecognized chat template" otherwise
    assert getattr(parsed, "response_template", None) or getattr(parsed, "response_schema", None)


def test_special_tokens_are_single_ids_and_eos_ends_a_turn(tiny):
    _, tokenizer = tiny
    for token in SPECIAL_TOKENS:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert tokenizer.eos_token == "<|im_end|>"
    text = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert "<tool_call>" in text and "<tool_response>\nX X Y X G\n</tool_response>" in text
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_tiny_model_is_deterministic_and_small(tiny):
    model, tokenizer = tiny
    again, _ = tiny_model()
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    assert model.config.vocab_size == len(tokenizer)


def test_load_round_trips_a_local_folder(tiny, tmp_path):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load(str(tmp_path), dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode("[crane]", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits)
    assert loaded_tokenizer.chat_template == tokenizer.chat_template


def test_load_puts_trls_template_on_an_unrecognised_tokenizer(tiny, tmp_path):
    model, _ = tiny
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"  # SmolLM2-like
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _, plain = load(str(tmp_path))
    with pytest.raises(ValueError, match="Unrecognized chat template"):
        add_response_schema(plain)
    _, fixed = load(str(tmp_path), chat_template="qwen3_instruct_2507")
    assert fixed.chat_template == trl_chat_template("qwen3_instruct_2507")
    add_response_schema(fixed)


def test_unknown_template_name_is_refused():
    with pytest.raises(ValueError, match="unknown chat template"):
        trl_chat_template("llama9")
