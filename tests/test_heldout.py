"""Held out means held out: no eval task reaches any training set, in any form.

A win rate on the eval split says the model learnt the game only if it never saw an eval task:
not as a task, not as an answer, not as a guess the SFT solver made. ``kit.tasks.leaks`` is the
check, per game; each test here runs it on the shipped and on freshly generated training data,
and each checker is shown to fail on a planted leak, so that a pass means something.
"""

from __future__ import annotations

import copy
import json
import statistics

import pytest

from kit import registry
from kit.builtin.catch import CATCH_COLUMNS, CATCH_EVAL_ROWS, CATCH_TRAIN_ROWS
from kit.builtin.sudoku import SUDOKU_DIFFICULTY
from kit.builtin.sudoku.engine import DIFFICULTIES
from kit.builtin.wordle import WORDLE_EVAL_SIZE, wordle_secrets
from kit.builtin.wordle.solver import WordleSolver
from kit.data import SHIPPED_SFT
from kit.envs import ENVS
from kit.games import make
from kit.paths import data_dir
from kit.sft import load_sft, sft_examples
from kit.solvers.policies import noisy_policy, random_policy, solver_policy
from kit.tasks import HELD_OUT, leaks, mixture_dataset, task_dataset

EVAL_SECRETS = frozenset(wordle_secrets("eval"))
FRESH_SEEDS = (1, 2, 3)


def _shipped(game: str) -> list[dict]:
    path = data_dir() / "sft" / game / "train.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_game_says_what_it_holds_out() -> None:
    assert set(HELD_OUT) == set(ENVS)
    assert f"{WORDLE_EVAL_SIZE} of the 156 secrets" in HELD_OUT["wordle"]
    assert all(str(rows) in HELD_OUT["catch"] for rows in CATCH_EVAL_ROWS + CATCH_TRAIN_ROWS)
    very_easy = SHIPPED_SFT["sudoku"]["difficulty"]
    assert very_easy != SUDOKU_DIFFICULTY  # the SFT games are easier than the eval puzzles
    for difficulty in (SUDOKU_DIFFICULTY, very_easy):
        clues = f"({DIFFICULTIES[difficulty][1]} clues)"
        assert difficulty in HELD_OUT["sudoku"] and clues in HELD_OUT["sudoku"]
    card = (data_dir() / "splits" / "README.md").read_text(encoding="utf-8")
    assert "kit.tasks.HELD_OUT" in card and "- echo: nothing to hold out" in card


# -- Wordle ---------------------------------------------------------------------------------------
def test_no_eval_secret_in_wordle_training_data() -> None:
    assert leaks("wordle", load_sft("wordle")) == []
    assert leaks("wordle", _shipped("wordle")) == []
    assert leaks("wordle", task_dataset("wordle", "train")) == []
    assert leaks("wordle", task_dataset("wordle", "train", num_tasks=300, seed=5)) == []
    # The eval split is what the check is about: every one of its rows is caught.
    found = leaks("wordle", task_dataset("wordle", "eval"))
    assert len(found) == WORDLE_EVAL_SIZE and all("in secret" in leak for leak in found)


@pytest.mark.parametrize("seed", FRESH_SEEDS)
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_freshly_made_wordle_sft_shows_no_eval_secret(seed: int, noise: float) -> None:
    """Beyond the shipped file: other seeds, and blunders (drawn from the same pool), too."""
    rows = sft_examples("wordle", num_games=6, seed=seed, noise=noise)
    assert leaks("wordle", rows) == []
    if noise == 0:
        assert all(_guesses(row)[-1] == row["task"]["secret"] for row in rows)  # all won


