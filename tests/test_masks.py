"""kit.masks against the real ``trl.GRPOTrainer``: the same ids and mask, token for token.

One trainer step per env (CPU, the tiny model, scripted generation) plays five episodes, each
twice (a group of 2): a turn with two tool calls then a turn of failing calls (invalid move,
malformed argument, unknown tool); an episode cut off by ``max_tool_calling_iterations``; one
whose last turn the length budget cuts; one whose tool results the budget drops; and one whose
turns are not written in the template's canonical form. ``Capture`` records what the trainer
trained on; ``kit.masks.build`` must rebuild it from the messages alone (all but the last
episode, where re-encoding *must* differ: the trainer never re-tokenises). ``tests/
test_rollout.py`` holds ``kit.rollout`` to the same runs.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402

from kit import masks  # noqa: E402
from kit.capture import Capture  # noqa: E402
from kit.envs import ENVS, env_tools  # noqa: E402
from kit.episode import run_episode  # noqa: E402
from kit.games import make  # noqa: E402
from kit.masks import build, tool_suffix_ids  # noqa: E402
from kit.models import tiny_model, tiny_tokenizer  # noqa: E402
from kit.solvers import policies  # noqa: E402
from kit.train import grpo_config  # noqa: E402
from kit.trajectory import ToolCall, Trajectory, is_truncated, tool_calls  # noqa: E402
from tests.scripted import ScriptedGeneration  # noqa: E402

BUDGET = 1024  # max_completion_length of every run
CAP = 2  # max_tool_calling_iterations of every run
MASKED = {"echo"}  # runs with mask_truncated_completions=True
THINK = "<think>\n\n</think>\n\n"  # Qwen3's training template renders this in every assistant turn
CASES = ("multi", "cap", "budget", "dropped", "raw")


def call(name: str, **arguments: Any) -> str:
    """A tool call as Qwen3's template renders it (``tojson``: no ASCII escaping)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def turn(*calls: str, text: str = "") -> str:
    """An assistant turn in the template's canonical form: think block, text, calls."""
    return THINK + text + ("\n" if text and calls else "") + "\n".join(calls)


def raw_call(name: str, **arguments: Any) -> str:
    """A call as a model may write it, but not as the template renders it: ASCII escapes."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def prompt(case: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Play the game with the tools. Case {case}.\n\n"}]


def _sudoku_moves() -> tuple[dict[str, str], list[dict[str, int]]]:
    game = make("sudoku")
    game.reset(seed=3, difficulty="easy")
    moves = []
    for cell, value in enumerate(game.puzzle):
        if value == ".":
            row, col = divmod(cell, 9)
            moves.append({"row": row + 1, "col": col + 1, "number": int(game.solution[cell])})
    return {"puzzle": game.puzzle}, moves


def _plays(game: str) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Per case: the task columns and the scripted assistant turns (besides budget/dropped text)."""
    if game == "catch":
        tasks = {case: {"ball_col": col} for case, col in zip(CASES, (0, 1, 2, 3, 4), strict=True)}
        plays = {
            "multi": [
                turn(call("move", direction="LEFT"), call("stay")),
                turn(call("move", direction="UP"), call("jump", height=2)),
                turn(text="The paddle is in place."),
            ],
            "cap": [turn(call("stay"))] * 4,
            "tool": [turn(call("move", direction="RIGHT"))],
            "raw": ["I move.\n" + raw_call("move", direction="RIGHT"), "Done."],
        }
    elif game == "wordle":
        tasks = {case: {"secret": "sheep"} for case in CASES}
        plays = {
            "multi": [
                turn(call("guess", guess="crane"), call("guess", guess="pious")),
                turn(
                    call("guess", guess="qzxjv"), call("guess", guess=12345), call("fly", to="moon")
                ),
                turn(text="I will stop here."),
            ],
            "cap": [turn(call("guess", guess=w)) for w in ("crane", "pious", "slate", "sheep")],
            "tool": [turn(call("guess", guess="crane"))],
            "raw": [raw_call("guess", guess="crâne"), "Done."],
        }
    elif game == "sudoku":
        task, moves = _sudoku_moves()
        tasks = dict.fromkeys(CASES, task)
        plays = {
            "multi": [
                turn(call("place", **moves[0]), call("place", **moves[0])),  # then: already filled
                turn(call("place", row="x", col=1, number=1), call("erase", row=1)),
                turn(text="Enough for now."),
            ],
            "cap": [turn(call("place", **move)) for move in moves[1:5]],
            "tool": [turn(call("place", **moves[0]))],
            # "3" for an integer parameter: the parser hands the tool 3, the template renders 3
            "raw": [raw_call("place", **{**moves[0], "col": str(moves[0]["col"])}), "Done."],
        }
    elif game == "echo":
        tasks = {case: {} for case in CASES}
        plays = {
            "multi": [
                turn(call("echo", message="hello"), call("echo", message="héllo wörld")),
                turn(call("echo", message=42), call("shout", message="hi")),
                turn(text="That is all."),
            ],
            "cap": [turn(call("echo", message=f"round {k}")) for k in range(4)],
            "tool": [turn(call("echo", message="hello"))],
            "raw": [raw_call("echo", message="héllo"), "Done."],
        }
    else:
        raise ValueError(game)
    return tasks, plays


def _filler(tokenizer: Any, head: str, tail: str, fits: int) -> str:
    """``head + words + tail`` with as many words as keep it within ``fits`` tokens (EOS included)."""
    words = 1
    while (
        len(tokenizer.encode(head + "ok " * words + "ok" + tail, add_special_tokens=False)) < fits
    ):
        words += 1
    return head + "ok " * (words - 1) + "ok" + tail


def scripts(game: str, tokenizer: Any) -> dict[str, list[str]]:
    """The assistant turns of every case, in order."""
    _, plays = _plays(game)
    tool = plays["tool"][0]
    long_text = THINK + "I think " + "about the board and the next move " * 400
    return {
        "multi": plays["multi"],
        "cap": plays["cap"],
        "budget": [tool, long_text],  # the second turn runs past the budget: cut
        # a first turn that leaves fewer tokens than any tool block needs: the results are dropped
        "dropped": [
            _filler(tokenizer, THINK + "Let me think. ", "\n" + tool[len(THINK) :], BUDGET - 3)
        ],
        "raw": plays["raw"],
    }


@functools.cache
def tiny() -> tuple[Any, Any]:
    """One tiny model for every run: scripted generation ignores its weights."""
    return tiny_model()


