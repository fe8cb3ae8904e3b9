"""Sudoku: kit's engine and its tool env against TextArena's Sudoku-v0 variants, in one process.

    python benchmarks/sudoku.py [--seconds 2] [--rounds 7] [--difficulties hard ...]

Per difficulty, three workloads, each timed in alternation between the contenders
(``harness``):

* ``moves``: moves per second, resets excluded (each game's reset runs untimed before it). The
  same 8 games in every contender (kit puzzles, fed to TextArena through its
  ``_generate_board``), each the solver's winning moves with an invalid ``[0 0 0]`` after every
  fourth. Goal: the engine at least 10x as fast as TextArena.
* ``reset(seed=)``: ``reset(seed=n)`` for seeds 0, 1, 2, ...: TextArena generates its puzzle
  there (up to seconds, at "hard", depending on the seed), the kit picks one from its bank and
  disguises it.
* ``reset(puzzle=)``: the path task datasets take (their ``puzzle`` column), on 64 puzzles the
  kit deals: the kit settles that the puzzle has exactly one solution (a search bounded by
  ``MAX_SEARCH_NODES``). TextArena's reset takes no puzzle: its ``_generate_board`` returns the
  one given, which it does not check.

Contenders: the ``engine`` (``Sudoku``: ``reset(...)``, ``step("[5 3 7]")``); the ``env`` TRL
trains through (``SudokuEnv``: ``reset(...)``, which builds a fresh engine, then the tool
``place(row=5, col=3, number=7)``; an invalid move raises, as TRL counts a failed call);
``TextArena``, driven as OpenEnv drives it (``harness.openenv_driven``): a step includes
``get_observation()``, since the kit's step returns the text.
"""

from __future__ import annotations

import argparse
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import harness
from harness import ENGINE, ENV, Contender, Move

from kit.builtin.sudoku.engine import DIFFICULTIES, Sudoku
from kit.envs import SudokuEnv
from kit.solvers import play

GAME = "sudoku"
REFERENCE = "TextArena"
GOAL = 10.0
_GAMES = 8  # the moves workload
_PUZZLE_SEEDS = range(1_000, 1_064)  # the reset(puzzle=) workload: seeds the moves one leaves

Grid = list[list[int]]


@dataclass(frozen=True)
class _Side:
    """How one contender takes each workload."""

    task: Callable[[str, str], Any]  # (puzzle, solution) -> what ``given`` takes, made untimed
    given: Callable[[Any], object]  # reset to a given puzzle
    seeded: Callable[[int], object]  # reset(seed=n)
    bind: Callable[[str], Move]  # an action of the workload, as this contender makes the move
    seeds_a_batch: int  # resets a batch of reset(seed=): one of TextArena's can take seconds


def _games(difficulty: str) -> list[tuple[str, str, list[str]]]:
    """(puzzle, solution, actions) of the moves workload."""
    out = []
    for seed in range(_GAMES):
        game = Sudoku(difficulty=difficulty)
        game.reset(seed=seed)
        moves = play("sudoku", seed=seed, difficulty=difficulty)
        actions = []
        for k, move in enumerate(moves, 1):
            actions += [move, "[0 0 0]"] if k % 4 == 0 and k < len(moves) else [move]
        out.append((game.puzzle, game.solution, actions))
    return out


def _dealt(difficulty: str) -> list[tuple[str, str]]:
    """(puzzle, solution) of the reset(puzzle=) workload: puzzles as a task dataset holds them."""
    game, out = Sudoku(difficulty=difficulty), []
    for seed in _PUZZLE_SEEDS:
        game.reset(seed=seed)
        out.append((game.puzzle, game.solution))
    return out


def _engine(difficulty: str) -> _Side:
    game = Sudoku(difficulty=difficulty)
    return _Side(
        task=lambda puzzle, _: puzzle,
        given=lambda puzzle: game.reset(puzzle=puzzle),
        seeded=lambda seed: game.reset(seed=seed),
        bind=lambda action: functools.partial(game.step, action),
        seeds_a_batch=50,
    )


