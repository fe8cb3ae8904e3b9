"""Catch: kit's engine and its tool env against OpenSpiel's ``rl_environment`` (the path OpenEnv's
``openspiel_env`` serves), on the same workload: whole 10 x 5 games of the same random actions.

    python benchmarks/catch.py [--seconds 2] [--rounds 7]

Workloads: ``games``, actions per second over whole games, resets included (a batch: 64 games
of 9 actions); ``reset``, one reset alone (a batch: 100). Contenders: the ``engine``
(``reset(ball_col=k)``, ``step("LEFT")``); the ``env`` TRL trains through (``CatchEnv``:
``reset(ball_col=k)``, which builds a fresh engine, then the tools ``move("LEFT")`` and
``stay()``); ``OpenSpiel`` (``rl_environment.Environment("catch")``: ``reset()``, ``step([id])``;
it draws the ball's column itself, and the column does not change the cost). Timing alternates
between them (``harness``). Goal: the engine plays games at least 5x as fast as OpenSpiel.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence

import harness
from harness import ENGINE, ENV, Contender, Move

from kit.builtin.catch.engine import ACTIONS, Catch
from kit.envs import CatchEnv

GAME = "catch"
REFERENCE = "OpenSpiel"
GOAL = 5.0
_POOL = [[random.Random(i).randrange(3) for _ in range(9)] for i in range(64)]  # action ids
_COLUMNS = [i % 5 for i in range(len(_POOL))]
_RESET_COLUMNS = [i % 5 for i in range(100)]

Sides = tuple[harness.Batch, harness.Batch]  # (a batch of games, a batch of resets)


def _sides(reset: Callable[[int], object], moves: Sequence[Move]) -> Sides:
    """A contender's two batches, given its reset and its three moves (by action id) as calls."""
    played = [
        (column, [moves[move] for move in game])
        for column, game in zip(_COLUMNS, _POOL, strict=True)
    ]
    return harness.games(reset, played), harness.resets(reset, _RESET_COLUMNS)


def _engine() -> Sides:
    game = Catch()
    steps = [functools.partial(game.step, action) for action in ACTIONS]
    return _sides(lambda column: game.reset(ball_col=column), steps)


def _env() -> Sides:
    env = CatchEnv()
    # TRL calls a tool by name with the model's JSON arguments: LEFT, STAY and RIGHT as tools.
    left, right = (functools.partial(env.move, direction=d) for d in ("LEFT", "RIGHT"))
    return _sides(lambda column: env.reset(ball_col=column), [left, env.stay, right])


def _reference() -> Sides | None:
    try:
        from open_spiel.python import rl_environment
    except ImportError:
        return None
    env = rl_environment.Environment("catch")
    env.seed(0)
    steps = [functools.partial(env.step, [move]) for move in range(len(ACTIONS))]
    return _sides(lambda column: env.reset(), steps)


def run(seconds: float = 2.0, rounds: int = 7) -> list[harness.Result]:
    """Time the engine, the env and (if installed) OpenSpiel on both workloads."""
    sides = {ENGINE: _engine(), ENV: _env()}
    reference = _reference()
    notes = [] if reference else ["open_spiel is not installed: no reference"]
    if reference is not None:
        sides[REFERENCE] = reference
    return [
        harness.compare(
            GAME,
            "games (10 x 5), resets included",
            "actions/s",
            [Contender(name, play) for name, (play, _) in sides.items()],
            seconds,
            rounds,
            REFERENCE,
            GOAL,
            notes,
        ),
        harness.compare(
            GAME,
            "reset",
            harness.MS,
            [Contender(name, resets) for name, (_, resets) in sides.items()],
            seconds,
            rounds,
            REFERENCE,
        ),
    ]


if __name__ == "__main__":
    harness.run_main(__doc__, run)
