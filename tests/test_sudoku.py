"""Sudoku: the kit engine against TextArena's recorded text, its puzzle bank, and its solver."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.builtin.sudoku.engine import (
    DIFFICULTIES,
    MAX_SEARCH_NODES,
    SearchLimitError,
    Sudoku,
    solutions,
)
from kit.builtin.sudoku.solver import SudokuSolver
from kit.games import make
from kit.paths import data_dir
from kit.solvers import play, solver

FIXTURES = Path(__file__).parent / "fixtures"
EPISODES = json.loads((FIXTURES / "sudoku.json").read_text())["episodes"]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay(episode: dict) -> None:
    """Play a recorded episode through the kit engine and assert it matches, step by step."""
    game = Sudoku(**episode["options"])
    assert game.reset(**episode["task"]) == episode["reset"]
    assert (game.puzzle, game.solution) == (episode["puzzle"], episode["solution"])
    invalid = 0
    for n, (action, ref) in enumerate(zip(episode["actions"], episode["steps"], strict=True), 1):
        step = game.step(action)
        where = f"{episode['name']} step {n} {action[:60]!r}"
        assert step.observation == ref["text"], where
        assert step.done == game.done == ref["done"], where
        assert step.info["reason"] == ref["reason"], where
        assert step.info["valid"] == (ref["reason"] is None), where
        invalid += ref["reason"] is not None
        assert (game.num_steps, game.invalid_moves) == (n, invalid), where
        assert game.correct_cells == round(ref["completion"] * game.empty_cells), where
        # The step reward as OpenEnv's TextArena server pays it: 0.0 until the game ends.
        assert step.reward == game.reward == ref["reward"], where
        assert isinstance(step.reward, float)
        assert step.info["progress"] == game.progress == ref["completion"], where
        assert game.won == (ref["done"] and ref["reward"] == 1), where


@pytest.mark.parametrize("episode", EPISODES, ids=[e["name"] for e in EPISODES])
def test_fixture_episode(episode: dict) -> None:
    replay(episode)


def test_fixtures_cover_the_cases() -> None:
    def kinds(difficulty: str) -> set[str]:
        out = set()
        for e in EPISODES:
            if e["options"]["difficulty"] != difficulty:
                continue
            last = e["steps"][-1]
            out.add("won" if last["reward"] == 1 else "lost" if last["done"] else "open")
            out.add("puzzle" if "puzzle" in e["task"] else "seed")
        return out

    assert all({"won", "lost", "puzzle", "seed"} <= kinds(d) for d in DIFFICULTIES)
    reasons = {s["reason"] for e in EPISODES for s in e["steps"] if s["reason"]}
    for fragment in ("format", "out of bounds", "overwrite", "violates Sudoku rules"):
        assert any(fragment in reason for reason in reasons), fragment
    warned_then_valid = any(
        a["reason"] and not b["reason"]
        for e in EPISODES
        for a, b in zip(e["steps"], e["steps"][1:], strict=False)
    )
    assert warned_then_valid
    assert any(e["steps"][-1]["done"] and e["steps"][-1]["reward"] == 0.0 for e in EPISODES)
    # Steps before the end pay 0.0 though some cells are filled: not the fraction filled so far.
    assert any(not s["done"] and s["completion"] > 0 for e in EPISODES for s in e["steps"])
    assert all(s["reward"] == 0.0 for e in EPISODES for s in e["steps"] if not s["done"])


# --- the engine's own contract ---------------------------------------------------------------


def test_seed_is_a_pure_function_of_difficulty_and_seed() -> None:
    a, b = Sudoku(), Sudoku(difficulty="hard")
    for d in DIFFICULTIES:
        for seed in (0, 1, 2**40):
            assert a.reset(seed=seed, difficulty=d) == b.reset(seed=seed, difficulty=d)
            assert (a.puzzle, a.solution, a.difficulty) == (b.puzzle, b.solution, d)
    puzzles = {(a.reset(seed=s, difficulty="hard"), a.puzzle)[1] for s in range(200)}
    assert len(puzzles) == 200
    assert Sudoku(difficulty="hard").reset(seed=7) == a.reset(seed=7, difficulty="hard")
    assert a.difficulty == "hard" and a.seed == 7
    a.reset(seed=7)  # back to the constructor's difficulty
    assert a.difficulty == "default"


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_dealt_puzzles_are_uniquely_solvable(difficulty: str) -> None:
    game = Sudoku(difficulty=difficulty)
    bank = _bank_clues(difficulty)
    for seed in range(150):
        game.reset(seed=seed)
        assert solutions(game.puzzle, 2) == [game.solution]
        _assert_valid_grid(game.solution)
        assert all(p in (".", s) for p, s in zip(game.puzzle, game.solution, strict=True))
        assert 81 - game.empty_cells in bank
        assert game.board == [
            [int(ch) if ch != "." else 0 for ch in game.puzzle[r : r + 9]] for r in range(0, 81, 9)
        ]


def _assert_valid_grid(grid: str) -> None:
    units = [[9 * r + c for c in range(9)] for r in range(9)]
    units += [[9 * r + c for r in range(9)] for c in range(9)]
    units += [
        [9 * (3 * (b // 3) + i) + 3 * (b % 3) + j for i in range(3) for j in range(3)]
        for b in range(9)
    ]
    for unit in units:
        assert sorted(grid[i] for i in unit) == list("123456789")


def _bank_clues(difficulty: str) -> set[int]:
    lines = (data_dir() / "sudoku" / f"{difficulty}.txt").read_text().splitlines()
    return {81 - line.split()[0].count(".") for line in lines}


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_bank_is_textarenas_generator(difficulty: str) -> None:
    """Each bank line is TextArena's algorithm (replayed by generate.py) for that seed."""
    generate = _load(data_dir() / "sudoku" / "generate.py", "sudoku_generate")
    lines = (data_dir() / "sudoku" / f"{difficulty}.txt").read_text().splitlines()
    assert len(lines) == 1000
    for seed in (0, 1, 2, 500, 999):
        puzzle, solution = generate.textarena_puzzle(seed, DIFFICULTIES[difficulty][1])
        assert lines[seed] == f"{puzzle} {solution}"
    for line in lines[:100]:
        puzzle, solution = line.split()
        assert solutions(puzzle, 2) == [solution]


