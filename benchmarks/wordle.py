"""Wordle: kit's engine and its tool env against TextArena's ``Wordle-v0`` on the same games.

    python benchmarks/wordle.py [--seconds 2] [--rounds 7]

Workload, shaped like GRPO's: tasks are seeds (seed n draws the same secret in both engines), each
played by a group of 8 rollouts in a row, as ``GRPOTrainer`` resets the G copies of a row; 100
tasks, 800 games, are one batch. A rollout makes 2 to 4 wrong guesses and then finds the secret
(3 in 4 games) or loses after six wrong guesses; one game in five also makes an invalid move (a
warning): about 4.7 moves a game. Every contender plays the identical moves; timing alternates
between them (``harness``).

Contenders: the ``engine`` (``reset(seed=n)``, ``step("[crane]")``); the ``env`` TRL trains
through (``WordleEnv``: ``reset(seed=n)``, which builds a fresh engine, then the tool
``guess("crane")``; an invalid guess raises, as TRL counts a failed call); ``TextArena``, driven
as OpenEnv drives it (``harness.openenv_driven``). The kit remembers seed draws, and the cache is
emptied before every batch, so that 7 resets in 8 skip seeding a Mersenne Twister, as in GRPO.

Workloads: ``games``, moves per second of whole games, resets included; ``reset``, one reset
alone on the workload's seeds; ``reset, new seeds``, on seeds never seen before. Goal: the engine
plays games at least 5x as fast as TextArena. A note gives the time to build each engine.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import harness
from harness import ENGINE, ENV, Contender, Move

from kit.builtin.wordle import engine as wordle
from kit.builtin.wordle.engine import Wordle
from kit.envs import WordleEnv

GAME = "wordle"
REFERENCE = "TextArena"
GOAL = 5.0
NLTK_DATA = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data"
GROUP = 8  # rollouts per task
GAMES = 800  # the workload, and one batch

Sides = tuple[harness.Batch, harness.Batch, harness.Batch]  # games, resets, resets on new seeds


def workload(games: int, seed: int = 0) -> list[tuple[int, list[str]]]:
    """(seed, moves) per game, each seed repeated ``GROUP`` times in a row."""
    rng = random.Random(seed)
    words = sorted(wordle.dictionary(5))
    game = Wordle()
    out = []
    for _ in range(max(1, games // GROUP)):
        task = rng.randrange(10**9)
        for _ in range(GROUP):
            game.reset(seed=task)
            moves = [f"[{rng.choice(words)}]" for _ in range(6)]
            if rng.random() < 0.75:
                moves[rng.randint(2, 4)] = f"[{game.secret}]"
            if rng.random() < 0.2:
                moves.insert(rng.randint(0, 4), rng.choice(["[xqzvw]", "crane!", "[cranes]"]))
            played = []
            for move in moves:  # keep only the moves played before the game ends
                played.append(move)
                if game.step(move).done:
                    break
            out.append((task, played))
    return out


def _sides(
    reset: Callable[[int], object],
    move: Callable[[str], Move],
    games: list[tuple[int, list[str]]],
    fresh: Sequence[int],
) -> Sides:
    """A contender's three batches, given its reset and how it binds one move of the workload."""
    played = [(seed, [move(text) for text in moves]) for seed, moves in games]
    seeds = [seed for seed, _ in games]
    return harness.games(reset, played), harness.resets(reset, seeds), harness.resets(reset, fresh)


def _word(move: str) -> str:
    """What a model would pass to ``guess`` for the move: the word, without the brackets."""
    return move[1:-1] if move.startswith("[") and move.endswith("]") else move


def _reference() -> tuple[Callable[[int], None], Callable[[str], None], float] | None:
    os.environ.setdefault("NLTK_DATA", str(NLTK_DATA))
    try:
        import nltk

        if os.environ["NLTK_DATA"] not in nltk.data.path:
            nltk.data.path.insert(0, os.environ["NLTK_DATA"])
        nltk.download = lambda *args, **kwargs: True  # offline: the data is local
        import textarena as ta
    except ImportError:
        return None
    start = time.perf_counter()
    env = ta.make("Wordle-v0")
    init = time.perf_counter() - start
    reset, step = harness.openenv_driven(env)
    return reset, step, init


def run(seconds: float = 2.0, rounds: int = 7) -> list[harness.Result]:
    """Time the engine, the env and (if installed) TextArena on the three workloads."""
    start = time.perf_counter()
    game = Wordle()
    game.reset(seed=0)  # loads the word lists
    built = {ENGINE: time.perf_counter() - start}
    env = WordleEnv()
    games = workload(GAMES)
    # Distinct seeds: with the draw cache emptied before every batch, each reset seeds a generator.
    fresh = random.Random(1).sample(range(10**12), GAMES)
    sides = {
        ENGINE: _sides(
            lambda seed: game.reset(seed=seed),
            lambda move: functools.partial(game.step, move),
            games,
            fresh,
        ),
        ENV: _sides(
            lambda seed: env.reset(seed=seed),
            lambda move: functools.partial(env.guess, guess=_word(move)),
            games,
            fresh,
        ),
    }
    reference = _reference()
    if reference is not None:
        reset, step, built[REFERENCE] = reference
        sides[REFERENCE] = _sides(reset, lambda move: functools.partial(step, move), games, fresh)
    notes = [
        "building the engine: "
        + ", ".join(f"{name} {seconds_:.3f} s" for name, seconds_ in built.items())
    ]
    if reference is None:
        notes.append("textarena is not installed: no reference")
    results = []
    workloads = [
        (f"games (GRPO groups of {GROUP}), resets included", "moves/s", GOAL, notes),
        (f"reset (GRPO groups of {GROUP})", harness.MS, None, ()),
        ("reset, new seeds", harness.MS, None, ()),
    ]
    for i, (name, unit, goal, remarks) in enumerate(workloads):
        contenders = [
            # An empty draw cache before every batch: each task's first reset seeds a generator.
            Contender(side, batches[i], None if side == REFERENCE else wordle._draw.cache_clear)
            for side, batches in sides.items()
        ]
        results.append(
            harness.compare(GAME, name, unit, contenders, seconds, rounds, REFERENCE, goal, remarks)
        )
    return results


if __name__ == "__main__":
    harness.run_main(__doc__, run)
