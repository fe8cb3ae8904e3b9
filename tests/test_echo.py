"""Echo against OpenEnv's echo env rule (``len(message) * 0.1``, never done, an empty message
refused), and the live env where it is importable (openenv 0.10.0 does not ship it: the oracle
test then skips)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.builtin.echo.engine import EMPTY_MESSAGE, READY, Echo
from kit.builtin.echo.solver import EchoSolver
from kit.envs import EchoEnv

MESSAGES = ["a", "Hi", "abc", "Hello, World!", "héllo wörld", "🙂" * 7, "x" * 100_000, "\n\t"]


def test_reset_text() -> None:
    assert READY == "Echo environment ready!"
    game = Echo()
    assert game.reset() == READY
    assert (game.done, game.won, game.reward, game.num_steps, game.messages) == (
        False,
        False,
        0.0,
        0,
        [],
    )


@pytest.mark.parametrize("message", MESSAGES)
def test_echoes_and_pays_len_times_point_one(message: str) -> None:
    game = Echo()
    game.reset()
    step = game.step(message)
    assert step.observation == message
    assert step.reward == len(message) * 0.1 == game.reward
    assert step.done is False and game.done is False
    assert step.info == {"valid": True, "reason": None, "message_length": len(message)}
    assert game.messages == [message] and game.invalid_moves == 0


def test_reward_is_multiplied_not_divided() -> None:
    game = Echo()
    game.reset()
    # The reference multiplies by 0.1; dividing by 10 gives different floats for these lengths.
    differ = [n for n in range(1, 200) if n * 0.1 != n / 10]
    assert 3 in differ
    for n in differ:
        reward = game.step("y" * n).reward
        assert reward == n * 0.1 and reward != n / 10
    assert game.step("abc").reward == 0.30000000000000004
    assert game.step("Hello, World!").reward == 13 * 0.1


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1))
def test_any_text_is_echoed(message: str) -> None:
    game = Echo()
    step = game.step(message)  # the reference needs no reset before the first step
    assert (step.observation, step.reward, step.done) == (message, len(message) * 0.1, False)


def _state(game: Echo) -> tuple:
    return (game.messages[:], game.reward, game.num_steps, game.invalid_moves, game.done)


def test_an_empty_message_is_refused_and_changes_nothing() -> None:
    """The reference's action is ``message: str = Field(min_length=1)``: the server refuses an
    empty one (VALIDATION_ERROR) before the env sees it, so nothing of the episode changes."""
    assert EMPTY_MESSAGE == "message must not be empty: send at least one character."
    game = Echo(max_turns=2)
    with pytest.raises(ValueError, match="^message must not be empty"):
        game.step("")  # before any reset, too
    assert _state(game) == ([], 0.0, 0, 0, False)
    game.reset()
    game.step("hello")
    before = _state(game)
    for _ in range(3):
        with pytest.raises(ValueError) as error:
            game.step("")
        assert str(error.value) == EMPTY_MESSAGE
        assert _state(game) == before  # not a step: the last turn is still to play
    assert game.step("x").done and game.num_steps == 2


def test_echo_env_refuses_an_empty_message_as_a_failed_call() -> None:
    env = EchoEnv()
    env.reset()
    assert env.echo("hi") == "hi"
    transcript, reward = env.transcript, env.reward
    with pytest.raises(ValueError) as error:
        env.echo("")
    assert str(error.value) == EMPTY_MESSAGE  # the engine's words, to the model
    (_, failed) = env.calls
    assert (failed.tool, failed.arguments, failed.result) == ("echo", {"message": ""}, None)
    assert failed.error == EMPTY_MESSAGE and env.invalid_calls == 1
    assert (env.transcript, env.reward, env.game.num_steps, env.game.messages) == (
        transcript,
        reward,
        1,
        ["hi"],
    )
    assert env.echo(" ") == " "  # one character is enough, whitespace included


def test_never_done_by_default() -> None:
    game = Echo()
    game.reset()
    for i in range(1_000):
        assert not game.step(str(i)).done
    # The history is a window of the newest messages: an episode that never ends stays bounded.
    assert game.num_steps == 1_000 and game.messages == [str(i) for i in range(744, 1_000)]
    game.reset(seed=3, episode_id="ep")
    assert (game.num_steps, game.messages, game.reward) == (0, [], 0.0)


def test_max_turns() -> None:
    game = Echo(max_turns=3)
    for _ in range(2):
        game.reset()
        assert [game.step(m).done for m in ("a", "bb", "ccc")] == [False, False, True]
        assert game.done and game.reward == 3 * 0.1 and not game.won
        with pytest.raises(ValueError, match="^the game is over"):
            game.step("more")
        assert game.num_steps == 3


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_bad_max_turns(bad: object) -> None:
    with pytest.raises(ValueError):
        Echo(max_turns=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "task", [{"prompt": "hi"}, {"seed": "1"}, {"seed": True}, {"episode_id": 3}, {"message": "x"}]
)
def test_bad_task_raises_and_changes_nothing(task: dict) -> None:
    game = Echo()
    game.reset()
    game.step("abc")
    before = (game.messages[:], game.reward, game.num_steps, game.done)
    with pytest.raises(ValueError):
        game.reset(**task)
    assert (game.messages, game.reward, game.num_steps, game.done) == before


def test_non_str_action_raises() -> None:
    game = Echo()
    game.reset()
    for bad in (None, 3, b"hi", ["hi"]):
        with pytest.raises(ValueError):
            game.step(bad)  # type: ignore[arg-type]
    assert game.num_steps == 0


def test_solver_is_seeded_varied_and_short() -> None:
    def run(seed: int, n: int = 30) -> list[str]:
        player, game = EchoSolver(seed=seed), Echo(max_turns=n)
        observation = game.reset()
        sent = []
        while not game.done:
            sent.append(player.act(observation))
            observation = game.step(sent[-1]).observation
        return sent

    first = run(0)
    assert first == run(0)
    assert first != run(1)
    assert len(set(first)) >= 10
    assert all(0 < len(m) <= 60 for m in first)
    assert EchoSolver(max_turns=5).act(READY) == EchoSolver().act("anything")


@pytest.mark.oracle
def test_live_echo_env() -> None:
    module = pytest.importorskip("echo_env.server.echo_environment")
    models = pytest.importorskip("echo_env.models")
    env, game = module.EchoEnvironment(), Echo()
    assert env.reset().echoed_message == game.reset()
    for message in MESSAGES:
        observation = env.step(models.EchoAction(message=message))
        step = game.step(message)
        assert step.observation == observation.echoed_message
        assert step.reward == observation.reward
        assert step.done == observation.done
    with pytest.raises(ValueError):  # pydantic's ValidationError: min_length=1
        models.EchoAction(message="")
    with pytest.raises(ValueError):
        game.step("")
