"""kit.tasks, kit.sft and kit.data: fixed splits, task rows TRL can reset from, and SFT sets that replay exactly, render
as GRPO renders them, regenerate byte for byte and train with SFTTrainer."""

from __future__ import annotations

import contextlib
import json
import re

import pytest

from kit.builtin.wordle import wordle_secrets
from kit.builtin.wordle.engine import secrets
from kit.data import SHIPPED_SFT, jsonl
from kit.envs import ENVS, env_tools
from kit.episode import tool_schemas
from kit.games import make
from kit.paths import data_dir
from kit.rewards import validate_environments
from kit.scoring import compute_score
from kit.sft import first_turns, load_sft, sft_dataset, sft_examples, validate_example
from kit.tasks import TaskProvider, make_splits, mixture_dataset, prompt, task_dataset
from tests.scripted import tool_call

GAMES = sorted(ENVS)


def _shipped(game: str) -> list[dict]:
    path = data_dir() / "sft" / game / "train.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- splits -------------------------------------------------------------------------------------
def test_wordle_split_is_fixed_disjoint_and_complete() -> None:
    train, held_out = wordle_secrets("train"), wordle_secrets("eval")
    assert (len(train), len(held_out)) == (125, 31)
    assert not set(train) & set(held_out)
    assert set(train) | set(held_out) == set(secrets())
    on_disk = json.loads((data_dir() / "splits" / "wordle.json").read_text())
    assert on_disk == make_splits()["wordle"]  # the documented procedure gives the shipped file


def test_sudoku_eval_puzzles_are_fixed_and_never_trained_on() -> None:
    fixed = json.loads((data_dir() / "splits" / "sudoku.json").read_text())
    assert fixed == make_splits()["sudoku"]
    eval_rows = task_dataset("sudoku", "eval")
    assert sorted(eval_rows["puzzle"]) == sorted(fixed["eval"])
    assert len(set(fixed["eval"])) == 50
    train = set(task_dataset("sudoku", "train", num_tasks=300)["puzzle"])
    assert len(train) == 300 and not train & set(fixed["eval"])


# -- task rows ------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_task_rows_reset_two_instances_to_the_same_observation(game: str) -> None:
    dataset = task_dataset(game, "train", num_tasks=6, seed=1)
    used = ENVS[game]()  # a pooled instance, as TRL reuses it after other episodes
    used.reset(**dataset[-1])
    for row in dataset:
        assert row["prompt"] == prompt(game) and row["prompt"][-1]["content"].endswith("\n\n")
        first = ENVS[game]().reset(**row)
        assert ENVS[game]().reset(**row) == first
        with contextlib.suppress(ValueError):  # a move the game may refuse: state changes anyway
            env_tools(used)[0](**_any_arguments(game))
        assert used.reset(**row) == first
        keys = ENVS[game].task_keys + ENVS[game].setting_keys  # Catch's board size included
        task = {k: v for k, v in row.items() if k in keys}
        assert first == make(game).reset(**task)


def _any_arguments(game: str) -> dict:
    return {
        "wordle": {"guess": "crane"},
        "catch": {"direction": "LEFT"},
        "sudoku": {"row": 1, "col": 1, "number": 1},
        "echo": {"message": "x"},
    }[game]


def test_task_order_is_fixed_by_the_seed_and_extends() -> None:
    small = [t.task for t in TaskProvider("wordle", "train", 10, seed=3)]
    large = [t.task for t in TaskProvider("wordle", "train", 200, seed=3)]
    assert large[:10] == small
    assert [t.task for t in TaskProvider("wordle", "train", 10, seed=4)] != small
    assert {t["secret"] for t in large} == set(wordle_secrets("train"))  # cycles through all
    assert {t.task["secret"] for t in TaskProvider("wordle", "eval")} == set(wordle_secrets("eval"))
    catch = json.loads((data_dir() / "splits" / "catch.json").read_text())
    assert catch == make_splits()["catch"]
    for split in ("train", "eval"):  # every board height with every starting column, once
        tasks = [t.task for t in TaskProvider("catch", split)]
        assert sorted(tasks, key=lambda t: (t["rows"], t["ball_col"])) == catch[split]
        assert (
            len(tasks)
            == len({json.dumps(t, sort_keys=True) for t in tasks})
            == 5 * len({t["rows"] for t in tasks})
        )


