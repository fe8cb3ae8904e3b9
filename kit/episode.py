"""One episode as TRL's tool loop plays it, message by message: the steps every loop of the kit
shares, and the loop that plays a scripted player.

Why one module: SFT warm-up data, reward diagnostics and the evaluation of a scripted player all
play episodes through the same ``kit.envs`` objects that TRL hands to reward functions, in TRL's
message format, and ``kit.rollout`` plays a model's episodes token by token with the same steps.
Each step is written here once, as TRL 1.16's ``_tool_call_loop`` takes it:

* :func:`reset` resets the env from a dataset row, as TRL passes the row's columns;
* :func:`start` does that and appends the observation to the prompt;
* :func:`call_tool` runs one parsed tool call and returns the tool message TRL appends (errors
  as ``{'error': ...}`` text, TRL's message for an unknown tool);
* :func:`runs_tools` is TRL's rule for whether a turn's calls run: the turn has calls and fewer
  than ``max_tool_calling_iterations`` rounds have run;
* :func:`run_episode` lets a **policy** (the conversation so far -> the next assistant message,
  as TRL's response parser gives it; ``kit.solvers.policies`` has the scripted ones) play until
  it answers without a tool call or reaches ``max_tool_calling_iterations`` rounds;
* :func:`replay` runs a recorded episode's tool calls again on a reset env.

``kit.rollout`` plays the same loop a batch of episodes at a time, token by token (ids, the
length budget), which a message-level policy cannot see; both take their steps and their stop
rule from here.

An assistant message looks like this (:func:`assistant_message` builds one)::

    {"role": "assistant", "content": "short reasoning",
     "tool_calls": [{"type": "function",
                     "function": {"name": "guess", "arguments": {"guess": "crane"}}}]}
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit.envs import env_tools
from kit.trajectory import ToolCall, tool_calls

Message = dict[str, Any]
Policy = Callable[[list[Message]], Message]
DEFAULT_PROMPT: list[Message] = [{"role": "user", "content": ""}]  # TRL's, for rows with no prompt


# -- TRL's message format -----------------------------------------------------------------------
def assistant_message(
    content: str = "", calls: Sequence[tuple[str, dict[str, Any]]] = ()
) -> Message:
    """An assistant turn as TRL's response parser returns it: content, then the tool calls."""
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": name, "arguments": dict(arguments)}}
            for name, arguments in calls
        ]
    return message


def tool_schemas(env_cls: type) -> list[dict[str, Any]]:
    """The JSON schemas of ``env_cls``'s tools, as transformers builds them for TRL's prompt."""
    from transformers.utils import get_json_schema

    return [get_json_schema(tool) for tool in env_tools(env_cls())]


def call_tool(
    env: Any, call: Mapping[str, Any], tools: Mapping[str, Callable[..., Any]] | None = None
) -> Message:
    """Run one tool call as TRL's ``_tool_call_loop`` does; return the tool message it appends.

    Any exception becomes the result ``{'error': '<message>'}`` (TRL catches ``Exception``, not
    only ``ValueError``), an unknown name gives TRL's ``Tool <name> not found.``, and the content
    is ``str(result)``, or the result itself when it is a list (TRL's multimodal content blocks).
    ``tools``: the env's tools by name, when the caller has them already (``env_tools``).
    """
    if call.get("type") != "function":
        name = call.get("name", "unknown")
        result: Any = {"error": f"Unsupported tool call type: {call.get('type')}"}
        return {"role": "tool", "name": name, "content": str(result)}
    function = call["function"]
    name = function["name"]
    if tools is None:
        tools = {tool.__name__: tool for tool in env_tools(env)}
    try:
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        result = tools[name](**function["arguments"])
    except Exception as error:  # noqa: BLE001 - TRL shows every tool exception to the model
        result = {"error": str(error)}
    content = result if isinstance(result, list) else str(result)
    return {"role": "tool", "name": name, "content": content}


def runs_tools(message: Message, rounds: int, max_tool_calling_iterations: int | None) -> bool:
    """Whether TRL runs the tool calls of assistant ``message`` after ``rounds`` rounds of tool
    calls: it has some and the cap (``None``: no cap) is not reached. A turn that calls no tool
    ends the episode; so does one past the cap, its calls left unrun."""
    cap = max_tool_calling_iterations
    return bool(message.get("tool_calls")) and (cap is None or rounds < cap)


