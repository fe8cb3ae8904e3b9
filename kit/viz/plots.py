"""matplotlib summaries of a batch (where the tokens go, how long episodes run, what pays) and
of an evaluation (each metric per player, with its interval: ``plot_evaluation``).

Why: the token view answers "what happened in this episode"; these answer "what happens in this
batch". Env tokens that dwarf model tokens (a verbose observation eating the length budget),
episodes piling up at ``max_completion_length``, and outcomes whose rewards do not separate
(no advantage, no gradient) are the three batch-level failures worth a figure.

The functions return a ``matplotlib.figure.Figure`` built without pyplot, so nothing draws it
behind the caller's back (pyplot's inline backend would show it a second time, and scripts
would collect open figures). Its PNG ``_repr_png_`` makes it show as the cell's value in any
front end, whether or not pyplot's inline backend has registered its own formatter (it has not
until pyplot draws something); scripts call ``fig.savefig``.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kit.trajectory import Trajectory
from kit.viz.render import OUTCOMES, has_value, outcome

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kit.evaluate import Evaluation

MODEL, ENV, TRUNCATED, OTHER = "#3884ff", "#ff9600", "#d6336c", "#8c8c8c"


@functools.cache
def _shown_figure() -> type[Figure]:
    """``Figure`` with a PNG repr; built on first use so importing kit.viz needs no matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("kit.viz's plots need matplotlib: pip install 'kit[notebook]'") from error

    class ShownFigure(Figure):
        def _repr_png_(self) -> bytes:
            png = io.BytesIO()
            self.savefig(png, format="png")
            return png.getvalue()

    return ShownFigure


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure with a PNG repr: shown once as a cell's value, never again by pyplot."""
    return _shown_figure()(figsize=(width, height), layout="constrained")