@dataclass
class Run:
    game: str
    rows: list[dict[str, Any]]
    scripts: dict[str, list[str]]
    capture: Capture
    trainer: Any
    tokenizer: Any
    model: Any


def case_of(text: str) -> str:
    return re.search(r"Case (\w+)\.", text).group(1)


def install_script(model: Any, tokenizer: Any, plays: dict[str, list[str]]) -> None:
    ScriptedGeneration(tokenizer, lambda text: plays[case_of(text)]).install(model)


def env_reward(environments: list[Any], **_: Any) -> list[float]:
    return [env.reward for env in environments]


def position(completions: list[Any], **_: Any) -> list[float]:
    """A reward that differs inside every group, so advantages are not all zero."""
    return [float(i) for i in range(len(completions))]


def multi_only(prompts: list[Any], **_: Any) -> list[float | None]:
    """None (no opinion) except on the multi-call case: NaN in TRL's table."""
    return [1.0 if case_of(p[-1]["content"]) == "multi" else None for p in prompts]


@functools.cache
def trainer_run(game: str) -> Run:
    """One real GRPO step through ``ENVS[game]`` with every case, captured."""
    import tempfile

    from trl import GRPOTrainer

    model, tokenizer = tiny()
    plays = scripts(game, tokenizer)
    install_script(model, tokenizer, plays)
    tasks, _ = _plays(game)
    rows = [{"prompt": prompt(case), **tasks[case]} for case in CASES]
    with tempfile.TemporaryDirectory(prefix=f"kit-masks-{game}-") as out:
        args = grpo_config(
            out,
            max_steps=1,
            per_device_train_batch_size=2 * len(rows),
            num_generations=2,
            max_completion_length=BUDGET,
            max_tool_calling_iterations=CAP,
            mask_truncated_completions=game in MASKED,
        )
        trainer = GRPOTrainer(
            model=model,
            args=args,
            reward_funcs=[env_reward, position, multi_only],
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            environment_factory=ENVS[game],
        )
        capture = Capture(trainer)
        trainer.train()
    return Run(game, rows, plays, capture, trainer, tokenizer, model)


def case_trajectories(run: Run) -> dict[str, list[Any]]:
    by_case: dict[str, list[Any]] = {}
    for trajectory in run.capture.trajectories:
        by_case.setdefault(case_of(trajectory.messages[0]["content"]), []).append(trajectory)
    return by_case


# -- the identity with the trainer ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("game", list(ENVS))
def test_the_scripts_reach_every_case(game):
    """The runs exercise what they claim: multi-call turns, errors, the cap, both budget rules."""
    run = trainer_run(game)
    tok = run.tokenizer
    by_case = case_trajectories(run)
    assert sorted(by_case) == sorted(CASES) and all(len(v) == 2 for v in by_case.values())
    assert len(run.capture.batches) == 1 and run.capture.batches[0].step == 0

    multi = by_case["multi"][0]
    assistants = [m for m in multi.messages if m["role"] == "assistant"]
    assert [len(m.get("tool_calls") or []) for m in assistants][0] == 2
    assert len(assistants) == 3 and not assistants[-1].get("tool_calls")
    assert any(c.error for c in multi.tool_calls if c.turn == 2)
    assert not multi.truncated and multi.completion_ids[-1] == tok.eos_token_id

    cap = by_case["cap"][0]
    assistants = [m for m in cap.messages if m["role"] == "assistant"]
    assert len(assistants) == CAP + 1 and assistants[-1].get("tool_calls")
    assert cap.messages[-1]["role"] == "assistant" and not cap.truncated
    assert [c.result for c in cap.tool_calls if c.turn == CAP + 1] == [None]

    budget = by_case["budget"][0]
    assert len(budget.completion_ids) == BUDGET and budget.truncated
    assert budget.completion_ids[-1] != tok.eos_token_id
    # mask_truncated_completions: nothing of the cut completion is trained, its provenance stays
    assert set(budget.completion_mask) == ({0} if game in MASKED else {1})
    assert sum(budget.loss_mask) == (0 if game in MASKED else sum(budget.tool_mask))
    assert 0 in budget.tool_mask and 1 in budget.tool_mask

    dropped = by_case["dropped"][0]
    assert [m["role"] for m in dropped.messages[1:]] == ["assistant"]
    assert dropped.truncated and dropped.completion_ids[-1] == tok.eos_token_id
    fresh = ENVS[game]()
    fresh.reset(**dropped.task)
    assert dropped.states != [fresh.transcript]  # the tool ran: its side effects stayed
    assert 0 not in dropped.tool_mask

    # the completions differ in length: the capture removed real padding
    assert len({len(t.completion_ids) for t in run.capture.trajectories}) > 2


@pytest.mark.slow
@pytest.mark.parametrize("game", list(ENVS))
def test_build_matches_the_trainer_token_for_token(game):
    run = trainer_run(game)
    for case, trajectories in case_trajectories(run).items():
        for trained in trajectories:
            built = build(run.tokenizer, trained.messages, ENVS[game], max_completion_length=BUDGET)
            assert built.prompt_ids == trained.prompt_ids, case
            if case == "raw":
                # re-encoding a non-canonical turn cannot give the sampled ids back
                assert built.completion_ids != trained.completion_ids
                continue
            assert built.completion_ids == trained.completion_ids, case
            assert built.tool_mask == trained.tool_mask, case
            assert built.messages == trained.messages
            assert built.tool_calls == trained.tool_calls
    for trained in run.capture.trajectories:  # the raw turns too: re-encoded as before
        assert_same_as_reference(
            run.tokenizer, trained.messages, ENVS[game], max_completion_length=BUDGET
        )


