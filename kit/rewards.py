"""Reward shaping for the tool envs: small named signals, composed into TRL reward functions.

Why: GRPO learns only from differences inside a group, and the reference rewards are sparse (a
win pays 1, nothing else pays until the game ends) or invite degenerate play (TextArena pays
Wordle's partial credit on a game ended by invalid moves). This module has:

* **Signals**: ``signal(episode) -> float``, one per idea (``won``, ``guesses_left``,
  ``partial_credit``, ``failed_calls``, ``repeated_calls``, ``called_tool``, ``env_reward``).
  Each docstring says what it rewards, why, and which degenerate policy it guards against.
  A ``kit.episode.Episode`` is the env after the episode plus, when known, TRL's completion
  messages.
* **``Reward``**: a weighted sum of named signals. It *is* a TRL reward function
  (``reward(completions=..., environments=..., **columns) -> list[float | None]``), logs each
  signal through TRL's ``log_metric``, and ``split()`` gives one function per signal with the
  ``reward_weights`` to pass to ``GRPOConfig``. ``default_reward(game)`` is each game's choice.
* **Several environments**: ``reward.for_environment("wordle")`` scores only the rows whose
  ``environment`` column says so (``None`` elsewhere: TRL ignores it) under its own name, and
  ``validate_environments(dataset, factories, rewards)`` checks the names before training.
* **Flat groups**: ``flat_groups(groups)``, the share of groups whose rewards are all equal
  (no gradient), counted exactly where TRL's ``frac_reward_zero_std`` is not.
* **Outside the trainer**: ``kit.scoring`` replays a response in a fresh env and scores it
  (``score``, and the adapters for single-turn TRL, veRL and OpenRLHF); its names are
  importable from here too.
"""

from __future__ import annotations

import difflib
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit import registry
from kit.envs import ENVS
from kit.episode import Episode, reset

Message = dict[str, Any]


Signal = Callable[[Episode], float]


def _game_name(episode: Episode) -> str:
    return getattr(episode.env, "game_name", type(episode.env).__name__)


def ended_on_invalid_move(episode: Episode) -> bool:
    """Whether invalid moves ended the game (the reference's one-warning rule): games that
    pay partial credit forfeit it then, so that ending a game on purpose pays nothing."""
    env = episode.env
    calls = env.calls
    return bool(env.done and not env.won and calls and calls[-1].error is not None)


# -- signals --------------------------------------------------------------------------------------
def won(episode: Episode) -> float:
    """1.0 for a won game, else 0.0: the task itself.

    Alone it is sparse: a group in which nobody (or everybody) wins has zero spread and teaches
    nothing; the other signals exist to separate such episodes.
    """
    return 1.0 if episode.env.won else 0.0


def guesses_left(episode: Episode) -> float:
    """Wordle: on a win, the share of spare guesses, ``(max - used) / (max - 1)``; else 0.0.

    Rewards winning sooner (1.0 for a first-guess win, 0.0 on the last guess). Paid only on a
    win, so it cannot be earned by ending the game early; guards against a policy indifferent
    to speed, which the reference's flat win reward cannot tell apart from a fast one.
    Other games take a fixed number of moves to win, so they have no such bonus.
    """
    game = episode.game
    if not hasattr(game, "max_guesses"):
        raise ValueError(
            "guesses_left is a signal of games with a guess limit (Wordle's max_guesses): "
            f"{_game_name(episode)} wins in a fixed number of moves"
        )
    if not game.won:
        return 0.0
    spare = game.max_guesses - len(game.guesses)
    return spare / (game.max_guesses - 1) if game.max_guesses > 1 else 1.0


