"""The real ``trl.GRPOTrainer(environment_factory=...)`` trains through every env on CPU.

The model's sampling is scripted (tests/scripted.py) to emit valid calls, calls the game
rejects, malformed arguments and unknown tools; the expected env state and failure counts come
from replaying the same calls on a fresh env directly. One run uses real, unscripted generation.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402

from kit.envs import CatchEnv, EchoEnv, SudokuEnv, WordleEnv, env_tools  # noqa: E402
from kit.games import make  # noqa: E402
from kit.models import tiny_model  # noqa: E402
from kit.train import grpo_config  # noqa: E402
from tests.scripted import ScriptedGeneration, tool_call  # noqa: E402

# TRL's example envs' tools (examples/scripts/openenv/*.py), read by make_trl_tools_fixture.py.
TRL_TOOLS = json.loads((Path(__file__).parent / "fixtures" / "trl_tools.json").read_text())


def _prompt(row_id: int) -> list[dict]:
    return [{"role": "user", "content": f"Play the game with the tools (row {row_id}).\n\n"}]


def _sudoku_task() -> dict:
    game = make("sudoku")
    game.reset(seed=3, difficulty="easy")
    return {"puzzle": game.puzzle}


def _sudoku_calls(puzzle: str) -> list[tuple[str, dict]]:
    game = make("sudoku")
    game.reset(puzzle=puzzle)
    cell = game.puzzle.index(".")
    row, col = divmod(cell, 9)
    right = int(game.solution[cell])
    wrong = right % 9 + 1
    return [
        ("place", {"row": row + 1, "col": col + 1, "number": right}),  # valid
        ("place", {"row": row + 1, "col": col + 1, "number": right}),  # cell already filled
        ("place", {"row": "x", "col": 1, "number": 1}),  # malformed: refused before the game
        ("place", {"row": 10, "col": col + 1, "number": wrong}),  # out of bounds: game over
    ]


# Each case: the env class, the dataset rows' task columns, the calls of every rollout.
CASES = {
    "wordle": (
        WordleEnv,
        [{"secret": "sheep"}, {"secret": "apple"}],
        lambda task: [
            ("guess", {"guess": "crane"}),
            ("guess", {"guess": "qzxjv"}),  # not a word: the first invalid move is a warning
            ("fly", {"to": "moon"}),  # no such tool: TRL's error, the env never sees it
            ("guess", {"guess": "sheep"}),
            ("guess", {"guess": 12345}),  # malformed argument
        ],
    ),
    "catch": (
        CatchEnv,
        [{"ball_col": 0}, {"ball_col": 4}],
        lambda task: [
            ("move", {"direction": "LEFT"}),
            ("move", {"direction": "UP"}),
            ("stay", {}),
            ("move", {"direction": "right"}),
        ],
    ),
    "sudoku": (SudokuEnv, [_sudoku_task()], lambda task: _sudoku_calls(task["puzzle"])),
    "echo": (
        EchoEnv,
        [{}],
        lambda task: [
            ("echo", {"message": "hello"}),
            ("echo", {"message": 42}),
            ("echo", {"message": "héllo wörld"}),
        ],
    ),
}


def _annotation(annotation) -> str | None:
    """An annotation as written in the source (a string under ``from __future__ import annotations``)."""
    if annotation is inspect.Parameter.empty:
        return None
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _signature(tool) -> dict:
    """A tool's parameters and return type as the fixture records them."""
    signature = inspect.signature(tool)
    return {
        "parameters": {name: _annotation(p.annotation) for name, p in signature.parameters.items()},
        "returns": _annotation(signature.return_annotation),
    }


@pytest.mark.parametrize("env_cls", [WordleEnv, CatchEnv, SudokuEnv, EchoEnv])
def test_tools_are_named_as_in_trl_examples(env_cls):
    """A model trained with TRL's example env for the game calls the kit's tools unchanged: the
    same tools, argument names (in order) and types."""
    expected = TRL_TOOLS["games"][env_cls.game_name]["tools"]
    tools = {tool.__name__: _signature(tool) for tool in env_tools(env_cls())}
    assert tools == expected, f"TRL {TRL_TOOLS['trl_commit'][:12]}"
    for name, tool in expected.items():  # dict equality ignores the order of the arguments
        assert list(tools[name]["parameters"]) == list(tool["parameters"])


