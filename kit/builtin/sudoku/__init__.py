"""Sudoku (TextArena ``Sudoku-v0``) in the kit: its tool env, prompt, splits, reward and texts.

Held out: a fixed list of eval puzzles (engine seeds from ``SUDOKU_EVAL_SEED_BASE``); training
puzzles are drawn from lower seeds and never equal one. SFT games are easier than the eval ones.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from typing import Any

from kit.builtin.sudoku.engine import DIFFICULTIES, Sudoku, solutions
from kit.builtin.sudoku.solver import SudokuSolver, last_board
from kit.envs import GameEnv, as_int
from kit.episode import Episode
from kit.registry import GameSpec, Message, Move, MoveContext, register
from kit.rewards import (
    called_tool,
    ended_on_invalid_move,
    failed_calls,
    partial_credit,
    repeated_calls,
    won,
)
from kit.sft import ending
from kit.solvers.policies import latest
from kit.tasks import load_split, task_of

SUDOKU_EVAL_SIZE = 50
SUDOKU_EVAL_SEED_BASE = 1_000_000  # eval puzzles come from seeds 1_000_000, 1_000_001, ...
SUDOKU_DIFFICULTY = "default"  # Sudoku-v0's 60 clues
_SFT_DIFFICULTY = "very-easy"
_MOVE = re.compile(r"\[(\d) (\d) (\d)\]")


def _splits() -> dict[str, Any]:
    """The eval puzzles, from seeds ``SUDOKU_EVAL_SEED_BASE + i``."""
    puzzles = []
    for i in range(SUDOKU_EVAL_SIZE):
        game = Sudoku()
        game.reset(seed=SUDOKU_EVAL_SEED_BASE + i, difficulty=SUDOKU_DIFFICULTY)
        puzzles.append(game.puzzle)
    return {
        "difficulty": SUDOKU_DIFFICULTY,
        "eval_seeds": [SUDOKU_EVAL_SEED_BASE, SUDOKU_EVAL_SEED_BASE + SUDOKU_EVAL_SIZE - 1],
        "eval": puzzles,
    }


def _split_card(split: dict[str, Any] | None) -> str:
    assert split is not None
    first, last = split["eval_seeds"]
    return f"""`sudoku.json`: {len(split["eval"])} eval puzzles ({split["difficulty"]!r} difficulty, TextArena's clue count),
  from engine seeds {first}..{last}. Training puzzles come from seeds below {first} and are
  never equal to an eval puzzle; a few may share a bank puzzle with one up to relabelling and
  row/column permutations (the engine disguises 1000 base puzzles per difficulty)."""


def _draw(rng: random.Random, difficulty: str | None) -> Iterator[str]:
    """Training puzzles from seeds below the eval ones, never an eval puzzle nor a repeat."""
    seen = set(load_split("sudoku")["eval"])  # held out, and then every puzzle dealt
    while True:
        game = Sudoku()
        game.reset(seed=rng.randrange(SUDOKU_EVAL_SEED_BASE), difficulty=difficulty)
        if game.puzzle not in seen:
            seen.add(game.puzzle)
            yield game.puzzle


def _to_tool_call(action: str) -> Move:
    match = _MOVE.fullmatch(action.strip())
    if match is None:
        raise ValueError(f"not a Sudoku move of the form '[row col number]': {action!r}")
    row, col, number = (int(x) for x in match.groups())
    return "place", {"row": row, "col": col, "number": number}


def _candidates(board: list[int], cell: int) -> list[int]:
    """Digits that the row, column and box of ``cell`` still allow."""
    r, c = divmod(cell, 9)
    r0, c0 = r - r % 3, c - c % 3
    seen = {board[9 * r + k] for k in range(9)} | {board[9 * k + c] for k in range(9)}
    seen |= {board[9 * (r0 + a) + c0 + b] for a in range(3) for b in range(3)}
    return [d for d in range(1, 10) if d not in seen]


def _reason(messages: list[Message], call: Move) -> str:
    board = latest(messages, last_board)
    row, col, number = call[1]["row"], call[1]["col"], call[1]["number"]
    options = _candidates(board, 9 * (row - 1) + col - 1)
    if len(options) == 1:
        return (
            f"Row {row}, column {col} can only be {number}: every other digit is already in "
            "its row, column or box."
        )
    listed = ", ".join(map(str, options))
    return f"Row {row}, column {col} allows {listed}; only {number} fits the rest of the grid."


def _random_move(context: MoveContext) -> Move:
    """A random digit in a random empty cell (usually rejected: only the solution's digit is
    accepted; a player picking among the digits the row, column and box allow would win most
    default-difficulty games, too strong for a floor)."""
    board = latest(context.messages, last_board)
    if board is None:
        raise ValueError("no Sudoku board in the conversation")
    cell = context.rng.choice([i for i in range(81) if not board[i]])
    number = context.rng.randint(1, 9)
    return "place", {"row": cell // 9 + 1, "col": cell % 9 + 1, "number": number}


def _leaks(row: Mapping[str, Any]) -> Iterator[str]:
    """No task puzzle, and no board in a user message, equal to an eval puzzle."""
    held_out = set(load_split("sudoku")["eval"])
    puzzle = task_of(row).get("puzzle")
    if puzzle in held_out:
        yield f"task puzzle {puzzle} is an eval puzzle"
    for i, message in enumerate(row.get("messages") or []):
        if message["role"] == "user":
            board = last_board(str(message["content"]))
            shown = None if board is None else "".join(str(v) if v else "." for v in board)
            if shown in held_out:
                yield f"messages[{i}] shows the eval puzzle {shown}"


def _partial(episode: Episode) -> float:
    """The share of the originally empty cells filled correctly so far; forfeited when invalid
    moves ended the game."""
    game = episode.game
    if ended_on_invalid_move(episode) or not game.empty_cells:
        return 0.0
    return game.correct_cells / game.empty_cells


class SudokuEnv(GameEnv):
    """Sudoku (TextArena ``Sudoku-v0``): fill the 9x9 grid so every row, column and box holds 1-9.

    Task columns: ``puzzle`` (81 characters, ``.`` for empty) or ``seed`` with ``difficulty``.
    Reward: 1 when solved; if two invalid moves in a row end the game, the fraction of the
    originally empty cells filled correctly; 0.0 before the end (the fraction so far is
    ``game.progress``).
    """

    game_name = "sudoku"
    task_keys = ("puzzle", "seed")
    setting_keys = ("difficulty",)

    def place(self, row: int, col: int, number: int) -> str:
        """Write a number into an empty cell.

        Args:
            row: Row of the cell, 1 (top) to 9 (bottom).
            col: Column of the cell, 1 (left) to 9 (right).
            number: The digit to place, 1 to 9.
        """
        arguments = {"row": row, "col": col, "number": number}
        values, problem = [], None
        for name, value in arguments.items():
            number_value, problem = as_int(name, value)
            if problem:
                break
            values.append(number_value)
        action = None if problem else "[{} {} {}]".format(*values)
        hint = None
        if action is not None and not all(1 <= value <= 9 for value in values):
            # The move still goes to the game, whose rules count it; but for a negative number
            # TextArena's own text says only "Invalid move format".
            hint = (
                "row, col and number must each be a whole number from 1 to 9; got "
                + ", ".join(f"{k}={v}" for k, v in zip(arguments, values, strict=True))
                + "."
            )
        return self._play("place", arguments, action, problem, hint)


SPEC = register(
    GameSpec(
        name="sudoku",
        env=SudokuEnv,
        engine=Sudoku,
        solver=SudokuSolver,
        prompt=(
            "Let's play Sudoku. Fill the empty cells with the place tool, one digit per call; "
            "rows and columns are numbered 1 to 9. The game says:\n\n"
        ),
        # The game's own bound plus room for invalid moves.
        turn_limit=150,
        # A move is `[row col digit]`; 256 leaves room for prose and bounds the transcript each
        # textarena_env reply carries (at most 129 moves: 64 cells, a warning before each and one more).
        max_action_chars=256,
        budget=4096,
        reward={
            "won": (won, 1.0),
            "partial": (partial_credit, 0.5),
            "failed": (failed_calls, -0.05),
            "repeated": (repeated_calls, -0.05),
            "format": (called_tool, 0.1),
        },
        tasks=lambda split: load_split("sudoku")["eval"] if split == "eval" else None,
        task=lambda puzzle: ({"puzzle": puzzle}, solutions(puzzle, 1)[0]),
        to_tool_call=_to_tool_call,
        random_move=_random_move,
        closing=lambda env: ending(env, "The grid is complete.", "The game is over."),
        held_out=(
            f"{SUDOKU_EVAL_SIZE} fixed puzzles at the {SUDOKU_DIFFICULTY} difficulty "
            f"({DIFFICULTIES[SUDOKU_DIFFICULTY][1]} clues), never a training puzzle; the SFT "
            f"games are {_SFT_DIFFICULTY} ({DIFFICULTIES[_SFT_DIFFICULTY][1]} clues)"
        ),
        draw=_draw,
        sizes={"train": 200},
        difficulty=SUDOKU_DIFFICULTY,
        reason=_reason,
        partial=_partial,
        leaks=_leaks,
        sft={"num_games": 200, "seed": 0, "noise": 0.0, "difficulty": _SFT_DIFFICULTY},
        splits=_splits,
        split_card=_split_card,
        server="kit.builtin.sudoku.serve:SudokuEnvironment",
    )
)