def partial_credit(episode: Episode) -> float:
    """Progress short of a win, in [0, 1], per game.

    * Wordle: the *best* ``(greens + 0.5 * yellows) / length`` of any accepted guess so far.
      The reference scores the *last* guess and only once the game is over, so a policy has to
      spend all six guesses to be paid at all, and does best to end on its best guess or to end
      the game with two invalid moves right after a good one. The best-so-far never drops, so
      there is nothing to gain by burning guesses or by stopping early.
    * Sudoku: the share of the originally empty cells filled correctly so far (the engine's
      ``progress``; the reference's reward is 0.0 until the game ends).
    * Catch: once the ball has landed, ``1 - |paddle - ball| / (columns - 1)``; 0.0 before,
      so a policy that stops moving half-way is paid nothing.

    Each game's own ``GameSpec.partial`` computes it (``kit/builtin/<game>/``).
    Forfeited (0.0) when invalid moves ended the game (Wordle, Sudoku): the reference pays
    exactly that case, which teaches a policy to end a game on purpose to cash in its progress.
    Echo has nothing to make progress on and raises ``ValueError``.
    """
    name = _game_name(episode)
    partial = registry.game(name).partial if name in registry.names() else None
    if partial is None:
        raise ValueError(
            f"no partial credit for game {name!r} (its GameSpec has no partial): use env_reward"
        )
    return float(partial(episode))


def failed_calls(episode: Episode) -> float:
    """How many tool calls failed: malformed arguments, moves the game rejects, moves after the
    end, unknown tools (the last only when the completion is known). Use a negative weight.

    Guards against spraying cheap malformed calls, and against the reference's one-warning
    rule, under which one invalid move is free. Bounded by TRL's ``max_tool_calling_iterations``.
    """
    return float(sum(call.error is not None for call in episode.calls))


def repeated_calls(episode: Episode) -> float:
    """How many calls repeat an earlier call of the episode exactly (tool and arguments). Use a
    negative weight.

    Guards against loops: re-guessing a Wordle word, re-placing a Sudoku digit, re-sending an
    echo. Not for Catch, where repeating LEFT is normal play.
    """
    seen: set[str] = set()
    repeats = 0
    for call in episode.calls:
        key = json.dumps([call.tool, call.arguments], sort_keys=True, default=str)
        repeats += key in seen
        seen.add(key)
    return float(repeats)


def called_tool(episode: Episode) -> float:
    """1.0 if the model made at least one tool call (valid or not), else 0.0: format.

    A fresh small model never calls a tool, so every rollout scores the same and GRPO has no
    gradient; this separates "tried" from "did nothing". One junk call earns it, so keep its
    weight below what real progress pays and pair it with ``failed_calls``.
    """
    return 1.0 if episode.calls else 0.0


def env_reward(episode: Episode) -> float:
    """The reference's own reward (``env.reward``): Wordle 1 / last guess's partial credit,
    Sudoku 1 / fraction filled, Catch +1 / -1, each paid only when the game ends (0.0 for an
    unfinished episode); Echo ``len(message) * 0.1`` for the last message.

    Echo's grows with message length without bound: a policy can farm it with long messages.
    """
    return float(episode.env.reward)


# -- composing them -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """One named, weighted signal of a ``Reward``."""

    name: str
    signal: Signal
    weight: float


@dataclass(frozen=True)
class Score:
    """A scored episode: the total and each signal's weighted share (they sum to the total)."""

    total: float
    signals: dict[str, float]
    env: Any = field(default=None, repr=False, compare=False)


