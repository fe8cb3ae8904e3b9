"""Policies of known strength, and the loop that plays them through the tool envs as TRL does.

Why: a reward has to be checked before GPU hours are spent on it, and SFT warm-up data has to
look exactly like a GRPO rollout. Both need episodes played through the same ``kit.envs`` objects
TRL hands to reward functions, in TRL's message format, by players whose ranking is known: the
solver, a noisy solver that blunders with probability ``p``, a random-but-valid player, or a
model. ``kit.diagnostics`` and ``kit.data`` are built on this module.

A **policy** maps the conversation so far to the next assistant message, in the form TRL's
response parser gives::

    {"role": "assistant", "content": "short reasoning",
     "tool_calls": [{"type": "function",
                     "function": {"name": "guess", "arguments": {"word": "crane"}}}]}

A message without tool calls ends the episode, as a model's final answer ends TRL's tool loop.
A **policy factory** ``factory(env_cls, seed) -> policy`` makes a fresh player per episode;
``solver_policy()``, ``noisy_policy(p)``, ``random_policy()`` and ``model_policy(model, tok)``
return factories. ``run_episode`` resets an env from a dataset row and plays one episode;
``replay`` runs a recorded episode's tool calls again on a reset env.

What a move looks like as a tool call, the reason the solver states for it and a random
well-formed move are each game's own (its ``GameSpec``: ``to_tool_call``, ``reason``,
``random_move``); ``texts``, ``latest`` and ``own_calls`` help a game read them from the messages.

The scripted players read the game state from the observation text only (never from the env),
so a blunder the noisy solver swaps in is seen, like any move, through the board or the feedback.
For Wordle the scripted factories take ``words=``, the only words their players may guess (the
solver's candidates and probes, the blunders): ``kit.data`` passes a split's secrets so that its
SFT data never shows another split's word.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit import registry
from kit.envs import env_tools
from kit.solvers import solver

Message = dict[str, Any]
Policy = Callable[[list[Message]], Message]
PolicyFactory = Callable[[type, int], Policy]


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


def call_tool(env: Any, call: dict[str, Any]) -> Message:
    """Run one tool call as TRL's ``_tool_call_loop`` does; return the tool message it appends.

    Any exception becomes the result ``{'error': '<message>'}`` (TRL catches ``Exception``, not
    only ``ValueError``), an unknown name gives TRL's ``Tool <name> not found.``, and the content
    is ``str(result)``.
    """
    if call.get("type") != "function":
        name = call.get("name", "unknown")
        result: Any = {"error": f"Unsupported tool call type: {call.get('type')}"}
        return {"role": "tool", "name": name, "content": str(result)}
    function = call["function"]
    name = function["name"]
    tools = {tool.__name__: tool for tool in env_tools(env)}
    try:
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        result = tools[name](**function["arguments"])
    except Exception as error:  # noqa: BLE001 - TRL shows every tool exception to the model
        result = {"error": str(error)}
    return {"role": "tool", "name": name, "content": str(result)}


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
    completion: list[Message] = []
    rounds = 0
    for turn in turns:
        completion.append(turn)
        calls = turn.get("tool_calls") or []
        if calls and (max_tool_calling_iterations is None or rounds < max_tool_calling_iterations):
            completion += [call_tool(env, call) for call in calls]
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


# -- episodes -----------------------------------------------------------------------------------
@dataclass
class Episode:
    """One episode as TRL's reward functions see it: prompt, completion and the env afterwards."""

    prompt: list[Message]  # the row's prompt with the reset observation appended
    completion: list[Message]  # assistant turns and tool results, TRL's ``completions`` entry
    env: Any  # the env instance after the episode: what ``environments=`` holds
    row: dict[str, Any] = field(default_factory=dict)
    # stopped at max_tool_calling_iterations while the policy still called tools
    truncated: bool = False

    @property
    def messages(self) -> list[Message]:
        return self.prompt + self.completion