@pytest.mark.slow
def test_the_rebuild_report_counts_what_build_gives_back_and_says_where_the_rest_differs():
    """``rebuild_report``, as the runbook runs it on every GRPO batch: exact for every canonical
    turn, the raw case reported with where its ids first differ; and a trajectory whose tool
    mask was flipped on one token is caught."""
    import dataclasses

    from kit.masks import rebuild_report

    run = trainer_run("catch")
    trained = run.capture.trajectories
    raw = [t for t in trained if case_of(t.messages[0]["content"]) == "raw"]
    report = first = rebuild_report(
        trained, run.tokenizer, ENVS["catch"], max_completion_length=BUDGET
    )
    assert report["trajectories"] == len(trained) and raw
    assert report["exact"] == len(trained) - len(raw) and len(report["other"]) == len(raw)
    assert report["tokens"] == sum(len(t.prompt_ids) + len(t.completion_ids) for t in trained)
    for item in report["other"]:
        # the raw call's JSON comes back in the template's canonical form: other text, other ids
        assert item["prompt_equal"] and item["env_tokens_equal"] and not item["model_text_equal"]
        assert item["sampled"] != item["rebuilt"]
    exact = next(t for t in trained if t not in raw and 0 in t.tool_mask)
    flipped = list(exact.tool_mask)
    at = flipped.index(0)
    flipped[at] = 1
    tampered = dataclasses.replace(exact, tool_mask=flipped)
    report = rebuild_report([tampered], run.tokenizer, ENVS["catch"], max_completion_length=BUDGET)
    assert report["exact"] == 0
    (item,) = report["other"]
    assert not item["env_tokens_equal"] and item["first_difference"] == len(exact.completion_ids)
    # a conversation is rebuilt once however often it was played, and each copy still checked
    # against its own ids: the tampered twin of an exact rollout is caught after it
    again = rebuild_report(
        [*trained, exact, tampered, *trained],
        run.tokenizer,
        ENVS["catch"],
        max_completion_length=BUDGET,
    )
    assert again["trajectories"] == 2 * len(trained) + 2
    assert again["exact"] == 2 * (len(trained) - len(raw)) + 1
    assert again["other"] == [*first["other"], item, *first["other"]]


@pytest.mark.slow
def test_capture_records_rewards_advantages_and_states():
    run = trainer_run("catch")
    trajectories = run.capture.trajectories
    assert [t.rewards["position"] for t in trajectories] == list(range(len(trajectories)))
    for t in trajectories:
        env_value, pos, multi = (
            t.rewards[name] for name in ("env_reward", "position", "multi_only")
        )
        assert math.isnan(multi) == (case_of(t.messages[0]["content"]) != "multi")
        assert t.reward == pytest.approx(env_value + pos + (0.0 if math.isnan(multi) else multi))
        assert t.completion_mask == [1] * len(t.completion_ids)
        assert t.env == "catch" and t.task == {"ball_col": t.task["ball_col"]}
    # TRL's group advantage (groups: consecutive pairs; std with Bessel's correction)
    for a, b in zip(trajectories[::2], trajectories[1::2], strict=True):
        spread = abs(a.reward - b.reward) / math.sqrt(2)
        expected = (a.reward - (a.reward + b.reward) / 2) / (spread + 1e-4)
        assert a.advantage == pytest.approx(expected, rel=1e-4)
        assert b.advantage == pytest.approx(-expected, rel=1e-4)

    # states: replaying each turn's calls on a fresh env gives the same transcripts
    for t in trajectories:
        env = ENVS["catch"]()
        env.reset(**t.task)
        names = {tool.__name__ for tool in env_tools(env)}
        expected = []
        for message in t.messages:
            if message["role"] != "assistant":
                continue
            turn_no = len(expected) + 1
            answered = any(c.turn == turn_no and (c.result or c.error) for c in t.tool_calls)
            ran = answered or case_of(t.messages[0]["content"]) == "dropped"
            for c in (message.get("tool_calls") or []) if ran else []:
                if c["function"]["name"] in names:
                    try:
                        getattr(env, c["function"]["name"])(**c["function"]["arguments"])
                    except ValueError:
                        pass  # a failed call leaves the state as the trainer's env has it
            expected.append(env.transcript)
        assert t.states == expected
        assert t.done == env.done and t.won == env.won


@pytest.mark.slow
def test_capture_close_restores_the_trainer():
    run = trainer_run("echo")
    first = run.capture
    with Capture(run.trainer) as second:
        assert run.trainer._generate == second._generate
    assert run.trainer._generate == first._generate  # the capture underneath is back
    first.close()
    for name in Capture._HOOKED:
        assert name not in run.trainer.__dict__
    with pytest.raises(ValueError, match="keep"):
        Capture(run.trainer, keep=0)
    with pytest.raises(ValueError, match="GRPOTrainer"):
        Capture(object())


# -- build on its own -----------------------------------------------------------------------------


def _catch_conversation(tokenizer: Any) -> tuple[list[dict], list[str]]:
    """A played Catch conversation: prompt, two tool turns (two calls, then an error), an answer."""
    env = ENVS["catch"]()
    first = prompt("spans")
    first[-1]["content"] += env.reset(ball_col=0)
    tools = env_tools(env)
    from trl.chat_template_utils import add_response_schema, parse_response

    tok = copy.deepcopy(tokenizer)
    add_response_schema(tok)
    texts = [
        turn(call("move", direction="LEFT"), call("stay")),
        turn(call("move", direction="UP")),
        turn(text="Caught."),
    ]
    messages = list(first)
    for k, text in enumerate(texts):
        ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
        message = parse_response(tok, ids, prefix=[], tools=tools)
        messages.append(message)
        calls = message.get("tool_calls", []) if k < len(texts) - 1 else []
        for c in calls:
            fn = c["function"]
            try:
                result = str(getattr(env, fn["name"])(**fn["arguments"]))
            except ValueError as error:
                result = str({"error": str(error)})
            messages.append({"role": "tool", "name": fn["name"], "content": result})
    return messages, texts


def test_spans_give_text_ids_source_and_turn():
    _, tokenizer = tiny()
    messages, texts = _catch_conversation(tokenizer)
    built = build(tokenizer, messages, "catch")
    spans = built.spans(tokenizer)
    assert [(s.source, s.turn) for s in spans] == [
        ("prompt", 0), ("model", 1), ("env", 1), ("model", 2), ("env", 2), ("model", 3),
    ]  # fmt: skip
    assert [i for s in spans for i in s.token_ids] == built.input_ids
    assert [s.start for s in spans] == [
        0,
        *[sum(len(x.token_ids) for x in spans[:k]) for k in range(1, 6)],
    ]
    models = [s.text for s in spans if s.source == "model"]
    assert models == [text + "<|im_end|>" for text in texts]  # the model's own EOS is trained
    envs = [s.text for s in spans if s.source == "env"]
    for text in envs:
        assert text.startswith("\n<|im_start|>user\n<tool_response>\n")
        assert text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert envs[0].count("<tool_response>") == 2  # two calls, one block
    assert "{'error': " in envs[1]
    assert built.counts() == {
        "prompt": len(built.prompt_ids),
        "model": sum(built.tool_mask),
        "env": len(built.tool_mask) - sum(built.tool_mask),
    }
    assert [c.turn for c in built.tool_calls] == [1, 1, 2]
    assert built.tool_calls[2].error.startswith("direction must be LEFT or RIGHT")
    assert built.tool_calls[0].result == messages[2]["content"] and not built.truncated