def test_reset_without_a_task_draws_a_seed() -> None:
    game = Sudoku(difficulty="medium")
    text = game.reset()
    assert isinstance(game.seed, int) and game.difficulty == "medium"
    assert Sudoku().reset(seed=game.seed, difficulty="medium") == text
    game.reset(difficulty="easy")
    assert game.difficulty == "easy" and 81 - game.empty_cells in _bank_clues("easy")


def test_given_puzzle() -> None:
    game = Sudoku()
    game.reset(seed=3, difficulty="medium")
    puzzle, solution = game.puzzle, game.solution
    other = Sudoku()
    text = other.reset(puzzle=puzzle.replace(".", "0"), difficulty="medium")
    assert text == game.reset(seed=3, difficulty="medium")
    assert (other.puzzle, other.solution, other.seed) == (puzzle, solution, None)
    assert other.empty_cells == puzzle.count(".") and other.correct_cells == 0


def _state(game: Sudoku) -> tuple:
    return (
        game.puzzle,
        game.solution,
        game.board,
        game.seed,
        game.difficulty,
        game.done,
        game.num_steps,
    )


@pytest.mark.parametrize(
    "task",
    [
        {"sed": 1},
        {"prompt": "hi"},
        {"seed": "1"},
        {"seed": 1.0},
        {"seed": True},
        {"seed": -1},
        {"difficulty": "extreme"},
        {"difficulty": 3},
        {"seed": 1, "puzzle": "." * 81},
        {"puzzle": 123},
        {"puzzle": "." * 80},
        {"puzzle": "x" + "." * 80},
        {"puzzle": "١" + "." * 80},
        {"puzzle": "11" + "." * 79},  # two equal clues in a row: no solution
        {"puzzle": "." * 81},  # many solutions
        {"puzzle": "123456789" + "." * 72},
    ],
)
def test_bad_reset_raises_and_changes_nothing(task: dict) -> None:
    game = Sudoku()
    game.reset(seed=1)
    game.step("[1 1 1]")
    before = _state(game)
    with pytest.raises(ValueError):
        game.reset(**task)
    assert _state(game) == before


def test_full_grid_and_unsolvable_messages() -> None:
    game = Sudoku()
    game.reset(seed=0)
    with pytest.raises(ValueError, match="no empty cell"):
        Sudoku().reset(puzzle=game.solution)
    with pytest.raises(ValueError, match="more than one solution"):
        Sudoku().reset(puzzle="." * 81)
    with pytest.raises(ValueError, match="no solution"):
        Sudoku().reset(puzzle="11" + "." * 79)
    with pytest.raises(ValueError, match="difficulty"):
        Sudoku(difficulty="impossible")


