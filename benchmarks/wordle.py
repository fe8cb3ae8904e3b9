"""kit's Wordle against TextArena's ``Wordle-v0`` on the same games, in one process.

    python benchmarks/wordle.py

Workload, shaped like GRPO's: tasks are seeds (seed n draws the same secret in both engines), each
played by a group of 8 rollouts in a row, as ``GRPOTrainer`` resets the G copies of a row. A
rollout makes 2 to 4 wrong guesses and then finds the secret (3 in 4 games) or loses after six
wrong guesses; one game in five also makes an invalid move (a warning): about 4.7 moves a game.
Both engines play the identical moves; the timing alternates between them chunk by chunk so that
the load of a shared machine hits both alike.

The reference is driven as OpenEnv drives it: clear the ``LLMObservationWrapper`` history,
``reset``, then ``get_observation()`` after the reset and after every step. Rows:
``steps_per_s``: moves per second of whole games, resets included; ``reset_ms``: mean reset time
on this workload (kit remembers seed draws, so 7 resets in 8 skip seeding a Mersenne Twister);
``reset_ms_fresh``: a reset on a seed never seen before; ``init_s``: building the engine.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.games import wordle
from kit.games.wordle import Wordle

NLTK_DATA = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data"
GROUP = 8  # rollouts per task
CHUNK = 200  # games timed on one engine before switching to the other


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


def _kit() -> tuple[Callable[[int], Any], Callable[[str], Any], float]:
    start = time.perf_counter()
    game = Wordle()
    game.reset(seed=0)  # loads the word lists
    return (lambda seed: game.reset(seed=seed)), game.step, time.perf_counter() - start


def _reference() -> tuple[Callable[[int], Any], Callable[[str], Any], float] | None:
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
    layers, layer = [], env
    while layer is not None:
        if hasattr(layer, "full_observations"):
            layers.append(layer)
        layer = getattr(layer, "env", None)

    def reset(seed: int) -> None:
        for wrapper in layers:  # the wrapper keeps its history across resets otherwise
            wrapper.full_observations = {}
        env.reset(num_players=1, seed=seed)
        env.get_observation()

    def step(action: str) -> None:
        env.step(action)
        env.get_observation()

    return reset, step, init


def _play(reset: Callable[[int], Any], step: Callable[[str], Any], games: list) -> float:
    start = time.perf_counter()
    for seed, moves in games:
        reset(seed)
        for move in moves:
            step(move)
    return time.perf_counter() - start


def _resets(reset: Callable[[int], Any], seeds: list[int]) -> float:
    start = time.perf_counter()
    for seed in seeds:
        reset(seed)
    return 1000 * (time.perf_counter() - start) / len(seeds)


def run(seconds: float = 2.0) -> list[dict]:
    """Time both engines on the same games (about ``seconds`` of reference time); one row each."""
    engines = {"kit": _kit()}
    reference = _reference()
    if reference is not None:
        engines["reference"] = reference
    games = workload(int(20_000 * seconds))
    steps = sum(len(moves) for _, moves in games)
    rng = random.Random(1)
    fresh = [rng.randrange(10**12) for _ in range(2000)]  # seeds the workload never uses
    resets, resets_fresh = {}, {}
    for name, (reset, _, _) in engines.items():
        wordle._draw.cache_clear()  # building the workload played its seeds once already
        resets[name] = _resets(reset, [seed for seed, _ in games[:4000]])
        resets_fresh[name] = _resets(reset, fresh)
    wordle._draw.cache_clear()
    elapsed = dict.fromkeys(engines, 0.0)
    for chunk in range(0, len(games), CHUNK):
        for name, (reset, step, _) in engines.items():
            elapsed[name] += _play(reset, step, games[chunk : chunk + CHUNK])
    rows = []
    for name, (_, _, init) in engines.items():
        rows.append(
            {
                "game": "wordle",
                "engine": name,
                "steps_per_s": steps / elapsed[name],
                "reset_ms": resets[name],
                "reset_ms_fresh": resets_fresh[name],
                "init_s": init,
                "games": len(games),
            }
        )
    return rows


if __name__ == "__main__":
    results = run()
    for row in results:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    if len(results) == 2:
        kit, ref = results
        print(
            f"kit / reference: steps/s {kit['steps_per_s'] / ref['steps_per_s']:.1f}x, "
            f"reset {ref['reset_ms'] / kit['reset_ms']:.1f}x, "
            f"fresh reset {ref['reset_ms_fresh'] / kit['reset_ms_fresh']:.1f}x"
        )
