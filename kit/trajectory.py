"""Trajectory: one episode as the loss sees it, token by token.

Everything that plays or captures episodes (``kit.rollout``, the trainer capture in
``kit.masks``) produces these, and everything that shows them (``kit.viz``) consumes them, so
this is the one place that says what a token's provenance is:

* ``prompt``  every token before the first sampled one (system, user, reset observation);
* ``model``   a token the model sampled (``tool_mask == 1``): the loss trains on it;
* ``env``     a token the template or the environment inserted between two sampled turns
              (``tool_mask == 0``): in the forward pass as context, never in the loss.

``prompt_ids``, ``completion_ids``, ``tool_mask`` and ``completion_mask`` carry TRL's names and
meanings; the loss mask is ``completion_mask * tool_mask``, as in ``GRPOTrainer``.
:class:`ToolCall` is the kit's one record of a tool call (the envs keep their own in it too);
:func:`tool_calls` reads a conversation's calls and replies into them, and :func:`is_truncated` is
TRL's test of a completion the length budget cut: every module that builds trajectories uses both.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Source = Literal["prompt", "model", "env"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call: what was asked, and what came back (or the error).

    An env records its own (``kit.envs.GameEnv.calls``, ``turn`` None: an env does not know the
    conversation); :func:`tool_calls` rebuilds them from a conversation's messages, with the
    assistant turn that made each. ``result`` and ``error`` are both None for a call that was
    never answered.
    """

    tool: str
    arguments: Any  # a dict, except as a model wrote it in a call that never reached the env
    result: str | None
    error: str | None
    turn: int | None = None  # 1 for the first assistant turn of the conversation


@dataclass(frozen=True)
class Span:
    """A run of consecutive tokens of one source within one turn."""

    source: Source
    turn: int  # 0 for the prompt; k for the k-th sampled turn and the env text that follows it
    token_ids: tuple[int, ...]
    text: str
    start: int  # index of the first token in prompt_ids + completion_ids


@dataclass
class Trajectory:
    """One episode: its messages, its token ids with provenance, its tool calls and its reward."""

    messages: list[dict[str, Any]]
    prompt_ids: list[int]
    completion_ids: list[int]
    tool_mask: list[int]
    completion_mask: list[int] | None = None  # None: every completion token counts
    env: str | None = None
    task: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)
    states: list[str] = field(default_factory=list)  # the env's transcript after each turn
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)  # each named reward signal
    advantage: float | None = None
    done: bool = False
    won: bool = False
    truncated: bool = False  # the length budget cut the episode

    def __post_init__(self) -> None:
        if len(self.tool_mask) != len(self.completion_ids):
            raise ValueError(
                f"tool_mask has {len(self.tool_mask)} entries for {len(self.completion_ids)} completion tokens"
            )
        if self.completion_mask is not None and len(self.completion_mask) != len(
            self.completion_ids
        ):
            raise ValueError(
                f"completion_mask has {len(self.completion_mask)} entries for "
                f"{len(self.completion_ids)} completion tokens"
            )

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def loss_mask(self) -> list[int]:
        """1 where the loss trains on the completion token: ``completion_mask * tool_mask``."""
        completion = self.completion_mask or [1] * len(self.completion_ids)
        return [a * b for a, b in zip(completion, self.tool_mask, strict=True)]

    @property
    def sources(self) -> list[Source]:
        """The provenance of every token of ``input_ids``."""
        return ["prompt"] * len(self.prompt_ids) + [
            "model" if bit else "env" for bit in self.tool_mask
        ]

    def spans(self, tokenizer: Any) -> list[Span]:
        """Consecutive tokens grouped by source and turn, with their decoded text."""
        spans: list[Span] = []
        ids, sources = self.input_ids, self.sources
        start, turn = 0, 0
        for i in range(1, len(ids) + 1):
            if i < len(ids) and sources[i] == sources[start]:
                continue
            if sources[start] == "model":
                turn += 1
            chunk = tuple(ids[start:i])
            spans.append(Span(sources[start], turn, chunk, tokenizer.decode(list(chunk)), start))
            start = i
        return spans

    def counts(self) -> dict[Source, int]:
        """How many tokens of each source the episode holds."""
        sources = self.sources
        return {s: sources.count(s) for s in ("prompt", "model", "env")}


def tool_calls(messages: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """Every tool call of a conversation, in order, with what the model was shown back.

    Each call of an assistant message is paired with the tool messages that follow it, in order.
    ``result`` is the tool message's text, or ``error`` the message of TRL's ``{'error': ...}``
    reply; a call the model was never answered (the last turn when the tool-call cap or the
    length budget ended the episode) has both None. ``arguments`` are as TRL parsed them (a dict,
    or the text of arguments it could not parse).
    """
    calls: list[ToolCall] = []
    turn = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        turn += 1
        replies = []
        for reply in messages[index + 1 :]:
            if reply.get("role") != "tool":
                break
            replies.append(reply.get("content"))
        for k, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or call
            result = error = None
            if k < len(replies) and replies[k] is not None:
                error = _error_text(replies[k])
                result = None if error is not None else str(replies[k])
            name = function.get("name")
            calls.append(
                ToolCall(
                    "" if name is None else str(name),
                    function.get("arguments"),
                    result,
                    error,
                    turn,
                )
            )
    return calls


def _error_text(content: Any) -> str | None:
    """The message of a tool result that TRL built from an exception (``str({'error': msg})``),
    or None for a normal result."""
    if not isinstance(content, str) or not content.startswith(("{'error': ", '{"error": ')):
        return None
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, dict) and list(value) == ["error"]:
        return str(value["error"])
    return None


def is_truncated(completion_ids: list[int], stop: set[int]) -> bool:
    """TRL's ``is_truncated``: the completion does not end on an EOS (or pad) token."""
    return bool(completion_ids) and completion_ids[-1] not in stop
