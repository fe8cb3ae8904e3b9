"""What every benchmark here shares: contenders timed in alternation over rounds, and a report
that gives each figure's spread and says plainly when a goal is missed.

A measurement is one workload of one game (whole games, or resets alone) played by several
contenders: the kit's engine, the tool env TRL drives (``kit.envs``), the reference. It runs in
``rounds`` rounds; each round gives every contender one slice of ``seconds / rounds`` of timed
work, back to back, and the order rotates from round to round. So a change in the load of a
shared machine (another job, a CPU clocking down) hits every contender alike, and no contender
is always first. A slice repeats batches of the workload until its time is up (at least one
batch, however long); the contender's figure for that round is its rate over the slice. Before
the first round every contender plays one batch untimed: first-call costs (lazy imports, word
lists, caches filling) are no part of a rate.

Reported per contender: min / median / max over the rounds. Per contender against the
reference: the ratio of the medians, and the range of the per-round ratios (within a round the
contenders ran side by side, under the same load). A goal (``engine >= N x reference``) is
judged on the ratio of the medians, and the report says whether every round met it too.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MS = "ms/reset"  # the one lower-is-better unit; every other unit is a rate ("moves/s")
ENGINE = "engine"
ENV = "env"
Batch = Callable[[], int]  # does one batch of a workload; returns how many operations it did
Move = Callable[[], object]  # one move, its arguments bound before timing


@dataclass(frozen=True)
class Contender:
    """One side of a measurement: ``batch`` does one batch of the workload and returns how many
    operations (moves, resets) it did; ``setup``, if given, runs untimed before every batch (a
    reset that must not count, a cache that must start empty)."""

    name: str
    batch: Batch
    setup: Callable[[], object] | None = None


@dataclass(frozen=True)
class Result:
    """One measurement: each contender's figure per round, in ``unit``."""

    game: str
    workload: str
    unit: str
    values: dict[str, list[float]]
    reference: str | None  # the name of the reference contender; None where none ran
    goal: float | None = None  # the engine's speed-up over the reference that is claimed
    notes: tuple[str, ...] = ()

    def speedups(self, name: str) -> tuple[float, list[float]]:
        """How many times as fast as the reference ``name`` is: on the medians, and per round."""
        if self.reference is None:
            raise ValueError(f"{self.game} | {self.workload}: no reference ran")
        mine, theirs = self.values[name], self.values[self.reference]
        if self.unit == MS:
            mine, theirs = theirs, mine
        per_round = [a / b for a, b in zip(mine, theirs, strict=True)]
        return statistics.median(mine) / statistics.median(theirs), per_round


def games(reset: Callable[[Any], object], played: Sequence[tuple[Any, Sequence[Move]]]) -> Batch:
    """A batch that plays whole games, resets included: ``reset(task)``, then every move, for
    each ``(task, moves)``; it counts the moves."""

    def batch() -> int:
        moves_played = 0
        for task, moves in played:
            reset(task)
            moves_played += _play(moves)
        return moves_played

    return batch


def moves_alone(
    name: str, reset: Callable[[Any], object], played: Sequence[tuple[Any, Sequence[Move]]]
) -> Contender:
    """A contender whose batch is the moves of one game, the next of ``played`` each time (round
    and round), its reset run untimed before it: moves per second, resets excluded."""
    queue = itertools.cycle(played)
    moves: Sequence[Move] = ()

    def setup() -> None:
        nonlocal moves
        task, moves = next(queue)
        reset(task)

    return Contender(name, lambda: _play(moves), setup)


def _play(moves: Sequence[Move]) -> int:
    for move in moves:
        try:
            move()
        except ValueError:
            # A tool call that failed, as TRL counts it: the env raises where the engine
            # answers an invalid move with a warning.
            pass
    return len(moves)


def resets(reset: Callable[[Any], object], tasks: Sequence[Any]) -> Batch:
    """A batch of ``reset(task)`` for each task; it counts the resets."""

    def batch() -> int:
        for task in tasks:
            reset(task)
        return len(tasks)

    return batch


def openenv_driven(env: Any) -> tuple[Callable[[Any], None], Callable[[str], None]]:
    """``reset(seed)`` and ``step(action)`` of a TextArena env (``textarena.make(...)``) as
    OpenEnv's ``textarena_env`` drives it: the ``LLMObservationWrapper`` history cleared before
    each reset (it keeps it across resets otherwise, and every observation would grow), and
    ``get_observation()`` after the reset and after every step (the kit's engines return the
    text, so the reference must build it too)."""
    layers, layer = [], env
    while layer is not None:
        if hasattr(layer, "full_observations"):
            layers.append(layer)
        layer = getattr(layer, "env", None)

    def reset(seed: Any) -> None:
        for wrapper in layers:
            wrapper.full_observations = {}
        env.reset(num_players=1, seed=seed)
        env.get_observation()

    def step(action: str) -> None:
        env.step(action)
        env.get_observation()

    return reset, step


