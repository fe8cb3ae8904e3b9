"""Evaluate a model, or a scripted player, on a game's held-out tasks, with confidence intervals.

Why: "did the warm-up work?" and "did GRPO help?" are questions about a handful of episodes on
a CPU, where one lucky episode moves a rate by 20 points. So every figure here comes with a 95%
interval and the seed that produced it, and the episodes come from the same machinery training
uses, so that an evaluation and a training batch are comparable token for token:

* a **model** (anything with ``generate``, or a ``vllm.LLM``) plays through :func:`kit.rollout.rollout`,
  TRL's tool loop outside the trainer: same prompt, same template, same stopping rules;
* a **policy factory** from :mod:`kit.solvers.policies` (the solver, the noisy solver, random
  play) plays through ``run_episode``, the loop the SFT data and ``kit.diagnostics`` use.

Per game it reports: win rate; the share of games played to their end (a small model often stops
half-way, with a malformed call or a plain answer); mean reward (``kit.rewards.default_reward(game)``,
the training reward, unless told otherwise); the valid-tool-call rate (executed calls that did not raise, over
all executed calls: an unknown tool name or a move the game rejects is invalid; a malformed call
is not a call at all, TRL parses it as plain text, which is why the share of episodes with at
least one call is reported too); mean tool calls, assistant turns and model tokens per episode;
invalid calls per episode (the executed calls that raised); and moves per win (tool calls per
won episode: how directly a player wins, undefined until it wins once). :data:`PUBLISHED` names
the four figures a results table of a tool-calling game reports. Rates get Wilson intervals;
means get a percentile bootstrap that resamples *tasks* (the ``num_generations`` episodes of one
task are not independent). Wilson treats trials as independent, so the valid-call interval (calls
of one episode are correlated) is optimistic. The statistics themselves are :mod:`kit.stats`.

"Did training help?" is a paired question: :func:`compare` plays the *same* tasks before and
after and bootstraps the difference over tasks, and over the episodes within each task, so a
gain on a few lucky tasks does not pass for one.

    from kit.evaluate import evaluate
    from kit.solvers.policies import solver_policy

    result = evaluate(model, "catch", tokenizer)             # greedy, the 10 eval tasks
    result = evaluate(model, "wordle", tokenizer, num_generations=4)  # 4 sampled per task
    baseline = evaluate(solver_policy(), "catch", name="solver")
    print(table([baseline, result]))                         # one row per (player, game)
    table([baseline, result], PUBLISHED)                     # a paper's four columns
    compare(before, after, "catch", "win_rate")              # paired: difference, interval, p
    kit.viz.inspector(result.trajectories, tokenizer)        # every episode, token by token
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit import registry
from kit.endpoint import Endpoint, EpisodeFailure, play_many
from kit.envs import ENVS
from kit.episode import Episode, Message, replay, reset, run_episode
from kit.masks import build
from kit.rewards import Reward, default_reward
from kit.rollout import SAMPLING, sampling_settings
from kit.solvers.policies import PolicyFactory
from kit.stats import BOOTSTRAP_RESAMPLES, Estimate, mean, paired_difference, rate, task_mean
from kit.tasks import TURN_LIMITS, TaskProvider, check_count, check_seed, prompt
from kit.trajectory import Trajectory, tool_calls

# Completion budgets (TRL's max_completion_length) that hold a whole solver-length game with the
# tiny model's 512-token vocabulary, by game (each GameSpec.budget); a real tokenizer needs fewer
# tokens for the same text.
BUDGETS = registry.View("budget")
METRICS = (
    "win_rate",
    "finished",
    "mean_reward",
    "valid_call_rate",
    "with_call",
    "calls",
    "turns",
    "tokens",
    "moves_per_win",
    "invalid_calls",
)
LABELS = {
    "win_rate": "win rate",
    "finished": "games finished",
    "mean_reward": "mean reward",
    "valid_call_rate": "valid-call rate",
    "with_call": "episodes with a call",
    "calls": "calls / episode",
    "turns": "turns / episode",
    "tokens": "model tokens / episode",
    "moves_per_win": "moves / win",
    "invalid_calls": "invalid calls / episode",
}
# The columns a paper's results table has for a tool-calling game: how often the player wins, how
# directly it wins, how often it calls a tool wrongly, and the valid share of its calls.
PUBLISHED = ("win_rate", "moves_per_win", "invalid_calls", "valid_call_rate")


# -- results --------------------------------------------------------------------------------------
@dataclass
class GameResult:
    """One game's figures and the episodes behind them (``trajectories``, task by task)."""

    game: str
    tasks: int
    episodes: int
    win_rate: Estimate
    finished: Estimate  # share of episodes whose game reached its end (won or lost)
    mean_reward: Estimate
    valid_call_rate: Estimate  # over executed calls; nan when the player made none
    with_call: Estimate  # share of episodes with at least one parsed tool call
    calls: Estimate  # parsed tool calls per episode
    turns: Estimate  # assistant turns per episode
    tokens: Estimate  # model tokens per episode; nan when the episodes have no token ids
    moves_per_win: Estimate  # parsed tool calls per won episode; nan when none was won
    invalid_calls: Estimate  # executed calls that raised, per episode
    valid_calls: int
    executed_calls: int
    trajectories: list[Trajectory] = field(default_factory=list, repr=False)
    # Episodes an endpoint could not finish (kit.endpoint): in no figure, never a lost game.
    failures: list[EpisodeFailure] = field(default_factory=list, repr=False)
    # Per task (in play order), each episode's value of every per-episode metric: what
    # :func:`compare` pairs. ``task_ids`` name the tasks (their reset columns as JSON).
    values: dict[str, list[list[float]]] = field(default_factory=dict, repr=False)
    task_ids: list[str] = field(default_factory=list, repr=False)