class Reward:
    """A weighted sum of named signals; a TRL reward function for ``environment_factory`` training.

    ``game`` (optional) is the game whose envs it accepts: another game's env raises
    ``ValueError`` instead of being scored by the wrong rules. ``environment`` (set by
    ``for_environment``) makes it score only the rows whose ``environment`` column holds that
    name and return ``None`` (TRL: ignored) for the others.
    """

    def __init__(
        self,
        name: str,
        terms: Mapping[str, tuple[Signal, float]] | Sequence[Term],
        game: str | None = None,
        environment: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a reward needs a non-empty name, got {name!r}")
        if isinstance(terms, Mapping):
            terms = [Term(key, signal, weight) for key, (signal, weight) in terms.items()]
        terms = list(terms)
        if not terms:
            raise ValueError("a reward needs at least one term")
        names = [term.name for term in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"term names must be unique, got {names}")
        for term in terms:
            if not callable(term.signal):
                raise ValueError(f"term {term.name!r}: signal must be callable")
            if not isinstance(term.weight, (int, float)) or not math.isfinite(term.weight):
                raise ValueError(f"term {term.name!r}: weight must be a finite number")
        if game is not None and game not in ENVS:
            raise ValueError(f"unknown game {game!r}; choose one of {sorted(ENVS)}")
        self.__name__ = name  # TRL logs a reward function under its __name__
        self.terms: tuple[Term, ...] = tuple(terms)
        self.game = game
        self.environment = environment

    def __repr__(self) -> str:
        terms = " + ".join(f"{t.weight:g}*{t.name}" for t in self.terms)
        where = f", environment={self.environment!r}" if self.environment else ""
        return f"Reward({self.__name__!r}: {terms}{where})"

    def signals(self, episode: Episode) -> dict[str, float]:
        """Each term's weighted value for one episode."""
        if self.game is not None and _game_name(episode) != self.game:
            raise ValueError(
                f"reward {self.__name__!r} scores {self.game} envs, got "
                f"{type(episode.env).__name__}; "
                "route rewards with for_environment() when training on several environments"
            )
        return {term.name: term.weight * float(term.signal(episode)) for term in self.terms}

    def score(self, env: Any, completion: Sequence[Message] | None = None) -> Score:
        """The total and the named signals for one finished env (and its completion, if known)."""
        values = self.signals(Episode(env, completion))
        return Score(sum(values.values()), values, env)

    def __call__(
        self,
        completions: Sequence[Any] | None = None,
        environments: Sequence[Any] | None = None,
        environment: Sequence[str] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        """TRL's reward-function signature; ``environment`` is the dataset's routing column."""
        if environments is None:
            raise ValueError(
                f"reward {self.__name__!r} reads the env state: train with "
                "GRPOTrainer(environment_factory=...), or use kit.scoring.single_turn_reward"
            )
        if self.environment is not None and environment is None:
            raise ValueError(
                f"reward {self.__name__!r} is routed to environment {self.environment!r}, but the "
                "dataset has no 'environment' column"
            )
        rewards: list[float | None] = []
        sums: Counter[str] = Counter()
        scored = 0
        for i, env in enumerate(environments):
            if self.environment is not None and environment[i] != self.environment:
                rewards.append(None)
                continue
            completion = completions[i] if completions is not None else None
            if completion is not None and not isinstance(completion, list):
                completion = None  # a plain-text completion carries no tool messages
            values = self.signals(Episode(env, completion))
            sums.update(values)
            scored += 1
            rewards.append(sum(values.values()))
        if log_metric is not None and scored and len(self.terms) > 1:
            for term in self.terms:
                log_metric(f"rewards/{self.__name__}/{term.name}", sums[term.name] / scored)
        return rewards

    def for_environment(self, environment: str, name: str | None = None) -> Reward:
        """This reward, scoring only the rows of ``environment`` (the ``environment`` column's
        value, i.e. a key of the ``environment_factory`` dict), logged under its own name."""
        if not isinstance(environment, str) or not environment:
            raise ValueError(f"environment must be a non-empty name, got {environment!r}")
        if name is None:
            own = self.__name__ == environment or self.__name__.startswith(f"{environment}_")
            name = self.__name__ if own else f"{environment}_{self.__name__}"
        return Reward(name, self.terms, self.game, environment)

    def split(self) -> tuple[list[Reward], list[float]]:
        """One reward function per term (unweighted) and the weights to pass as
        ``GRPOConfig(reward_weights=...)``: same total, each signal logged by TRL on its own."""
        parts = [
            Reward(
                f"{self.__name__}_{term.name}",
                [Term(term.name, term.signal, 1.0)],
                self.game,
                self.environment,
            )
            for term in self.terms
        ]
        return parts, [float(term.weight) for term in self.terms]


def default_reward(game: str) -> Reward:
    """The reward each game's notebooks train with (its ``GameSpec.reward`` terms, in
    ``kit/builtin/<game>/``); ``kit.diagnostics`` checks that it ranks solver > noisy solver >
    random play.

    * wordle: won + 0.2 guesses_left + 0.5 partial_credit - 0.1 failed_calls
      - 0.1 repeated_calls + 0.1 called_tool
    * sudoku: won + 0.5 partial_credit - 0.05 failed_calls - 0.05 repeated_calls + 0.1 called_tool
    * catch: won + 0.5 partial_credit - 0.1 failed_calls + 0.1 called_tool
    * echo: env_reward - 0.1 repeated_calls + 0.1 called_tool

    A win always outweighs any partial credit; the format term is worth less than any progress.
    """
    return Reward(game, registry.game(game).reward, game=game)


def flat_groups(groups: Sequence[Sequence[float]], tolerance: float = 1e-6) -> float:
    """The share of ``groups`` (each the rewards of one prompt's generations) whose rewards are
    all equal within ``tolerance``, NaN ignored: the groups whose GRPO advantages are all zero.

    TRL logs the same idea as ``frac_reward_zero_std`` but tests the group's float32 standard
    deviation with ``torch.isclose(std, 0)`` (tolerance 1e-8), so it misses most flat groups
    whose reward is not exact in binary: eight rewards of 0.475 have a float32 std of 3.2e-8.
    Counted here in float64 on the rewards themselves. NaN when there is no group.
    """
    if not groups:
        return math.nan
    flat = 0
    for group in groups:
        finite = [float(r) for r in group if not math.isnan(r)]
        flat += bool(finite) and max(finite) - min(finite) <= tolerance
    return flat / len(groups)


def routed_rewards(factories: Mapping[str, Any]) -> list[Reward]:
    """Each env's default reward, routed to its name in an ``environment_factory`` dict."""
    rewards = []
    for name, factory in factories.items():
        game = getattr(factory, "game_name", None)
        if game is None:
            raise ValueError(f"environment {name!r}: {factory!r} is not a kit.envs class")
        rewards.append(default_reward(game).for_environment(name))
    return rewards


# -- several environments: check before training ---------------------------------------------------
def validate_environments(
    dataset: Any, factories: Mapping[str, Callable[[], Any]], rewards: Sequence[Any] = ()
) -> dict[str, int]:
    """Check a multi-environment dataset against its ``environment_factory`` dict and rewards.

    TRL only finds an unknown ``environment`` name when a batch holding it comes up, possibly
    hours in. This raises ``ValueError`` at once if: the ``environment`` column is missing; a
    name in it is not a key of ``factories`` (with the closest key); the first row of an env
    does not reset it (a task column missing or wrong); a prompt does not end with whitespace
    although the env's observation is glued to it; a routed reward names an env not in
    ``factories``; or, when ``rewards`` are given, some env's rows get no reward at all (TRL
    would give them advantage 0). Returns the number of rows per environment.
    """
    if not isinstance(factories, Mapping) or not factories:
        raise ValueError("factories must be a non-empty dict {environment name: factory}")
    columns = list(
        getattr(dataset, "column_names", None) or (dataset[0].keys() if len(dataset) else [])
    )
    if "environment" not in columns:
        raise ValueError(
            f"the dataset has no 'environment' column (columns: {columns}); TRL routes each row "
            "of a dict environment_factory by it"
        )
    names = list(dataset["environment"])
    counts = Counter(names)
    for name in counts:
        if name not in factories:
            row = names.index(name)
            close = difflib.get_close_matches(str(name), [str(k) for k in factories], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"row {row} has environment={name!r}, which is not in environment_factory "
                f"(choose one of {sorted(factories)}){hint}"
            )
    for name in counts:
        index = names.index(name)
        row = dataset[index]
        try:
            observation = reset(factories[name](), row)
        except Exception as error:
            raise ValueError(
                f"row {index} (environment {name!r}): reset failed: {error}"
            ) from error
        prompt = row.get("prompt")
        if isinstance(observation, str) and isinstance(prompt, list) and prompt:
            content = prompt[-1].get("content")
            if (
                isinstance(content, str)
                and content
                and observation
                and not (content[-1].isspace() or observation[0].isspace())
            ):
                raise ValueError(
                    f"row {index} (environment {name!r}): TRL appends the observation to the "
                    f"prompt with no separator, giving ...{content[-20:] + observation[:20]!r}...; "
                    "end the prompt with a separator such as '\\n\\n'"
                )
    routed = [getattr(reward, "environment", None) for reward in rewards]
    for environment in routed:
        if environment is not None and environment not in factories:
            raise ValueError(
                f"a reward is routed to environment {environment!r}, which is not in "
                f"environment_factory (choose one of {sorted(factories)})"
            )
    if rewards and None not in routed:
        missing = sorted(set(counts) - set(routed))
        if missing:
            raise ValueError(f"rows of {missing} get no reward from any reward function")
    return dict(counts)
