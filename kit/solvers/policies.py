"""Players of known strength: the solver, a noisy solver, a random-but-valid player.

Why: a reward has to be checked before GPU hours are spent on it, and SFT warm-up data has to
look exactly like a GRPO rollout. Both need episodes played by players whose ranking is known,
through the same ``kit.envs`` objects TRL hands to reward functions, in TRL's message format
(``kit.episode.run_episode`` plays them). ``kit.diagnostics`` and ``kit.sft`` are built on them.

A **policy** maps the conversation so far to the next assistant message, in the form TRL's
response parser gives (``kit.episode``); a message without tool calls ends the episode, as a
model's final answer ends TRL's tool loop. A **policy factory** ``factory(env_cls, seed) ->
policy`` makes a fresh player per episode; ``solver_policy()``, ``noisy_policy(p)`` and
``random_policy()`` return factories, and so does ``kit.rollout.model_policy(model, tokenizer)``.

What a move looks like as a tool call, the reason the solver states for it and a random
well-formed move are each game's own (its ``GameSpec``: ``to_tool_call``, ``reason``,
``random_move``); ``texts``, ``latest`` and ``own_calls`` help a game read them from the messages.

The scripted players read the game state from the observation text only (never from the env),
so a blunder the noisy solver swaps in is seen, like any move, through the board or the feedback.
For Wordle the scripted factories take ``words=``, the only words their players may guess (the
solver's candidates and probes, the blunders): ``kit.sft`` passes a split's secrets so that its
SFT data never shows another split's word.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Collection
from typing import Any

from kit import registry
from kit.episode import Message, Policy, assistant_message
from kit.solvers import solver

PolicyFactory = Callable[[type, int], Policy]


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
    """The game's solver; with ``noise`` > 0 it swaps in a random move with that probability, or
    with ``habit`` its game's habit move (``GameSpec.habits``), still stating the solver's reason.

    The solver reads every observation, blunders included, so it plays on from the real state.
    """

    def __init__(
        self,
        env_cls: type,
        seed: int,
        noise: float,
        reasoning: bool,
        words: Collection[str] | None = None,
        habit: bool | str = False,
    ) -> None:
        self.game = _check_words(env_cls.game_name, words)
        habits = registry.game(self.game).habits
        self.habit = habits[habit_name(self.game, habit)] if habit else None
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
        erring = self.noise and self.rng.random() < self.noise
        if erring and self.habit is None:
            return self.blunder(messages)
        call = to_tool_call(self.game, action)
        # a habit knows the right move, says so, and plays its own: the text does not flag it
        content = registry.game(self.game).reason(messages, call) if self.reasoning else ""
        return assistant_message(content, [self.habit(call) if erring else call])


def habit_name(game: str, habit: bool | str) -> str:
    """The name of ``game``'s habit ``habit`` (``True``: its first, ``GameSpec.habits``);
    ``ValueError`` naming the game's habits when it has no such one."""
    habits = registry.game(game).habits
    if not habits:
        raise ValueError(f"{game} has no habit move (GameSpec.habits)")
    name = next(iter(habits)) if habit is True else habit
    if name not in habits:
        raise ValueError(f"{game} has no habit {habit!r}: its habits are {', '.join(habits)}")
    return name


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
    noise: float = 0.3,
    reasoning: bool = False,
    words: Collection[str] | None = None,
    habit: bool | str = False,
) -> PolicyFactory:
    """The solver, but each move is replaced by the random policy's with probability ``noise``.

    ``habit``: the replacement is the game's habit move of that name instead (``True``: its
    first; ``GameSpec.habits``; Catch: ``"both"``, the other direction, or ``"left"``, RIGHT
    where the solver moves LEFT), with the solver's stated reason: a demonstrator that knows the
    right move and, a fraction ``noise`` of the time, plays the same wrong one. Above
    ``noise=0.5`` the habit is its most frequent move wherever it differs from the solver's, so
    imitation learns the habit; a random move, by contrast, leaves the solver's move the most
    frequent one at any ``noise`` below 1 (docs/results.md, "A demonstrator that errs").
    ``ValueError`` when the player is made for a game without that habit.

    ``words`` (Wordle only) restricts the solver's guesses and the blunders alike.
    """
    noise = _check_noise(noise)
    _check_words(None, words)
    if not isinstance(habit, (bool, str)):
        raise ValueError(f"habit must be True, False or a habit's name, got {habit!r}")
    return lambda env_cls, seed: _SolverPlayer(env_cls, seed, noise, reasoning, words, habit)


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
