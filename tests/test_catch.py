"""Catch against OpenSpiel: recorded fixtures always, the live oracle where it is installed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.builtin.catch.engine import ACTIONS, Catch, parse_action
from kit.builtin.catch.solver import CatchSolver

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "catch.json").read_text())["episodes"]
INVALID = [
    "",
    "   ",
    "UP",
    "3",
    "-1",
    "1.0",
    "[LEFT",
    "LEFT]",
    "[]",
    "left right",
    "ſtay",  # upper-cases to "STAY" outside ASCII
    "ＲＩＧＨＴ",
    "\x00",
    "[[LEFT]]",
    "x" * 100_000,
]


def _state(game: Catch) -> tuple:
    return (
        game.ball_row,
        game.ball_col,
        game.paddle_col,
        game.done,
        game.won,
        game.reward,
        game.num_steps,
        game.invalid_moves,
    )


def test_fixtures_cover_the_cases() -> None:
    names = {e["name"] for e in FIXTURES}
    assert len(FIXTURES) >= 200
    for ball in range(5):
        for script in ("all_left", "all_right", "all_stay", "win", "lose", "random_0"):
            assert f"10x5/ball{ball}/{script}" in names
    assert {e["steps"][-1]["reward"] for e in FIXTURES} == {1.0, -1.0}


@pytest.mark.parametrize("episode", FIXTURES, ids=[e["name"] for e in FIXTURES])
def test_replays_openspiel(episode: dict) -> None:
    game = Catch(**episode["options"])
    assert game.reset(**episode["task"]) == episode["reset"]
    assert (game.done, game.reward, game.num_steps) == (False, 0.0, 0)
    for i, (action, want) in enumerate(zip(episode["actions"], episode["steps"], strict=True)):
        assert parse_action(action) == episode["action_ids"][i]
        step = game.step(action)
        assert step.observation == want["observation"]
        assert step.reward == want["reward"] == game.reward
        assert step.done == want["done"] == game.done
        assert step.info == {"valid": True, "reason": None}
    assert game.num_steps == episode["options"]["rows"] - 1
    assert game.invalid_moves == 0
    assert game.won == (episode["steps"][-1]["reward"] == 1.0)
    cumulative = episode["reset"] + "".join(s["observation"] for s in episode["steps"])
    game.reset(**episode["task"])
    assert game.render() + "".join(game.step(a).observation for a in episode["actions"]) == (
        cumulative
    )


def test_action_names_are_openspiels() -> None:
    for episode in FIXTURES:
        assert list(ACTIONS) == list(Catch.ACTIONS) == episode["legal_action_names"]
        assert episode["chance_outcome_names"] == [
            f"Initialized ball to {c}" for c in range(episode["options"]["columns"])
        ]


@pytest.mark.parametrize("episode", FIXTURES[::7], ids=[e["name"] for e in FIXTURES[::7]])
def test_invalid_moves_do_not_advance(episode: dict) -> None:
    rng = random.Random(episode["name"])
    game = Catch(**episode["options"])
    game.reset(**episode["task"])
    invalid = 0
    for action, want in zip(episode["actions"], episode["steps"], strict=True):
        for bad in rng.sample(INVALID, rng.randrange(3)):
            before = _state(game)
            step = game.step(bad)
            invalid += 1
            assert parse_action(bad) is None
            assert step.info["valid"] is False and isinstance(step.info["reason"], str)
            assert step.observation == step.info["reason"] + "\n"
            assert len(step.observation) < 200
            assert (step.reward, step.done) == (0.0, False)
            assert _state(game)[:6] == before[:6]
            assert game.invalid_moves == invalid
        step = game.step(action)
        assert (step.observation, step.reward, step.done) == (
            want["observation"],
            want["reward"],
            want["done"],
        )
    assert game.num_steps == len(episode["actions"]) + invalid


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_handled(action: str) -> None:
    game = Catch()
    game.reset(ball_col=1)
    step = game.step(action)
    assert step.info["valid"] is (parse_action(action) is not None)
    assert game.num_steps == 1 and game.invalid_moves == (0 if step.info["valid"] else 1)
    assert game.ball_row == (1 if step.info["valid"] else 0)


def test_seed_is_a_pure_function() -> None:
    for columns in (1, 5, 7):
        for seed in (0, 1, 42, -3, 2**70):
            a, b = Catch(columns=columns), Catch(columns=columns)
            text = a.reset(seed=seed)
            assert a.ball_col == random.Random(seed).randrange(columns)
            assert b.reset(seed=seed) == text
            assert text == Catch(columns=columns).reset(ball_col=a.ball_col)
    boards = {Catch().reset(seed=s) for s in range(50)}
    assert len(boards) == 5
    assert Catch().reset() in {Catch().reset(ball_col=c) for c in range(5)}


@pytest.mark.parametrize(
    "task",
    [
        {"ball": 1},
        {"prompt": "hi"},
        {"ball_col": 5},
        {"ball_col": -1},
        {"ball_col": "1"},
        {"ball_col": True},
        {"ball_col": 1.0},
        {"seed": "7"},
        {"seed": 1.5},
        {"ball_col": 1, "seed": 2},
    ],
)
def test_bad_task_raises_and_changes_nothing(task: dict) -> None:
    game = Catch()
    game.reset(ball_col=3)
    game.step("LEFT")
    before, text = _state(game), game.render()
    with pytest.raises(ValueError):
        game.reset(**task)
    assert _state(game) == before and game.render() == text


@pytest.mark.parametrize(
    "options", [{"rows": 1}, {"rows": "10"}, {"columns": 0}, {"columns": 2.0}, {"size": 3}]
)
def test_bad_options_raise(options: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        Catch(**options)


def test_errors() -> None:
    game = Catch()
    with pytest.raises(ValueError, match="reset"):
        game.step("LEFT")
    game.reset(ball_col=0)
    for bad in (0, None, b"LEFT", ["LEFT"]):
        with pytest.raises(ValueError):
            game.step(bad)  # type: ignore[arg-type]
    assert game.num_steps == 0
    for _ in range(9):
        game.step("STAY")
    assert game.done
    with pytest.raises(ValueError, match="^the game is over"):
        game.step("STAY")
    assert game.num_steps == 9


def _solve(game: Catch, player: CatchSolver, blunder: random.Random | None = None) -> None:
    observation = game.render()
    while not game.done:
        action = player.act(observation)
        assert action in ACTIONS
        if blunder is not None and blunder.random() < 0.3:
            action = blunder.choice(["LEFT", "RIGHT", "STAY", "jump", ""])
        observation = game.step(action).observation


@pytest.mark.parametrize("rows,columns", [(10, 5), (2, 1), (3, 2), (5, 3), (6, 7), (12, 4)])
def test_solver_always_wins(rows: int, columns: int) -> None:
    for ball in range(columns):
        if abs(ball - columns // 2) > rows - 1:
            continue  # out of reach on this board
        game = Catch(rows=rows, columns=columns)
        game.reset(ball_col=ball)
        _solve(game, CatchSolver(rows=rows, columns=columns))
        assert game.won and game.reward == 1.0 and game.invalid_moves == 0


def test_solver_reads_the_board_not_its_own_moves() -> None:
    wins = 0
    for seed in range(200):
        rng = random.Random(seed)
        game, player = Catch(), CatchSolver()
        game.reset(seed=seed)
        observation = game.render()
        while not game.done:
            action = player.act(observation)
            # After any board, the solver's move must point at the ball.
            want = "LEFT" if game.ball_col < game.paddle_col else "STAY"
            want = "RIGHT" if game.ball_col > game.paddle_col else want
            assert action == want
            if rng.random() < 0.3:
                action = rng.choice(["LEFT", "RIGHT", "STAY", "jump", ""])
            observation = game.step(action).observation
        wins += game.won
    assert wins > 100


def test_solver_reads_cumulative_text() -> None:
    game = Catch()
    text = game.reset(ball_col=4) + game.step("LEFT").observation + game.step("LEFT").observation
    assert CatchSolver().act(text) == "RIGHT"


def test_play_integration() -> None:
    import kit.games
    import kit.solvers

    try:  # the registries import every game; the others are written in parallel
        [(kit.games.make(name), kit.solvers.solver(name)) for name in kit.games.GAMES]
    except ImportError as error:
        pytest.skip(f"another game is not importable yet: {error}")
    from kit.solvers import play

    for ball in range(5):
        actions = play("catch", ball_col=ball)
        game = Catch()
        game.reset(ball_col=ball)
        for action in actions:
            game.step(action)
        assert game.won and len(actions) == 9
    assert len(play("catch", rows=4, columns=3, ball_col=0)) == 3


@pytest.mark.oracle
def test_live_openspiel() -> None:
    pyspiel = pytest.importorskip("pyspiel")
    rng = random.Random(7)
    for _ in range(300):
        rows, columns = rng.choice([(10, 5), (10, 5), (4, 3), (7, 9), (2, 2)])
        ball = rng.randrange(columns)
        state = pyspiel.load_game("catch", {"rows": rows, "columns": columns}).new_initial_state()
        state.apply_action(ball)
        game = Catch(rows=rows, columns=columns)
        assert game.reset(ball_col=ball) == str(state) == state.observation_string(0)
        while not state.is_terminal():
            if rng.random() < 0.2:
                assert game.step(rng.choice(INVALID[:-1])).info["valid"] is False
            move = rng.randrange(3)
            name = state.action_to_string(0, move)
            spelled = rng.choice([name, name.lower(), str(move), f"[{name}]", f" {move} "])
            state.apply_action(move)
            step = game.step(spelled)
            assert step.observation == str(state)
            assert step.reward == state.rewards()[0] == game.reward
            assert step.done == state.is_terminal() == game.done
        assert game.reward == state.returns()[0]


@pytest.mark.oracle
def test_live_rl_environment() -> None:
    """The OpenEnv path: OpenSpiel's rl_environment, seen through its observation tensor."""
    pytest.importorskip("pyspiel")
    from open_spiel.python import rl_environment

    env = rl_environment.Environment("catch")
    env.seed(3)
    rng = random.Random(3)
    for _ in range(50):
        time_step = env.reset()
        tensor = time_step.observations["info_state"][0]
        ball = [i for i, v in enumerate(tensor[:5]) if v == 1.0]
        assert len(ball) == 1
        game = Catch()
        text = game.reset(ball_col=ball[0])
        while True:
            cells = [float(ch in "ox") for ch in text.replace("\n", "")]
            assert cells == list(time_step.observations["info_state"][0])
            if time_step.last():
                break
            move = rng.randrange(3)
            time_step = env.step([move])
            step = game.step(ACTIONS[move])
            text = step.observation
            assert step.reward == time_step.rewards[0]
            assert step.done == time_step.last()