def _guesses(row: dict) -> list[str]:
    return [
        call["function"]["arguments"]["guess"]
        for m in row["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


def test_the_wordle_check_catches_a_planted_secret() -> None:
    row = _shipped("wordle")[0]
    assert leaks("wordle", [row]) == []
    word = "plane"
    assert word in EVAL_SECRETS
    # As a guess: the tool call's argument.
    guessed = copy.deepcopy(row)
    turn = next(i for i, m in enumerate(guessed["messages"]) if m.get("tool_calls"))
    guessed["messages"][turn]["tool_calls"][0]["function"]["arguments"]["guess"] = word
    assert leaks("wordle", [guessed]) == [
        f"row 0: eval secret 'plane' in messages[{turn}].tool_calls[0].function.arguments.guess"
    ]
    # In text, any case, next to punctuation or a line break; only whole words count.
    for text in ("Next guess: 'Plane'.", "\n[GAME] [PLANE]", "a plane_b"):
        spoken = copy.deepcopy(row)
        spoken["messages"][turn]["content"] = text
        assert len(leaks("wordle", [spoken])) == 1, text
    for text in ("planes", "airplane", "planet"):
        spoken = copy.deepcopy(row)
        spoken["messages"][turn]["content"] = text
        assert leaks("wordle", [spoken]) == [], text
    # As the task, and in a task row's column.
    assert leaks("wordle", [{**row, "task": {"secret": word}}]) != []
    assert leaks("wordle", [{"prompt": [], "secret": word}]) == [
        "row 0: eval secret 'plane' in secret"
    ]


def test_the_pool_solver_stays_strong_and_never_leaves_its_pool() -> None:
    train = wordle_secrets("train")
    counts = []
    for secret in train:
        game, player = make("wordle"), WordleSolver(words=train)
        observation = game.reset(secret=secret)
        while not game.done:
            observation = game.step(player.act(observation)).observation
        assert game.won and game.invalid_moves == 0 and set(game.guesses) <= set(train)
        counts.append(len(game.guesses))
    print(f"\nWordle solver on its train pool: mean {statistics.mean(counts):.3f} guesses")
    assert statistics.mean(counts) <= 2.7 and max(counts) <= 4  # 2.62 and 4 when written
    # A secret outside the pool cannot be found, and no guess leaves the pool trying.
    game, player = make("wordle"), WordleSolver(words=train)
    observation = game.reset(secret="plane")
    while not game.done:
        observation = game.step(player.act(observation)).observation
    assert not game.won and set(game.guesses) <= set(train)


def test_a_word_pool_is_wordle_only() -> None:
    with pytest.raises(ValueError, match="Wordle"):
        noisy_policy(0.1, words="crane")  # a string is not a collection of words
    for factory in (solver_policy(words=["crane"]), random_policy(words=["crane"])):
        with pytest.raises(ValueError, match="Wordle guesses"):
            factory(ENVS["catch"], 0)
    with pytest.raises(ValueError, match="no word of the pool"):
        WordleSolver(words=["zzzzz"])


# -- Catch ----------------------------------------------------------------------------------------
def _board_heights(text: str) -> list[int]:
    """Line counts of the Catch boards in ``text``, counted here independently of kit.tasks."""
    heights, run = [], 0
    for line in text.split("\n"):
        if line and set(line) <= set(".ox") and len(line) == CATCH_COLUMNS:
            run += 1
        elif run:
            heights.append(run)
            run = 0
    return heights + ([run] if run else [])


def test_no_eval_board_height_in_catch_training_data() -> None:
    default_rows = make("catch").rows
    assert default_rows in CATCH_EVAL_ROWS  # so a task without rows would be a leak
    rows = _shipped("catch")
    assert leaks("catch", rows) == [] and leaks("catch", load_sft("catch")) == []
    for row in rows:
        assert row["task"].get("rows", default_rows) in CATCH_TRAIN_ROWS
        user = next(m["content"] for m in row["messages"] if m["role"] == "user")
        assert _board_heights(user) == [row["task"]["rows"]]  # the first board, counted
    assert {row["task"]["rows"] for row in rows} == set(CATCH_TRAIN_ROWS)
    train = task_dataset("catch", "train")
    assert leaks("catch", train) == []
    assert all(rows in CATCH_TRAIN_ROWS for rows in train["rows"])
    for seed in FRESH_SEEDS:
        fresh = sft_examples("catch", num_games=4, seed=seed, noise=0.3)
        assert leaks("catch", fresh) == []
        assert leaks("catch", task_dataset("catch", "train", num_tasks=40, seed=seed)) == []


def test_the_catch_check_catches_eval_boards() -> None:
    assert len(leaks("catch", task_dataset("catch", "eval"))) == 5 * len(CATCH_EVAL_ROWS)
    assert leaks("catch", [{"ball_col": 2}]) == [
        "row 0: task {'ball_col': 2} is on an eval board height, 10 rows (no rows: the default "
        "board)"
    ]
    assert leaks("catch", [{"rows": 8, "ball_col": 0}]) != []
    assert leaks("catch", [{"rows": 9, "ball_col": 0}]) == []
    # An example played on an eval board: caught by its task and by every board it draws.
    (played,) = sft_examples("catch", num_games=1, seed=0, split="eval")
    found = leaks("catch", [played])
    assert found[0].startswith("row 0: task") and len(found) > 2
    # A train task whose drawn board has an eval height (a tampered message) is caught too.
    row = copy.deepcopy(next(r for r in _shipped("catch") if r["task"]["rows"] == 5))
    user = row["messages"][1]
    assert user["role"] == "user" and user["content"].endswith("..x..\n")
    user["content"] = user["content"].replace("\n\n", "\n\n" + ".....\n" * 3, 1)  # 8 rows
    assert _board_heights(user["content"]) == [8]
    assert leaks("catch", [row]) == ["row 0: messages[1] draws a board of an eval height, 8 rows"]
    boardless = copy.deepcopy(_shipped("catch")[0])
    boardless["messages"][1]["content"] = "no board"
    assert leaks("catch", [boardless]) == ["row 0: no board in the user message to check"]


# -- Sudoku ---------------------------------------------------------------------------------------
def _eval_puzzles() -> set[str]:
    return set(json.loads((data_dir() / "splits" / "sudoku.json").read_text())["eval"])


def test_no_eval_puzzle_in_sudoku_training_data() -> None:
    held_out = _eval_puzzles()
    rows = _shipped("sudoku")
    assert not {row["task"]["puzzle"] for row in rows} & held_out
    assert leaks("sudoku", rows) == []
    train = task_dataset("sudoku", "train")
    assert not set(train["puzzle"]) & held_out and leaks("sudoku", train) == []
    fresh = sft_examples("sudoku", num_games=2, seed=4, difficulty="very-easy")
    assert leaks("sudoku", fresh) == []


def test_the_sudoku_check_catches_an_eval_puzzle() -> None:
    (played,) = sft_examples("sudoku", num_games=1, seed=0, split="eval")
    found = leaks("sudoku", [played])
    assert len(found) == 2  # the task, and the board in the user message
    assert found[0].startswith("row 0: task puzzle") and found[1].startswith("row 0: messages[1]")
    row = _shipped("sudoku")[0]
    planted = {**row, "task": {"puzzle": played["task"]["puzzle"]}}
    assert leaks("sudoku", [planted]) == [
        f"row 0: task puzzle {played['task']['puzzle']} is an eval puzzle"
    ]
    assert len(leaks("sudoku", task_dataset("sudoku", "eval"))) == len(_eval_puzzles())


# -- Echo -----------------------------------------------------------------------------------------
def test_echo_has_no_task_to_leak() -> None:
    for split in ("train", "eval"):
        assert task_dataset("echo", split).column_names == ["prompt"]  # no task column at all
        assert leaks("echo", task_dataset("echo", split)) == []
    assert all(row["task"] == {} for row in _shipped("echo"))
    assert leaks("echo", load_sft("echo")) == []
    assert leaks("echo", [{"prompt": [], "secret": "plane"}]) == [
        "row 0: echo has no task, yet the row carries {'secret': 'plane'}"
    ]


# -- all games at once ----------------------------------------------------------------------------
def test_a_training_mixture_leaks_nothing() -> None:
    games = {"wordle": 125, "catch": 30, "sudoku": 5, "echo": 3}
    assert set(games) == set(registry.BUILTIN)  # every built-in game (others may be registered)
    mixture = mixture_dataset(games)
    for game in games:
        rows = [row for row in mixture if row["environment"] == game]
        assert rows and leaks(game, rows) == []