def test_step_errors() -> None:
    game = Sudoku()
    with pytest.raises(ValueError, match="reset"):
        game.step("[1 1 1]")
    game.reset(seed=0)
    with pytest.raises(ValueError):
        game.step(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        game.step(b"[1 1 1]")  # type: ignore[arg-type]
    game.step("x")
    game.step("y")
    assert game.done and not game.won and game.reward == 0.0
    with pytest.raises(ValueError, match="the game is over"):
        game.step("[1 1 1]")


def test_reward_is_zero_until_the_end_and_progress_is_separate() -> None:
    """TextArena pays nothing before the end (OpenEnv's server: 0.0); the fraction filled so far
    is ``progress`` and ``info["progress"]``, never the step's reward."""
    game = make("sudoku", difficulty="easy")
    assert game.progress == 0.0  # before any reset
    game.reset(seed=4)
    assert game.reward == 0.0 and game.correct_cells == 0 and game.progress == 0.0
    empty = [i for i, ch in enumerate(game.puzzle) if ch == "."]
    moves = [f"[{i // 9 + 1} {i % 9 + 1} {game.solution[i]}]" for i in empty]
    for n, move in enumerate(moves[:3], 1):
        step = game.step(move)
        assert not step.done and step.reward == game.reward == 0.0
        assert step.info["progress"] == game.progress == n / game.empty_cells
    i = empty[0]
    assert game.board[i // 9][i % 9] == int(game.solution[i]) and game.correct_cells == 3
    warned = game.step("no move")  # a warning pays nothing either, and keeps the progress
    assert (warned.reward, warned.done, warned.info["progress"]) == (0.0, False, 3 / len(empty))
    ended = game.step("still no move")  # the second invalid move in a row ends it: paid now
    assert ended.done and ended.reward == game.reward == game.progress == 3 / len(empty)

    game.reset(seed=4)
    for move in moves[:-1]:
        assert game.step(move).reward == 0.0
    last = game.step(moves[-1])
    assert last.done and game.won and last.reward == game.reward == last.info["progress"] == 1.0


def test_a_number_too_long_for_int_is_out_of_bounds() -> None:
    # TextArena itself raises here (int() refuses > 4300 digits); we call it out of bounds.
    game = Sudoku()
    game.reset(seed=0)
    step = game.step("[" + "0" * 3 + "7" * 5000 + " 1 1]")
    assert step.info["reason"].startswith(
        "Invalid move. Player 0 attempted to place 1 at (" + "7" * 5000
    )
    assert step.info["reason"].endswith(", 1), which is out of bounds.")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=4))
def test_any_text_is_a_legal_action(actions: list[str]) -> None:
    game = Sudoku()
    game.reset(seed=5)
    for action in actions:
        if game.done:
            break
        step = game.step(action)
        assert step.observation.startswith("\n[Player] ")
        assert step.info["valid"] == (step.info["reason"] is None)


# --- what a given puzzle may cost ---------------------------------------------------------------

# Puzzles whose check explodes the backtracking search. Search nodes each needs to settle, and
# the CPU time reset(puzzle=...) took before the node budget (one AMD EPYC core):
HOSTILE = {
    # 319,836 nodes, 0.5 s: no solution
    "19-clues-no-solution": "6.8...9......59..8.......3....3......6....3..8....2....8.6...1.3.9.........1..6..",
    # 33,510,745 nodes, 46 s: no solution
    "17-clues-no-solution": "9..........1..7..3.....3.......6......3.1....2....56..........5.3...4.96...3.....",
    # 27,644,779 nodes, 39 s: two solutions, the second found late
    "15-clues-two-solutions-a": "7....1.3...3.7.......3....1.9.......6.4.........4....71.....9..................8.",
    # 77,235,937 nodes, 122 s: two solutions, likewise
    "15-clues-two-solutions-b": "5..736..8.........1.6...............2...........2....5..56...........2......27...",
}  # fmt: skip
# Hard puzzles with exactly one solution, and the nodes each needs: all accepted.
FAMOUS = {
    # "Golden Nugget"
    ".......39.....1..5..3.5.8....8.9...6.7...2...1..4.......9.8..5..2....6..4..7.....": 11_210,
    # "Platinum Blonde"
    "..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9": 7_150,
    # "AI Escargot"
    "1....7.9..3..2...8..96..5....53..9...1..8...26....4...3......1..4......7..7...3..": 2_407,
}


