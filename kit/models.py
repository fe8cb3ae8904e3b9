"""Models: a tiny one built offline in a second, or any local / hub model on a GPU.

Why a tiny model: tests, CI and the CPU runbook cannot download weights, yet they must drive the
real ``GRPOTrainer`` end to end. ``tiny_model()`` trains a byte-level BPE tokenizer on the games'
own text, adds the ChatML and tool-call tokens, and sets one of TRL's bundled chat templates
byte for byte (TRL recognises a template by its exact text, and refuses tool training
otherwise). The model is a randomly initialised ``Qwen3ForCausalLM`` of about 0.4M parameters:
it learns nothing useful, but every code path it goes through is the one a 1.7B model takes.

``load(name)`` is the path GPU users take: a hub id or a local folder, with TRL's template put
on tokenizers whose own template TRL does not know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAT_TEMPLATES = ("qwen3", "qwen3_instruct_2507")

# Tokens the Qwen3 templates and TRL's response parser rely on; each must be a single id.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


def trl_chat_template(name: str = "qwen3") -> str:
    """The exact text of one of TRL's bundled chat templates (``"qwen3"`` or ``"qwen3_instruct_2507"``)."""
    import trl

    if name not in CHAT_TEMPLATES:
        raise ValueError(f"unknown chat template {name!r}; choose one of {CHAT_TEMPLATES}")
    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    return path.read_text(encoding="utf-8")


def _training_corpus() -> list[str]:
    """Text the tiny tokenizer learns its merges from: the games' own prompts and tool calls."""
    from kit.games import GAMES, make
    from kit.solvers import play

    lines = [
        '<tool_call>\n{"name": "guess", "arguments": {"word": "crane"}}\n</tool_call>',
        '<tool_call>\n{"name": "place", "arguments": {"row": 1, "col": 2, "number": 3}}\n</tool_call>',
        '<tool_call>\n{"name": "move", "arguments": {"direction": "LEFT"}}\n</tool_call>',
        '<tool_call>\n{"name": "echo", "arguments": {"message": "hello"}}\n</tool_call>',
        "You are a helpful assistant. Use the tools to play the game.",
    ]
    for name in GAMES:
        game = make(name)
        lines.append(game.reset(seed=0))
        for action in play(name, seed=0, max_steps=12):
            lines.append(action)
            step = game.step(action)
            lines.append(step.observation)
            if step.done:
                break
    return lines


def tiny_tokenizer(chat_template: str = "qwen3", vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer with ChatML and tool-call tokens, built offline in about a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_training_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    tokenizer.chat_template = trl_chat_template(chat_template)
    return tokenizer


def tiny_model(
    hidden_size: int = 128,
    num_layers: int = 2,
    chat_template: str = "qwen3",
    seed: int = 0,
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: a random small ``Qwen3ForCausalLM`` and :func:`tiny_tokenizer`.

    Deterministic given ``seed``. Save it with ``model.save_pretrained(dir)`` and
    ``tokenizer.save_pretrained(dir)`` and reload it with :func:`load`, like any checkpoint.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = tiny_tokenizer(chat_template)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load(
    name_or_path: str,
    chat_template: str | None = None,
    dtype: str = "auto",
    device_map: str | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from a hub id (e.g. ``"Qwen/Qwen3-1.7B"``) or a local folder.

    ``chat_template`` (``"qwen3"`` or ``"qwen3_instruct_2507"``) replaces the tokenizer's own
    template with TRL's bundled one: needed for ChatML models whose template TRL does not
    recognise (SmolLM2, for one). Other keyword arguments go to ``from_pretrained``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if chat_template is not None:
        tokenizer.chat_template = trl_chat_template(chat_template)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        name_or_path, dtype=dtype, device_map=device_map, **kwargs
    )
    return model, tokenizer