def run_episode(
    env: Any,
    row: dict[str, Any],
    policy: Policy,
    max_tool_calling_iterations: int = 100,
    stop_when_done: bool = True,
) -> Episode:
    """Reset ``env`` from ``row`` and let ``policy`` play, through the env's tools, as TRL would.

    ``reset`` gets every column (``prompt`` included) except ``environment``, as TRL's
    multi-environment routing passes them. The loop ends when the policy answers without a
    tool call, after ``max_tool_calling_iterations`` rounds of tool calls (TRL's
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
    columns = {key: value for key, value in row.items() if key != "environment"}
    prompt = columns.get("prompt") or [{"role": "user", "content": ""}]
    prompt = with_observation(prompt, env.reset(**columns))
    completion: list[Message] = []
    iterations, truncated = 0, False
    while not (stop_when_done and env.done):
        message = policy(prompt + completion)
        completion.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            break
        if iterations == max_tool_calling_iterations:
            truncated = True
            break
        completion.extend(call_tool(env, call) for call in calls)
        iterations += 1
    return Episode(prompt, completion, env, dict(row), truncated)


# -- reading the game from the text -------------------------------------------------------------
def _newest_text(messages: list[Message]) -> str:
    """What the game added since the player's last move: the trailing tool results or the prompt."""
    tail: list[str] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        tail.append(str(message["content"]))
    if tail:
        return "".join(reversed(tail))
    return str(messages[-1]["content"])


def texts(messages: list[Message]) -> list[str]:
    """Every text the game showed, oldest first (the first user message holds the reset text)."""
    return [str(m["content"]) for m in messages if m["role"] in ("user", "tool")]


def own_calls(messages: list[Message]) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call the player made so far, as ``(name, arguments)``, oldest first."""
    return [
        (call["function"]["name"], call["function"]["arguments"])
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


def latest(messages: list[Message], parse: Callable[[str], Any]) -> Any:
    """What ``parse`` finds in the newest game text where it finds anything (e.g. a board)."""
    for text in reversed(texts(messages)):
        found = parse(text)
        if found is not None:
            return found
    return None


def to_tool_call(game: str, action: str) -> tuple[str, dict[str, Any]]:
    """The ``kit.envs`` tool call that plays a solver's action (``"[crane]"``, ``"LEFT"``, ...)."""
    return registry.game(game).to_tool_call(action)


# -- the players --------------------------------------------------------------------------------
class _RandomPlayer:
    """A well-formed move drawn at random: the floor any reward should rank below the solver."""

    def __init__(
        self, env_cls: type, seed: int, reasoning: bool, words: Collection[str] | None = None
    ) -> None:
        self.game = _check_words(env_cls.game_name, words)
        self.options = dict(env_cls.options)
        self.rng = random.Random(seed)
        self.reasoning = reasoning
        self.words = None if words is None else tuple(sorted(set(words)))

    def move(self, messages: list[Message]) -> tuple[str, dict[str, Any]]:
        context = registry.MoveContext(self.rng, messages, self.options, self.words)
        return registry.game(self.game).random_move(context)

    def __call__(self, messages: list[Message]) -> Message:
        call = self.move(messages)
        content = f"Let me try {_describe(call)}." if self.reasoning else ""
        return assistant_message(content, [call])


class _SolverPlayer:
    """The game's solver; with ``noise`` > 0 it swaps in a random move with that probability.

    The solver reads every observation, blunders included, so it plays on from the real state.
    """

    def __init__(
        self,
        env_cls: type,
        seed: int,
        noise: float,
        reasoning: bool,
        words: Collection[str] | None = None,
    ) -> None:
        self.game = _check_words(env_cls.game_name, words)
        options = dict(env_cls.options)
        if words is not None:
            options["words"] = words
        self.solver = solver(self.game, **options)
        if "seed" in inspect.signature(type(self.solver)).parameters:
            self.solver = solver(self.game, **options, seed=seed)  # echo's messages vary with it
        self.noise = noise
        self.rng = random.Random(seed)
        self.blunder = _RandomPlayer(env_cls, seed + 1, reasoning, words)
        self.reasoning = reasoning

    def __call__(self, messages: list[Message]) -> Message:
        action = self.solver.act(_newest_text(messages))
        if self.noise and self.rng.random() < self.noise:
            return self.blunder(messages)
        call = to_tool_call(self.game, action)
        content = registry.game(self.game).reason(messages, call) if self.reasoning else ""
        return assistant_message(content, [call])