def _integer_ticks(axes: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _batch(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    items = [trajectories] if isinstance(trajectories, Trajectory) else list(trajectories)
    if not items:
        raise ValueError("need at least one trajectory to plot")
    for item in items:
        if not isinstance(item, Trajectory):
            raise ValueError(
                f"expected kit.trajectory.Trajectory objects, got {type(item).__name__}"
            )
    return items


def turn_counts(trajectory: Trajectory) -> list[tuple[int, int]]:
    """``(model, env)`` token counts of each sampled turn: its tokens, then the env text after."""
    turns: list[list[int]] = []
    previous = 0
    for bit in trajectory.tool_mask:
        if bit and (not turns or not previous):
            turns.append([0, 0])
        if not turns:  # env tokens before any sampled one: count them with a turn of their own
            turns.append([0, 0])
        turns[-1][0 if bit else 1] += 1
        previous = bit
    return [(model, env) for model, env in turns]


def plot_tokens(trajectories: Sequence[Trajectory]) -> Figure:
    """Model vs env tokens of each rollout (stacked) and of each turn (mean over the rollouts)."""
    items = _batch(trajectories)
    figure = new_figure(11, 3.6)
    per_rollout, per_turn = figure.subplots(1, 2)

    x = list(range(len(items)))
    model = [item.counts()["model"] for item in items]
    env = [item.counts()["env"] for item in items]
    per_rollout.bar(x, model, color=MODEL, label="model")
    per_rollout.bar(x, env, bottom=model, color=ENV, label="env")
    per_rollout.set(title="completion tokens per rollout", xlabel="rollout", ylabel="tokens")
    _integer_ticks(per_rollout)
    per_rollout.legend()

    turns = [turn_counts(item) for item in items]
    depth = max((len(t) for t in turns), default=0)
    means = []
    for k in range(depth):
        reached = [t[k] for t in turns if len(t) > k]
        means.append(
            (sum(m for m, _ in reached) / len(reached), sum(e for _, e in reached) / len(reached))
        )
    ks = [k + 1 for k in range(depth)]
    per_turn.bar(
        [k - 0.2 for k in ks], [m for m, _ in means], width=0.4, color=MODEL, label="model"
    )
    per_turn.bar([k + 0.2 for k in ks], [e for _, e in means], width=0.4, color=ENV, label="env")
    per_turn.set(
        title="tokens per turn (mean over rollouts that reached it)", xlabel="turn", ylabel="tokens"
    )
    per_turn.set_xticks(ks)
    per_turn.legend()
    return figure


def plot_lengths(trajectories: Sequence[Trajectory], budget: int) -> Figure:
    """Each rollout's completion length against the budget (``max_completion_length``)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"budget must be a positive int (max_completion_length), got {budget!r}")
    items = _batch(trajectories)
    lengths = [len(item.completion_ids) for item in items]
    colours = [TRUNCATED if item.truncated else OTHER for item in items]
    figure = new_figure(7, 3.6)
    axes = figure.subplots()
    axes.bar(range(len(items)), lengths, color=colours)
    axes.axhline(budget, color=TRUNCATED, linestyle="--", label=f"budget {budget}")
    cut = sum(item.truncated for item in items)
    axes.set(
        title=f"episode length: {cut} of {len(items)} truncated (red)",
        xlabel="rollout",
        ylabel="completion tokens",
        ylim=(0, max(budget, *lengths) * 1.08),
    )
    _integer_ticks(axes)
    axes.legend()
    return figure


def plot_rewards(trajectories: Sequence[Trajectory]) -> Figure:
    """Every rollout's reward by outcome (won, lost, unfinished, truncated), with each mean."""
    items = [item for item in _batch(trajectories) if has_value(item.reward)]
    if not items:
        raise ValueError("no trajectory has a reward to plot")
    groups = {name: [item.reward for item in items if outcome(item) == name] for name in OUTCOMES}
    groups = {name: rewards for name, rewards in groups.items() if rewards}
    figure = new_figure(7, 3.6)
    axes = figure.subplots()
    for x, rewards in enumerate(groups.values()):
        # An even spread instead of random jitter: the same batch always draws the same figure.
        spread = (
            [0.0]
            if len(rewards) == 1
            else [-0.25 + 0.5 * j / (len(rewards) - 1) for j in range(len(rewards))]
        )
        axes.scatter([x + s for s in spread], rewards, color=MODEL, alpha=0.7)
        mean = sum(rewards) / len(rewards)
        axes.hlines(mean, x - 0.35, x + 0.35, color="black", linewidth=2)
    axes.set_xticks(range(len(groups)), [f"{name}\n(n={len(r)})" for name, r in groups.items()])
    axes.set(title="reward by outcome (bar: mean)", ylabel="reward")
    return figure


def plot_evaluation(
    evaluations: Sequence[Evaluation] | Evaluation, metrics: Sequence[str] | None = None
) -> Figure:
    """Bars of each metric per player (one panel per metric, one bar group per game), with the
    95% intervals as error bars (``kit.evaluate.evaluate``'s results; default metrics: the first
    four of ``kit.evaluate.METRICS``); returns a matplotlib ``Figure`` that shows itself as PNG."""
    from kit.evaluate import LABELS, METRICS, Evaluation, check_metrics

    metrics = METRICS[:4] if metrics is None else metrics
    if isinstance(evaluations, Evaluation):
        evaluations = [evaluations]
    check_metrics(metrics)
    if not evaluations:
        raise ValueError("give at least one Evaluation")
    games = list(dict.fromkeys(g for e in evaluations for g in e.games))
    figure = new_figure(3.4 * len(metrics), 3.2)
    width = 0.8 / len(evaluations)
    for axes, metric in zip(
        figure.subplots(1, len(metrics), squeeze=False)[0], metrics, strict=True
    ):
        for i, evaluation in enumerate(evaluations):
            xs, values, errors = [], [], ([], [])
            for x, game in enumerate(games):
                if game not in evaluation.games:
                    continue
                estimate = getattr(evaluation.games[game], metric)
                if math.isnan(estimate.value):  # undefined (no calls to rate): no bar, not 0
                    continue
                xs.append(x - 0.4 + width * (i + 0.5))
                values.append(estimate.value)
                # max(0, ...): float sums can put a zero-width bootstrap bound a hair past the mean
                errors[0].append(max(0.0, estimate.value - estimate.low))
                errors[1].append(max(0.0, estimate.high - estimate.value))
            axes.bar(xs, values, width=width, yerr=errors, capsize=3, label=evaluation.name)
        axes.set_xticks(range(len(games)), games)
        axes.set_title(LABELS[metric], fontsize=10)
        axes.axhline(0, color="black", linewidth=0.5)
    figure.axes[0].legend(fontsize=8)
    return figure
