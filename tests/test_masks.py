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
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402

from kit.envs import ENVS  # noqa: E402
from kit.games import make  # noqa: E402
from kit.masks import Capture, build, env_tools, tool_calls, tool_suffix_ids  # noqa: E402
from kit.models import tiny_model  # noqa: E402
from kit.train import grpo_config  # noqa: E402
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
                turn(call("guess", word="crane"), call("guess", word="pious")),
                turn(
                    call("guess", word="qzxjv"), call("guess", word=12345), call("fly", to="moon")
                ),
                turn(text="I will stop here."),
            ],
            "cap": [turn(call("guess", word=w)) for w in ("crane", "pious", "slate", "sheep")],
            "tool": [turn(call("guess", word="crane"))],
            "raw": [raw_call("guess", word="crâne"), "Done."],
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
    assert any(c["error"] for c in multi.tool_calls if c["turn"] == 2)
    assert not multi.truncated and multi.completion_ids[-1] == tok.eos_token_id

    cap = by_case["cap"][0]
    assistants = [m for m in cap.messages if m["role"] == "assistant"]
    assert len(assistants) == CAP + 1 and assistants[-1].get("tool_calls")
    assert cap.messages[-1]["role"] == "assistant" and not cap.truncated
    assert [c["result"] for c in cap.tool_calls if c["turn"] == CAP + 1] == [None]

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
            answered = any(
                c["turn"] == turn_no and (c["result"] or c["error"]) for c in t.tool_calls
            )
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
    assert [c["turn"] for c in built.tool_calls] == [1, 1, 2]
    assert built.tool_calls[2]["error"].startswith("direction must be LEFT or RIGHT")
    assert built.tool_calls[0]["result"] == messages[2]["content"] and not built.truncated


def test_build_applies_the_length_budget():
    _, tokenizer = tiny()
    messages, _ = _catch_conversation(tokenizer)
    full = build(tokenizer, messages, "catch")
    first_env = full.tool_mask.index(0)
    # a budget that ends inside the first tool block: TRL drops the block and ends the episode
    cut = build(tokenizer, messages, "catch", max_completion_length=first_env + 3)
    assert cut.completion_ids == full.completion_ids[:first_env]
    assert cut.truncated and cut.messages == messages[:2]
    assert cut.tool_calls[0]["result"] is None  # the model never saw it
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


def _chatml(assistant_header: str, answered_mark: str) -> str:
    """A small ChatML tool template; the arguments make it inconsistent in one chosen way."""
    return (
        "{%- for m in messages %}"
        "{%- if m.role == 'assistant' %}"
        "{{- '<|im_start|>" + assistant_header + "\\n' + m.content }}"
        "{%- for c in m.tool_calls or [] %}"
        "{{- '<tool_call>\\n' + (c.function | tojson) + '\\n</tool_call>' }}"
        "{%- endfor %}"
        "{%- if not loop.last and messages[loop.index0 + 1].role == 'tool' %}"
        "{{- '" + answered_mark + "' }}"
        "{%- endif %}"
        "{{- '<|im_end|>\\n' }}"
        "{%- elif m.role == 'tool' %}"
        "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
        "{%- else %}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )


# The assistant header differs from the generation prompt ("assistant:" vs "assistant"): every
# rendering is prefix-preserving, yet no sampled turn starts where the prompt ends.
SHIFTED_HEADER = _chatml("assistant:", "")
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
        {"turn": 1, "name": "a", "arguments": {"x": 1}, "result": "fine", "error": None},
        {"turn": 1, "name": "b", "arguments": {}, "result": None, "error": "Tool b not found."},
        {"turn": 2, "name": "a", "arguments": {}, "result": None, "error": None},
    ]
