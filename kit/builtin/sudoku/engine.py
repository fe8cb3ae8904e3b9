"""Sudoku, as TextArena's ``Sudoku-v0`` (textarena 0.7.4) plays it, with its difficulty variants.

Rules (``textarena/envs/Sudoku/env.py`` behind ``LLMObservationWrapper`` and
``ActionFormattingWrapper``): an action without any bracket is wrapped in ``[...]``; the first
match of ``\\[(\\d+)\\s(\\d+)\\s(\\d+)\\]`` is the move ``[row col num]``, 1-based. Checks in order:
format, bounds 1..9, cell already filled, digit differs from the stored solution. The first
invalid move is a warning; a second in a row ends the game and pays the fraction of the
originally empty cells filled correctly. Filling the last cell pays 1. The reference's 100-turn
limit cannot be reached: warnings do not count as turns and a unique puzzle has at most 64
empty cells. Before the end every step pays 0.0, as OpenEnv's TextArena server pays it
(TextArena itself has no reward until the game ends); the fraction filled so far is
``progress``, also in each step's ``info["progress"]``, for reward shaping. One deviation: a
number of over 4300 digits, on which TextArena crashes (``int()`` refuses it), is out of bounds
here.

Tasks: ``reset(puzzle=...)`` plays a given puzzle (81 chars, ``.`` or ``0`` empty; it must have
exactly one solution, which the solver must settle within ``MAX_SEARCH_NODES`` search nodes:
a few hostile puzzles would otherwise cost minutes of CPU per reset),
``reset(seed=..., difficulty=...)`` picks a base puzzle from the bank in
``data/sudoku`` (TextArena's own generator, run offline: same clue counts) and disguises it with
a validity-preserving transform drawn from ``random.Random(seed)``, in microseconds where
TextArena's hard reset takes seconds. Difficulties (``DIFFICULTIES``): very-easy, easy, default
(``Sudoku-v0``), medium, hard; a constructor option, or a reset key for one episode.
"""

from __future__ import annotations

import math
import numbers
import random
import re
import unicodedata
from typing import Any

from kit.games import Step
from kit.paths import data_dir

#: difficulty -> (TextArena env id, the clue target its generator starts from)
DIFFICULTIES: dict[str, tuple[str, int]] = {
    "very-easy": ("Sudoku-v0-very-easy", 75),
    "easy": ("Sudoku-v0-easy", 70),
    "default": ("Sudoku-v0", 60),
    "medium": ("Sudoku-v0-medium", 40),
    "hard": ("Sudoku-v0-hard", 20),
}

#: The most search nodes (partial grids visited) ``reset(puzzle=...)`` spends settling that a
#: given puzzle has exactly one solution. The puzzles the kit deals need far fewer (the worst
#: of 100,000 disguised "hard" puzzles: 3,705), as do famous hard ones (Golden Nugget: 11,210);
#: some 15-20-clue puzzles without a unique solution need tens of millions (33.5 million: 46 s
#: of CPU; 77 million: 122 s), and nothing bounds them but this.
MAX_SEARCH_NODES = 100_000