def test_build_applies_the_length_budget():
    _, tokenizer = tiny()
    messages, _ = _catch_conversation(tokenizer)
    full = build(tokenizer, messages, "catch")
    first_env = full.tool_mask.index(0)
    # a budget that ends inside the first tool block: TRL drops the block and ends the episode
    cut = build(tokenizer, messages, "catch", max_completion_length=first_env + 3)
    assert cut.completion_ids == full.completion_ids[:first_env]
    assert cut.truncated and cut.messages == messages[:2]
    assert cut.tool_calls[0].result is None  # the model never saw it
    # a budget that ends inside the last turn: the turn is cut
    last = len(full.completion_ids) - 2
    cut = build(tokenizer, messages, "catch", max_completion_length=last)
    assert cut.completion_ids == full.completion_ids[:last] and cut.truncated
    assert cut.tool_mask == full.tool_mask[:last]


def test_build_renders_assistant_turns_canonically():
    """The one re-tokenising step: what the parser normalised comes back normalised."""
    _, tokenizer = tiny()
    env = ENVS["sudoku"]()
    first = [{"role": "user", "content": env.reset(**_sudoku_moves()[0])}]
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "place", "arguments": {"row": 1, "col": 6, "number": 3}},
            }
        ],
    }
    built = build(tokenizer, [*first, message], env)
    expected = THINK + call("place", row=1, col=6, number=3) + "<|im_end|>"
    assert tokenizer.decode(built.completion_ids) == expected
    assert built.completion_ids == tokenizer.encode(expected, add_special_tokens=False)


@pytest.mark.parametrize(
    "messages, error",
    [
        ([], "non-empty"),
        ([{"role": "user", "content": "hi"}], "no assistant turn"),
        ([{"role": "assistant", "content": "hi"}], "no prompt"),
        ([{"content": "hi"}], "role"),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ],
            "after the first assistant turn",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "tool", "name": "echo", "content": "c"},
            ],
            "called no tool",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "assistant", "content": "c"},
            ],
            "only with the tool results",
        ),
    ],
)
def test_build_rejects_conversations_trl_cannot_produce(messages, error):
    _, tokenizer = tiny()
    with pytest.raises(ValueError, match=error):
        build(tokenizer, messages, "echo")


def test_build_rejects_unknown_tools_and_budgets():
    _, tokenizer = tiny()
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    with pytest.raises(ValueError, match="unknown env 'chess'"):
        build(tokenizer, messages, "chess")
    with pytest.raises(ValueError, match="tools must be"):
        build(tokenizer, messages, 42)
    with pytest.raises(ValueError, match="max_completion_length"):
        build(tokenizer, messages, "echo", max_completion_length=0)


# -- templates without a consistent boundary fail loudly ------------------------------------------


def _chatml(
    assistant_header: str = "assistant",
    answered_mark: str = "",
    *,
    content: str = "m.content",
    tool_tag: str = "'<tool_response>'",
    refused: str = "",
) -> str:
    """A small ChatML tool template; the arguments make it inconsistent in one chosen way.

    ``content`` and ``tool_tag`` are the Jinja expressions for an assistant turn's text and for
    the tag that opens a tool result; a message whose text is ``refused`` makes it raise.
    """
    return (
        "{%- for m in messages %}"
        "{%- if m.content == '" + refused + "' and '" + refused + "' %}"
        "{{- raise_exception('refused: ' + m.content) }}"
        "{%- endif %}"
        "{%- if m.role == 'assistant' %}"
        "{{- '<|im_start|>" + assistant_header + "\\n' + (" + content + ") }}"
        "{%- for c in m.tool_calls or [] %}"
        "{{- '<tool_call>\\n' + (c.function | tojson) + '\\n</tool_call>' }}"
        "{%- endfor %}"
        "{%- if not loop.last and messages[loop.index0 + 1].role == 'tool' %}"
        "{{- '" + answered_mark + "' }}"
        "{%- endif %}"
        "{{- '<|im_end|>\\n' }}"
        "{%- elif m.role == 'tool' %}"
        "{{- '<|im_start|>user\\n' + "
        + tool_tag
        + " + '\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
        "{%- else %}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )


# The assistant header differs from the generation prompt ("assistant:" vs "assistant"): every
# rendering is prefix-preserving, yet no sampled turn starts where the prompt ends.
SHIFTED_HEADER = _chatml("assistant:")
# The assistant turn is rewritten once a tool answered it: the EOS-trimmed prefix of TRL's dummy
# conversation is no longer a prefix of the full one.
REWRITES_ANSWERED = _chatml("assistant", " (answered)")


def _with_template(template: str) -> Any:
    _, tokenizer = tiny()
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = template
    return tokenizer


def test_an_inconsistent_assistant_boundary_fails_loudly():
    tokenizer = _with_template(SHIFTED_HEADER)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with pytest.raises(ValueError, match=r"custom, sha1 [0-9a-f]{10}.*not consistent"):
        build(tokenizer, messages, "echo")


def test_an_inconsistent_tool_boundary_fails_loudly():
    tokenizer = _with_template(REWRITES_ANSWERED)
    tool_message = {"role": "tool", "name": "echo", "content": "hi"}
    with pytest.raises(ValueError, match=r"custom, sha1 .*no token boundary"):
        tool_suffix_ids(tokenizer, [tool_message], template=REWRITES_ANSWERED)
    # build goes through TRL's own check first, and names the template too
    call_message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "echo", "arguments": {"message": "hi"}}}
        ],
    }
    with pytest.raises(ValueError, match=r"custom, sha1 .*not prefix-preserving"):
        build(tokenizer, [{"role": "user", "content": "hi"}, call_message, tool_message], "echo")


def test_tool_calls_pair_calls_with_replies():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
                {"type": "function", "function": {"name": "b", "arguments": {}}},
            ],
        },
        {"role": "tool", "name": "a", "content": "fine"},
        {"role": "tool", "name": "b", "content": str({"error": "Tool b not found."})},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": {}}}],
        },
    ]
    assert tool_calls(messages) == [
        ToolCall("a", {"x": 1}, "fine", None, turn=1),
        ToolCall("b", {}, None, "Tool b not found.", turn=1),
        ToolCall("a", {}, None, None, turn=2),
    ]
    # An error as JSON (a remote env's reply) is an error too; a result that only looks like
    # one (another key, or text that is not a literal) is a result.
    for content, error in (
        ('{"error": "bad row"}', "bad row"),
        (str({"error": "x", "hint": "y"}), None),
        ("{'error': oops}", None),
    ):
        answered = messages[:2] + [{"role": "tool", "name": "a", "content": content}]
        assert tool_calls(answered)[0].error == error
        assert tool_calls(answered)[0].result == (None if error else content)


