"""Test a reward before training: does it rank known players correctly, and does it vary?

Why: GRPO learns nothing from a group whose rewards are all equal (TRL logs the share of such
groups as ``frac_reward_zero_std``, missing some: ``kit.rewards.flat_groups``), and a reward
that ranks a random player above a good one trains the wrong thing. Both can be seen in CPU
seconds, before any GPU hour: play ``groups`` groups of ``num_generations`` episodes (one task
per group, as GRPO's generations of one prompt) with players of known strength, score them with
the reward functions exactly as TRL calls them (``environments=`` the ``kit.envs`` instances,
``completions=`` the messages, every dataset column), and report per reward function and for
the weighted total:

* mean and std of the reward per player;
* ``flat_groups``: the share of groups whose rewards are all equal (no gradient), counted
  exactly (``kit.rewards.flat_groups``);
* whether the means follow the expected order (solver > noisy solver > random by default).

    from kit.diagnostics import diagnose
    report = diagnose("wordle")          # default reward, solver / noisy(0.3) / random
    print(report)                        # the table
    report.plot()                        # the same as bars with std and zero-std shares

A player is any ``kit.solvers.policies`` factory, ``kit.rollout.model_policy(model, tokenizer)``
included, or a ``kit.endpoint.Endpoint``: a model behind a server, sampled with its defaults,
whose episodes the server could not finish are counted (``failed_episodes``) and left out.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit import registry
from kit.endpoint import Endpoint, EpisodeFailure, play_many
from kit.envs import ENVS
from kit.episode import Episode, run_episode
from kit.rewards import default_reward, flat_groups
from kit.solvers.policies import PolicyFactory, noisy_policy, random_policy, solver_policy
from kit.tasks import TURN_LIMITS, TaskProvider, check_count

TOTAL = "total"


def default_policies(noise: float = 0.3) -> dict[str, PolicyFactory]:
    """The solver, the solver blundering with probability ``noise``, and random legal play,
    in the order a good reward ranks them."""
    return {"solver": solver_policy(), "noisy": noisy_policy(noise), "random": random_policy()}


def _name(function: Callable[..., Any]) -> str:
    """The name TRL logs a reward function under (its ``get_callable_name``)."""
    while isinstance(function, functools.partial):
        function = function.func
    return getattr(function, "__name__", type(function).__name__)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _std(values: Sequence[float]) -> float:
    """Std with Bessel's correction, ignoring NaN, as TRL's ``nanstd``; NaN below two values."""
    finite = [v for v in values if not math.isnan(v)]
    if len(finite) < 2:
        return math.nan
    mean = sum(finite) / len(finite)
    return math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))


@dataclass
class Diagnosis:
    """The outcome of ``diagnose``: one row per (reward, policy), the order check, player stats."""

    game: str
    groups: int
    num_generations: int
    seed: int
    rewards: list[str]  # reward function names, then "total" when there are several
    policies: list[str]  # in the expected order, best first
    rows: list[dict[str, Any]]  # reward, policy, mean, std, flat_groups
    ordered: dict[str, bool]  # reward -> the means follow the policies' order strictly
    players: dict[str, dict[str, float]] = field(default_factory=dict)  # win_rate, calls, failed

    def row(self, reward: str, policy: str) -> dict[str, Any]:
        for row in self.rows:
            if (row["reward"], row["policy"]) == (reward, policy):
                return row
        raise ValueError(f"no row for reward {reward!r} and policy {policy!r}")

    def table(self) -> str:
        """The report as fixed-width text."""
        width = max(len(name) for name in self.rewards + ["reward"])
        lines = [
            f"{self.game}: {self.groups} groups x {self.num_generations} episodes per player "
            f"(seed {self.seed})",
            f"{'reward':<{width}}  {'policy':<8} {'mean':>8} {'std':>8}  flat_groups",
        ]
        for row in self.rows:
            lines.append(
                f"{row['reward']:<{width}}  {row['policy']:<8} "
                f"{row['mean']:>8.3f} {row['std']:>8.3f}"
                f"  {row['flat_groups']:.2f}"
            )
        order = " > ".join(self.policies)
        verdicts = ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in self.ordered.items())
        lines.append(f"ordered {order}: {verdicts}")
        lines.append(f"{'policy':<8} {'win_rate':>8} {'calls':>7} {'failed':>7}")
        for policy, stats in self.players.items():
            lost = stats.get("failed_episodes")
            lines.append(
                f"{policy:<8} {stats['win_rate']:>8.2f} "
                f"{stats['calls']:>7.1f} {stats['failed']:>7.2f}"
                + (f"  ({lost:.0f} episodes the server failed to finish, left out)" if lost else "")
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_markdown_(self) -> str:
        header = "| reward | policy | mean | std | flat_groups |\n|---|---|---:|---:|---:|\n"
        body = "".join(
            f"| {r['reward']} | {r['policy']} | {r['mean']:.3f} | {r['std']:.3f} | "
            f"{r['flat_groups']:.2f} |\n"
            for r in self.rows
        )
        order = " > ".join(self.policies)
        verdicts = ", ".join(
            f"{name}: {'yes' if ok else '**no**'}" for name, ok in self.ordered.items()
        )
        return (
            f"**{self.game}** — {self.groups} groups x {self.num_generations} episodes per "
            "player\n\n"
            f"{header}{body}\nOrdered {order}: {verdicts}\n"
        )

    def plot(self, axes: Any = None) -> Any:
        """Bars of the mean reward per player (std as error bars), one panel per reward, each bar
        labelled with its ``flat_groups`` share ("zero-std"); returns the matplotlib Figure."""
        import matplotlib.pyplot as plt

        if axes is None:
            figure, axes = plt.subplots(
                1, len(self.rewards), figsize=(3.2 * len(self.rewards), 3.0), squeeze=False
            )
            axes = axes[0]
        else:
            axes = list(axes) if isinstance(axes, Sequence) else [axes]
            figure = axes[0].figure
        if len(axes) != len(self.rewards):
            raise ValueError(f"need {len(self.rewards)} axes, one per reward, got {len(axes)}")
        for ax, reward in zip(axes, self.rewards, strict=True):
            rows = [self.row(reward, policy) for policy in self.policies]
            means = [row["mean"] for row in rows]
            stds = [0.0 if math.isnan(row["std"]) else row["std"] for row in rows]
            bars = ax.bar(self.policies, means, yerr=stds, capsize=4, color="#4c72b0")
            for bar, row in zip(bars, rows, strict=True):
                ax.annotate(
                    f"zero-std {row['flat_groups']:.0%}",
                    (bar.get_x() + bar.get_width() / 2, 0),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                    color="white",
                )
            verdict = "ordered" if self.ordered[reward] else "NOT ordered"
            ax.set_title(f"{reward} ({verdict})", fontsize=9)
            ax.axhline(0, color="black", linewidth=0.5)
        figure.suptitle(
            f"{self.game}: {self.groups} groups x {self.num_generations} per player", fontsize=10
        )
        figure.tight_layout()
        return figure


def _reward_functions(rewards: Any, game: str) -> list[tuple[str, Callable[..., Any]]]:
    if rewards is None:
        rewards = [default_reward(game)]
    if isinstance(rewards, Mapping):
        named = [(str(name), function) for name, function in rewards.items()]
    elif callable(rewards):
        named = [(_name(rewards), rewards)]
    else:
        named = [(_name(function), function) for function in rewards]
    if not named:
        raise ValueError("give at least one reward function")
    for name, function in named:
        if not callable(function):
            raise ValueError(f"reward {name!r} is not callable")
    names = [name for name, _ in named]
    if len(set(names)) != len(names) or TOTAL in names:
        raise ValueError(f"reward names must be unique and not {TOTAL!r}: {names}")
    return named


def _task_rows(tasks: Any, game: str, groups: int, seed: int) -> list[dict[str, Any]]:
    if tasks is None:
        return [task.row() for task in TaskProvider(game, "train", groups, seed)]
    rows = [dict(row) for row in tasks]
    if not rows:
        raise ValueError("tasks is empty")
    return [rows[i % len(rows)] for i in range(groups)]


def diagnose(
    env: str | type = "wordle",
    rewards: Any = None,
    policies: Mapping[str, PolicyFactory] | None = None,
    groups: int = 8,
    num_generations: int = 4,
    seed: int = 0,
    tasks: Any = None,
    reward_weights: Sequence[float] | None = None,
    max_tool_calling_iterations: int | None = None,
) -> Diagnosis:
    """Play ``groups`` x ``num_generations`` episodes per player; report how the rewards score them.

    ``env``: a game name (a key of ``kit.envs.ENVS``) or a ``kit.envs`` class (a variant).
    ``rewards``: a TRL reward function, a list of them or a ``{name: function}`` dict (default:
    ``kit.rewards.default_reward(game)``); they are called once per group with TRL's keyword
    arguments: ``prompts``, ``completions``, ``environments``, every dataset column, and no-op
    ``log_extra`` / ``log_metric`` (there are no token ids: ``completion_ids`` is not passed).
    ``policies``: ``{name: factory}`` in the order a good reward ranks them (default: solver,
    noisy solver at 0.3, random). ``tasks``: dataset rows (default: ``kit.tasks`` train tasks);
    group ``g`` plays row ``g``. ``reward_weights``: as ``GRPOConfig``'s, for the total.
    ``max_tool_calling_iterations``: tool-calling rounds per episode (default:
    ``kit.tasks.TURN_LIMITS``).
    Episodes end when the game does; the same seed gives the same report.
    """
    env_cls = ENVS.get(env) if isinstance(env, str) else env
    if env_cls is None or not hasattr(env_cls, "game_name"):
        raise ValueError(f"env must be one of {sorted(ENVS)} or a kit.envs class, got {env!r}")
    game = env_cls.game_name
    check_count("groups", groups)
    check_count("num_generations", num_generations)
    functions = _reward_functions(rewards, game)
    weights = (
        [1.0] * len(functions) if reward_weights is None else [float(w) for w in reward_weights]
    )
    if len(weights) != len(functions):
        raise ValueError(f"{len(weights)} reward_weights for {len(functions)} reward functions")
    policies = dict(policies) if policies is not None else default_policies()
    if not policies:
        raise ValueError("give at least one policy")
    rows = _task_rows(tasks, game, groups, seed)
    limit = max_tool_calling_iterations or TURN_LIMITS[game]
    names = [name for name, _ in functions]
    reported = names + ([TOTAL] if len(functions) > 1 else [])

    table: list[dict[str, Any]] = []
    players: dict[str, dict[str, float]] = {}
    means: dict[str, dict[str, float]] = {name: {} for name in reported}
    for p, (policy_name, factory) in enumerate(policies.items()):
        scores: dict[str, list[list[float]]] = {name: [] for name in reported}
        wins = calls = failed = 0
        played, lost = _groups(factory, env_cls, rows, num_generations, seed, p, limit)
        for row, episodes in zip(rows, played, strict=True):
            if not episodes:
                continue  # every episode of the group failed on the server: in lost
            for episode in episodes:
                wins += episode.env.won
                calls += len(episode.env.calls)
                failed += episode.env.invalid_calls
            per_function = [_call(function, episodes, row) for _, function in functions]
            for name, values in zip(names, per_function, strict=True):
                scores[name].append(values)
            if TOTAL in scores:
                scores[TOTAL].append(_total(per_function, weights))
        episodes_played = max(1, len(rows) * num_generations - lost)
        players[policy_name] = {
            "win_rate": wins / episodes_played,
            "calls": calls / episodes_played,
            "failed": failed / episodes_played,
        }
        if lost:
            players[policy_name]["failed_episodes"] = lost
        for name in reported:
            flat = [value for group in scores[name] for value in group]
            means[name][policy_name] = _mean(flat)
            table.append(
                {
                    "reward": name,
                    "policy": policy_name,
                    "mean": _mean(flat),
                    "std": _std(flat),
                    "flat_groups": flat_groups(scores[name]),
                    "episodes": episodes_played,
                }
            )
    table.sort(key=lambda r: (reported.index(r["reward"]), list(policies).index(r["policy"])))
    order = list(policies)
    ordered = {
        name: all(means[name][a] > means[name][b] for a, b in zip(order, order[1:], strict=False))
        for name in reported
    }
    return Diagnosis(
        game, len(rows), num_generations, seed, reported, order, table, ordered, players
    )


def _groups(
    player: PolicyFactory | Endpoint,
    env_cls: type,
    rows: Sequence[dict[str, Any]],
    num_generations: int,
    seed: int,
    index: int,
    limit: int,
) -> tuple[list[list[Episode]], int]:
    """Each row's group of episodes played by ``player`` (the ``index``-th), and how many
    episodes an endpoint failed to finish (left out of their groups)."""
    if isinstance(player, Endpoint):
        budget = registry.View("budget")[env_cls.game_name]
        played = play_many(
            player,
            env_cls,
            rows,
            num_generations,
            seed * 1_000 + index,
            max_tool_calling_iterations=limit,
            max_completion_length=budget,
            sampling={},
        )
        groups: list[list[Episode]] = [[] for _ in rows]
        for k, episode in enumerate(played):
            if not isinstance(episode, EpisodeFailure):
                groups[k // num_generations].append(episode)
        return groups, sum(isinstance(episode, EpisodeFailure) for episode in played)
    groups = []
    for g, row in enumerate(rows):
        episodes = []
        for j in range(num_generations):
            episode_seed = ((seed * 1_000 + index) * 1_000 + g) * 1_000 + j
            episodes.append(run_episode(env_cls(), row, player(env_cls, episode_seed), limit))
        groups.append(episodes)
    return groups, 0


def _call(
    function: Callable[..., Any], episodes: Sequence[Any], row: Mapping[str, Any]
) -> list[float]:
    """One TRL-style call of a reward function on a group; None becomes NaN, as in TRL."""
    columns = {key: [value] * len(episodes) for key, value in row.items() if key != "prompt"}
    values = function(
        prompts=[episode.prompt for episode in episodes],
        completions=[episode.completion for episode in episodes],
        environments=[episode.env for episode in episodes],
        trainer_state=None,
        log_extra=lambda column, values: None,
        log_metric=lambda name, value: None,
        **columns,
    )
    if len(values) != len(episodes):
        raise ValueError(
            f"reward {_name(function)!r} returned {len(values)} rewards for "
            f"{len(episodes)} episodes"
        )
    return [math.nan if value is None else float(value) for value in values]


def _total(per_function: Sequence[Sequence[float]], weights: Sequence[float]) -> list[float]:
    """TRL's total: the weighted nansum, NaN where every function returned None."""
    totals = []
    for values in zip(*per_function, strict=True):
        if all(math.isnan(v) for v in values):
            totals.append(math.nan)
        else:
            totals.append(
                sum(w * v for w, v in zip(weights, values, strict=True) if not math.isnan(v))
            )
    return totals


def diagnose_all(groups: int = 8, num_generations: int = 4, seed: int = 0) -> dict[str, Diagnosis]:
    """``diagnose`` every game with its default reward and the default players."""
    return {
        game: diagnose(game, groups=groups, num_generations=num_generations, seed=seed)
        for game in ENVS
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kit.diagnostics [game ...]``: print the report of each game's default reward."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.diagnostics", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "games", nargs="*", default=list(ENVS), help="games to diagnose (default: all)"
    )
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)
    for name in arguments.games:
        report = diagnose(
            name,
            groups=arguments.groups,
            num_generations=arguments.num_generations,
            seed=arguments.seed,
        )
        print(report, end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
