"""Scripted generation: make a real model "say" chosen assistant turns, token for token.

Only the model's sampling is replaced; the trainer's tool loop, the chat template, the env and
the loss all run for real. A script is a list of assistant turns per rollout, picked by the
turn index (how many assistant headers the input already holds), so rollouts that share a
prompt follow the same script.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import torch

Turn = str  # the assistant text, tool calls included


def tool_call(name: str, **arguments: Any) -> str:
    """One tool call in the Qwen3 template's syntax."""
    payload = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{payload}\n</tool_call>"


class ScriptedGeneration:
    """Patch ``model.generate`` so turn ``k`` of every rollout emits ``script(prompt_text)[k]``."""

    def __init__(self, tokenizer: Any, script: Callable[[str], Sequence[Turn]]) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.calls = 0

    def __call__(self, input_ids: torch.Tensor, attention_mask=None, **_: Any) -> torch.Tensor:
        self.calls += 1
        tok = self.tokenizer
        rows = []
        for ids, mask in zip(input_ids, attention_mask, strict=True):
            text = tok.decode(ids[mask.bool()])
            turn = text.count("<|im_start|>assistant") - 1
            turns = self.script(text)
            reply = turns[turn] if turn < len(turns) else "I have finished."
            rows.append(tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id])
        width = max(map(len, rows))
        padded = [row + [tok.pad_token_id] * (width - len(row)) for row in rows]
        return torch.cat([input_ids, torch.tensor(padded, dtype=input_ids.dtype)], dim=1)

    def install(self, model: Any) -> None:
        model.generate = self
