"""The tool-method envs: TRL's contract, and nothing but ValueError for any input a model sends."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.envs import ENVS, GAME_OVER, CatchEnv, EchoEnv, SudokuEnv, ToolCall, WordleEnv
from kit.games import make
from kit.solvers import solver

TASKS = {
    WordleEnv: {"secret": "sheep"},
    CatchEnv: {"ball_col": 3},
    SudokuEnv: {"seed": 5, "difficulty": "easy"},
    EchoEnv: {},
}
TOOLS = {
    WordleEnv: {"guess": ["guess"]},
    CatchEnv: {"move": ["direction"], "stay": []},
    SudokuEnv: {"place": ["row", "col", "number"]},
    EchoEnv: {"echo": ["message"]},
}

# Everything a JSON tool call can carry, plus what a sloppy parser might pass on.
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.text(max_size=40).map(lambda t: t * 2_000)  # huge inputs
    | st.sampled_from(["LEFT", "right", "[crane]", "sheep", "5", "1", "9", "0", "10", "-1"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=5,
)


def _public_functions(cls) -> set[str]:
    """What TRL turns into tools: public functions on the class other than reset/get_reward."""
    return {
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


@pytest.mark.parametrize("env_cls", list(TOOLS))
def test_only_the_tools_are_public(env_cls):
    assert _public_functions(env_cls) == set(TOOLS[env_cls])


@pytest.mark.parametrize("env_cls", list(TOOLS))
def test_tool_schemas_build(env_cls):
    """transformers builds every tool's JSON schema (the failure TRL only shows at step one)."""
    from transformers.utils import get_json_schema

    env = env_cls()
    for name, params in TOOLS[env_cls].items():
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["name"] == name
        assert list(schema["parameters"]["properties"]) == params
        assert schema["description"]
    if env_cls is CatchEnv:
        direction = get_json_schema(env.move)["function"]["parameters"]["properties"]["direction"]
        assert direction["enum"] == ["LEFT", "RIGHT"]


@pytest.mark.parametrize("env_cls", list(TOOLS))
def test_reset_is_a_pure_function_of_the_row(env_cls):
    row = {"prompt": [{"role": "user", "content": "play"}], "split": "train", **TASKS[env_cls]}
    first, second = env_cls(), env_cls()
    text = first.reset(**row)
    _play_a_little(first)
    assert first.reset(**row) == text == second.reset(**row)  # reused instance, fresh instance
    assert first.calls == [] and first.transcript == text


def test_reset_needs_a_task_column():
    with pytest.raises(ValueError, match="needs one of the columns"):
        WordleEnv().reset(prompt=[{"role": "user", "content": "play"}])


@pytest.mark.parametrize("env_cls", [WordleEnv, CatchEnv, SudokuEnv])
def test_a_bad_row_leaves_the_episode_intact(env_cls):
    env = env_cls()
    env.reset(**TASKS[env_cls])
    _play_a_little(env)
    before = (env.transcript, env.calls, env.reward, env.done)
    bad = {"secret": "toolongword"} if env_cls is WordleEnv else {"seed": "x"}
    with pytest.raises(ValueError):
        env.reset(**bad)
    assert (env.transcript, env.calls, env.reward, env.done) == before


def _play_a_little(env) -> None:
    name = next(key for key, cls in ENVS.items() if cls is type(env))
    player = solver(name)
    observation = env.transcript
    for _ in range(2):
        action = player.act(observation)
        observation = _call_with_action(env, action)


def _call_with_action(env, action: str) -> str:
    """Turn a game action string into the env's tool call (the inverse of what the tools build)."""
    if isinstance(env, WordleEnv):
        return env.guess(action)
    if isinstance(env, CatchEnv):
        return env.stay() if action == "STAY" else env.move(action)
    if isinstance(env, SudokuEnv):
        row, col, number = action.strip("[]").split()
        return env.place(int(row), int(col), int(number))
    return env.echo(action)