def _describe(call: tuple[str, dict[str, Any]]) -> str:
    name, arguments = call
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def _check_noise(noise: float) -> float:
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise <= 1:
        raise ValueError(f"noise must be a probability in [0, 1], got {noise!r}")
    return float(noise)


def _check_words(game: str | None, words: Collection[str] | None) -> str | None:
    """``game`` if ``words`` suits it (None: check the collection only), else ``ValueError``."""
    if words is None:
        return game
    if isinstance(words, str) or not words or (game and registry.game(game).words is None):
        raise ValueError(
            "words is a non-empty collection of guesses, for a game with a word pool such as "
            f"Wordle guesses; got {words!r} for {game or 'a policy'}"
        )
    return game


def solver_policy(reasoning: bool = False, words: Collection[str] | None = None) -> PolicyFactory:
    """The game's solver (``kit.solvers``): the ceiling a reward should rank first.

    ``words`` (Wordle only) is the pool every guess comes from, e.g. the train split's secrets,
    so that data made by this player never shows a held-out word; see ``WordleSolver``.
    """
    _check_words(None, words)
    return lambda env_cls, seed: _SolverPlayer(env_cls, seed, 0.0, reasoning, words)


def noisy_policy(
    noise: float = 0.3, reasoning: bool = False, words: Collection[str] | None = None
) -> PolicyFactory:
    """The solver, but each move is replaced by the random policy's with probability ``noise``.

    ``words`` (Wordle only) restricts the solver's guesses and the blunders alike.
    """
    noise = _check_noise(noise)
    _check_words(None, words)
    return lambda env_cls, seed: _SolverPlayer(env_cls, seed, noise, reasoning, words)


def random_policy(reasoning: bool = False, words: Collection[str] | None = None) -> PolicyFactory:
    """Random well-formed moves: a player that has learnt the tools but not the game.

    Wordle: a dictionary word not guessed yet (always accepted), or one of ``words`` if given.
    Catch: LEFT, STAY or RIGHT.
    Sudoku: a random digit in a random empty cell (usually rejected: only the solution's digit
    is accepted; a player picking among the digits the row, column and box allow would win most
    default-difficulty games, too strong for a floor). Echo: 1-10 random letters.
    """
    _check_words(None, words)
    return lambda env_cls, seed: _RandomPlayer(env_cls, seed, reasoning, words)


def model_policy(
    model: Any, tokenizer: Any, max_new_tokens: int = 256, temperature: float | None = 1.0
) -> PolicyFactory:
    """A model that plays as it would in GRPO: the chat template with the env's tools, one sampled
    turn per call, parsed with TRL's own ``parse_response``.

    ``temperature=None`` decodes greedily (all rollouts of a group then match). Sampling seeds
    torch's global generator with the episode's seed. The tokenizer gets TRL's response schema if
    it has none, as ``GRPOTrainer`` does to it.
    """
    import torch
    from trl.chat_template_utils import add_response_schema, parse_response

    if (
        getattr(tokenizer, "response_schema", None) is None
        and getattr(tokenizer, "response_template", None) is None
    ):
        add_response_schema(tokenizer)

    def factory(env_cls: type, seed: int) -> Policy:
        tools = env_tools(env_cls())
        torch.manual_seed(seed)

        def act(messages: list[Message]) -> Message:
            ids = tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            inputs = torch.tensor([ids], device=model.device)
            sampling = (
                {"do_sample": False}
                if temperature is None
                else {"do_sample": True, "temperature": temperature}
            )
            with torch.no_grad():
                output = model.generate(
                    input_ids=inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    **sampling,
                )
            return parse_response(
                tokenizer, output[0, len(ids) :].tolist(), prefix=ids, tools=tools
            )

        return act

    return factory