@dataclass
class Evaluation:
    """What :func:`evaluate` returns: one :class:`GameResult` per game, and how it was played."""

    name: str
    split: str
    seed: int
    num_generations: int
    decoding: str  # "greedy", "sampled x4, T=1" or, for a policy, "policy x1"
    games: dict[str, GameResult]
    # How a model's tokens were chosen, as GRPOConfig names the settings: {"greedy": False,
    # "temperature": ..., "top_p": ..., "top_k": ..., "min_p": ..., "repetition_penalty": ...};
    # greedy: {"greedy": True, "repetition_penalty": ...} (the one setting greedy decoding
    # applies); a policy: {} (it samples no tokens).
    sampling: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, game: str) -> GameResult:
        if game not in self.games:
            raise ValueError(f"no result for game {game!r}; this evaluation has {list(self.games)}")
        return self.games[game]

    @property
    def trajectories(self) -> list[Trajectory]:
        """Every episode of every game (``trajectory.env`` says which), for ``kit.viz``."""
        return [t for result in self.games.values() for t in result.trajectories]

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per game: how it was played (the sampling settings by their
        ``GRPOConfig`` names, None where they did not apply: a policy, or greedy decoding's
        warpers), then each metric's value with its ``_low`` / ``_high`` bounds."""
        rows = []
        for result in self.games.values():
            row: dict[str, Any] = {
                "player": self.name,
                "game": result.game,
                "split": self.split,
                "tasks": result.tasks,
                "episodes": result.episodes,
                "decoding": self.decoding,
                **{setting: self.sampling.get(setting) for setting in SAMPLING},
                "seed": self.seed,
            }
            for metric in METRICS:
                estimate = getattr(result, metric)
                row |= {
                    metric: estimate.value,
                    f"{metric}_low": estimate.low,
                    f"{metric}_high": estimate.high,
                }
            row |= {
                "valid_calls": result.valid_calls,
                "executed_calls": result.executed_calls,
                "failed_episodes": len(result.failures),
            }
            rows.append(row)
        return rows

    def table(self) -> Any:
        """This evaluation as :func:`table` shows it."""
        return table([self])

    def __str__(self) -> str:
        return text_table([self])


def table(evaluations: Sequence[Evaluation], metrics: Sequence[str] = METRICS) -> Any:
    """A pandas ``DataFrame``, one row per (player, game), each figure as ``value [low, high]``;
    plain text (:func:`text_table`) where pandas is not installed. ``metrics`` picks the
    figures, e.g. :data:`PUBLISHED` for the four columns of a paper's results table."""
    try:
        import pandas as pd
    except ImportError:
        return text_table(evaluations, metrics=metrics)
    return pd.DataFrame(_display_rows(evaluations, metrics))


def text_table(
    evaluations: Sequence[Evaluation], transpose: bool = False, metrics: Sequence[str] = METRICS
) -> str:
    """The same table as fixed-width text, with a line saying what the brackets are;
    ``transpose=True`` puts one column per (player, game) and one line per figure, which reads
    better for a before/after comparison in a terminal."""
    rows = _display_rows(evaluations, metrics)
    if transpose:
        fields = list(rows[0])[2:]
        rows = [
            {"": field, **{f"{r['player']} ({r['game']})": r[field] for r in rows}}
            for field in fields
        ]
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in columns}
    lines = ["  ".join(f"{c:<{widths[c]}}" for c in columns).rstrip()]
    lines += ["  ".join(f"{str(row[c]):<{widths[c]}}" for c in columns).rstrip() for row in rows]
    lines.append(
        "[low, high]: 95% interval (Wilson for rates, task bootstrap for means); "
        "valid calls: executed calls that did not raise"
    )
    return "\n".join(lines)