def test_the_fixture_script_reads_tools_as_trl_exposes_them():
    """make_trl_tools_fixture.py keeps what TRL turns into tools: public functions other than
    reset/get_reward, not properties or private helpers."""
    import importlib.util

    path = Path(__file__).parent / "fixtures" / "make_trl_tools_fixture.py"
    spec = importlib.util.spec_from_file_location("make_trl_tools_fixture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = """
def main():
    class Helper:
        def step(self): ...

    class GameEnv:
        def reset(self, **kwargs) -> str: ...
        def get_reward(self) -> float: ...
        def _private(self, x: int) -> str: ...
        @property
        def score(self) -> float: ...
        @staticmethod
        def hint(level: int): ...
        def play(self, row: int, col: "int", name: str | None = None) -> str: ...
"""
    assert module.tools(source) == (
        "GameEnv",
        {
            "hint": {"parameters": {"level": "int"}, "returns": None},
            "play": {
                "parameters": {"row": "int", "col": "'int'", "name": "str | None"},
                "returns": "str",
            },
        },
    )


def _replay(env_cls, task: dict, calls) -> tuple[object, int]:
    """What a fresh env looks like after the calls, and how many of them fail (as TRL counts)."""
    env = env_cls()
    env.reset(prompt=_prompt(0), **task)
    failures = 0
    for name, arguments in calls:
        method = getattr(env, name, None) if not name.startswith("_") else None
        try:
            if method is None or name == "reset":
                raise ValueError(f"Tool {name} not found.")
            method(**arguments)
        except ValueError:
            failures += 1
    return env, failures


def _row_of(text: str) -> int:
    """Which dataset row a rendered prompt came from (each prompt names its row)."""
    found = re.findall(r"\(row (\d+)\)", text)
    assert len(found) == 1, "the prompt names no row, or several"
    return int(found[0])


def _train(env_cls, rows, script, tmp_path, steps=2, **config):
    from trl import GRPOTrainer

    model, tokenizer = tiny_model()
    if script is not None:
        ScriptedGeneration(tokenizer, script).install(model)
    seen = []

    def env_state(environments, row_id, **kwargs):
        seen.append(
            [
                (i, env.done, env.reward, len(env.calls))
                for i, env in zip(row_id, environments, strict=True)
            ]
        )
        return [env.reward for env in environments]

    args = grpo_config(str(tmp_path), max_steps=steps, **config)
    dataset = Dataset.from_list(
        [{"prompt": _prompt(i), "row_id": i, **row} for i, row in enumerate(rows)]
    )
    trainer = GRPOTrainer(
        model=model,
        args=args,
        reward_funcs=env_state,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=env_cls,
    )
    trainer.train()
    return trainer, seen


@pytest.mark.slow
@pytest.mark.parametrize("game", list(CASES))
def test_grpo_trains_through_env_with_scripted_tool_calls(game, tmp_path):
    env_cls, rows, calls_for = CASES[game]

    def script(text):
        return [tool_call(name, **args) for name, args in calls_for(rows[_row_of(text)])]

    trainer, seen = _train(env_cls, rows, script, tmp_path, max_completion_length=3000)
    replays = [_replay(env_cls, task, calls_for(task)) for task in rows]

    # The calls reached the envs: each pooled instance ends where a direct replay of its row ends.
    pool = trainer._environment_pool[None]
    assert len(pool) == 2  # batch 2 = 1 group of 2 generations
    (last_row,) = {i for i, *_ in seen[-1]}
    expected, _ = replays[last_row]
    for env in pool:
        assert env.transcript == expected.transcript
        assert env.calls == expected.calls
        assert (env.reward, env.done) == (expected.reward, expected.done)
        assert len(env.transcript) > len(env_cls().reset(**rows[last_row]))  # the state changed

    # TRL's tool metrics equal the replays' counts, step by step, and the reward function saw
    # each env's state after its episode.
    logs = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    assert len(logs) == len(seen) == 2
    for entry, batch in zip(logs, seen, strict=True):
        calls = failures = 0
        for i, done, reward, num_calls in batch:
            expected, expected_failures = replays[i]
            calls += len(calls_for(rows[i]))
            failures += expected_failures
            assert (done, reward, num_calls) == (
                expected.done,
                expected.reward,
                len(expected.calls),
            )
        assert entry["tools/call_frequency"] == pytest.approx(calls / len(batch))
        assert entry["tools/failure_frequency"] == pytest.approx(failures / calls)
        assert 0 < failures < calls


@pytest.mark.slow
def test_grpo_trains_with_real_generation(tmp_path):
    """No script: the random tiny model samples freely; the loop must still run and learn."""
    trainer, seen = _train(
        WordleEnv,
        [{"secret": "sheep"}, {"secret": "apple"}],
        None,
        tmp_path,
        max_completion_length=32,
        temperature=1.0,
    )
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert len(seen) == 2 and all(len(batch) == 2 for batch in seen)
    # A random model makes no tool call: the envs stay at their first observation.
    for env in trainer._environment_pool[None]:
        assert env.calls == [] or all(re.match(r"\w+", c.tool) for c in env.calls)