def test_solutions_stops_after_max_nodes() -> None:
    for puzzle, nodes in FAMOUS.items():
        (solution,) = solutions(puzzle, 2, max_nodes=nodes)  # exactly enough
        assert solutions(puzzle, 2) == [solution]
        with pytest.raises(SearchLimitError, match=f"within {nodes - 1:,} search nodes"):
            solutions(puzzle, 2, max_nodes=nodes - 1)
    assert issubclass(SearchLimitError, ValueError)
    with pytest.raises(SearchLimitError):
        solutions(HOSTILE["17-clues-no-solution"], 2, max_nodes=1_000)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_puzzle_too_costly_to_check_is_refused_and_changes_nothing(name: str) -> None:
    game = Sudoku()
    game.reset(seed=1)
    game.step("[1 1 1]")
    before = _state(game)
    with pytest.raises(ValueError, match=f"too costly to check.*{MAX_SEARCH_NODES:,}"):
        game.reset(puzzle=HOSTILE[name])
    assert _state(game) == before
    with pytest.raises(SearchLimitError):  # the refusal is the node budget, not the puzzle's answer
        solutions(HOSTILE[name], 2, max_nodes=MAX_SEARCH_NODES)


def test_famous_hard_puzzles_are_accepted() -> None:
    assert max(FAMOUS.values()) < MAX_SEARCH_NODES
    for puzzle in FAMOUS:
        game = Sudoku()
        game.reset(puzzle=puzzle)
        assert game.solution == solutions(puzzle, 1)[0]


@pytest.mark.slow
def test_every_puzzle_the_kit_deals_or_ships_is_well_within_the_budget() -> None:
    """reset(puzzle=...) must take back any puzzle the kit hands out (dataset rows carry them):
    each settles in a tenth of the budget. The worst of 100,000 disguised hard puzzles needs
    3,705 nodes; the median, 132."""
    margin = MAX_SEARCH_NODES // 10

    def check(puzzle: str, solution: str | None = None) -> None:
        found = solutions(puzzle, 2, max_nodes=margin)
        assert len(found) == 1 and solution in (None, found[0]), puzzle

    for difficulty in DIFFICULTIES:
        for line in (data_dir() / "sudoku" / f"{difficulty}.txt").read_text().splitlines():
            check(*line.split())
        game = Sudoku(difficulty=difficulty)
        for seed in range(2_000 if difficulty == "hard" else 300):
            game.reset(seed=seed)
            check(game.puzzle, game.solution)
    generate = _load(data_dir() / "sudoku" / "generate.py", "sudoku_generate")
    for seed in range(1_000, 1_020):  # the generator beyond the bank
        check(*generate.textarena_puzzle(seed, DIFFICULTIES["hard"][1]))
    for puzzle in json.loads((data_dir() / "splits" / "sudoku.json").read_text())["eval"]:
        check(puzzle)
    sft = (data_dir() / "sft" / "sudoku" / "train.jsonl").read_text().splitlines()
    for row in map(json.loads, sft):
        check(row["task"]["puzzle"])


# --- the solver ------------------------------------------------------------------------------


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_solver_always_wins(difficulty: str) -> None:
    for seed in range(40):
        actions = play("sudoku", seed=seed, difficulty=difficulty)
        game = Sudoku(difficulty=difficulty)
        game.reset(seed=seed)
        for action in actions:
            assert game.step(action).info["valid"], action
        assert game.won and game.reward == 1.0 and len(actions) == game.empty_cells


def _candidates(board: list[list[int]], r: int, c: int) -> int:
    seen = set(board[r]) | {board[k][c] for k in range(9)}
    seen |= {board[r - r % 3 + a][c - c % 3 + b] for a in range(3) for b in range(3)}
    return len(set(range(1, 10)) - seen)


def test_solver_fills_the_most_constrained_cell_first() -> None:
    game, player = Sudoku(difficulty="hard"), solver("sudoku", difficulty="hard")
    observation = game.reset(seed=11)
    while not game.done:
        action = player.act(observation)
        r, c, _ = (int(x) - 1 for x in action[1:-1].split())
        empty = [(i, j) for i in range(9) for j in range(9) if not game.board[i][j]]
        assert _candidates(game.board, r, c) == min(_candidates(game.board, i, j) for i, j in empty)
        observation = game.step(action).observation


