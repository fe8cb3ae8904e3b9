"""Intervals for small evaluations: Wilson for rates, bootstraps over tasks for means and paired
differences.

Why a module of its own: these are the statistics every figure of the kit carries, and they know
nothing of games, models or episodes, so a reader checks them here in a page (against published
bounds, ``tests/test_evaluate.py``) and ``kit.evaluate`` only decides what to feed them. They
import nothing of the kit's.

Why these: a CPU evaluation is a handful of tasks with a few episodes each, where one lucky
episode moves a rate by 20 points. Wilson's interval stays inside [0, 1] and is not empty at 0 or
n successes. The episodes of one task are not independent, so means and differences resample
whole *tasks* (and, for a paired difference, the episodes within each drawn task too). Every
bootstrap is seeded: the same input gives the same interval. The random streams are keyed as
they were when these lived in ``kit.evaluate``, so every interval published in ``docs/`` repeats.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A measured value with its 95% interval; ``n`` trials (rates), episodes (means) or tasks
    (paired differences)."""

    value: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "-"
        digits = 2 if abs(self.value) < 10 else 0
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate; ``(nan, nan)`` for zero trials.

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n successes,
    which is where small CPU evaluations live.
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return math.nan, math.nan
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_mean(
    groups: Sequence[Sequence[float]], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the mean, resampling whole groups (tasks).

    ``groups[i]`` holds the values of task ``i``'s episodes; each resample draws as many tasks
    as there are, with replacement, and takes the mean over their episodes. Seeded: the same
    input gives the same interval. One task gives a zero-width interval: there is nothing to
    resample, which says how little one task tells.
    """
    groups = [list(group) for group in groups if group]
    if not groups:
        return math.nan, math.nan
    rng = random.Random(f"kit.evaluate.bootstrap/{seed}")
    means = []
    for _ in range(resamples):
        picked = [groups[rng.randrange(len(groups))] for _ in groups]
        means.append(sum(map(sum, picked)) / sum(map(len, picked)))
    means.sort()
    return _percentiles(means)


def rate(successes: int, trials: int) -> Estimate:
    """``successes / trials`` with its Wilson interval (nan for zero trials)."""
    low, high = wilson(successes, trials)
    return Estimate(successes / trials if trials else math.nan, low, high, trials)


def mean(groups: Sequence[Sequence[float]], seed: int = 0) -> Estimate:
    """The mean over every value of ``groups`` (one group per task) with
    :func:`bootstrap_mean`'s interval; nan when there is no value."""
    values = [value for group in groups for value in group]
    if not values:
        return Estimate(math.nan, math.nan, math.nan, 0)
    low, high = bootstrap_mean(groups, seed)
    return Estimate(sum(values) / len(values), low, high, len(values))


def paired_difference(
    before: Sequence[Sequence[float]],
    after: Sequence[Sequence[float]],
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[Estimate, float]:
    """``(difference, p_value)`` of ``after``'s mean minus ``before``'s over the same tasks
    (``before[i]`` and ``after[i]``: task ``i``'s episodes, each non-empty).

    A two-level bootstrap: each resample draws tasks with replacement, then, within each drawn
    task, that task's episodes of each side with replacement, and takes the difference of the
    means of the task means. Resampling the episodes too keeps the interval honest when a task
    has few of them (one greedy episode has no spread to resample, so greedy against greedy leans
    on the tasks alone). The p-value is twice the smaller tail of the resampled differences at 0,
    capped at 1 (0 when no resample crossed 0: read it as below ``1/resamples``).
    """
    if len(before) != len(after) or not before:
        raise ValueError(f"need the same tasks on both sides, got {len(before)} and {len(after)}")
    if not all(before) or not all(after):
        raise ValueError("every task needs at least one episode on each side")
    rng = random.Random(f"kit.evaluate.compare/{seed}")
    differences = []
    n = len(before)
    for _ in range(resamples):
        total_a = total_b = 0.0
        for _ in range(n):
            i = rng.randrange(n)
            total_a += sum(rng.choice(before[i]) for _ in before[i]) / len(before[i])
            total_b += sum(rng.choice(after[i]) for _ in after[i]) / len(after[i])
        differences.append((total_b - total_a) / n)
    differences.sort()
    low, high = _percentiles(differences)
    tail = min(sum(d <= 0 for d in differences), sum(d >= 0 for d in differences)) / resamples
    return Estimate(task_mean(after) - task_mean(before), low, high, n), min(1.0, 2 * tail)


def task_mean(groups: Sequence[Sequence[float]]) -> float:
    """The mean of the tasks' means (each group non-empty): each task counts once, however many
    episodes it has, as in :func:`paired_difference`."""
    return sum(sum(group) / len(group) for group in groups) / len(groups)


def _percentiles(ordered: Sequence[float]) -> tuple[float, float]:
    """The 2.5% and 97.5% points of sorted resamples, as the kit has always taken them."""
    last = len(ordered) - 1
    return ordered[int(0.025 * last)], ordered[int(math.ceil(0.975 * last))]