def measure(contenders: Sequence[Contender], seconds: float, rounds: int) -> dict[str, list[float]]:
    """Operations per second of each contender in each round (see the module docstring)."""
    for contender in contenders:
        _slice(contender, 0.0)
    rates: dict[str, list[float]] = {contender.name: [] for contender in contenders}
    for round_ in range(rounds):
        shift = round_ % len(contenders)
        for contender in [*contenders[shift:], *contenders[:shift]]:
            rates[contender.name].append(_slice(contender, seconds / rounds))
    return rates


def _slice(contender: Contender, seconds: float) -> float:
    operations, spent = 0, 0.0
    while True:
        if contender.setup is not None:
            contender.setup()
        start = time.perf_counter()
        operations += contender.batch()
        spent += time.perf_counter() - start
        if spent >= seconds:
            return operations / spent


def compare(
    game: str,
    workload: str,
    unit: str,
    contenders: Sequence[Contender],
    seconds: float,
    rounds: int,
    reference: str | None = None,
    goal: float | None = None,
    notes: Iterable[str] = (),
) -> Result:
    """Measure ``contenders`` and keep the figures in ``unit`` (a rate, or ``MS`` per operation).
    ``reference`` names the contender the others are held against, if it is among them."""
    rates = measure(contenders, seconds, rounds)
    values = {
        name: [1000 / rate for rate in per_round] if unit == MS else per_round
        for name, per_round in rates.items()
    }
    return Result(
        game, workload, unit, values, reference if reference in values else None, goal, tuple(notes)
    )


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.1f}x"


def verdict(result: Result) -> tuple[str, bool] | None:
    """What became of the goal, and whether it is missed (a goal not checked counts as missed:
    nothing shows it met); None where the measurement states no goal."""
    if result.goal is None:
        return None
    goal = f"engine >= {result.goal:g}x {result.reference or 'the reference'}:"
    if result.reference is None:
        return f"{goal} NOT CHECKED, no reference ran", True
    median, per_round = result.speedups(ENGINE)
    if median < result.goal:
        return f"{goal} MISSED ({_times(median)} on the medians)", True
    if min(per_round) < result.goal:
        lowest = _times(min(per_round))
        return f"{goal} met on the medians, not in every round (lowest {lowest})", False
    return f"{goal} met (every round)", False


def lines(result: Result) -> list[str]:
    """The measurement as text: a row per contender, a ratio per contender, the goal's verdict."""
    out = [f"{result.game} | {result.workload} | {result.unit}, over {_rounds(result)} rounds"]
    out.append(f"    {'':<12}{'min':>14}{'median':>14}{'max':>14}")
    for name, values in result.values.items():
        low, mid, high = min(values), statistics.median(values), max(values)
        out.append(f"    {name:<12}{_number(low):>14}{_number(mid):>14}{_number(high):>14}")
    if result.reference is not None:
        for name in result.values:
            if name != result.reference:
                median, per_round = result.speedups(name)
                out.append(
                    f"    {name} / {result.reference}: {_times(median)} on the medians "
                    f"(rounds {_times(min(per_round))} to {_times(max(per_round))})"
                )
    judged = verdict(result)
    if judged is not None:
        out.append(f"    goal: {judged[0]}")
    out += [f"    note: {note}" for note in result.notes]
    return out


def _rounds(result: Result) -> int:
    return len(next(iter(result.values.values())))


def report(results: Iterable[Result]) -> None:
    """Print every measurement, then the goals."""
    results = list(results)
    for result in results:
        print("\n".join(lines(result)) + "\n")
    summary(results)


def summary(results: Sequence[Result]) -> None:
    """Print the goals (each one missed by name, or that all are met) and the load at the end."""
    goals = [(result, judged) for result in results if (judged := verdict(result)) is not None]
    missed = [(result, text) for result, (text, miss) in goals if miss]
    if not goals:
        print("Goals: none stated for these measurements.")
    elif not missed:
        print(f"Goals: all {len(goals)} met.")
    else:
        print(f"Goals: {len(missed)} of {len(goals)} MISSED or not checked:")
        for result, text in missed:
            print(f"    {result.game} | {result.workload}: {text}")
    print(f"Load average (1, 5, 15 min) at the end: {_load()}")


def _load() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--seconds`` per contender and workload, ``--rounds``."""
    out = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    out.add_argument(
        "--seconds",
        type=float,
        default=2.0,
        help="timed work per contender and workload, over all rounds (default 2)",
    )
    out.add_argument(
        "--rounds", type=_positive, default=7, help="rounds of alternation (default 7)"
    )
    return out


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def header(seconds: float, rounds: int) -> None:
    """The run's conditions, printed first: a ratio means little without the load it ran under."""
    print(
        f"{rounds} rounds of about {seconds / rounds:.3g} s of timed work per contender and "
        f"workload; the order rotates each round.\n"
        f"Load average (1, 5, 15 min) at the start: {_load()} on {os.cpu_count()} CPUs\n"
    )


def run_main(doc: str | None, run: Callable[[float, int], list[Result]]) -> None:
    """A benchmark module's ``__main__``: parse the common options, run, report."""
    args = parser(doc).parse_args()
    header(args.seconds, args.rounds)
    report(run(args.seconds, args.rounds))