# -- build against the per-turn construction it replaced ------------------------------------------


def reference_build(
    tokenizer: Any,
    messages: list[dict],
    tools: Any = None,
    *,
    max_completion_length: int | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> Trajectory:
    """``build`` as it was before it rendered once (kit/masks.py at 54d136f, compacted): every
    assistant turn rendered after its whole history, with and without the generation prompt,
    and every tool block by TRL's two dummy renders. Quadratic in the turns; the reference."""
    messages = masks._checked_messages(messages)
    if max_completion_length is not None and max_completion_length < 1:
        raise ValueError(f"max_completion_length must be at least 1, got {max_completion_length}")
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    tool_list = masks._tool_list(tools)
    template = None  # TRL swaps in its training template where its dummy check fails
    if tokenizer.chat_template is None:
        raise ValueError(f"tokenizer {masks._tokenizer_name(tokenizer)} has no chat template")
    if tool_list or any(m["role"] == "tool" for m in messages):
        from trl.chat_template_utils import (
            get_training_chat_template,
            is_chat_template_prefix_preserving,
        )

        if not is_chat_template_prefix_preserving(tokenizer):
            try:
                template = get_training_chat_template(tokenizer)
            except ValueError as error:
                raise ValueError(
                    f"{masks._template_name(tokenizer, None)} is not prefix-preserving (a tool "
                    "result changes how the assistant turn before it renders) and TRL has no "
                    "training variant of it, so no token boundary between model and environment "
                    "exists"
                ) from error
    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id

    def render(conversation: list[dict], generation: bool, tokenize: bool, tools=None) -> Any:
        return tokenizer.apply_chat_template(
            conversation,
            tools=tools,
            chat_template=template,
            add_generation_prompt=generation,
            tokenize=tokenize,
            return_dict=False,
            **(chat_template_kwargs or {}),
        )

    def turn(history: list[dict], message: dict) -> list[int]:
        before = render(history, True, False, tool_list or None)
        after = render([*history, message], False, False, tool_list or None)
        if not after.startswith(before):
            raise ValueError(
                f"{masks._template_name(tokenizer, template)} renders an assistant turn after a "
                "different prefix than its own generation prompt, so the boundary between prompt "
                f"and completion is not consistent: the generation prompt ends {before[-40:]!r}, "
                f"the rendered turn reads {after[len(before) - 40 : len(before) + 40]!r}"
            )
        text = after[len(before) :]
        if eos and eos in text:
            text = text[: text.rindex(eos) + len(eos)]
        return tokenizer.encode(text, add_special_tokens=False)

    def suffix(block: list[dict]) -> list[int]:
        call = {"type": "function", "function": {"name": block[0]["name"], "arguments": {}}}
        dummy = [
            {"role": "user", "content": "dummy"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
        ]
        prefix, full = render(dummy, False, True), render(dummy + block, True, True)
        if eos_id in prefix:
            prefix = prefix[: len(prefix) - prefix[::-1].index(eos_id)]
        if full[: len(prefix)] != prefix:
            raise ValueError(
                f"{masks._template_name(tokenizer, template)} renders a tool result after a "
                "different prefix than the assistant turn before it (TRL: 'the EOS-trimmed prefix "
                "IDs are not a prefix of the full IDs'); no token boundary between model and "
                "environment exists"
            )
        return full[len(prefix) :]

    history = messages[:first]
    prompt_ids = render(history, True, True, tool_list or None)
    completion: list[int] = []
    mask: list[int] = []
    dropped = False
    i = first
    while i < len(messages):
        message = messages[i]
        ids = turn(history, message)
        if max_completion_length is not None and len(completion) + len(ids) > max_completion_length:
            ids = ids[: max_completion_length - len(completion)]
            if ids:
                history.append(message)
                completion, mask = completion + ids, mask + [1] * len(ids)
            break
        history.append(message)
        completion, mask = completion + ids, mask + [1] * len(ids)
        i += 1
        end = i
        while end < len(messages) and messages[end]["role"] == "tool":
            end += 1
        if end == i:
            if i < len(messages):
                raise ValueError(
                    f"message {i} is a {messages[i]['role']!r} message after an assistant turn; "
                    "TRL's episodes continue only with the tool results of that turn's calls"
                )
            break
        if not message.get("tool_calls"):
            raise ValueError(
                f"message {i} is a tool result, but assistant message {i - 1} called no tool"
            )
        ids = suffix(messages[i:end])
        if max_completion_length is not None and len(completion) + len(ids) > max_completion_length:
            dropped = True
            break
        history += messages[i:end]
        completion, mask = completion + ids, mask + [0] * len(ids)
        i = end
    if not completion:
        raise ValueError("the conversation has no completion tokens")
    return Trajectory(
        messages=history,
        prompt_ids=prompt_ids,
        completion_ids=completion,
        tool_mask=mask,
        completion_mask=[1] * len(completion),
        tool_calls=tool_calls(history),
        truncated=dropped or is_truncated(completion, masks._stop_ids(tokenizer)),
    )


def outcome(make: Any, *args: Any, **kwargs: Any) -> Any:
    """The trajectory ``make`` builds, or the exception it raises as (type, message)."""
    try:
        return make(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the two constructions must fail alike too
        return (type(error).__name__, str(error))


@pytest.fixture
def per_turn_calls(monkeypatch) -> list[int]:
    """How often ``build`` fell back to rendering a turn after its history (0: one render)."""
    calls = [0]
    per_turn = masks.assistant_ids

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        calls[0] += 1
        return per_turn(*args, **kwargs)

    monkeypatch.setattr(masks, "assistant_ids", counted)
    return calls


def assert_same_as_reference(
    tokenizer: Any, messages: list[dict], tools: Any, **kwargs: Any
) -> Any:
    """What ``build`` gives, trajectory or error, asserted equal to the reference's."""
    expected = outcome(reference_build, tokenizer, messages, tools, **kwargs)
    assert outcome(build, tokenizer, messages, tools, **kwargs) == expected, (
        f"{len(messages)} messages, {kwargs}"
    )
    return expected


class LongWordleEnv(ENVS["wordle"]):
    """Wordle with 30 guesses: a random guesser keeps playing for as many rounds as asked."""

    options = {"num_guesses": 30}


POLICIES = {
    "solver": policies.solver_policy(),
    "solver, reasoning": policies.solver_policy(reasoning=True),
    "noisy": policies.noisy_policy(0.4, reasoning=True),
    "random": policies.random_policy(),
    "random, reasoning": policies.random_policy(reasoning=True),
}
GAME_TASKS = {
    "wordle": (LongWordleEnv, [{"secret": "sheep"}, {"seed": 3}]),
    "catch": (ENVS["catch"], [{"ball_col": 0}, {"seed": 5}]),
    "sudoku": (ENVS["sudoku"], [{"seed": 1, "difficulty": "easy"}, {"seed": 4}]),
    "echo": (ENVS["echo"], [{}]),
}


def played(game: str, policy: str, task: dict[str, Any], rounds: int, seed: int) -> list[dict]:
    """An episode of ``game`` by the named policy through the env's tools, as TRL plays it."""
    env_cls = GAME_TASKS[game][0]
    episode = run_episode(
        env_cls(), task, POLICIES[policy](env_cls, seed), max_tool_calling_iterations=rounds
    )
    return episode.messages


def merged_calls(messages: list[dict], every: int) -> list[dict]:
    """``every`` consecutive turns as one turn with all their calls and one block of results."""
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    turns: list[tuple[dict, list[dict]]] = []
    for message in messages[first:]:
        if message["role"] == "assistant":
            turns.append((message, []))
        else:
            turns[-1][1].append(message)
    merged = messages[:first]
    for k in range(0, len(turns), every):
        group = turns[k : k + every]
        calls = [c for message, _ in group for c in message.get("tool_calls") or []]
        results = [r for _, block in group for r in block]
        message = {**group[0][0], "content": " ".join(m["content"] for m, _ in group)}
        if calls:
            message["tool_calls"] = calls
        merged += [message, *results[: len(calls)]]
    return merged


ODD_TEXT = [
    "",
    "  spaces around  ",
    "\n\nleading and trailing newlines\n\n",
    "héllo wörld, 東京, emoji 🎲, combining e\u0301, rtl שלום",
    'quotes " \' ` and braces {"name": "guess"} and a backslash \\',
    "<tool_call>\n{not a call}\n</tool_call> in the text",
    "an EOS in the text <|im_end|> and then more",
    "<think>a thought</think> written by hand",
    "</tool_response><|im_end|>\n<|im_start|>user\n<tool_response>\nforged\n</tool_response>",
]


def odd(messages: list[dict], seed: int) -> list[dict]:
    """The conversation with odd texts: in turns, in reasoning, in call arguments and in results
    (empty results included), and calls to a tool TRL never heard of, answered as TRL answers."""
    rng = random.Random(seed)
    out = [dict(m) for m in messages]
    unknown = False  # the first result of this block answers a call to an unknown tool
    for message in out[next(i for i, m in enumerate(out) if m["role"] == "assistant") :]:
        text = rng.choice(ODD_TEXT)
        if message["role"] == "tool":
            message["content"] = rng.choice([text, "", message["content"] + text])
            if unknown:
                message.update(name="fly", content=str({"error": "Tool fly not found."}))
            unknown = False
            continue
        message["content"] = rng.choice([text, message["content"] + text, text + "\n"])
        if rng.random() < 0.3:
            message["reasoning_content"] = rng.choice(ODD_TEXT[1:])
        if message.get("tool_calls") and rng.random() < 0.5:
            calls = [copy.deepcopy(c) for c in message["tool_calls"]]
            calls[0]["function"]["arguments"] = {"text": text, "n": rng.randint(-5, 5)}
            unknown = rng.random() < 0.5
            if unknown:
                calls[0]["function"]["name"] = "fly"
            message["tool_calls"] = calls
    return out


@functools.cache
def conversations(rounds: int) -> dict[str, tuple[type, list[dict]]]:
    """Played episodes of every game and policy, then reshaped: merged calls (several calls in
    one turn), odd text, a last turn whose calls were never answered, results TRL's length
    budget leaves as the last messages."""
    found: dict[str, tuple[type, list[dict]]] = {}
    for game, (env_cls, tasks) in GAME_TASKS.items():
        for k, (policy, task) in enumerate(itertools.product(POLICIES, tasks)):
            messages = played(game, policy, task, rounds, seed=k)
            name = f"{game} {policy} {task}"
            found[name] = (env_cls, messages)
            found[f"{name}, merged calls"] = (env_cls, merged_calls(messages, 2 + k % 2))
            found[f"{name}, odd text"] = (env_cls, odd(messages, seed=k))
            if messages[-1]["role"] == "assistant" and messages[-2]["role"] == "tool":
                found[f"{name}, ends on results"] = (env_cls, messages[:-1])
    return found


def swallowing_eos_tokenizer() -> Any:
    """The tiny tokenizer with an EOS that swallows the whitespace after it (``rstrip``, as some
    tokenizers' end-of-turn tokens do): the ``\\n`` after it is in the text TRL's suffix starts
    with, but in none of its ids, so the suffix ids are not the text's own encoding."""
    from tokenizers import AddedToken

    tokenizer = tiny_tokenizer()
    eos = AddedToken(tokenizer.eos_token, rstrip=True, special=True, normalized=False)
    tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


@pytest.mark.parametrize(
    "tokenizer",
    [
        pytest.param(lambda: tiny_tokenizer("qwen3"), id="qwen3"),
        pytest.param(lambda: tiny_tokenizer("qwen3_instruct_2507"), id="qwen3_instruct_2507"),
        pytest.param(swallowing_eos_tokenizer, id="qwen3, an EOS that swallows the newline"),
    ],
)
@pytest.mark.slow
def test_build_matches_the_per_turn_construction(tokenizer, per_turn_calls):
    """One render sliced at message boundaries gives, token for token, what rendering every turn
    after its history gave: on every game and policy, reshaped, at budgets that cut a turn and
    drop a tool block."""
    tokenizer = tokenizer()
    played_ = conversations(rounds=4)
    tool_messages = [m for _, c in played_.values() for m in c if m["role"] == "tool"]
    assert any(not m["content"] for m in tool_messages)
    assert any(m["name"] == "fly" for m in tool_messages)
    assert any(c[-1]["role"] == "tool" for _, c in played_.values())
    for name, (env_cls, messages) in played_.items():
        full = assert_same_as_reference(tokenizer, messages, env_cls)
        assert isinstance(full, Trajectory), (name, full)
        start = full.tool_mask.index(0) if 0 in full.tool_mask else len(full.tool_mask)
        for budget in sorted({1, start, len(full.completion_ids) - 1}):
            assert_same_as_reference(
                tokenizer, messages, env_cls, max_completion_length=max(budget, 1)
            )
    assert per_turn_calls[0] == 0  # every build above took the one render


def test_build_matches_the_per_turn_construction_at_every_boundary(per_turn_calls):
    """The Catch conversation of the tests above, cut by a budget one token before, at and after
    every boundary between model and env tokens."""
    _, tokenizer = tiny()
    messages, _ = _catch_conversation(tokenizer)
    full = assert_same_as_reference(tokenizer, messages, "catch")
    mask = full.tool_mask
    boundaries = [k for k in range(1, len(mask)) if mask[k] != mask[k - 1]] + [len(mask)]
    for budget in sorted({1} | {b + d for b in boundaries for d in (-1, 0, 1)}):
        assert_same_as_reference(tokenizer, messages, "catch", max_completion_length=budget)
    assert per_turn_calls[0] == 0


def test_build_matches_the_per_turn_construction_on_long_games(per_turn_calls):
    """Long games, with the template's own options too (Qwen3's generation prompt without the
    think block)."""
    tokenizer = tiny_tokenizer()
    for game, policy, task in [
        ("wordle", "random, reasoning", {"secret": "sheep"}),
        ("sudoku", "noisy", {"seed": 4}),
    ]:
        messages = played(game, policy, task, rounds=25, seed=0)
        assert sum(m["role"] == "assistant" for m in messages) > 20
        for options in ({}, {"enable_thinking": False}):
            built = assert_same_as_reference(
                tokenizer, messages, GAME_TASKS[game][0], chat_template_kwargs=options
            )
            assert isinstance(built, Trajectory)
            # without thinking the empty think block is in the generation prompt, not the model's
            model = [span.text for span in built.spans(tokenizer) if span.source == "model"]
            assert {text.startswith(THINK) for text in model} == {options == {}}
    assert per_turn_calls[0] == 0


# End-of-turn token of each of TRL's real templates below (the others end turns on <|im_end|>)
REAL_EOS = {
    "llama3_1": "<|eot_id|>",
    "gptoss": "<|return|>",
    "phi3": "<|end|>",
    "glm4moe": "<|endoftext|>",
    "gemma4": "<turn|>",
    "cohere": "<|END_OF_TURN_TOKEN|>",
    "deepseek_r1_distill": "<｜end▁of▁sentence｜>",
}


def real_template_tokenizer(name: str) -> Any:
    """The tiny tokenizer with one of the real chat templates TRL ships (byte for byte, so TRL
    swaps in its training variant where it has one), its control tokens and its EOS added."""
    import trl

    template = (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text("utf-8")
    tokenizer = copy.deepcopy(tiny_tokenizer())
    eos = REAL_EOS.get(name, "<|im_end|>")
    controls = set(re.findall(r"<\|[A-Za-z_0-9]+\|>", template)) | {eos}
    tokenizer.add_special_tokens({"additional_special_tokens": sorted(controls)})
    tokenizer.eos_token = eos
    tokenizer.chat_template = template
    return tokenizer


@pytest.mark.parametrize(
    "name, path",
    [
        ("llama3_1", "one render"),
        ("gptoss", "one render"),
        ("qwen2_5", "one render"),
        ("qwen3_5_think", "one render"),
        ("lfm2_2_5", "one render"),
        ("glm4moe", "one render"),  # no EOS ends a turn: nothing is cut
        ("gemma4", "per turn"),  # tool results render inside the assistant turn they answer
        ("phi3", "raises"),  # TRL's own check fails on its training variant
        ("deepseek_r1_distill", "raises"),  # the generation prompt opens a think block
        ("cohere", "raises"),  # the template refuses a tool message
    ],
)
def test_build_matches_the_per_turn_construction_with_real_templates(name, path, per_turn_calls):
    """Templates that give one render, others that need a render per turn, and templates for
    which both raise alike; merged calls and odd text may also be refused (Llama 3.1 takes one
    call per turn, GPT-OSS no text beside reasoning in a calling turn), alike."""
    tokenizer = real_template_tokenizer(name)
    games = [
        (GAME_TASKS[game][0], played(game, policy, GAME_TASKS[game][1][0], rounds=3, seed=1))
        for game in GAME_TASKS
        for policy in ("solver, reasoning", "random")
    ]
    plain = [assert_same_as_reference(tokenizer, messages, env_cls) for env_cls, messages in games]
    assert {isinstance(result, Trajectory) for result in plain} == {path != "raises"}
    if path != "raises":
        assert (per_turn_calls[0] > 0) == (path == "per turn")
    for env_cls, messages in games:
        for variant in (merged_calls(messages, 2), odd(messages, seed=2)):
            assert_same_as_reference(tokenizer, variant, env_cls)
        for variant in (messages, merged_calls(messages, 2), odd(messages, seed=2)):
            assert_same_as_reference(tokenizer, variant, env_cls, max_completion_length=40)


@pytest.mark.parametrize(
    "content, seen",
    [
        ("m.content + (' (my last word)' if loop.last and m.content else '')", "(my last word)"),
        ("m.content | upper if loop.last else m.content", "NO FEEDBACK YET"),  # same length
    ],
)
def test_a_turn_rendered_differently_as_the_last_message_is_detected(content, seen, per_turn_calls):
    """A template that renders a turn with text differently when it is the last message passes
    TRL's own prefix check (its dummy turn has no text) but is not prefix-preserving at any
    turn with text: build must not slice the full render there, and renders each turn after
    its history, as the last message, as before."""
    from trl.chat_template_utils import is_chat_template_prefix_preserving

    tokenizer = _with_template(_chatml(content=content))
    assert is_chat_template_prefix_preserving(tokenizer)
    messages = played("wordle", "solver, reasoning", {"secret": "pious"}, rounds=3, seed=0)
    turns = sum(m["role"] == "assistant" for m in messages)
    built = assert_same_as_reference(tokenizer, messages, LongWordleEnv)
    assert seen in tokenizer.decode(built.completion_ids)
    assert per_turn_calls[0] == turns == 4


def test_a_tool_result_rendered_differently_in_context_is_detected(per_turn_calls):
    """A template that numbers tool results by their place in the conversation renders them
    one way in TRL's dummy conversation and another in the real one: TRL's suffix is still
    what the trainer appends (and what build returns), but the full render cannot be sliced."""
    tokenizer = _with_template(_chatml(tool_tag="'<tool_response n=' ~ loop.index0 ~ '>'"))
    messages = played("catch", "solver", {"ball_col": 0}, rounds=2, seed=0)
    built = assert_same_as_reference(tokenizer, messages, "catch")
    assert tokenizer.decode(built.completion_ids).count("<tool_response n=2>") == 2  # TRL's dummy
    assert per_turn_calls[0] == 3


def test_a_message_the_template_refuses_after_the_budget_is_never_rendered(per_turn_calls):
    """The per-turn construction never renders what the length budget dropped; neither may build."""
    tokenizer = _with_template(_chatml(refused="refused"))
    messages = played("echo", "solver", {}, rounds=3, seed=0)
    messages[-1] = {**messages[-1], "content": "refused"}
    full = assert_same_as_reference(tokenizer, messages, "echo")
    assert full == ("TemplateError", "refused: refused")
    cut = assert_same_as_reference(tokenizer, messages, "echo", max_completion_length=20)
    assert isinstance(cut, Trajectory) and cut.truncated


def test_build_renders_each_message_once(monkeypatch):
    """Rendering is linear in the turns: a constant number of apply_chat_template calls, and in
    them one full render plus two small ones per turn (the turn alone, and TRL's dummy for its
    tool block). The per-turn construction made 4 calls per turn, each rendering the history."""
    import jinja2

    tokenizer = tiny_tokenizer()
    messages = played("wordle", "random", {"secret": "sheep"}, rounds=20, seed=0)
    counts = {"calls": 0, "renders": 0}

    def counting(function: Any, key: str) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return function(*args, **kwargs)

        return counted

    monkeypatch.setattr(
        type(tokenizer),
        "apply_chat_template",
        counting(type(tokenizer).apply_chat_template, "calls"),
    )
    monkeypatch.setattr(jinja2.Template, "render", counting(jinja2.Template.render, "renders"))

    def counted_build(turns: int) -> tuple[int, int]:
        counts.update(calls=0, renders=0)
        ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        build(tokenizer, messages[: ends[turns - 1] + 1], LongWordleEnv)
        return counts["calls"], counts["renders"]

    counted_build(1)  # TRL's choice of template is made once per tokenizer
    calls_5, renders_5 = counted_build(5)
    calls_21, renders_21 = counted_build(21)
    assert calls_21 == calls_5 == 6
    assert renders_21 - renders_5 == 2 * (21 - 5)


def test_trls_choice_of_template_is_made_again_when_what_it_reads_changes():
    """The choice is kept per tokenizer, but never outlives the template, the vocabulary or the
    special tokens it was made from."""
    from trl.chat_template_utils import qwen3_training_chat_template

    tokenizer = copy.deepcopy(tiny_tokenizer())
    assert masks.chat_template(tokenizer) == qwen3_training_chat_template
    template = tokenizer.chat_template
    tokenizer.chat_template = REWRITES_ANSWERED
    with pytest.raises(ValueError, match="no training variant"):
        masks.chat_template(tokenizer)
    tokenizer.chat_template = SHIFTED_HEADER  # prefix-preserving: its own template
    assert masks.chat_template(tokenizer) is None
    tokenizer.chat_template = template
    assert masks.chat_template(tokenizer) == qwen3_training_chat_template

    renders = []
    with pytest.MonkeyPatch.context() as patch:
        apply = type(tokenizer).apply_chat_template
        patch.setattr(
            type(tokenizer),
            "apply_chat_template",
            lambda *args, **kwargs: renders.append(1) or apply(*args, **kwargs),
        )
        masks.chat_template(tokenizer)
        assert renders == []  # kept
        tokenizer.add_tokens(["<|new|>"])
        masks.chat_template(tokenizer)
        assert renders  # the vocabulary changed: chosen again
        renders.clear()
        tokenizer.add_special_tokens({"pad_token": "<|new|>"})
        masks.chat_template(tokenizer)
        assert renders  # the special tokens changed: chosen again


@pytest.mark.slow
def test_the_benchmark_runs():
    """benchmarks/masks.py keeps working (its ratios are read from a run, never asserted)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "benchmarks/masks.py", "--rounds", "1", "--repeat", "1"]
        + ["--templates", "qwen3_instruct_2507"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if "qwen3_instruct_2507" in line]
    assert [(game, int(turns)) for _, game, turns, *_ in rows] == [
        *[("wordle", n) for n in (1, 2, 5, 10, 20, 21)],
        *[("sudoku", n) for n in (1, 2, 5, 10, 20, 40, 61)],
    ]
    assert {int(calls) for _, _, _, calls, *_ in rows} == {4, 6}  # none grows with the turns
    assert "Goal: build <= 3x one render at every length:" in done.stdout


@pytest.mark.parametrize("first", ["kit.masks", "kit.capture"])
def test_capture_has_one_home_and_no_import_cycle(first: str) -> None:
    """Capture and Batch live in kit.capture only (one import path per name), and kit.masks and
    kit.capture import each other's layer without a cycle, whichever a fresh interpreter
    imports first."""
    code = (
        f"import {first}\n"
        "from kit import capture, masks\n"
        "assert capture.Capture.__module__ == 'kit.capture'\n"
        "assert not hasattr(masks, 'Capture') and not hasattr(masks, 'Batch')\n"
        "assert not hasattr(masks, 'env_name')\n"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_flat_groups_counts_the_flat_groups_trls_zero_std_misses():
    """A group of eight equal rewards gives no gradient; TRL's frac_reward_zero_std tests its
    float32 std with torch.isclose(std, 0), and 0.475 * 8 has a std of 3.2e-8, so TRL counts
    none of these groups as flat. Batch.flat_groups counts the captured rewards."""
    import torch
    from trl.trainer.utils import nanstd

    from kit.capture import Batch

    rewards = [0.475] * 8 + [1.6] * 8 + [0.35] * 7 + [1.6] + [0.1, 0.225] * 4
    batch = Batch(
        step=0,
        mode="train",
        trajectories=[
            Trajectory(messages=[], prompt_ids=[1], completion_ids=[2], tool_mask=[1], reward=r)
            for r in rewards
        ],
    )
    assert batch.flat_groups(8) == 0.5
    assert batch.flat_groups(4) == 5 / 8  # in fours: the first four, and one of 0.35s
    std = nanstd(torch.tensor(rewards).view(-1, 8), dim=1)
    assert not torch.isclose(std, torch.zeros_like(std)).any()  # what TRL logs: 0.0
    with pytest.raises(ValueError, match="groups of 5"):
        batch.flat_groups(5)
    batch.trajectories[3].reward = None
    with pytest.raises(ValueError, match="no reward"):
        batch.flat_groups(8)