def _env(difficulty: str) -> _Side:
    env = SudokuEnv()

    def place(action: str) -> Move:
        # The JSON arguments a model sends for the move "[5 3 7]".
        row, col, number = map(int, action.strip("[]").split())
        return functools.partial(env.place, row=row, col=col, number=number)

    return _Side(
        task=lambda puzzle, _: puzzle,
        given=lambda puzzle: env.reset(puzzle=puzzle),
        seeded=lambda seed: env.reset(seed=seed, difficulty=difficulty),
        bind=place,
        seeds_a_batch=50,
    )


def _reference(difficulty: str) -> _Side | None:
    try:
        import textarena as ta
    except ImportError:
        return None
    env_id = DIFFICULTIES[difficulty][0]
    seeded, _ = harness.openenv_driven(ta.make(env_id))
    env = ta.make(env_id)
    inner = env
    while hasattr(inner, "env"):
        inner = inner.env
    given: tuple[Grid, Grid] = ([], [])
    # Its reset takes no puzzle, but calls _generate_board for (solution, puzzle): return the
    # given ones, copied, as the moves fill the puzzle's grid in place.
    inner._generate_board = lambda: tuple([row[:] for row in grid] for grid in given)
    reset, step = harness.openenv_driven(env)

    def play_given(grids: tuple[Grid, Grid]) -> None:
        nonlocal given
        given = grids
        reset(0)

    return _Side(
        task=lambda puzzle, solution: (_grid(solution), _grid(puzzle)),
        given=play_given,
        seeded=seeded,
        bind=lambda action: functools.partial(step, action),
        seeds_a_batch=1,
    )


def _grid(cells: str) -> Grid:
    return [[0 if ch == "." else int(ch) for ch in cells[r : r + 9]] for r in range(0, 81, 9)]


def _seeded(reset: Callable[[int], object], per_batch: int) -> harness.Batch:
    """A batch of ``per_batch`` resets on the next seeds: 0, 1, 2, ... over the whole run (a
    seed's TextArena puzzle costs what it costs; no seed is timed twice)."""
    seeds = itertools.count()

    def batch() -> int:
        for _ in range(per_batch):
            reset(next(seeds))
        return per_batch

    return batch


def run(
    seconds: float = 2.0, rounds: int = 7, difficulties: tuple[str, ...] = tuple(DIFFICULTIES)
) -> list[harness.Result]:
    """Time the engine, the env and (if installed) TextArena on the three workloads of each
    difficulty."""
    results = []
    for difficulty in difficulties:
        sides = {ENGINE: _engine(difficulty), ENV: _env(difficulty)}
        reference = _reference(difficulty)
        if reference is not None:
            sides[REFERENCE] = reference
        notes = [] if reference else ["textarena is not installed: no reference"]
        games, dealt = _games(difficulty), _dealt(difficulty)
        label = f"{GAME} {difficulty}"
        moves = [
            harness.moves_alone(
                name,
                side.given,
                [(side.task(p, s), [side.bind(a) for a in actions]) for p, s, actions in games],
            )
            for name, side in sides.items()
        ]
        seeded = [
            Contender(name, _seeded(side.seeded, side.seeds_a_batch))
            for name, side in sides.items()
        ]
        given = [
            Contender(name, harness.resets(side.given, [side.task(p, s) for p, s in dealt]))
            for name, side in sides.items()
        ]
        results += [
            harness.compare(
                label,
                "moves, resets excluded",
                "moves/s",
                moves,
                seconds,
                rounds,
                REFERENCE,
                GOAL,
                notes,
            ),
            harness.compare(label, "reset(seed=)", harness.MS, seeded, seconds, rounds, REFERENCE),
            harness.compare(label, "reset(puzzle=)", harness.MS, given, seconds, rounds, REFERENCE),
        ]
    return results


def difficulties(parser: argparse.ArgumentParser) -> None:
    """Add ``--difficulties`` (default: all) to a benchmark's options."""
    parser.add_argument(
        "--difficulties",
        nargs="+",
        choices=list(DIFFICULTIES),
        default=list(DIFFICULTIES),
        help="the Sudoku difficulties to time (default: all)",
    )


if __name__ == "__main__":
    options = harness.parser(__doc__)
    difficulties(options)
    args = options.parse_args()
    harness.header(args.seconds, args.rounds)
    harness.report(run(args.seconds, args.rounds, tuple(args.difficulties)))
