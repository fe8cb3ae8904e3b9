"""``kit.masks.build`` against one render of the same conversation, as ratios.

    python benchmarks/masks.py                 # about 30 s
    python benchmarks/masks.py --rounds 3 --templates qwen3

Why: ``build`` rendered the whole history twice per assistant turn, so its cost grew with the
square of the turns (a 20-round Wordle game: 88 renders, 12x one render; 60 Sudoku rounds: 248
renders, 15x). It now renders the conversation once and slices it. Goal: ``build`` within 3x
one ``apply_chat_template(messages, tools=..., tokenize=True)`` of the conversation, at every
length.

Conversations: Wordle (a random guesser given 30 guesses, 20 rounds of tool calls), Sudoku (the
solver with 10% blunders on a hard puzzle, 60 rounds), and the first turns of each, played
through ``kit.envs`` by ``kit.solvers.policies``. Tokenizer: the kit's tiny one with each chat
template named: ``qwen3`` (the kit's default, which TRL swaps for its training variant),
``qwen3_instruct_2507``, and real templates TRL ships, ``llama3_1`` and ``gptoss``, with their
control tokens added. Each round times ``build`` and one render back to back, alternating which
goes first, so the load of a shared machine hits both alike; a figure is the median over the
rounds of the fastest of ``--repeat`` calls. Also counted, per build: ``apply_chat_template``
calls and the jinja renders they make (a batched call renders each of its conversations); a
tokenizer's first build also makes TRL's choice of template, once, and is not counted. No time
is asserted anywhere: a ratio is a fact of one run on one machine.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import jinja2
import trl

# the checkout this file is in, not whichever one an editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.envs import ENVS, env_tools  # noqa: E402
from kit.episode import run_episode  # noqa: E402
from kit.masks import build  # noqa: E402
from kit.models import tiny_tokenizer  # noqa: E402
from kit.solvers.policies import noisy_policy, random_policy  # noqa: E402


class LongWordleEnv(ENVS["wordle"]):
    """Wordle with 30 guesses, so that a random guesser plays on for 20 rounds."""

    options = {"num_guesses": 30}


GOAL = 3.0
TEMPLATES = ("qwen3", "qwen3_instruct_2507", "llama3_1", "gptoss")
# End-of-turn tokens of the real templates (the kit's own use <|im_end|>)
EOS = {"llama3_1": "<|eot_id|>", "gptoss": "<|return|>"}
# (env, policy, its seed, task, rounds of tool calls); the first turns of each are also timed
GAMES = (
    (LongWordleEnv, random_policy(reasoning=True), 0, {"secret": "sheep"}, 20),
    (ENVS["sudoku"], noisy_policy(0.1, reasoning=True), 5, {"seed": 5, "difficulty": "hard"}, 60),
)
LENGTHS = (1, 2, 5, 10, 20, 40)


def tokenizer_for(name: str) -> Any:
    """The tiny tokenizer with chat template ``name`` (TRL's file), its control tokens added."""
    if name in ("qwen3", "qwen3_instruct_2507"):
        return tiny_tokenizer(name)
    template = (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text("utf-8")
    tokenizer = tiny_tokenizer()
    controls = sorted(set(re.findall(r"<\|[a-z_0-9]+\|>", template)))
    tokenizer.add_special_tokens({"additional_special_tokens": controls})
    tokenizer.eos_token = EOS[name]
    tokenizer.chat_template = template
    return tokenizer


def conversation(env_cls: type, policy: Any, seed: int, task: dict, rounds: int) -> list[dict]:
    episode = run_episode(
        env_cls(), task, policy(env_cls, seed), max_tool_calling_iterations=rounds
    )
    return episode.messages


def first_turns(messages: list[dict], turns: int) -> list[dict]:
    """The conversation through its ``turns``-th assistant turn."""
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return messages[: assistants[turns - 1] + 1]


def fastest(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def renders(tokenizer: Any, messages: list[dict], env_cls: type) -> tuple[int, int]:
    """``(apply_chat_template calls, jinja renders)`` of one ``build`` (not the tokenizer's first,
    which also makes TRL's choice of template: up to five more renders, once)."""
    build(tokenizer, messages, env_cls)
    calls, renders_ = [0], [0]
    apply, render = type(tokenizer).apply_chat_template, jinja2.Template.render

    def counted_apply(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return apply(self, *args, **kwargs)

    def counted_render(self: Any, *args: Any, **kwargs: Any) -> Any:
        renders_[0] += 1
        return render(self, *args, **kwargs)

    with (
        mock.patch.object(type(tokenizer), "apply_chat_template", counted_apply),
        mock.patch.object(jinja2.Template, "render", counted_render),
    ):
        build(tokenizer, messages, env_cls)
    return calls[0], renders_[0]


def measure(
    tokenizer: Any, messages: list[dict], env_cls: type, rounds: int, repeat: int
) -> tuple[float, float]:
    """Median over rounds of the fastest ``build`` and the fastest single render, in seconds."""
    tools = env_tools(env_cls())  # what build renders the conversation with

    def one_render() -> object:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)

    def built() -> object:
        return build(tokenizer, messages, env_cls)

    built(), one_render()  # first calls compile the template
    built_times, render_times = [], []
    for k in range(rounds):
        order = (built, one_render) if k % 2 == 0 else (one_render, built)
        for call in order:
            (built_times if call is built else render_times).append(fastest(call, repeat))
    return statistics.median(built_times), statistics.median(render_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of alternated timings")
    parser.add_argument("--repeat", type=int, default=5, help="calls per figure (fastest kept)")
    parser.add_argument("--templates", nargs="+", default=list(TEMPLATES), choices=TEMPLATES)
    args = parser.parse_args()
    print(f"Load average (1, 5, 15 min) at the start: {os.getloadavg()}")
    print(
        f"{'template':<22}{'game':<8}{'turns':>6}{'calls':>7}{'renders':>9}"
        f"{'build ms':>10}{'render ms':>11}{'ratio':>8}"
    )
    worst = 0.0
    for name in args.templates:
        tokenizer = tokenizer_for(name)
        for env_cls, policy, seed, task, rounds in GAMES:
            played = conversation(env_cls, policy, seed, task, rounds)
            game = env_cls.game_name
            total = sum(m["role"] == "assistant" for m in played)
            for turns in [n for n in LENGTHS if n < total] + [total]:
                messages = first_turns(played, turns)
                calls, jinja_renders = renders(tokenizer, messages, env_cls)
                built, rendered = measure(tokenizer, messages, env_cls, args.rounds, args.repeat)
                worst = max(worst, built / rendered)
                print(
                    f"{name:<22}{game:<8}{turns:>6}{calls:>7}{jinja_renders:>9}"
                    f"{built * 1e3:>10.2f}{rendered * 1e3:>11.2f}{built / rendered:>7.1f}x"
                )
    verdict = "met" if worst <= GOAL else "MISSED"
    print(f"Goal: build <= {GOAL:g}x one render at every length: {verdict} (worst {worst:.1f}x)")
    print(f"Load average (1, 5, 15 min) at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
