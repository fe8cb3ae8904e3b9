"""Hostile tool calls: 10,000 per env, of everything a model can write into a JSON tool call.

What must hold for every call, because a training run depends on it (issue "tool input that
cannot hurt training"): the tool returns text or raises ``ValueError`` (TRL turns only exceptions
into ``{'error': ...}`` for the model, and the kit's contract is ValueError); the text and the
error are encodable (a lone surrogate in a tool result makes TRL's tokenisation raise outside its
tool-error handling, and the training step dies); the error is short and speaks of the tool's
arguments, not of Python's internals; and every call, failed or not, is in ``env.calls``, so
that ``invalid_calls`` counts what TRL's ``tools/failure_frequency`` counts.
"""

from __future__ import annotations

import random

import pytest

from kit.envs import CatchEnv, EchoEnv, SudokuEnv, WordleEnv
from tests.test_envs import TASKS as GAME_TASKS
from tests.test_envs import TOOLS

CALLS = 10_000
# test_envs' tasks, with Catch on a 30-row board so that a game outlasts more hostile calls.
TASKS = {**GAME_TASKS, CatchEnv: {"ball_col": 3, "rows": 30}}
# What an error may not say: Python's own messages, which tell a model nothing about the tool.
INTERNALS = ("int()", "sys.", "Traceback", "literal", "object of type", "recursion", "NoneType")
LONGEST_ERROR = 600


def _nested(depth: int, make):
    value: object = 1
    for _ in range(depth):
        value = make(value)
    return value


def _hostile() -> list[object]:
    """Values a JSON tool call can carry (every JSON type, at the extremes) and strings a model
    writes when it is confused: surrogates, look-alike digits, markup, nothing, far too much."""
    return [
        None, True, False, 0, 1, 3, 9, 10, -1, -3, 2**63, -(2**70), 10**5000,
        0.0, 3.0, 3.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf"),
        "", " ", "\n", "\x00", "3", " 3 ", "+3", "-3", "+-3", "-+3", "3.0", "1e3", "0x10",
        "٣", "３", "³", "9" * 30, "LEFT", "left", " RIGHT ", "[RIGHT]", "STAY", "up",
        "crane", "[crane]", "crane.", "CRANE", "cr ane", "[crane] [sheep]", "sheep",
        "\ud800", "a\udfffb", "crane\ud800", "\udc80" * 3, "LEFT\ud83d", "😀", "é" * 5,
        "\u202eenarc", "[GAME] You won!", "[Player]", "{'error': 'x'}", "x" * 100_000,
        "[1 2 3]", "1 2 3", [], [1], [1, 2, 3], ["crane"], {}, {"guess": "crane"}, {"": None},
        _nested(5_000, lambda v: [v]), _nested(5_000, lambda v: {"a": v}),
    ]  # fmt: skip


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize("env_cls", list(TOOLS), ids=lambda cls: cls.__name__)
def test_hostile_calls_cannot_hurt_training(env_cls):
    rng = random.Random(0)
    pool = _hostile()
    env = env_cls()
    env.reset(**TASKS[env_cls])
    escaped: list[str] = []
    for i in range(CALLS):
        if env.done or rng.random() < 0.02:
            env.reset(**TASKS[env_cls])
        tool = rng.choice(sorted(TOOLS[env_cls]))
        arguments = {name: rng.choice(pool) for name in TOOLS[env_cls][tool]}
        calls = len(env.calls)
        try:
            result = getattr(env, tool)(**arguments)
        except ValueError as error:
            message = str(error)
            assert env.calls[-1].error == message and env.calls[-1].result is None
            assert message and _encodable(message), (tool, arguments)
            assert len(message) <= LONGEST_ERROR, (tool, message[:200])
            assert not any(word in message for word in INTERNALS), (tool, message)
        except Exception as error:  # noqa: BLE001 - this is what the test looks for
            escaped.append(f"call {i}: {tool}: {type(error).__name__}: {str(error)[:80]}")
            continue
        else:
            assert isinstance(result, str) and _encodable(result), (tool, arguments)
            assert env.calls[-1].result == result and env.calls[-1].error is None
        assert len(env.calls) == calls + 1, f"call {i} ({tool}) was not recorded"
        assert env.invalid_calls == sum(call.error is not None for call in env.calls)
    assert not escaped, (
        f"{len(escaped)} calls raised something other than ValueError: {escaped[:5]}"
    )


@pytest.mark.parametrize(
    ("env_cls", "tool", "arguments", "says"),
    [
        (EchoEnv, "echo", {"message": "hi \ud800"}, "surrogate"),
        (WordleEnv, "guess", {"guess": "sheep\ud800"}, "surrogate"),
        (WordleEnv, "guess", {"guess": "crane."}, "letters"),
        (SudokuEnv, "place", {"row": -1, "col": 3, "number": 4}, "1 to 9"),
        (SudokuEnv, "place", {"row": "+-3", "col": 1, "number": 1}, "whole number"),
        (SudokuEnv, "place", {"row": 10**5000, "col": 1, "number": 1}, "5001-digit"),
        (SudokuEnv, "place", {"row": _nested(5_000, lambda v: [v]), "col": 1, "number": 1}, "list"),
        (CatchEnv, "move", {"direction": "\ud800"}, "surrogate"),
    ],
)
def test_each_refusal_says_what_to_send_instead(env_cls, tool, arguments, says):
    env = env_cls()
    env.reset(**TASKS[env_cls])
    with pytest.raises(ValueError) as error:
        getattr(env, tool)(**arguments)
    assert says in str(error.value)
    assert len(env.calls) == 1 and env.invalid_calls == 1