def replay(
    env: Any, turns: Sequence[Message], max_tool_calling_iterations: int | None = None
) -> list[Message]:
    """Run the tool calls of recorded assistant ``turns`` on ``env`` (already reset), as TRL's
    tool loop ran them; return the completion TRL held: each turn, then its tool messages.

    Recorded tool results are ignored: the env answers afresh, and the engines are
    deterministic, so this rebuilds the env an episode left behind (for a reward to read) or
    checks a recorded conversation against the env. Only the first
    ``max_tool_calling_iterations`` turns that call tools run them (as in TRL; None: no cap); a
    later turn is kept with its calls unrun, as TRL keeps the turn past its cap.
    """
    tools = {tool.__name__: tool for tool in env_tools(env)}
    completion: list[Message] = []
    rounds = 0
    for turn in turns:
        completion.append(turn)
        if runs_tools(turn, rounds, max_tool_calling_iterations):
            completion += [call_tool(env, call, tools) for call in turn["tool_calls"]]
            rounds += 1
    return completion


def with_observation(prompt: list[Message], observation: Any) -> list[Message]:
    """The prompt TRL generates from: the reset observation glued to the last message's content.

    TRL adds no separator, so a prompt should end with one (``"\\n\\n"``).
    """
    if observation is None:
        return [dict(message) for message in prompt]
    last = prompt[-1]
    return [dict(message) for message in prompt[:-1]] + [
        {**last, "content": last["content"] + observation}
    ]


def reset(env: Any, row: Mapping[str, Any]) -> Any:
    """``env.reset`` with every column of a dataset row (``prompt`` included) except
    ``environment``, as TRL's multi-environment routing passes them; returns the observation."""
    return env.reset(**{key: value for key, value in row.items() if key != "environment"})


def start(env: Any, row: Mapping[str, Any]) -> list[Message]:
    """Reset ``env`` from a dataset row (:func:`reset`) and return the prompt TRL generates the
    first turn from: the row's ``prompt`` (TRL's empty user message when it has none) with the
    reset observation appended (:func:`with_observation`)."""
    prompt = row.get("prompt") or DEFAULT_PROMPT
    return with_observation(copy.deepcopy(prompt), reset(env, row))


# -- episodes -----------------------------------------------------------------------------------
@dataclass
class Episode:
    """One episode message by message, as TRL's reward functions see it: the env instance after
    it, TRL's completion messages, and the prompt and row it began from. What a reward signal
    reads (``kit.rewards``) and what :func:`run_episode` returns; ``kit.trajectory.Trajectory``
    is an episode token by token.

    A reward needs only ``env``; with ``completion``, ``calls`` also has the calls that never
    reached the env (an unknown tool name, a wrong argument name), exactly as TRL's
    ``tools/failure_frequency`` counts them.
    """

    env: Any  # the env instance after the episode: what ``environments=`` holds
    completion: list[Message] | None = None  # assistant turns and tool results (``completions``)
    prompt: list[Message] = field(default_factory=list)  # with the reset observation appended
    row: dict[str, Any] = field(default_factory=dict)
    # stopped at max_tool_calling_iterations while the policy still called tools
    truncated: bool = False

    @property
    def messages(self) -> list[Message]:
        return self.prompt + list(self.completion or [])

    @property
    def game(self) -> Any:
        """The env's game engine after the episode."""
        return self.env.game

    @property
    def calls(self) -> list[ToolCall]:
        """Every tool call of the episode, in order: the env's own record, or, with the
        completion, the calls TRL parsed and the results it appended
        (``kit.trajectory.tool_calls``: ``arguments`` as the model wrote them, ``result`` None
        where the call failed or got no result)."""
        if self.completion is None:
            return list(self.env.calls)
        return tool_calls(self.completion)


def run_episode(
    env: Any,
    row: dict[str, Any],
    policy: Policy,
    max_tool_calling_iterations: int = 100,
    stop_when_done: bool = True,
) -> Episode:
    """Reset ``env`` from ``row`` and let ``policy`` play, through the env's tools, as TRL would.

    ``reset`` gets the row as :func:`reset` passes it. The loop ends when the policy answers
    without a tool call, after ``max_tool_calling_iterations`` rounds of tool calls (TRL's
    ``max_tool_calling_iterations``: a call requested after that is left unexecuted), or, with
    ``stop_when_done``, as soon as the game is over, as a player that stops at the end would.
    """
    if (
        isinstance(max_tool_calling_iterations, bool)
        or not isinstance(max_tool_calling_iterations, int)
        or max_tool_calling_iterations < 1
    ):
        raise ValueError(
            f"max_tool_calling_iterations must be an int >= 1, got {max_tool_calling_iterations!r}"
        )
    prompt = start(env, row)
    tools = {tool.__name__: tool for tool in env_tools(env)}
    completion: list[Message] = []
    rounds = 0
    while not (stop_when_done and env.done):
        message = policy(prompt + completion)
        completion.append(message)
        if not runs_tools(message, rounds, max_tool_calling_iterations):
            break
        completion.extend(call_tool(env, call, tools) for call in message["tool_calls"])
        rounds += 1
    truncated = bool(completion and completion[-1].get("tool_calls"))
    return Episode(env, completion, prompt, dict(row), truncated)