def _display_rows(
    evaluations: Sequence[Evaluation], metrics: Sequence[str] = METRICS
) -> list[dict[str, Any]]:
    if isinstance(evaluations, Evaluation):
        evaluations = [evaluations]
    if not evaluations:
        raise ValueError("give at least one Evaluation")
    check_metrics(metrics)
    failed = any(r.failures for e in evaluations for r in e.games.values())
    rows = []
    for evaluation in evaluations:
        for result in evaluation.games.values():
            row = {
                "player": evaluation.name,
                "game": result.game,
                "episodes": result.episodes,
                "decoding": evaluation.decoding,
                "seed": evaluation.seed,
            }
            for metric in metrics:
                row[LABELS[metric]] = str(getattr(result, metric))
            row["valid / executed"] = f"{result.valid_calls} / {result.executed_calls}"
            if failed:  # transport failures, beside the figures they are not in
                row["failed episodes"] = (
                    f"{len(result.failures)} of {result.episodes + len(result.failures)}"
                )
            rows.append(row)
    return rows


def check_metrics(metrics: Sequence[str]) -> None:
    """``ValueError`` unless ``metrics`` are some of :data:`METRICS` (and not one bare string)."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics or isinstance(metrics, str):
        raise ValueError(f"metrics must be some of {METRICS}, got {metrics!r}")


# -- paired comparison ---------------------------------------------------------------------------
# Every per-episode metric; not the valid-call rate (a share of calls, not of episodes) nor moves
# per win (defined on won episodes only, so two players' values are not paired task by task).
PAIRED_METRICS = (
    "win_rate",
    "finished",
    "mean_reward",
    "with_call",
    "calls",
    "turns",
    "tokens",
    "invalid_calls",
)


@dataclass(frozen=True)
class Comparison:
    """``after - before`` on one metric over the same tasks, with a paired 95% interval and the
    two-sided bootstrap p-value of "no difference"."""

    game: str
    metric: str
    before: float
    after: float
    difference: Estimate
    p_value: float
    tasks: int

    def record(self) -> dict[str, Any]:
        """One flat dict, as ``Evaluation.records`` gives per game: the metric, both means, the
        difference with its ``_low`` / ``_high`` bounds, the p-value and the number of tasks."""
        return {
            "metric": self.metric,
            "before": self.before,
            "after": self.after,
            "difference": self.difference.value,
            "difference_low": self.difference.low,
            "difference_high": self.difference.high,
            "p_value": self.p_value,
            "tasks": self.tasks,
        }

    def __str__(self) -> str:
        p = f"p < {1 / BOOTSTRAP_RESAMPLES:g}" if self.p_value == 0 else f"p = {self.p_value:.3f}"
        return (
            f"{LABELS[self.metric]} ({self.game}): {self.before:.2f} -> {self.after:.2f}, "
            f"difference {self.difference} ({p}, paired bootstrap over {self.tasks} tasks)"
        )


def compare(
    before: Evaluation,
    after: Evaluation,
    game: str,
    metric: str = "win_rate",
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Comparison:
    """Compare two evaluations of the same tasks on one per-episode metric: the difference of
    the task means with its interval and p-value, from :func:`kit.stats.paired_difference` (a
    bootstrap over the tasks and over the episodes within each). Raises ``ValueError`` unless
    both evaluations played the same tasks in the same order (same split, ``num_tasks`` and
    ``seed``).
    """
    if metric not in PAIRED_METRICS:
        raise ValueError(f"metric must be one of {PAIRED_METRICS}, got {metric!r}")
    first, second = before[game], after[game]
    if first.task_ids != second.task_ids:
        raise ValueError(
            f"{before.name!r} and {after.name!r} played different {game} tasks; a paired "
            "comparison needs the same split, num_tasks and seed"
        )
    a, b = first.values.get(metric), second.values.get(metric)
    for evaluation, result in ((before, first), (after, second)):
        lost = sorted({json.dumps(f.task, sort_keys=True, default=str) for f in result.failures})
        groups = result.values.get(metric) or []
        if lost and not all(groups):
            raise ValueError(
                f"{evaluation.name!r} has no {game} episode left on {len(lost)} task(s) after "
                f"{len(result.failures)} transport failure(s) (GameResult.failures), e.g. {lost[0]}: "
                "evaluate again once the endpoint answers"
            )
    if not a or not b or not all(a) or not all(b):
        raise ValueError(f"no per-episode values of {metric!r} to compare for {game}")
    difference, p_value = paired_difference(a, b, seed, resamples)
    return Comparison(
        game=game,
        metric=metric,
        before=task_mean(a),
        after=task_mean(b),
        difference=difference,
        p_value=p_value,
        tasks=len(a),
    )


def by_task(
    evaluations: Sequence[Evaluation],
    game: str,
    metric: str = "win_rate",
    by: str | None = None,
) -> Any:
    """Where a change came from: ``metric``'s mean per task, or per value of the reset column
    ``by`` (Catch's ``"ball_col"``, say), one column per evaluation, beside the tasks and
    episodes of each row (the first evaluation's; each mean is over its own). A pooled
    difference can hide a gain on some tasks and a loss on others (GRPO sharpening a move that is
    right on one board and wrong on another); this table shows it. A pandas ``DataFrame`` (plain
    rows, a list of dicts, without pandas). Raises ``ValueError`` unless every evaluation played
    the same tasks (as :func:`compare`) under a name of its own, or when ``by`` is not a reset
    column of them."""
    if isinstance(evaluations, Evaluation):
        evaluations = [evaluations]
    if not evaluations:
        raise ValueError("give at least one Evaluation")
    if metric not in PAIRED_METRICS:
        raise ValueError(f"metric must be one of {PAIRED_METRICS}, got {metric!r}")
    results = [e[game] for e in evaluations]
    task_ids = results[0].task_ids
    for evaluation, result in zip(evaluations, results, strict=True):
        if result.task_ids != task_ids:
            raise ValueError(
                f"{evaluations[0].name!r} and {evaluation.name!r} played different {game} tasks; "
                "a side-by-side table needs the same split, num_tasks and seed"
            )
    names = [e.name for e in evaluations]
    fixed = (by or "task", "tasks", "episodes")
    if len(set(names)) != len(names) or set(names) & set(fixed):
        raise ValueError(
            f"name the evaluations apart, and other than {list(fixed)} "
            f"(evaluate(..., name=...)), got {names}"
        )
    tasks = [json.loads(task_id) for task_id in task_ids]
    if by is not None and any(by not in task for task in tasks):
        columns = sorted({key for task in tasks for key in task})
        raise ValueError(f"{game} tasks have no column {by!r}; they have {columns}")
    groups: dict[Any, list[int]] = {}
    for index, (task_id, task) in enumerate(zip(task_ids, tasks, strict=True)):
        groups.setdefault(task_id if by is None else task[by], []).append(index)
    rows = []
    for key in sorted(groups, key=lambda k: (str(type(k)), k)):
        indices = groups[key]
        episodes = sum(len(results[0].values["win_rate"][i]) for i in indices)
        row: dict[str, Any] = dict(zip(fixed, (key, len(indices), episodes), strict=True))
        for name, result in zip(names, results, strict=True):
            per_task = result.values.get(metric)  # absent: no episode had a value (no token ids)
            values = [v for i in indices for v in per_task[i]] if per_task else []
            row[name] = sum(values) / len(values) if values else math.nan
        rows.append(row)
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows)


# -- evaluation -----------------------------------------------------------------------------------
def evaluate(
    player: Any,
    game: str | Sequence[str],
    tokenizer: Any = None,
    *,
    split: str = "eval",
    num_tasks: int | None = None,
    tasks: Sequence[Mapping[str, Any]] | None = None,
    num_generations: int = 1,
    greedy: bool | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
    seed: int = 0,
    max_completion_length: int | None = None,
    max_tool_calling_iterations: int | None = None,
    rewards: Mapping[str, Reward] | None = None,
    name: str | None = None,
    batch_size: int = 32,
    chat_template_kwargs: dict[str, Any] | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    progress: bool = False,
) -> Evaluation:
    """Play every task of ``game``'s ``split`` ``num_generations`` times with ``player``; report
    per game.

    ``player``: a model (with a ``generate`` method, or a ``vllm.LLM``; needs ``tokenizer``), a
    ``kit.endpoint.Endpoint`` (any OpenAI-compatible server: the sampling settings go in its
    requests, ``generation_kwargs`` may hold ``max_new_tokens``, sent as ``max_tokens``) or a
    ``kit.solvers.policies`` factory such as ``solver_policy()``; a policy's or an endpoint's
    episodes get token ids (for ``kit.viz`` and the token count) when a ``tokenizer`` is given. ``game``: a name or
    several. Tasks: ``kit.tasks.TaskProvider(game, split, num_tasks, seed)``, or ``tasks`` (rows
    with the reset columns) for a single game; a row without a ``prompt`` gets the game's
    (``kit.tasks.prompt``), the one its training rows carry, not TRL's empty one. ``greedy``
    defaults to ``num_generations == 1``. Sampled play samples as GRPO does: ``temperature``,
    ``top_p``, ``top_k``, ``min_p`` and ``repetition_penalty`` are the ``GRPOConfig`` fields,
    with their defaults, passed over the model's own generation config (see
    :func:`kit.rollout.rollout`), so that a checkpoint is measured on the distribution training
    sampled from, not on the one its ``generation_config.json`` suggests for chat; the
    evaluation records them (:attr:`Evaluation.sampling`, :meth:`Evaluation.records`).
    ``max_completion_length`` defaults to :data:`BUDGETS`, ``max_tool_calling_iterations`` to
    ``kit.tasks.TURN_LIMITS``, ``rewards`` to each game's ``default_reward``. ``seed`` fixes the
    task subset, the sampling and the bootstrap. ``chat_template_kwargs`` go to the model's chat
    template, as ``GRPOConfig``'s do (``{"enable_thinking": False}`` for Qwen3:
    ``kit.train.recipe`` sets it). ``generation_kwargs`` go to the generation backend on top of
    everything else, as ``GRPOConfig.generation_kwargs`` do: pass the ones GRPO trained with
    (``kit.train.recipe`` caps a turn with ``{"max_new_tokens": ...}`` on a CPU) so that the
    evaluation plays the game GRPO played.
    """
    games = [game] if isinstance(game, str) else list(game)
    _check(player, games, tokenizer, tasks, num_generations, seed)
    greedy = num_generations == 1 if greedy is None else greedy
    if greedy and num_generations > 1 and _plays_tokens(player):
        raise ValueError(
            f"greedy decoding plays {num_generations} identical episodes per task: "
            "pass greedy=False"
        )
    sampling = sampling_settings(temperature, top_p, top_k, min_p, repetition_penalty)
    results = {}
    for g in games:
        rows = (
            [{"prompt": prompt(g), **row} for row in tasks]
            if tasks is not None
            else [task.row() for task in TaskProvider(g, split, num_tasks, seed)]
        )
        cap = max_tool_calling_iterations
        cap = TURN_LIMITS[g] if cap is None else cap
        reward = (rewards or {}).get(g) or default_reward(g)
        failures: list[EpisodeFailure] = []
        groups = None
        settings = {
            "num_generations": num_generations,
            "greedy": greedy,
            "sampling": sampling,
            "seed": seed,
            "budget": max_completion_length or BUDGETS[g],
            "cap": cap,
            "chat_template_kwargs": chat_template_kwargs,
            "generation_kwargs": generation_kwargs,
        }
        if isinstance(player, Endpoint):
            trajectories, groups, failures = _play_endpoint(player, tokenizer, g, rows, **settings)
        elif _is_model(player):
            trajectories = _play_model(
                player, tokenizer, g, rows, batch_size=batch_size, progress=progress, **settings
            )
        else:
            trajectories = _play_policy(player, tokenizer, g, rows, num_generations, seed, cap)
        results[g] = _summarise(
            g, len(rows), num_generations, trajectories, reward, cap, seed, failures, groups
        )
    return Evaluation(
        name=name or _player_name(player),
        split=split if tasks is None else "given tasks",
        seed=seed,
        num_generations=num_generations,
        decoding=(
            f"policy x{num_generations}"
            if not _plays_tokens(player)
            else "greedy"
            if greedy
            else f"sampled x{num_generations}, T={temperature:g}"
        ),
        games=results,
        sampling=_sampling_record(player, greedy, sampling),
    )


def _sampling_record(player: Any, greedy: bool, sampling: dict[str, Any]) -> dict[str, Any]:
    """What :attr:`Evaluation.sampling` says: the settings that chose the tokens. ``min_p=None``
    sets none, so a transformers model samples with its own ``min_p`` if its generation config
    has one (as under GRPO): that value is recorded."""
    if not _plays_tokens(player):
        return {}
    if greedy:
        return {"greedy": True, "repetition_penalty": sampling["repetition_penalty"]}
    if sampling["min_p"] is None:
        own = getattr(getattr(player, "generation_config", None), "min_p", None)
        sampling = sampling | {"min_p": own}
    return {"greedy": False, **sampling}


def evaluate_in_turn(
    players: Mapping[str, Callable[[], tuple[Any, Any]]],
    game: str | Sequence[str],
    **evaluate_kwargs: Any,
) -> list[Evaluation]:
    """Evaluate several models one after the other, each loaded only while it plays:
    ``players`` maps each name to a loader returning ``(model, tokenizer)``; returns one
    :class:`Evaluation` per name, in order, as ``evaluate(model, game, tokenizer, name=name,
    **evaluate_kwargs)`` gives it.

    Why: comparing base, SFT and GRPO checkpoints by loading all three and then evaluating
    them holds three models on the GPU at once (Qwen3-1.7B three times does not fit a T4).
    Here each model is loaded, evaluated, and every reference to it dropped, garbage collected
    and the CUDA cache emptied before the next loader runs; the evaluations keep their episodes
    (token ids, messages, env states) but no reference to a model. A loader must load (e.g.
    ``lambda: load(folder)``): a model also held elsewhere, by a notebook variable, stays alive.
    """
    if not players:
        raise ValueError("give at least one player: {name: loader returning (model, tokenizer)}")
    taken = sorted({"name", "tokenizer"} & set(evaluate_kwargs))
    if taken:
        raise ValueError(
            f"the names of players are the keys of players, and each loader returns its "
            f"tokenizer: drop {taken}"
        )
    if not_loaders := [name for name, loader in players.items() if not callable(loader)]:
        raise ValueError(
            f"each player is a loader, a function returning (model, tokenizer); {not_loaders} "
            "are not callable"
        )
    evaluations = []
    for name, loader in players.items():
        model, tokenizer = loader()
        try:
            evaluations.append(evaluate(model, game, tokenizer, name=name, **evaluate_kwargs))
        finally:
            del model, tokenizer
            _free_memory()
    return evaluations


def _free_memory() -> None:
    """Collect what the last model left (whatever sat in a reference cycle outlives ``del``) and
    hand the CUDA memory PyTorch still caches back, so that the next model finds it free."""
    gc.collect()
    try:
        import torch
    except ImportError:  # policies only: no model was ever loaded
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _is_model(player: Any) -> bool:
    return callable(getattr(player, "generate", None))


def _plays_tokens(player: Any) -> bool:
    """A model or an endpoint: a player whose tokens are sampled with the sampling settings."""
    return _is_model(player) or isinstance(player, Endpoint)


def _player_name(player: Any) -> str:
    if isinstance(player, Endpoint):
        return player.model
    if _is_model(player):
        path = getattr(getattr(player, "config", None), "_name_or_path", "")
        return path or type(player).__name__
    return "policy"


def _check(
    player: Any,
    games: list[str],
    tokenizer: Any,
    tasks: Sequence[Mapping[str, Any]] | None,
    num_generations: int,
    seed: int,
) -> None:
    if not games:
        raise ValueError("name at least one game")
    for g in games:
        if g not in ENVS:
            raise ValueError(f"unknown game {g!r}; choose one of {sorted(ENVS)}")
    if _is_model(player):
        if tokenizer is None:
            raise ValueError("a model needs its tokenizer: evaluate(model, game, tokenizer)")
    elif not callable(player) and not isinstance(player, Endpoint):
        raise ValueError(
            "player must be a model (with a generate method), a kit.endpoint.Endpoint or a "
            f"kit.solvers.policies factory such as solver_policy(); got {type(player).__name__}"
        )
    if tasks is not None and (len(games) != 1 or not tasks):
        raise ValueError("tasks= needs exactly one game and at least one row")
    check_count("num_generations", num_generations)
    check_seed(seed)


def _play_model(
    model: Any,
    tokenizer: Any,
    game: str,
    rows: list[dict[str, Any]],
    *,
    num_generations: int,
    greedy: bool,
    sampling: dict[str, Any],
    seed: int,
    budget: int,
    cap: int,
    batch_size: int,
    chat_template_kwargs: dict[str, Any] | None,
    generation_kwargs: dict[str, Any] | None,
    progress: bool,
) -> list[Trajectory]:
    from kit.rollout import rollout

    training = getattr(model, "training", False)
    if training:
        model.eval()  # no dropout while measuring; put back as found
    try:
        return rollout(
            model,
            ENVS[game],
            tokenizer,
            rows,
            num_generations=num_generations,
            max_completion_length=budget,
            max_tool_calling_iterations=cap,
            greedy=greedy,
            **sampling,
            seed=seed,
            batch_size=batch_size,
            chat_template_kwargs=chat_template_kwargs,
            generation_kwargs=generation_kwargs,
            progress=progress,
        )
    finally:
        if training:
            model.train()


def _play_endpoint(
    endpoint: Endpoint,
    tokenizer: Any,
    game: str,
    rows: list[dict[str, Any]],
    *,
    num_generations: int,
    greedy: bool,
    sampling: dict[str, Any],
    seed: int,
    budget: int,
    cap: int,
    chat_template_kwargs: dict[str, Any] | None,
    generation_kwargs: dict[str, Any] | None,
) -> tuple[list[Trajectory], list[int], list[EpisodeFailure]]:
    """Play through ``endpoint`` (:func:`kit.endpoint.play_many`); the played episodes as
    trajectories with the task index of each, and the failed ones. The request carries the sampling settings that
    chat-completions names (``temperature``, ``top_p``) and the others only where they differ
    from sampling's defaults (servers that know them take ``top_k``, ``min_p`` and
    ``repetition_penalty`` as extra fields; the rest refuse them, which is a clear error)."""
    extra = dict(generation_kwargs or {})
    request: dict[str, Any] = {}
    if "max_new_tokens" in extra:
        request["max_tokens"] = extra.pop("max_new_tokens")
    if extra:
        raise ValueError(
            f"an endpoint takes max_new_tokens from generation_kwargs, not {sorted(extra)}: "
            "put server settings in Endpoint(extra_body=...)"
        )
    if greedy:
        request["temperature"] = 0.0
    else:
        request |= {"temperature": sampling["temperature"], "top_p": sampling["top_p"]}
        for name, default in (("top_k", 0), ("min_p", None), ("repetition_penalty", 1.0)):
            if sampling[name] not in (default, None):
                request[name] = sampling[name]
    env_cls = ENVS[game]
    played = play_many(
        endpoint,
        env_cls,
        rows,
        num_generations,
        seed,
        max_tool_calling_iterations=cap,
        max_completion_length=budget,
        sampling=request,
        chat_template_kwargs=chat_template_kwargs,
    )
    trajectories, groups, failures = [], [], []
    for index, episode in enumerate(played):
        if isinstance(episode, EpisodeFailure):
            failures.append(episode)
            continue
        row = rows[index // num_generations]
        trajectories.append(_trajectory(episode, episode.states, tokenizer, game, row))
        groups.append(index // num_generations)
    return trajectories, groups, failures


def _trajectory(
    episode: Episode, states: list[str], tokenizer: Any, game: str, row: Mapping[str, Any]
) -> Trajectory:
    """A played episode (a policy's or an endpoint's) as a trajectory of ``game`` from ``row``,
    with token ids where a ``tokenizer`` is given (:func:`kit.masks.build`)."""
    messages = episode.messages
    if tokenizer is not None:
        trajectory = build(tokenizer, messages, ENVS[game])
    else:
        trajectory = Trajectory(messages, [], [], [], tool_calls=tool_calls(messages))
    trajectory.env, trajectory.states = game, states
    trajectory.task = {k: v for k, v in row.items() if k != "prompt"}
    trajectory.done, trajectory.won = episode.env.done, episode.env.won
    trajectory.truncated = episode.truncated
    return trajectory


def _play_policy(
    factory: PolicyFactory,
    tokenizer: Any,
    game: str,
    rows: list[dict[str, Any]],
    num_generations: int,
    seed: int,
    cap: int,
) -> list[Trajectory]:
    env_cls = ENVS[game]
    trajectories = []
    for i, row in enumerate(rows):
        for j in range(num_generations):
            env = env_cls()
            before: list[str] = []  # the env's transcript when each turn is asked for
            policy = factory(env_cls, (seed * 1_000_003 + i) * 1_000 + j)
            episode = run_episode(env, row, _recording(policy, env, before), cap)
            states = (before + [env.transcript])[1:]
            trajectories.append(_trajectory(episode, states, tokenizer, game, row))
    return trajectories


def _recording(
    policy: Callable[[list[Message]], Message], env: Any, states: list[str]
) -> Callable[[list[Message]], Message]:
    def act(messages: list[Message]) -> Message:
        states.append(env.transcript)
        return policy(messages)

    return act


def _summarise(
    game: str,
    tasks: int,
    num_generations: int,
    trajectories: list[Trajectory],
    reward: Reward,
    cap: int,
    seed: int,
    failures: Sequence[EpisodeFailure] = (),
    groups: Sequence[int] | None = None,
) -> GameResult:
    """Score every episode and pool them; per-task groups feed the bootstrap. ``groups``: each
    trajectory's task index, where some episodes failed (an endpoint's: ``failures``); by
    default every task has its ``num_generations`` episodes in order."""
    per_task: dict[str, list[list[float]]] = {m: [[] for _ in range(tasks)] for m in METRICS}
    task_ids = [""] * tasks
    for failure in failures:  # a task all of whose episodes failed still has its name
        task_ids[failure.task_index] = json.dumps(failure.task, sort_keys=True, default=str)
    if groups is None:
        groups = [index // num_generations for index in range(len(trajectories))]
    wins = finished = with_call = valid = executed = 0
    has_ids = all(t.prompt_ids for t in trajectories)
    for index, trajectory in enumerate(trajectories):
        env, completion = _replay(game, trajectory.task, trajectory.messages, cap)
        score = reward.score(env, completion)
        trajectory.reward, trajectory.rewards = score.total, dict(score.signals)
        answered = [
            c
            for c in tool_calls(_prompt(trajectory.messages) + completion)
            if c.result is not None or c.error is not None
        ]
        parsed = sum(len(m.get("tool_calls") or []) for m in _turns(trajectory.messages))
        invalid = sum(c.error is not None for c in answered)
        valid += len(answered) - invalid
        executed += len(answered)
        wins += trajectory.won
        finished += env.done
        with_call += parsed > 0
        group = groups[index]
        task_ids[group] = json.dumps(trajectory.task, sort_keys=True, default=str)
        per_task["win_rate"][group].append(float(trajectory.won))
        per_task["finished"][group].append(float(env.done))
        per_task["with_call"][group].append(float(parsed > 0))
        per_task["mean_reward"][group].append(score.total)
        per_task["calls"][group].append(float(parsed))
        per_task["invalid_calls"][group].append(float(invalid))
        if trajectory.won:  # only won episodes say how directly the player wins
            per_task["moves_per_win"][group].append(float(parsed))
        per_task["turns"][group].append(float(len(_turns(trajectory.messages))))
        if has_ids:
            per_task["tokens"][group].append(float(trajectory.counts()["model"]))
    return GameResult(
        game=game,
        tasks=tasks,
        episodes=len(trajectories),
        win_rate=rate(wins, len(trajectories)),
        finished=rate(finished, len(trajectories)),
        mean_reward=mean(per_task["mean_reward"], seed),
        valid_call_rate=rate(valid, executed),
        with_call=rate(with_call, len(trajectories)),
        calls=mean(per_task["calls"], seed),
        turns=mean(per_task["turns"], seed),
        tokens=mean(per_task["tokens"], seed),
        moves_per_win=mean(per_task["moves_per_win"], seed),
        invalid_calls=mean(per_task["invalid_calls"], seed),
        valid_calls=valid,
        executed_calls=executed,
        trajectories=trajectories,
        failures=list(failures),
        values={m: v for m, v in per_task.items() if any(v)},
        task_ids=task_ids,
    )


def _prompt(messages: list[Message]) -> list[Message]:
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return messages[:first]


def _turns(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m["role"] == "assistant"]


def _replay(
    game: str, task: Mapping[str, Any], messages: list[Message], cap: int
) -> tuple[Any, list[Message]]:
    """A fresh env after the episode's executed tool calls, and the completion TRL holds.

    TRL runs the calls of the first ``cap`` turns that make any (a turn past the cap is left
    unrun); calls whose results the length budget dropped did run.
    """
    env = ENVS[game]()
    reset(env, task)
    return env, replay(env, _turns(messages), cap)


# -- command line ---------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kit.evaluate``: measure an endpoint model, and checkpoints beside it, on
    held-out tasks; print the runbook's table and each player's paired comparison with the
    first one on the same tasks."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m kit.evaluate",
        description="Evaluate a model behind an OpenAI-compatible endpoint (and checkpoints "
        "beside it) on a game's held-out tasks, with intervals and paired comparisons.",
    )
    parser.add_argument("games", nargs="*", default=list(ENVS), help="games (default: all)")
    parser.add_argument("--base-url", help="the endpoint, up to /v1 (http://localhost:8000/v1)")
    parser.add_argument("--model", help="the endpoint's model name")
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="the environment variable holding the API key (never printed)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="episodes in flight at once")
    parser.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        help="a checkpoint folder or hub id to evaluate in-process on the same tasks (repeat)",
    )
    parser.add_argument("--split", default="eval")
    parser.add_argument("--num-tasks", type=int, default=None, help="default: the whole split")
    parser.add_argument("--eval-generations", type=int, default=4, help="episodes per task")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="a cap on each turn (default: none)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write every figure (records, comparisons) to this JSON")
    args = parser.parse_args(argv)
    if (args.base_url is None) != (args.model is None):
        parser.error("--base-url and --model go together")
    if args.base_url is None and not args.checkpoint:
        parser.error("name a player: --base-url and --model, or --checkpoint")
    if args.out and os.path.exists(args.out):
        parser.error(f"--out {args.out} exists: name a new file (nothing is written over)")
    players: dict[str, Callable[[], tuple[Any, Any]]] = {}
    if args.base_url is not None:
        endpoint = Endpoint(
            args.base_url, args.model, args.api_key_env, concurrency=args.concurrency
        )
        players[f"{args.model} (endpoint)"] = lambda: (endpoint, None)
    for path in args.checkpoint:
        players[path] = functools.partial(_load_checkpoint, path)
    settings: dict[str, Any] = {
        "split": args.split,
        "num_tasks": args.num_tasks,
        "num_generations": args.eval_generations,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "seed": args.seed,
    }
    if args.max_new_tokens is not None:
        settings["generation_kwargs"] = {"max_new_tokens": args.max_new_tokens}
    evaluations = evaluate_in_turn(players, args.games, **settings)
    print(text_table(evaluations, transpose=True))
    comparisons = []
    first = evaluations[0]
    for other in evaluations[1:]:
        print(f"\n{other.name} against {first.name}, on the same tasks:")
        for game in args.games:
            for metric in ("win_rate", "finished", "mean_reward"):
                comparison = compare(first, other, game, metric, args.seed)
                comparisons.append({"player": other.name, "game": game, **comparison.record()})
                print(f"  {comparison}")
    for evaluation in evaluations:
        for result in evaluation.games.values():
            for failure in result.failures[:3]:
                print(f"failed ({evaluation.name}, {result.game}): {failure.error}")
    if args.out:
        records = [row for e in evaluations for row in e.records()]
        with open(args.out, "x", encoding="utf-8") as file:  # never over a user's file
            json.dump({"records": records, "comparisons": comparisons}, file, indent=2)
        print(f"every figure: {args.out}")
    return 0


def _load_checkpoint(path: str) -> tuple[Any, Any]:
    from kit.models import load

    return load(path)


if __name__ == "__main__":
    raise SystemExit(main())