@pytest.mark.parametrize("env_cls", list(TOOLS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_tools_raise_only_value_error_and_keep_state_consistent(env_cls, data):
    env = env_cls()
    reset_text = env.reset(**TASKS[env_cls])
    engine_texts = [reset_text]
    for _ in range(data.draw(st.integers(1, 12))):
        tool = data.draw(st.sampled_from(sorted(TOOLS[env_cls])))
        arguments = {p: data.draw(anything) for p in TOOLS[env_cls][tool]}
        steps_before, was_done = env.game.num_steps, env.done
        try:
            result = getattr(env, tool)(**arguments)
        except ValueError as error:
            assert str(error), "an error must tell the model something"
            assert env.calls[-1].error == str(error)
            if was_done:
                assert env.game.num_steps == steps_before  # nothing reaches a finished game
        else:
            assert not was_done
            assert isinstance(result, str)
            assert env.calls[-1].result == result
        if env.game.num_steps > steps_before:  # the move reached the engine: its text is kept
            engine_texts.append(env.transcript[len("".join(engine_texts)) :])
        assert env.transcript == "".join(engine_texts)
        assert env.invalid_calls == sum(call.error is not None for call in env.calls)
    # The engine underneath agrees with a fresh engine fed the same moves.
    assert env.game.num_steps <= len(env.calls)


@pytest.mark.parametrize("env_cls", [WordleEnv, CatchEnv, SudokuEnv])
def test_a_call_the_engine_refuses_is_recorded(env_cls):
    """A tool call before any reset is refused by the engine itself, not by the tool's checks:
    it is a failed call all the same, recorded with the text the model is shown, so that
    invalid_calls agrees with TRL's tools/failure_frequency."""
    env = env_cls()
    tool, arguments = {
        WordleEnv: ("guess", {"guess": "crane"}),
        CatchEnv: ("move", {"direction": "LEFT"}),
        SudokuEnv: ("place", {"row": 1, "col": 1, "number": 1}),
    }[env_cls]  # well-formed, so that only the engine can refuse it
    with pytest.raises(ValueError, match="reset") as refused:
        getattr(env, tool)(**arguments)
    assert env.invalid_calls == 1
    assert env.calls == [ToolCall(tool, arguments, None, str(refused.value))]
    assert env.transcript == ""


@pytest.mark.parametrize("env_cls", [WordleEnv, CatchEnv, SudokuEnv])
def test_calls_after_the_end_are_refused(env_cls):
    name = next(key for key, cls in ENVS.items() if cls is env_cls)
    env = env_cls()
    observation = env.reset(**TASKS[env_cls])
    player = solver(name)
    replies = []
    while not env.done:
        observation = _call_with_action(env, player.act(observation))
        replies.append(observation)
    assert env.won
    # The move that ends the game says so in words; no move before it does.
    assert replies[-1].endswith(f"\n{GAME_OVER}")
    assert not any(GAME_OVER in reply for reply in replies[:-1])
    final = (env.transcript, env.reward)
    tool = sorted(TOOLS[env_cls])[0]
    arguments = {p: 1 for p in TOOLS[env_cls][tool]}
    with pytest.raises(ValueError, match="game is over"):
        getattr(env, tool)(**arguments)
    assert (env.transcript, env.reward) == final


def test_wordle_env_matches_the_engine_move_for_move():
    env, game = WordleEnv(), make("wordle")
    assert env.reset(secret="sheep") == game.reset(secret="sheep")
    for word in ["crane", "qzxjv", "shelf", "sheep"]:
        step = game.step(f"[{word}]")
        try:
            # The engine's text, and after the move that ends the game, the announcement.
            ending = f"\n{GAME_OVER}" if step.done else ""
            assert env.guess(word) == step.observation + ending
        except ValueError as error:
            assert not step.info["valid"] and step.info["reason"] in str(error)
    assert (
        (env.done, env.won, env.reward) == (game.done, game.won, game.reward) == (True, True, 1.0)
    )


def test_game_ending_invalid_move_says_so():
    env = SudokuEnv()
    env.reset(**TASKS[SudokuEnv])
    for _ in range(2):
        with pytest.raises(ValueError) as error:
            env.place(0, 0, 0)
    assert env.done and "game is over" in str(error.value)
    assert "Invalid move" in str(error.value)  # the reference's reason, which its text omits


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, 3),
        (3.0, 3),
        ("3", 3),
        (" 7 ", 7),
        (True, None),
        (2.5, None),
        ("three", None),
        (None, None),
    ],
)
def test_sudoku_numbers_of_any_spelling(value, expected):
    env = SudokuEnv()
    env.reset(**TASKS[SudokuEnv])
    try:
        env.place(value, 1, 1)
    except ValueError:
        pass
    action_reached_engine = env.game.num_steps == 1
    assert action_reached_engine == (expected is not None)


def test_a_setting_alone_is_not_a_task():
    """``difficulty`` without ``seed``/``puzzle`` would draw a random board: refused."""
    with pytest.raises(ValueError, match="needs one of the columns"):
        SudokuEnv().reset(difficulty="easy")
    env = SudokuEnv()
    assert env.reset(seed=1, difficulty="hard") == SudokuEnv().reset(seed=1, difficulty="hard")
    assert env.game.difficulty == "hard"


def test_variants_are_subclasses():
    class LongWordleEnv(WordleEnv):
        options = {"word_length": 7, "num_guesses": 9}

    env = LongWordleEnv()
    assert "7-letter word" in env.reset(seed=0) and env.game.max_guesses == 9
    with pytest.raises(ValueError, match="exactly 7 letters"):
        env.guess("crane")
    assert WordleEnv().reset(seed=0) != env.transcript  # the base class is untouched