_MOVE = re.compile(r"\[(\d+)\s(\d+)\s(\d+)\]")
_ONE_DIGIT = frozenset("123456789")
_ROW = [i // 9 for i in range(81)]
_COL = [i % 9 for i in range(81)]
_BOX = [(i // 27) * 3 + (i % 9) // 3 for i in range(81)]
_POPCOUNT = [bin(m).count("1") for m in range(512)]
_BITS = [[1 << d for d in range(9) if m >> d & 1] for m in range(512)]

_PROMPT = (
    "You are Player 0. You are playing Sudoku.\n"
    "Here is the current state of the Sudoku grid. Each row is numbered from 1 to 9, and each "
    "column is also numbered from 1 to 9.\n"
    "Empty cells are represented by '.', and pre-filled cells contain digits from 1 to 9.\n\n"
    "Current Sudoku Grid:\n"
    "Your objective is to fill the empty cells in the 9x9 grid with digits from 1 to 9 such that:\n"
    "1. Each row contains all digits from 1 to 9 without repetition.\n"
    "2. Each column contains all digits from 1 to 9 without repetition.\n"
    "3. Each of the nine 3x3 subgrids contains all digits from 1 to 9 without repetition.\n\n"
    "Rules and Instructions:\n"
    "1. **Do not overwrite** the initial numbers provided in the grid.\n"
    "2. **Only fill** empty cells represented by '.'.\n"
    "3. You may respond in any manner you prefer, but ensure that your response includes the "
    "format of '[row column number]'.\n"
    "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves will result in "
    "penalties.\n"
    "Examples:\n"
    "- **Valid Move**:\n  - Grid Snippet Before Move:\n  \n  - Move: `[5 3 7]`\n"
    "  - Explanation: Placing 7 at row 5, column 3 does not violate any Sudoku rules.\n\n"
    "- **Invalid Move** (Overwriting a pre-filled cell):\n  - Grid Snippet Before Move:\n  \n"
    "  - Move: `[1 1 9]`\n"
    "  - Explanation: Cell (1,1) is already filled with 5. You cannot overwrite it.\n\n"
    "- **Invalid Move** (Violating Sudoku rules):\n  - Grid Snippet Before Move:\n  \n"
    "  - Move: `[1 3 5]`\n"
    "  - Explanation: Placing 5 in row 1, column 3 violates the rule since 5 already exists in "
    "row 1.\n\n"
    "The history of your moves and thoughts will be appended as you play more rounds. Use the "
    "history of your move to improve your decision making by avoiding the moves you have tried. "
    "Good luck!\n\n"
)
_HEADER = "   C1 C2 C3   C4 C5 C6   C7 C8 C9  "
_RULE = "   " + "- " * 16
_ROW_TEXT = "R{}  {}  {}  {} |  {}  {}  {} |  {}  {}  {}"


class SearchLimitError(ValueError):
    """``solutions`` visited more than ``max_nodes`` search nodes without an answer."""


def solutions(puzzle: str, limit: int = 2, max_nodes: int | None = None) -> list[str]:
    """Up to ``limit`` solutions of an 81-char puzzle (``.`` or ``0`` empty), as 81-digit strings.

    Bitmask backtracking on the most constrained cell: a hard puzzle's uniqueness check takes
    milliseconds, where TextArena's row-major search takes up to seconds. ``max_nodes`` bounds
    the work: past that many search nodes (partial grids visited, the empty grid included) it
    raises ``SearchLimitError``; None (the default) searches to the end, however long.
    """
    grid = [0 if ch in ".0" else 1 << (int(ch) - 1) for ch in puzzle]
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, bit in enumerate(grid):
        if bit:
            if (rows[_ROW[i]] | cols[_COL[i]] | boxes[_BOX[i]]) & bit:
                return []  # two equal clues in one unit
            rows[_ROW[i]] |= bit
            cols[_COL[i]] |= bit
            boxes[_BOX[i]] |= bit
    empty = [i for i in range(81) if not grid[i]]
    found: list[str] = []
    nodes_left = math.inf if max_nodes is None else max_nodes

    def search(k: int) -> bool:
        nonlocal nodes_left
        nodes_left -= 1
        if nodes_left < 0:
            raise SearchLimitError(
                f"no answer within {max_nodes:,} search nodes ({len(found)} solution(s) so far)"
            )
        if k == len(empty):
            found.append("".join(str(b.bit_length()) for b in grid))
            return len(found) >= limit
        best, best_count, best_mask = k, 10, 0
        for j in range(k, len(empty)):
            i = empty[j]
            mask = ~(rows[_ROW[i]] | cols[_COL[i]] | boxes[_BOX[i]]) & 511
            if _POPCOUNT[mask] < best_count:
                best, best_count, best_mask = j, _POPCOUNT[mask], mask
                if best_count < 2:
                    break
        empty[k], empty[best] = empty[best], empty[k]
        i = empty[k]
        r, c, b = _ROW[i], _COL[i], _BOX[i]
        for bit in _BITS[best_mask]:
            grid[i] = bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            stop = search(k + 1)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            if stop:
                break
        grid[i] = 0
        return len(found) >= limit

    search(0)
    return found


class Sudoku:
    """One game of TextArena Sudoku; ``difficulty`` (a key of ``DIFFICULTIES``) is the default
    for ``reset(seed=...)``. After each call: ``puzzle`` and ``solution`` (81 chars, ``.`` empty),
    ``board`` (rows of ints, 0 empty; read it, don't write it), ``empty_cells`` (originally
    empty), ``correct_cells`` (filled so far), ``progress`` (their ratio), ``seed`` (None for a
    given puzzle)."""

    OPTIONS = ("difficulty",)

    def __init__(self, difficulty: str = "default") -> None:
        self._default = _check_difficulty(difficulty)
        self.difficulty = difficulty
        self.seed: int | None = None
        self.puzzle = self.solution = ""
        self.board: list[list[int]] = []
        self.empty_cells = self.correct_cells = 0
        self.done = self.won = False
        self.reward = 0.0
        self.num_steps = self.invalid_moves = 0
        self._warned = False
        self._lines: list[str] = []

    def reset(self, **task: Any) -> str:
        """Start a game. ``puzzle=`` plays that puzzle (81 chars); else ``seed=`` (a non-negative
        int; a random one if omitted) and ``difficulty=`` (default: the constructor's) pick a
        bank puzzle and disguise it. The text is TextArena's first observation."""
        unknown = set(task) - {"seed", "difficulty", "puzzle"}
        if unknown:
            raise ValueError(f"unknown task keys {sorted(unknown)}; use seed, difficulty, puzzle")
        seed, difficulty, puzzle = task.get("seed"), task.get("difficulty"), task.get("puzzle")
        if difficulty is not None:
            _check_difficulty(difficulty)
        if puzzle is not None:
            if seed is not None:
                raise ValueError("give either puzzle= or seed=, not both")
            puzzle, solution = _check_puzzle(puzzle)
        else:
            if seed is None:
                seed = random.randrange(2**32)
            elif isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
                raise ValueError(f"seed must be a non-negative int, not {seed!r}")
            seed = int(seed)  # a numpy integer from a dataset column is fine too
            rng = random.Random(seed)
            bank = _bank(difficulty or self._default)
            puzzle, solution = _disguise(*bank[rng.randrange(len(bank))].split(), rng)
        self.seed, self.difficulty = seed, difficulty or self._default
        self.puzzle, self.solution = puzzle, solution
        self.board = [
            [0 if ch == "." else int(ch) for ch in puzzle[r : r + 9]] for r in range(0, 81, 9)
        ]
        self.empty_cells, self.correct_cells = puzzle.count("."), 0
        rows = [_ROW_TEXT.format(r // 9 + 1, *puzzle[r : r + 9]) for r in range(0, 81, 9)]
        self._lines = [_HEADER, *rows[:3], _RULE, *rows[3:6], _RULE, *rows[6:]]
        self.done = self.won = self._warned = False
        self.reward = 0.0
        self.num_steps = self.invalid_moves = 0
        return f"\n[GAME] {_PROMPT}\n[GAME] Game Board:\n{self._render()}"

    def step(self, action: str) -> Step:
        """Play one action, e.g. ``"[5 3 7]"``: row 5, column 3, digit 7."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, not {type(action).__name__}")
        if not self.puzzle:
            raise ValueError("call reset() before step()")
        if self.done:
            raise ValueError("the game is over; call reset() to play again")
        self.num_steps += 1
        if "[" not in action and "]" not in action:  # TextArena's ActionFormattingWrapper
            action = f"[{action}]"
        text = "\n[Player] " + action.replace("[Player]", "").replace("[GAME]", "")
        reason = self._play(action)
        if reason is None:
            self._warned = False
            text += f"\n[GAME] Board state: \n{self._render()}"
            self.won = self.done = self.correct_cells == self.empty_cells
        else:
            self.invalid_moves += 1
            if self._warned:
                self.done = True
            else:
                self._warned = True
                text += (
                    f"\n[GAME] You attempted an invalid move. Reason: {reason} Please resubmit a "
                    "valid move and remember to follow the game rules to avoid penalties."
                )
        progress = self.progress
        # The reference pays only at the end: 1 for a solved grid, the progress when invalid
        # moves end the game; before that 0.0 (OpenEnv's server, as TextArena has no reward yet).
        self.reward = 1.0 if self.won else progress if self.done else 0.0
        info = {"valid": reason is None, "reason": reason, "progress": progress}
        return Step(text, self.reward, self.done, info)

    @property
    def progress(self) -> float:
        """The share of the originally empty cells filled correctly so far, 0.0 to 1.0 (0.0
        before any reset): what the reference pays if invalid moves end the game now. Not the
        reward, which is 0.0 until the game ends; for shaping (``kit.rewards.partial_credit``)."""
        return self.correct_cells / self.empty_cells if self.empty_cells else 0.0

    def _play(self, action: str) -> str | None:
        """Apply the move if valid; else return the reference's reason, checked in its order."""
        match = _MOVE.search(action)
        if match is None:
            return "Invalid move format. Player 0 did not respond with valid 'row column number'."
        row, col, num = match.groups()
        if not (row in _ONE_DIGIT and col in _ONE_DIGIT and num in _ONE_DIGIT):
            row, col, num = _decimal(row), _decimal(col), _decimal(num)
            if not (row in _ONE_DIGIT and col in _ONE_DIGIT and num in _ONE_DIGIT):
                return (
                    f"Invalid move. Player 0 attempted to place {num} at ({row}, {col}), "
                    "which is out of bounds."
                )
        r, c = int(row) - 1, int(col) - 1
        if self.board[r][c]:
            return (
                f"Invalid move. Player 0 attempted to overwrite a pre-filled cell ({row}, {col})."
            )
        if self.solution[9 * r + c] != num:
            return (
                f"Invalid move. Player 0 attempted to place {num} at ({row}, {col}), "
                "which violates Sudoku rules."
            )
        self.board[r][c] = int(num)
        line, at = self._lines[r + r // 3 + 1], 4 + 3 * c + 2 * (c // 3)  # where the cell is drawn
        self._lines[r + r // 3 + 1] = line[:at] + num + line[at + 1 :]
        self.correct_cells += 1
        return None

    def _render(self) -> str:
        return "\n".join(self._lines)


def _decimal(digits: str) -> str:
    """The number a run of (possibly non-ASCII) decimal digits spells, as TextArena prints it."""
    try:
        return str(int(digits))
    except ValueError:  # over 4300 digits: int() refuses (the reference crashes); spell it out
        return "".join(str(unicodedata.decimal(ch)) for ch in digits).lstrip("0") or "0"


def _check_difficulty(difficulty: Any) -> str:
    if not isinstance(difficulty, str) or difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {list(DIFFICULTIES)}")
    return difficulty


def _check_puzzle(puzzle: Any) -> tuple[str, str]:
    """The puzzle with ``.`` for empty cells, and its only solution; else ValueError."""
    if not isinstance(puzzle, str) or len(puzzle) != 81 or not set(puzzle) <= set(".0123456789"):
        raise ValueError(
            "puzzle must be a str of 81 characters, each a digit 1-9 or '.'/'0' (empty)"
        )
    puzzle = puzzle.replace("0", ".")
    if "." not in puzzle:
        raise ValueError("puzzle has no empty cell: there is nothing to play")
    try:
        found = solutions(puzzle, 2, max_nodes=MAX_SEARCH_NODES)
    except SearchLimitError:
        raise ValueError(
            f"puzzle is too costly to check: the solver visited {MAX_SEARCH_NODES:,} partial "
            "grids without settling that it has exactly one solution, and stops there (the "
            "puzzles the kit deals need a few thousand at most). Give a puzzle with exactly one "
            "solution (more clues usually make it cheaper to check), or reset(seed=...) for one "
            "of the kit's"
        ) from None
    if not found:
        raise ValueError("puzzle has no solution")
    if len(found) > 1:
        raise ValueError("puzzle has more than one solution; a Sudoku must have exactly one")
    return puzzle, found[0]


_BANKS: dict[str, list[str]] = {}


def _bank(difficulty: str) -> list[str]:
    """The difficulty's base puzzles, one ``"<puzzle> <solution>"`` line each (see data/sudoku)."""
    if difficulty not in _BANKS:
        path = data_dir() / "sudoku" / f"{difficulty}.txt"
        _BANKS[difficulty] = path.read_text(encoding="ascii").splitlines()
    return _BANKS[difficulty]


def _disguise(puzzle: str, solution: str, rng: random.Random) -> tuple[str, str]:
    """Relabel digits, permute bands, stacks, rows in a band, columns in a stack, maybe transpose:
    each keeps a puzzle valid and its solution unique, so one base puzzle yields ~10^12 others."""
    rows = [3 * band + r for band in rng.sample(range(3), 3) for r in rng.sample(range(3), 3)]
    cols = [3 * stack + c for stack in rng.sample(range(3), 3) for c in rng.sample(range(3), 3)]
    cells = [9 * r + c for r in rows for c in cols]
    if rng.random() < 0.5:
        cells = [cells[9 * c + r] for r in range(9) for c in range(9)]
    digits = str.maketrans("123456789", "".join(rng.sample("123456789", 9)))
    puzzle, solution = (
        "".join(grid[i] for i in cells).translate(digits) for grid in (puzzle, solution)
    )
    return puzzle, solution
