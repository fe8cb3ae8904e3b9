"""A game the kit has never heard of runs through every part of it: ``examples/guess_number.py``.

The game is one file outside ``kit/``, registered by importing it. These tests take it through
the task datasets, a solver-played SFT set, the reward diagnostics, a real ``GRPOTrainer``
step, ``kit.evaluate``, the HTML view and the inspector, and an OpenEnv server, each by the
game's name alone.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("trl")


from kit import registry  # noqa: E402
from kit.envs import ENVS  # noqa: E402
from kit.evaluate import BUDGETS, evaluate  # noqa: E402
from kit.rewards import default_reward  # noqa: E402
from kit.sft import sft_dataset, validate_example  # noqa: E402
from kit.solvers.policies import random_policy, solver_policy  # noqa: E402
from kit.tasks import HELD_OUT, TURN_LIMITS, TaskProvider, leaks, task_dataset  # noqa: E402
from tests.scripted import ScriptedGeneration, tool_call  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAME = "guess_number"


@pytest.fixture(scope="module")
def game() -> ModuleType:
    # Imported here, not at collection: the other test modules list the games they parametrize
    # over when they are collected.
    return importlib.import_module("examples.guess_number")


@pytest.mark.slow
def test_the_kit_does_not_import_the_game() -> None:
    """Every module of the kit imported, and every game it knows listed: no fifth game."""
    named = [path.relative_to(ROOT).with_suffix("").parts for path in (ROOT / "kit").rglob("*.py")]
    modules = sorted(
        ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for parts in named
        if parts[-1] != "__main__" and "serve" not in parts  # serving needs the serve extra
    )
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
        "from kit import registry; from kit.envs import ENVS; "
        "[registry.game(name) for name in registry.names()]; "
        "assert list(ENVS) == list(registry.BUILTIN), list(ENVS); "
        "assert not [m for m in sys.modules if m.startswith('examples')]"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {"kit.tasks", "kit.sft", "kit.data"} <= set(modules) and "kit.builtin.wordle" in modules


def test_registering_puts_the_game_in_every_table_of_the_kit(game: ModuleType) -> None:
    assert registry.game(GAME) is game.SPEC and GAME in registry.names()
    # The tables were imported before the game was registered, and list it all the same.
    assert ENVS[GAME] is game.GuessEnv and TURN_LIMITS[GAME] == 10 and BUDGETS[GAME] == 512
    assert "ending in 5" in HELD_OUT[GAME] and GAME in dict(ENVS)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.GameSpec(**{**vars(game.SPEC), "budget": 64}))
    for change, message in (
        ({"name": "guess number"}, "identifier"),
        ({"name": "guess_digit"}, "game_name = 'guess_digit'"),
        ({"turn_limit": 0}, "turn_limit must be an int >= 1"),
        ({"reward": {}}, "at least one term"),
    ):
        with pytest.raises(ValueError, match=message):
            registry.GameSpec(**{**vars(game.SPEC), **change})
    with pytest.raises(ValueError, match="unknown game 'guess_digit'"):
        task_dataset("guess_digit")
    with pytest.raises(TypeError, match="read-only"):
        ENVS["chess"] = game.GuessEnv


def test_task_datasets_have_a_held_out_split(game: ModuleType) -> None:
    train, held_out = task_dataset(GAME, "train"), task_dataset(GAME, "eval")
    assert len(train) == 90 and sorted(held_out["target"]) == list(game.EVAL_TARGETS)
    assert not set(train["target"]) & set(held_out["target"])
    assert train[0]["prompt"][1]["content"].endswith("The game says:\n\n")
    tasks = list(TaskProvider(GAME, "eval", 3, seed=1))
    assert [t.ground_truth for t in tasks] == [str(t.task["target"]) for t in tasks]
    # The default leak check finds an eval task in a training set.
    assert leaks(GAME, train) == []
    assert leaks(GAME, held_out.select(range(1))) == [
        f"row 0: task {{'target': {held_out[0]['target']}}} is an eval task"
    ]


def test_the_solver_plays_an_sft_set_that_replays_and_leaks_nothing(game: ModuleType) -> None:
    sft = sft_dataset(GAME, num_games=20, reasoning=True)
    assert len(sft) == 20 and sft[0]["tools"][0]["function"]["name"] == "guess"
    for row in sft:
        env = validate_example(row)  # every tool result is what a fresh env returns
        assert env.won and len(env.game.guesses) <= 7
        assert row["messages"][-1] == {"role": "assistant", "content": "Found it."}
    first_turn = sft[0]["messages"][2]
    assert first_turn["content"] == "The number is from 1 to 100, so I guess the middle, 50."
    assert leaks(GAME, sft) == []


def test_a_game_that_declares_its_answers_is_checked_for_them_anywhere(game: ModuleType) -> None:
    # Binary search from 1..100 probes 50, then 25 or 75: 75 is a held-out target (they end in
    # 5). A probe is not a task, so the default check passes the set; once the game declares its
    # truths to be answers, the probe that shows one is found and the SFT set is refused.
    rows = list(sft_dataset(GAME, num_games=20, seed=0))
    probes = {json.dumps(m.get("tool_calls")) for row in rows for m in row["messages"]}
    assert any('"number": 75' in p for p in probes)
    assert leaks(GAME, rows) == []
    spec = registry.game(GAME)
    registry.register(dataclasses.replace(spec, answers_leak=True), replace=True)
    try:
        found = leaks(GAME, rows)
        assert found and all(re.search(r"eval answer '\d*5' in messages\[\d+\]", f) for f in found)
        assert any(
            re.search(r"'75' in messages\[\d+\]\.tool_calls\[0\].+number$", f) for f in found
        )
        clean = {
            "messages": [{"role": "user", "content": "guess 57 or 750"}],
            "task": {"target": 3},
        }
        assert leaks(GAME, [clean]) == []  # a whole word only: 57 and 750 are no eval target
        with pytest.raises(ValueError, match="train games show eval tasks"):
            sft_dataset(GAME, num_games=20, seed=0)
    finally:
        registry.register(spec, replace=True)
    assert leaks(GAME, rows) == []


def test_diagnostics_rank_the_solver_over_random_play(game: ModuleType) -> None:
    from kit.diagnostics import diagnose

    report = diagnose(GAME, groups=4, num_generations=2)
    assert report.ordered[GAME] and report.players["solver"]["win_rate"] == 1.0
    assert report.players["random"]["win_rate"] < 1.0


def test_a_grpo_step_trains_through_the_games_tool_env(game: ModuleType, tmp_path: Path) -> None:
    from trl import GRPOTrainer

    from kit.models import tiny_model
    from kit.train import grpo_config

    model, tokenizer = tiny_model()
    calls = [tool_call("guess", number=50), tool_call("guess", number=25)]
    ScriptedGeneration(tokenizer, lambda text: calls).install(model)
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(
            str(tmp_path),
            max_steps=1,
            max_completion_length=256,
            max_tool_calling_iterations=TURN_LIMITS[GAME],
        ),
        reward_funcs=default_reward(GAME),
        train_dataset=task_dataset(GAME, "train", num_tasks=1),
        processing_class=tokenizer,
        environment_factory=ENVS[GAME],
    )
    trainer.train()
    (target,) = task_dataset(GAME, "train", num_tasks=1)["target"]
    for env in trainer._environment_pool[None]:
        assert env.game.target == target and env.game.guesses == [50, 25]
    logged = next(entry for entry in trainer.state.log_history if "loss" in entry)
    assert logged["tools/call_frequency"] == 2.0 and f"rewards/{GAME}/mean" in logged


@pytest.fixture(scope="module")
def evaluation(game: ModuleType) -> Any:
    from kit.models import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    return evaluate(solver_policy(), GAME, tokenizer, name="solver"), tokenizer


def test_evaluate_plays_the_held_out_tasks(evaluation: Any) -> None:
    result, _ = evaluation
    played = result[GAME]
    assert played.tasks == 10 and played.win_rate.value == 1.0
    assert {t.task["target"] for t in played.trajectories} == set(range(5, 101, 10))
    randomly = evaluate(random_policy(), GAME, num_tasks=4)[GAME]
    assert randomly.win_rate.value < 1.0 and randomly.mean_reward.value < played.mean_reward.value


def test_a_model_is_evaluated_through_the_rollout(game: ModuleType) -> None:
    from kit.models import tiny_model

    model, tokenizer = tiny_model()
    result = evaluate(model, GAME, tokenizer, num_tasks=2, max_completion_length=24)[GAME]
    assert result.episodes == 2 and all(t.prompt_ids for t in result.trajectories)


def test_the_html_view_and_the_inspector_show_its_episodes(evaluation: Any, tmp_path: Path) -> None:
    from kit import viz

    result, tokenizer = evaluation
    trajectories = result[GAME].trajectories
    page = viz.save_html(trajectories, tokenizer, tmp_path / "guess.html").read_text("utf-8")
    assert "is too low" in page or "is too high" in page
    pytest.importorskip("ipywidgets")
    box = viz.inspector(trajectories, tokenizer)
    assert "kit-inspector" in box._dom_classes


def test_a_server_plays_the_game_as_the_tool_env_does(game: ModuleType) -> None:
    pytest.importorskip("openenv", reason="kit.serve needs `pip install 'kit[serve]'`")
    from fastapi.testclient import TestClient

    import kit.remote
    from kit.serve import ENVIRONMENTS, build_app, resolve_env

    assert ENVIRONMENTS[GAME] is game.GuessEnvironment
    with TestClient(build_app(game.GuessEnvironment)) as client:
        reply = client.post("/reset", json={"target": 30}).json()
        assert reply["observation"]["text"].startswith("I am thinking of a whole number")
        # HTTP is stateless, as OpenEnv's is: a step plays on a fresh, drawn board.
        reply = client.post("/step", json={"action": {"message": "50"}}).json()
        assert reply["observation"]["text"].startswith("50 is ")
        assert reply["observation"]["metadata"]["game"]["guesses"] == [50]
    url, server = resolve_env(GAME)
    local = ENVS[GAME]()
    with server, kit.remote.env(GAME, url)() as remote:
        assert remote.reset(target=30) == local.reset(target=30)
        for number in (50, 25, 37, 31, 28, 30):
            assert remote.guess(number) == local.guess(number)
        assert remote.won and remote.reward == local.reward == 1.0


@pytest.mark.slow
def test_the_runbook_takes_the_game_by_its_module(game: ModuleType, tmp_path: Path) -> None:
    """``python -m kit.demo --game examples.guess_number``: the game ships no SFT file, so its
    warm-up is played by its solver; the tiny tokenizer learns the game's words; every output is
    written, and the printed command names the module again."""
    from kit.models import load, tiny_tokenizer
    from kit.sft import load_sft

    assert not (ROOT / "data" / "sft" / GAME).exists()
    played = load_sft(GAME)
    assert played.to_list() == sft_dataset(GAME, **registry.game(GAME).sft).to_list()
    out = tmp_path / "run"
    argv = ["--game", "examples.guess_number", "--sft-steps", "3", "--grpo-steps", "1"]
    argv += ["--eval-generations", "1", "--max-completion-length", "48", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "kit.demo", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["game"] == GAME and summary["command"].startswith(
        "python -m kit.demo --game examples.guess_number "
    )
    assert [e["player"] for e in summary["evaluation"]] == ["base", "SFT", "SFT + GRPO"]
    assert {e["game"] for e in summary["evaluation"]} == {GAME}
    assert (out / "trajectory.html").exists()
    _, tokenizer = load(out / "grpo-model")
    words = "whether your guess is too low or too high"
    assert len(tokenizer(words)["input_ids"]) < len(tiny_tokenizer()(words)["input_ids"])


def test_a_game_reference_that_names_no_game_is_refused_with_what_it_named() -> None:
    with pytest.raises(ValueError, match="no module 'no_such_game'"):
        registry.load_game("no_such_game")
    with pytest.raises(ValueError, match="neither a registered GameSpec"):
        registry.load_game("examples.guess_number:GuessNumber")
    with pytest.raises(ValueError, match="importing module kit.trajectory registered no game"):
        registry.load_game("kit.trajectory")
    assert registry.load_game("examples.guess_number:GuessEnv") == GAME
    assert registry.load_game("examples.guess_number:SPEC") == GAME
    assert registry.load_game("examples.guess_number") == GAME
    assert registry.load_game("catch") == "catch"