def test_solver_reads_the_board_not_its_own_moves() -> None:
    """A wrapper swaps some moves for blunders (invalid ones, or another right move): the solver
    must follow what the text shows and still win."""
    rng = random.Random(0)
    for seed in range(30):
        difficulty = list(DIFFICULTIES)[seed % 5]
        game, player = Sudoku(difficulty=difficulty), SudokuSolver(difficulty=difficulty)
        observation, blundered = game.reset(seed=seed), False
        while not game.done:
            action = player.act(observation)
            if not blundered and rng.random() < 0.4:
                empty = [i for i in range(81) if not game.board[i // 9][i % 9]]
                i = rng.choice(empty)
                action = rng.choice(
                    ["[1 1 1] oops", "skip", f"[{i // 9 + 1} {i % 9 + 1} {game.solution[i]}]"]
                )
                blundered = True
            else:
                blundered = False
            observation = game.step(action).observation
        assert game.won


def test_solver_needs_a_board() -> None:
    with pytest.raises(ValueError):
        SudokuSolver().act("\n[Player] [1 1 1]\n[GAME] You attempted an invalid move.")
    with pytest.raises(ValueError):
        SudokuSolver(level=3)


# --- against the live reference --------------------------------------------------------------


@pytest.mark.oracle
def test_live_random_episodes_match_textarena() -> None:
    pytest.importorskip("textarena")
    make_fixtures = _load(FIXTURES / "make_sudoku_fixtures.py", "make_sudoku_fixtures")
    for k in range(40):
        difficulty = list(DIFFICULTIES)[k % 5]
        seed = 5000 + k
        episode = make_fixtures.record(
            f"live-{k}", difficulty, {"seed": seed}, [make_fixtures.random_move] * 60, seed
        )
        replay(episode)


@pytest.mark.oracle
def test_live_textarena_pays_nothing_before_the_end() -> None:
    """Why a step pays 0.0 until the game ends: TextArena's Sudoku sets ``state.rewards`` only
    when the game ends (a warning sets nothing), and OpenEnv's TextArena server pays 0.0 while it
    is unset. The kit's ``progress`` is TextArena's own fraction filled, at every step."""
    pytest.importorskip("textarena")
    make_fixtures = _load(FIXTURES / "make_sudoku_fixtures.py", "make_sudoku_fixtures")
    import textarena as ta

    for difficulty in DIFFICULTIES:
        game = Sudoku(difficulty=difficulty)
        game.reset(seed=21)
        env = ta.make(DIFFICULTIES[difficulty][0])
        inner = make_fixtures._unwrap(env)
        grids = make_fixtures._grid(game.solution), make_fixtures._grid(game.puzzle)
        inner._generate_board = lambda grids=grids: grids
        env.reset(num_players=1, seed=0)
        empty = [i for i, ch in enumerate(game.puzzle) if ch == "."]
        moves = [f"[{i // 9 + 1} {i % 9 + 1} {game.solution[i]}]" for i in empty]
        for move in [*moves[:2], "no move", moves[2], "no move", "[1 1 0]"]:
            done, _ = env.step(move)
            step = game.step(move)
            assert (inner.state.rewards is None) == (not done) == (not step.done), move
            assert step.reward == make_fixtures.openenv_reward(inner.state), move
            assert step.info["progress"] == inner._get_percentage_completion(), move
        assert step.done and step.reward == 3 / len(empty)


@pytest.mark.oracle
def test_generator_matches_textarena() -> None:
    """generate.py replays TextArena's generator exactly (a few seeds; TextArena's hard is slow)."""
    pytest.importorskip("textarena")
    from textarena.envs.Sudoku.env import SudokuEnv

    generate = _load(data_dir() / "sudoku" / "generate.py", "sudoku_generate")
    for clues, seeds in (
        (75, range(20)),
        (70, range(20)),
        (60, range(20)),
        (40, range(5)),
        (20, (1, 3)),
    ):
        env = SudokuEnv(clues=clues)
        for seed in seeds:
            random.seed(seed)
            full, board = env._generate_board()
            puzzle = "".join(str(v) if v else "." for row in board for v in row)
            solution = "".join(str(v) for row in full for v in row)
            assert generate.textarena_puzzle(seed, clues) == (puzzle, solution)
    random.seed()


_MOVES = st.builds("[{} {} {}]".format, *[st.integers(0, 10)] * 3)
_ODD = st.text(alphabet="[] 0123456789\n\t\u00a0\uff15\u0663x", max_size=14)


@pytest.mark.oracle
@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_MOVES, _ODD, st.text(max_size=30)), min_size=1, max_size=12))
def test_live_arbitrary_text_matches_textarena(actions: list[str]) -> None:
    pytest.importorskip("textarena")
    make_fixtures = _load(FIXTURES / "make_sudoku_fixtures.py", "make_sudoku_fixtures")
    replay(make_fixtures.record("hypothesis", "very-easy", {"seed": 9}, actions))
