"""Score a model's response outside GRPO's tool loop: replay its tool calls in a fresh env.

Why a module of its own: ``kit.rewards`` scores the env a ``GRPOTrainer`` episode left behind;
other trainers (single-turn TRL, veRL, OpenRLHF) and offline scoring have only the response
text or messages. ``score(task, response)`` replays its tool calls in a fresh env and returns
the total and each named signal of a ``kit.rewards.Reward``, as llenvs' scorers do; thin
adapters for single-turn TRL (``single_turn_reward``), veRL (``compute_score``:
``custom_reward_function.path=kit/scoring.py``) and OpenRLHF (``reward_func``:
``--remote_rm_url kit/scoring.py``) reuse it. ``kit.rewards`` re-exports every name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kit import episode
from kit.envs import ENVS
from kit.rewards import Message, Reward, Score, default_reward

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """The ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks of a response
    (Qwen / Hermes syntax), in TRL's message form. If any block is malformed the whole response
    counts as plain text (no calls), as TRL's parser falls back to."""
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            payload = json.loads(block)
            arguments = payload["arguments"]
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            name = payload["name"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return []
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return []
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def _assistant_turns(response: Any) -> list[Message]:
    """The assistant turns of a response: text, messages or a ``kit.trajectory.Trajectory``."""
    if isinstance(response, str):
        return [
            {"role": "assistant", "content": response, "tool_calls": parse_tool_calls(response)}
        ]
    messages = getattr(response, "messages", response)
    if not isinstance(messages, Sequence):
        raise ValueError(
            "response must be a str, a list of messages or a Trajectory, got "
            f"{type(response).__name__}"
        )
    turns = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if not calls and isinstance(message.get("content"), str):
            calls = parse_tool_calls(message["content"])  # text TRL could not parse: no tools given
        turns.append(
            {
                "role": "assistant",
                "content": message.get("content") or "",
                "tool_calls": calls or [],
            }
        )
    return turns


def replay(game: str, task: Mapping[str, Any], response: Any) -> tuple[Any, list[Message]]:
    """Reset a fresh ``kit.envs`` env of ``game`` from ``task`` and run the response's tool calls
    (recorded results are ignored); return the env and the completion as TRL would hold it."""
    if game not in ENVS:
        raise ValueError(f"unknown game {game!r}; choose one of {sorted(ENVS)}")
    env = ENVS[game]()
    episode.reset(env, task)
    return env, episode.replay(env, _assistant_turns(response))


def _as_task(task: Any, response: Any = None) -> dict[str, Any]:
    """The reset columns of a task given as a dict, a JSON object, or None (a Trajectory's own)."""
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except json.JSONDecodeError as error:
            raise ValueError(f"task must be a dict or a JSON object, got {task[:60]!r}") from error
    if task is None:
        task = getattr(response, "task", None)
    if not isinstance(task, Mapping):
        raise ValueError(f"task must be a dict of reset columns, got {type(task).__name__}")
    return dict(task)


def _game_of(task: Mapping[str, Any], game: str | None, response: Any = None) -> str:
    game = game or task.get("environment") or getattr(response, "env", None)
    if game not in ENVS:
        raise ValueError(
            "cannot tell the game: pass game= or give the task an 'environment' key, one of "
            f"{sorted(ENVS)}; got {game!r}"
        )
    return game


def score(
    task: Mapping[str, Any] | str | None,
    response: Any,
    game: str | None = None,
    reward: Reward | None = None,
) -> Score:
    """Score one response, or one finished trajectory, against a task.

    ``task`` holds the reset columns (``{"secret": "sheep"}``; a JSON string works too; ``None``
    takes a Trajectory's own), ``game`` defaults to its ``environment`` key (or the
    Trajectory's ``env``); ``response`` is the model's text (tool calls in ``<tool_call>``
    tags), a list of messages or a ``kit.trajectory.Trajectory``. Its tool calls are replayed in
    a fresh env; ``reward`` defaults to the game's ``default_reward``.
    """
    task = _as_task(task, response)
    game = _game_of(task, game, response)
    env, completion = replay(game, task, response)
    return (reward or default_reward(game)).score(env, completion)


def single_turn_reward(game: str, reward: Reward | None = None) -> Callable[..., list[float]]:
    """A TRL reward function for plain GRPO (no ``environment_factory``): each completion's tool
    calls are replayed in a fresh env reset from the row's task columns."""
    game = _game_of({}, game)
    reward = reward or default_reward(game)
    task_keys = ENVS[game].task_keys + ENVS[game].setting_keys

    def function(completions: Sequence[Any], **columns: Any) -> list[float]:
        totals = []
        for i, completion in enumerate(completions):
            task = {key: columns[key][i] for key in task_keys if key in columns}
            task = {key: value for key, value in task.items() if value is not None}
            totals.append(score(task, completion, game, reward).total)
        return totals

    function.__name__ = reward.__name__
    return function


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> dict[str, float]:
    """veRL's custom reward function (``custom_reward_function.path=<this file>``): the game is
    ``ground_truth``'s ``environment`` key or ``data_source`` (``"wordle"`` or ``"kit/wordle"``),
    ``ground_truth`` the task (dict or JSON). Returns ``{"score": total, <signal>: value, ...}``;
    veRL logs the extra keys."""
    del extra_info
    task = _as_task(ground_truth)
    source = data_source.rsplit("/", 1)[-1] if isinstance(data_source, str) else None
    result = score(task, solution_str, task.get("environment") or source)
    return {"score": result.total, **result.signals}


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]
) -> dict[str, Any]:
    """OpenRLHF's remote reward function (``--remote_rm_url <this file>``, ``--label_key``): each
    label is the task as JSON with an ``environment`` key; the response is the query after its
    prompt. Returns ``{"rewards", "scores", "extra_logs"}`` tensors."""
    import torch

    totals, logs = [], {}
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        response = query[len(prompt) :] if query.startswith(prompt) else query
        result = score(label, response)
        totals.append(result.total)
        for name, value in result.signals.items():
            logs.setdefault(name, [0.0] * len(queries))[i] = value
    rewards = torch.tensor(totals, dtype=torch.float32)
    extra = {name: torch.tensor(values, dtype=torch.float32) for name, values in logs.items()}
    return {"rewards": rewards, "scores": rewards, "extra_logs": extra}