def test_where_keeps_only_the_matching_tasks_and_refuses_what_cannot_match() -> None:
    left = [t.task for t in TaskProvider("catch", "train", 40, seed=1, where={"ball_col": 0})]
    rows = {t.task["rows"] for t in TaskProvider("catch", "train")}
    assert len(left) == 40 and all(t["ball_col"] == 0 for t in left)
    assert {t["rows"] for t in left} == rows  # every train height, cycled through
    held_out = TaskProvider("catch", "eval", where={"ball_col": 0, "rows": 8})
    assert [t.task for t in held_out] == [{"rows": 8, "ball_col": 0}]
    rows = task_dataset("wordle", "eval", where={"secret": wordle_secrets("eval")[0]})
    assert rows["secret"] == [wordle_secrets("eval")[0]]
    for game, split, where, message in (
        ("catch", "train", {"column": 0}, "not a catch task column"),
        ("catch", "train", {"rows": 8}, "no catch train task has {'rows': 8}"),  # held out
        ("catch", "eval", {"ball_col": "0"}, "no catch eval task"),  # a string is not 0
        ("sudoku", "train", {"puzzle": "x"}, "drawn afresh"),
        ("echo", "eval", {"x": 1}, "drawn afresh"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            TaskProvider(game, split, where=where)
    # a list is any of its values
    short = TaskProvider("catch", "train", where={"rows": [5, 6], "ball_col": [0, 4]})
    assert sorted((t.task["rows"], t.task["ball_col"]) for t in short) == [
        (5, 0), (5, 4), (6, 0), (6, 4)
    ]  # fmt: skip
    with pytest.raises(ValueError, match=re.escape("no catch train task has {'rows': [8, 10]}")):
        TaskProvider("catch", "train", where={"rows": [8, 10]})  # the held-out heights
    # no where, or an empty one: the same tasks as before
    assert [t.task for t in TaskProvider("catch", "train", where={})] == [
        t.task for t in TaskProvider("catch", "train")
    ]


def test_tasks_carry_their_ground_truth() -> None:
    for task in TaskProvider("sudoku", "eval", 3):
        game = make("sudoku")
        game.reset(puzzle=task.task["puzzle"])
        assert task.ground_truth == game.solution
    task = next(iter(TaskProvider("wordle", "eval")))
    assert task.ground_truth == task.task["secret"]
    response = tool_call("guess", guess=task.ground_truth)
    assert compute_score("wordle", response, task.label)["won"] == 1.0
    assert len(TaskProvider("echo", "train").to_hf_dataset()) == 100


def test_mixture_routes_by_environment_column() -> None:
    mixture = mixture_dataset({"wordle": 4, "catch": 3, "sudoku": 2, "echo": 1})
    assert mixture.column_names[:2] == ["environment", "prompt"]
    assert validate_environments(mixture, ENVS) == {"wordle": 4, "catch": 3, "sudoku": 2, "echo": 1}
    for row in mixture:
        env = ENVS[row["environment"]]()
        columns = {k: v for k, v in row.items() if k != "environment"}
        assert env.reset(**columns) == ENVS[row["environment"]]().reset(**columns)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown game"):
        task_dataset("chess")
    with pytest.raises(ValueError, match="unknown split"):
        task_dataset("wordle", "test")
    with pytest.raises(ValueError, match="num_tasks"):
        task_dataset("wordle", num_tasks=0)
    with pytest.raises(ValueError, match="difficulty"):
        task_dataset("wordle", difficulty="easy")
    with pytest.raises(ValueError, match="num_games"):
        sft_examples("catch", num_games=-1)
    for seed in (True, 1.5, "0"):
        with pytest.raises(ValueError, match="seed must be an int"):
            task_dataset("catch", seed=seed)


# -- SFT ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_every_shipped_sft_example_replays_in_its_engine(game: str) -> None:
    rows = _shipped(game)
    assert len(rows) == SHIPPED_SFT[game]["num_games"]
    for row in rows:
        env = validate_example(row)
        assert row["tools"] == tool_schemas(ENVS[game])
        if game != "echo":
            assert env.done  # every game was played to its end
    dataset = load_sft(game)
    assert dataset[0]["messages"] == rows[0]["messages"]  # Json columns keep each message as is


def test_first_turns_keeps_each_games_opening_and_nothing_after() -> None:
    """``first_turns(data, n)``: each conversation up to and including its n-th assistant turn,
    every column and message kept as it was; shorter games whole; n < 1 refused."""
    data = load_sft("catch")
    for turns in (1, 2):
        cut = first_turns(data, turns)
        assert cut.column_names == data.column_names and len(cut) == len(data)
        for whole, opening in zip(data, cut, strict=True):
            roles = [m["role"] for m in opening["messages"]]
            assert roles.count("assistant") == turns and roles[-1] == "assistant"
            assert opening["messages"] == whole["messages"][: len(roles)]
            assert (opening["tools"], opening["task"]) == (whole["tools"], whole["task"])
    first = first_turns(data)[0]["messages"][-1]
    assert first["tool_calls"][0]["function"]["name"] in ("move", "stay")  # the first decision
    whole = first_turns(data, 100)  # longer than any Catch game: every game whole
    assert whole["messages"] == data["messages"]
    for bad in (0, -1, True, 1.0):
        with pytest.raises(ValueError, match="turns must be an int >= 1"):
            first_turns(data, bad)


def test_sft_uses_only_train_secrets() -> None:
    used = {row["task"]["secret"] for row in _shipped("wordle")}
    assert used <= set(wordle_secrets("train"))
    assert used == set(wordle_secrets("train"))
    fresh = sft_dataset("wordle", num_games=5, seed=9)
    assert {row["secret"] for row in fresh["task"]} <= set(wordle_secrets("train"))


@pytest.mark.parametrize("game", GAMES)
def test_regenerating_with_the_same_seed_is_byte_identical(game: str) -> None:
    options = {**SHIPPED_SFT[game], "num_games": 3}
    shipped = (data_dir() / "sft" / game / "train.jsonl").read_text(encoding="utf-8")
    assert jsonl(sft_examples(game, **options)) == "".join(shipped.splitlines(keepends=True)[:3])


def test_a_tampered_example_is_caught() -> None:
    row = sft_examples("catch", num_games=1, seed=0)[0]
    validate_example(row)
    forged = json.loads(json.dumps(row))
    forged["messages"][3]["content"] = forged["messages"][3]["content"].replace("o", ".", 1)
    with pytest.raises(ValueError, match="differs from the env"):
        validate_example(forged)
    moved = json.loads(json.dumps(row))
    first = moved["messages"][2]["tool_calls"][0]["function"]
    other = {"name": "move", "arguments": {"direction": "LEFT"}}
    moved["messages"][2]["tool_calls"][0]["function"] = (
        other if first != other else {"name": "stay", "arguments": {}}
    )
    with pytest.raises(ValueError, match="differs from the env"):
        validate_example(moved)
    unanswered = json.loads(json.dumps(row))
    del unanswered["messages"][3]
    with pytest.raises(ValueError, match="message 3: missing the tool result of"):
        validate_example(unanswered)
    extra = json.loads(json.dumps(row))
    extra["messages"].insert(4, extra["messages"][3])
    with pytest.raises(ValueError, match="message 4: expected an assistant turn, got 'tool'"):
        validate_example(extra)
    wrong_task = {**row, "task": {**row["task"], "ball_col": (row["task"]["ball_col"] + 1) % 5}}
    with pytest.raises(ValueError, match="reset observation"):
        validate_example(wrong_task)


def test_sft_options_noise_and_reasoning() -> None:
    plain = sft_examples("catch", num_games=2, seed=0, reasoning=False)
    assert all(
        m["content"] == ""
        for row in plain
        for m in row["messages"][2:-1]
        if m["role"] == "assistant"
    )
    noisy = sft_examples("sudoku", num_games=4, seed=0, noise=0.5, difficulty="very-easy")
    errors = [
        m
        for row in noisy
        for m in row["messages"]
        if m["role"] == "tool" and m["content"].startswith("{'error'")
    ]
    assert errors  # blunders, and the game's answer to them, are in the data


@pytest.fixture(scope="module")
def tiny():
    from kit.models import tiny_model

    return tiny_model()


def test_tools_column_renders_the_prompt_grpo_renders(tiny) -> None:
    _, tokenizer = tiny
    for game in GAMES:
        row = _shipped(game)[0]
        methods = env_tools(ENVS[game]())
        head = row["messages"][:3]
        from_column = tokenizer.apply_chat_template(head, tools=row["tools"], tokenize=False)
        assert from_column == tokenizer.apply_chat_template(head, tools=methods, tokenize=False)
        assert "<tool_call>" in from_column and row["tools"][0]["function"]["name"] in from_column


@pytest.mark.slow
def test_grpo_rollouts_are_exactly_the_sft_conversations(tmp_path) -> None:
    """Script the model to say what an SFT example's assistant says: TRL's tool loop must then
    build, message for message, the example's conversation."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.models import tiny_model
    from kit.train import grpo_config
    from tests.scripted import ScriptedGeneration

    examples = {
        game: sft_examples(
            game,
            num_games=1,
            seed=2,
            noise=0.2,
            **({"difficulty": "very-easy"} if game == "sudoku" else {}),
        )[0]
        for game in GAMES
    }
    turns = {}
    for example in examples.values():
        texts = []
        for message in example["messages"]:
            if message["role"] == "assistant":
                calls = message.get("tool_calls") or []
                texts.append(
                    message["content"]
                    + "".join(
                        "\n" + tool_call(c["function"]["name"], **c["function"]["arguments"])
                        for c in calls
                    )
                )
        turns[example["messages"][1]["content"]] = texts

    def script(text: str) -> list[str]:
        matches = [texts for user, texts in turns.items() if user in text]
        assert len(matches) == 1
        return matches[0]

    model, tokenizer = tiny_model()
    ScriptedGeneration(tokenizer, script).install(model)
    captured = []

    def capture(prompts, completions, environment, **kwargs):
        captured.extend(zip(environment, prompts, completions, strict=True))
        return [0.0] * len(prompts)

    rows = [
        {
            "environment": game,
            "prompt": prompt(game),
            "secret": None,
            "ball_col": None,
            "puzzle": None,
            **e["task"],
        }
        for game, e in examples.items()
    ]
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(
            str(tmp_path),
            max_steps=1,
            per_device_train_batch_size=8,
            max_completion_length=3000,
            max_tool_calling_iterations=20,
        ),
        reward_funcs=capture,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=ENVS,
    )
    trainer.train()
    assert sorted(game for game, _, _ in captured) == sorted(GAMES * 2)
    for game, prompt_messages, completion in captured:
        assert prompt_messages + completion == examples[game]["messages"]


@pytest.mark.slow
def test_sft_trainer_runs_on_a_generated_set(tiny, tmp_path) -> None:
    from trl import SFTTrainer

    from kit.train import sft_config

    model, tokenizer = tiny
    dataset = sft_dataset("catch", num_games=4, seed=0)
    trainer = SFTTrainer(
        model=model,
        args=sft_config(str(tmp_path), max_steps=2, per_device_train_batch_size=2, max_length=1024),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    labels = trainer.train_dataset[0]["labels"]
    trained = tokenizer.decode([token for token in labels if token != -100])
    assert 0 < sum(token != -100 for token in labels) < len(labels)
    assert "<tool_call>" in trained and "The ball is in column" in trained
    assert "<tool_response>" not in trained and "Let's play Catch" not in trained
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
