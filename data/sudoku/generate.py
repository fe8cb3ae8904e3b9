"""Build the Sudoku puzzle bank: TextArena's own generator, run offline with a fast solver.

TextArena (``textarena/envs/Sudoku/env.py``) fills a grid by randomised backtracking, shuffles the
81 cells and removes them one by one down to its clue target, putting a cell back whenever the
puzzle stops having exactly one solution. This script replays that algorithm call for call on
``random.Random(seed)``, which is what TextArena's ``reset(seed=seed)`` seeds, so line ``n`` of
``<difficulty>.txt`` is exactly the puzzle ``Sudoku-v0[-difficulty]`` deals for seed ``n``, and
the bank has TextArena's clue-count distribution. Only the solution counter is ours (same answer,
milliseconds instead of seconds).

    python data/sudoku/generate.py                 # rewrite the bank (1000 puzzles a difficulty)
    python data/sudoku/generate.py --verify 20     # compare the first 20 seeds with TextArena
"""

from __future__ import annotations

import argparse
import random
import sys
from multiprocessing import Pool
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script from a checkout

from kit.builtin.sudoku.engine import DIFFICULTIES, solutions  # noqa: E402


def _safe(grid: list[list[int]], row: int, col: int, num: int) -> bool:
    if num in grid[row] or num in [grid[i][col] for i in range(9)]:
        return False
    r0, c0 = 3 * (row // 3), 3 * (col // 3)
    return all(grid[i][j] != num for i in range(r0, r0 + 3) for j in range(c0, c0 + 3))


def _fill(grid: list[list[int]], rng: random.Random) -> bool:
    empty = next(((i, j) for i in range(9) for j in range(9) if grid[i][j] == 0), None)
    if empty is None:
        return True
    row, col = empty
    numbers = list(range(1, 10))
    rng.shuffle(numbers)
    for num in numbers:
        if _safe(grid, row, col, num):
            grid[row][col] = num
            if _fill(grid, rng):
                return True
            grid[row][col] = 0
    return False


def textarena_puzzle(seed: int, clues: int) -> tuple[str, str]:
    """The (puzzle, solution) TextArena's SudokuEnv(clues=clues) deals after reset(seed=seed)."""
    rng = random.Random(seed)
    grid = [[0] * 9 for _ in range(9)]
    _fill(grid, rng)
    solution = "".join(str(v) for row in grid for v in row)
    puzzle = list(solution)
    cells = [(i, j) for i in range(9) for j in range(9)]
    rng.shuffle(cells)
    while len(cells) > clues:
        i, j = cells.pop()
        removed, puzzle[9 * i + j] = puzzle[9 * i + j], "."
        if len(solutions("".join(puzzle), 2)) != 1:
            puzzle[9 * i + j] = removed
    return "".join(puzzle), solution


def _job(args: tuple[int, int]) -> str:
    puzzle, solution = textarena_puzzle(*args)
    return f"{puzzle} {solution}\n"


def generate(count: int, processes: int) -> None:
    with Pool(processes) as pool:
        for name, (_, clues) in DIFFICULTIES.items():
            lines = pool.map(_job, [(seed, clues) for seed in range(count)], chunksize=8)
            (HERE / f"{name}.txt").write_text("".join(lines))
            print(f"{name}: {count} puzzles", flush=True)


def verify(count: int) -> None:
    """Deal seeds 0..count-1 with TextArena itself and compare them with the bank."""
    from textarena.envs.Sudoku.env import SudokuEnv

    for name, (_, clues) in DIFFICULTIES.items():
        bank = (HERE / f"{name}.txt").read_text().split("\n")
        env = SudokuEnv(clues=clues)
        for seed in range(count):
            random.seed(seed)  # what TextArena's State(seed=seed) does before generating
            full, board = env._generate_board()
            puzzle = "".join(str(v) if v else "." for row in board for v in row)
            solution = "".join(str(v) for row in full for v in row)
            assert bank[seed] == f"{puzzle} {solution}", f"{name} seed {seed} differs"
        print(f"{name}: seeds 0..{count - 1} identical to TextArena", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="puzzles per difficulty")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--verify", type=int, metavar="N", help="check seeds 0..N-1 instead")
    args = parser.parse_args()
    if args.verify is not None:
        verify(args.verify)
    else:
        generate(args.count, args.processes)
