"""The game registry: one ``GameSpec`` per game, which every part of the kit reads by name.

Why: a game's knowledge (its engine, tool env and solver, its prompt, tasks and splits, turn
and token limits, reward terms, closing text, what its eval split holds out) used to be spread
over a dozen places that each branched on the game's name, so a new game meant editing the kit
everywhere. Now each game is one module that builds a ``GameSpec`` and calls ``register``; the
datasets, SFT sets, diagnostics, evaluation, rollout, visualisers and servers look it up here.

The four built-in games live in ``kit/builtin/<game>/`` and are imported on first use, one at
a time, so ``import kit.registry`` stays cheap and one broken game cannot break the others. A
game of your own is registered from your own code, without editing the kit::

    from kit.registry import GameSpec, register

    register(GameSpec(name="guess_number", env=GuessEnv, engine=GuessNumber, ...))
    kit.tasks.task_dataset("guess_number")   # and every other part of the kit

``examples/guess_number.py`` is a whole game in one file. The kit's older name-keyed tables
(``kit.envs.ENVS``, ``kit.tasks.TURN_LIMITS``, ``kit.evaluate.BUDGETS``, ...) are ``View``s of
the registry, so they also list games registered after they were imported.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]
# A move as the tool call that plays it: (tool name, arguments),
# e.g. ("move", {"direction": "LEFT"}).
Move = tuple[str, dict[str, Any]]

# The built-in games, in the kit's usual order, and the module that registers each.
BUILTIN = {name: f"kit.builtin.{name}" for name in ("wordle", "catch", "sudoku", "echo")}


@dataclass(frozen=True)
class MoveContext:
    """What a random player knows when it picks a move (``GameSpec.random_move``)."""

    rng: random.Random  # the player's own, seeded per episode
    messages: list[Message]  # the conversation so far
    options: Mapping[str, Any]  # the env's variant options (``GameEnv.options``)
    words: Collection[str] | None  # the word pool the player keeps to (``GameSpec.words``)


def _no_reason(messages: list[Message], call: Move) -> str:
    return ""


def _no_notes(rows: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    return "", ""


@dataclass(frozen=True)
class GameSpec:
    """Everything the kit knows about one game. Required: what any game must say; the rest
    has defaults that suit a game whose tasks are a fixed list per split.

    Tasks: ``tasks(split)`` is the split's fixed list of task values (any JSON-able value, e.g.
    a secret word), or None where the split's tasks are drawn afresh by ``draw(rng,
    difficulty)``; ``task(value)`` turns a value into the env's reset columns and the ground
    truth as text. ``kit.tasks.TaskProvider`` builds every task set from these three.
    """

    name: str
    env: type  # the tool env class TRL's environment_factory takes (a kit.envs.GameEnv)
    engine: Callable[..., Any]  # builds the engine, with the variant's options (kit.games.make)
    solver: Callable[..., Any]  # builds the solver (kit.solvers.solver): ``act(text) -> action``
    prompt: str  # the user prompt; TRL glues the reset observation to it, so end in a separator
    turn_limit: int  # TRL's max_tool_calling_iterations: the game's bound plus room for errors
    budget: int  # TRL's max_completion_length that holds a solver-length game (tiny model)
    reward: Mapping[str, tuple[Callable[..., float], float]]  # kit.rewards.default_reward's terms
    tasks: Callable[[str], Sequence[Any] | None]
    task: Callable[[Any], tuple[dict[str, Any], str]]
    to_tool_call: Callable[[str], Move]  # the tool call that plays a solver's action
    random_move: Callable[[MoveContext], Move]  # a well-formed move, drawn at random
    closing: Callable[[Any], str]  # the SFT conversations' last message, from the finished env
    held_out: str  # one line: what the eval split holds out, and how training data differs
    draw: Callable[[random.Random, str | None], Iterator[Any]] | None = None
    sizes: Mapping[str, int] = field(default_factory=dict)  # default sizes of drawn splits
    difficulty: str | None = None  # the default difficulty of drawn tasks; None: no such option
    ends: bool = True  # False: the game never ends (Echo): an SFT game stops at the turn limit
    reason: Callable[[list[Message], Move], str] = _no_reason  # the solver's stated reason
    # A demonstrator's habits, by name: the wrong move it plays instead of the solver's ``Move``
    # when it errs (Catch: "both", the other direction; "left", RIGHT where the solver moves LEFT);
    # ``kit.solvers.policies.noisy_policy(habit=NAME)``, ``habit=True`` the first. Empty: the game
    # has no habit, and a noisy solver's errors are random moves only.
    habits: Mapping[str, Callable[[Move], Move]] = field(default_factory=dict)
    partial: Callable[[Any], float] | None = None  # kit.rewards.partial_credit of an Episode
    leaks: Callable[[Mapping[str, Any]], Iterable[str]] | None = None  # None: the default check
    # True: an eval task's ground truth (``task(value)[1]``, e.g. a secret code) must not appear
    # in a training row at all, as a whole word in any string; the default check then looks for it
    # too. Off by default: for some games a truth is an ordinary word of play (Catch's columns).
    answers_leak: bool = False
    words: Callable[[str], Collection[str]] | None = None  # a split's word pool (Wordle)
    sft: Mapping[str, Any] = field(
        default_factory=lambda: {"num_games": 100, "seed": 0, "noise": 0.0}
    )  # how the game's SFT set is made: kit.sft.sft_examples's options
    # The SFT set's card, from its rows: a note on its tasks, and lines of its own.
    card_notes: Callable[[Sequence[Mapping[str, Any]]], tuple[str, str]] = _no_notes
    splits: Callable[[], dict[str, Any]] | None = None  # what data/splits/<name>.json holds
    # its paragraph of data/splits/README.md, from what ``splits()`` returned (None: no splits)
    split_card: Callable[[dict[str, Any] | None], str] | None = None
    server: str | None = None  # "module:Class" of its OpenEnv server (kit.serve, optional)
    # A reset column whose values split a result usefully (Catch's ball column: the side the first
    # move must take), for kit.evaluate.by_task; kit.demo prints each model's win rate per value.
    breakdown: str | None = None
    # The longest move text (a tool's action, a server's ``message``) the game takes, in
    # characters. Every reply and history is bounded through it, so a longer move is refused
    # (``kit.games.check_action``), identically in-process and on a server, and never played.
    max_action_chars: int = 1024

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a game's name is an identifier such as 'wordle', not {self.name!r}")
        if getattr(self.env, "game_name", None) != self.name:
            raise ValueError(
                f"{self.name}: the env class {self.env!r} must have game_name = {self.name!r}"
            )
        for label in ("turn_limit", "budget", "max_action_chars"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{self.name}: {label} must be an int >= 1, got {value!r}")
        if not self.reward:
            raise ValueError(f"{self.name}: reward needs at least one term")


_GAMES: dict[str, GameSpec] = {}


def register(spec: GameSpec, replace: bool = False) -> GameSpec:
    """Add ``spec`` to the registry under ``spec.name`` and return it; every part of the kit
    then plays the game by that name. A name already taken by another spec raises
    ``ValueError`` unless ``replace`` (registering the same spec again is a no-op)."""
    if not isinstance(spec, GameSpec):
        raise TypeError(f"register takes a GameSpec, not {type(spec).__name__}")
    old = _GAMES.get(spec.name)
    if old is not None and old is not spec and not replace:
        raise ValueError(f"a game named {spec.name!r} is already registered; pass replace=True")
    _GAMES[spec.name] = spec
    return spec


def names() -> list[str]:
    """The names of every game, built-in first, without importing any game module."""
    return list(BUILTIN) + [name for name in _GAMES if name not in BUILTIN]


def game(name: str) -> GameSpec:
    """The spec of game ``name``; ``ValueError`` for a name nobody registered."""
    spec = _GAMES.get(name) if isinstance(name, str) else None
    if spec is None and name in BUILTIN:
        importlib.import_module(BUILTIN[name])  # the module registers its game
        spec = _GAMES.get(name)
    if spec is None:
        raise ValueError(f"unknown game {name!r}; choose one of {sorted(names())}")
    return spec


def load_game(reference: str) -> str:
    """The registered name of the game ``reference`` names, importing it first if need be.

    ``reference``: a registered name (``"catch"``), a module that registers one game when
    imported (``"examples.guess_number"``), or ``"module:Name"``, where ``Name`` is the module's
    ``GameSpec`` or tool env class (``"examples.guess_number:GuessEnv"``). This is how a command
    line (``python -m kit.demo --game ...``) takes a user's game: its one file, on the path.
    ``ValueError`` says what the reference named instead."""
    if not isinstance(reference, str) or not reference:
        raise ValueError(f"a game is a name or a module, not {reference!r}")
    if reference in names():
        return reference
    module_name, _, attribute = reference.partition(":")
    before = [id(spec) for spec in _GAMES.values()]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise ValueError(
                f"unknown game {reference!r}: not one of {sorted(names())}, and no module "
                f"{module_name!r} to import (a user's game: its module on the path, "
                "e.g. examples.guess_number, or module:Name)"
            ) from None
        raise
    if attribute:
        target = getattr(module, attribute, None)
        name = target.name if isinstance(target, GameSpec) else getattr(target, "game_name", None)
        if name not in names():
            raise ValueError(
                f"{reference!r}: {module_name}.{attribute} is neither a registered GameSpec nor "
                "a tool env class of a registered game (its game_name)"
            )
        return game(name).name
    found = [
        spec
        for spec in _GAMES.values()
        if id(spec) not in before or spec.env.__module__ == module_name
    ]
    if not found:
        raise ValueError(
            f"unknown game {reference!r}: not one of {sorted(names())}, and importing module "
            f"{module_name} registered no game"
        )
    if len(found) > 1:
        raise ValueError(
            f"{reference!r}: importing the module registered {sorted(s.name for s in found)}, "
            f"not one game; name one as {module_name}:Name"
        )
    return found[0].name


class View(dict):
    """One field of every registered game, by name, read from the registry at each access:
    a game registered later is in it too. Read-only.

    A ``dict`` subclass (with no contents of its own) because TRL tells a multi-environment
    ``environment_factory`` by ``isinstance(..., dict)``, and ``kit.envs.ENVS`` is one.
    """

    def __init__(self, field_name: str) -> None:
        super().__init__()
        self._field = field_name

    def __getitem__(self, name: str) -> Any:
        if name not in names():
            raise KeyError(name)
        return getattr(game(name), self._field)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())

    def __contains__(self, name: object) -> bool:
        return name in names()

    def __repr__(self) -> str:
        return f"View({self._field!r}: {sorted(names())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # a mutable dict's, as dict has

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if name in self else default

    def keys(self) -> list[str]:  # type: ignore[override]
        return names()

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[name] for name in names()]

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(name, self[name]) for name in names()]

    def copy(self) -> dict[str, Any]:
        return dict(self.items())

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a registry view is read-only: kit.registry.register adds a game")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _read_only
