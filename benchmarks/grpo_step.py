"""Where a GRPO step's time goes on this machine, phase by phase, as shares of the step.

    python benchmarks/grpo_step.py                              # the runbook's tiny model on Catch
    python benchmarks/grpo_step.py --model smollm2 --sft-steps 20 --steps 3
    python benchmarks/grpo_step.py --sft-from runs/demo/RUN --grpo num_generations=4
    python benchmarks/grpo_step.py --trl-scoring                # the loss scored as TRL lays it out

Why: on a CPU a GRPO step of a tool-calling game is mostly generation, and inside generation
TRL's transformers path re-reads an episode's whole context every turn. Before changing the
recipe (rollouts per step, budget, turns, threads, cache), the change is judged by where the time
went, not by the step's total alone. So this runs the runbook's own ``kit.train.grpo`` (its
recipe, its reward, ``kit.capture.Capture``) with every phase of TRL 1.16's step timed by wrapping
the trainer class's methods for the run (TRL itself is not modified), and prints each phase's
exclusive seconds and share of the timed steps:

* generation, first turn and later turns (``model.generate``, through TRL's
  ``_generate_single_turn`` or the kit's cache-keeping one, ``kit.rollout.reuse_turn_caches``),
  with the tokens each turn read and wrote;
* the chat template: prompts (``_tokenize_prompts``) and tool results (``_get_tool_suffix_ids``);
* tool-call parsing (``parse_response``) and the tool loop's own work: env steps, bookkeeping
  (``_tool_call_loop`` less what it calls);
* rewards (``_calculate_rewards``); log-probs without gradient (the old policy's and the
  reference's, ``_get_per_token_logps_and_entropies`` under ``no_grad``); the rest of scoring;
* the loss's forward pass (the same method with gradient, or the kit's,
  ``kit.train.score_by_length``, which ``--trl-scoring`` leaves out), the backward pass and the
  rest of ``training_step``, the optimizer step (between the trainer's optimizer callbacks);
* the kit's capture (``Capture._trajectories``), and whatever of the step is none of these.

The first step is untimed (its first calls pay for lazy imports and allocator growth). No time
is asserted anywhere: ``tests/test_benchmarks.py`` runs this with tiny counts.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# the checkout this file is in, not whichever one an editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOOL_LOOP = "tool-call loop: env steps and bookkeeping"
GENERATION_FIRST = "generation, first turn"
GENERATION_LATER = "generation, later turns"
OTHER = "the rest of the step (trainer loop)"


class Phases:
    """Exclusive time per phase: a timed call's seconds less those of the timed calls inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.tokens: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # read, written
        self.on = False  # only the timed steps count
        self._inner: list[float] = []  # per open call: the seconds of the calls inside it
        self._labels: list[str] = []

    def time(self, label: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        self._inner.append(0.0)
        self._labels.append(label)
        try:
            return call()
        finally:
            elapsed = time.perf_counter() - start
            inner = self._inner.pop()
            self._labels.pop()
            if self.on:
                self.seconds[label] += elapsed - inner
                self.calls[label] += 1
            if self._inner:
                self._inner[-1] += elapsed

    def within(self, label: str) -> bool:
        return label in self._labels


@contextmanager
def timed(phases: Phases) -> Iterator[None]:
    """Wrap TRL's ``GRPOTrainer`` methods (and the kit's capture) for as long as this is open."""
    import torch
    import trl.trainer.grpo_trainer as grpo_module
    from trl import GRPOTrainer

    from kit.capture import Capture

    restore: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: Callable[..., str] | str) -> None:
        original = getattr(owner, name)
        restore.append((owner, name, original))

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name_ = label(*args, **kwargs) if callable(label) else label
            return phases.time(name_, lambda: original(*args, **kwargs))

        setattr(owner, name, wrapper)

    def logps(*args: Any, **kwargs: Any) -> str:
        return "forward (loss)" if torch.is_grad_enabled() else "log-probs without gradient"

    wrap(GRPOTrainer, "_tokenize_prompts", "chat template: prompts")
    wrap(GRPOTrainer, "_get_tool_suffix_ids", "chat template: tool results")
    wrap(GRPOTrainer, "_tool_call_loop", TOOL_LOOP)
    wrap(GRPOTrainer, "_generate", "first turn's parsing and bookkeeping")
    wrap(GRPOTrainer, "_calculate_rewards", "rewards")
    wrap(GRPOTrainer, "_get_per_token_logps_and_entropies", logps)
    wrap(GRPOTrainer, "_generate_and_score_completions", "scoring: advantages, padding, rest")
    wrap(GRPOTrainer, "training_step", "backward and the rest of training_step")
    wrap(grpo_module, "parse_response", "tool-call parsing (parse_response)")
    wrap(Capture, "_trajectories", "kit capture")
    # A generation call is timed under the turn it generates, with the tokens it read and wrote:
    # TRL's own (every token of every prompt read) and the kit's, which kit.train.grpo installs
    # (kit.rollout.reuse_turn_caches: a kept cache's tokens are not read again).
    from kit.rollout import _TransformersGenerate

    def turn_label() -> str:
        return GENERATION_LATER if phases.within(TOOL_LOOP) else GENERATION_FIRST

    original_turn = GRPOTrainer._generate_single_turn
    original_generate = _TransformersGenerate.__call__
    restore.append((GRPOTrainer, "_generate_single_turn", original_turn))
    restore.append((_TransformersGenerate, "__call__", original_generate))

    def trl_turn(self: Any, prompt_ids: Sequence[Sequence[int]], *args: Any, **kwargs: Any) -> Any:
        label = turn_label()
        result = phases.time(label, lambda: original_turn(self, prompt_ids, *args, **kwargs))
        if phases.on:
            phases.tokens[label][0] += sum(map(len, prompt_ids))
            phases.tokens[label][1] += sum(map(len, result[0]))
        return result

    def kit_turn(self: Any, prompts: list[list[int]]) -> list[list[int]]:
        label, before = turn_label(), self.prompt_tokens
        result = phases.time(label, lambda: original_generate(self, prompts))
        if phases.on:
            phases.tokens[label][0] += self.prompt_tokens - before
            phases.tokens[label][1] += sum(map(len, result))
        return result

    GRPOTrainer._generate_single_turn = trl_turn
    _TransformersGenerate.__call__ = kit_turn
    # The kit's scoring (kit.train.score_by_length, which kit.train.grpo installs on the trainer
    # it builds) is timed as TRL's is: the loss's forward pass, or log-probs without gradient.
    import kit.train

    original_score = kit.train.score_by_length
    restore.append((kit.train, "score_by_length", original_score))

    def score_by_length(trainer: Any, *args: Any, **kwargs: Any) -> None:
        original_score(trainer, *args, **kwargs)
        kit_score = trainer._get_per_token_logps_and_entropies

        def timed_score(*a: Any, **k: Any) -> Any:
            return phases.time(logps(), lambda: kit_score(*a, **k))

        trainer._get_per_token_logps_and_entropies = timed_score

    kit.train.score_by_length = score_by_length
    try:
        yield
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)


def step_clock(phases: Phases, skip: int) -> Any:
    """A ``TrainerCallback`` that times each step and the optimizer, from step ``skip + 1`` on."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[float] = []
            self._step = self._optimizer = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            phases.on = state.global_step >= skip
            self._step = time.perf_counter()

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._optimizer = time.perf_counter()

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if phases.on:
                phases.seconds["optimizer step"] += time.perf_counter() - self._optimizer
                phases.calls["optimizer step"] += 1

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if phases.on:
                self.steps.append(time.perf_counter() - self._step)
            phases.on = False

    return Clock()


def report(phases: Phases, steps: Sequence[float]) -> dict[str, float]:
    """Print each phase's seconds per step and share; return the shares."""
    total = sum(steps)
    seconds = dict(phases.seconds)
    seconds[OTHER] = total - sum(seconds.values())
    shares = {label: value / total for label, value in seconds.items()}
    print(
        f"\n{len(steps)} timed steps, {total / len(steps):.1f} s a step "
        f"(min {min(steps):.1f}, max {max(steps):.1f})\n"
    )
    print(f"{'phase':48} {'s/step':>8} {'share':>7} {'calls':>7}")
    for label, value in sorted(seconds.items(), key=lambda item: -item[1]):
        calls = phases.calls.get(label, 0)
        print(f"{label:48} {value / len(steps):8.2f} {shares[label]:7.1%} {calls:7d}")
    for label in (GENERATION_FIRST, GENERATION_LATER):
        if label in phases.tokens:
            read, written = phases.tokens[label]
            print(
                f"{label}: {read / len(steps):,.0f} prompt tokens read and "
                f"{written / len(steps):,.0f} written a step"
            )
    return shares


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run ``--steps`` GRPO steps after one untimed one; print and return each phase's share."""
    parser = argparse.ArgumentParser(prog="python benchmarks/grpo_step.py")
    parser.add_argument("--model", default="tiny", help="tiny, smollm2 or a model's folder")
    parser.add_argument("--game", default="catch")
    parser.add_argument("--steps", type=int, default=3, help="timed GRPO steps")
    parser.add_argument(
        "--sft-steps",
        type=int,
        default=None,
        help="SFT warm-up first, so that the model calls tools (default: the runbook's)",
    )
    parser.add_argument(
        "--sft-from", type=Path, help="a tiny-model kit.demo run whose sft-model to start from"
    )
    parser.add_argument(
        "--grpo",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="GRPOConfig fields, as kit.demo --grpo takes them",
    )
    parser.add_argument(
        "--grpo-where",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="GRPO plays only these tasks, as kit.demo --grpo-where",
    )
    parser.add_argument(
        "--trl-scoring",
        action="store_true",
        help="score rollouts as TRL does, without kit.train.score_by_length (the before)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-step"))
    args = parser.parse_args(argv)

    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from kit.demo import _model_folder, _pairs
    from kit.models import load, tiny_model
    from kit.runs import pin_threads, quiet_libraries
    from kit.train import CPU_STEPS, GRPO, SFT, SFT_STEPS, grpo, recipe, warm_up

    quiet_libraries()
    pin_threads(args.threads)
    overrides, where = _pairs(args.grpo), _pairs(args.grpo_where)
    lora: dict[str, Any] = {}
    if args.sft_from:
        model, tokenizer = load(args.sft_from / "sft-model")
        settings: dict[str, Any] = dict(GRPO)
    elif args.model == "tiny":
        model, tokenizer = tiny_model(seed=args.seed, tie_word_embeddings=False)
        steps = SFT_STEPS if args.sft_steps is None else args.sft_steps
        warm_up(model, tokenizer, args.game, steps, args.seed, args.out / "sft", **SFT)
        settings = dict(GRPO)
    else:
        r = recipe(_model_folder(args.model), args.game, lora=True)
        model, tokenizer = r.load_model(args.seed)
        lora = {"peft_config": r.peft_config}
        steps = CPU_STEPS["sft"] if args.sft_steps is None else args.sft_steps
        warm_up(model, tokenizer, args.game, steps, args.seed, args.out / "sft", **lora, **r.sft)
        settings = {k: v for k, v in r.grpo.items() if k != "chat_template_kwargs"}
    phases = Phases()
    clock = step_clock(phases, skip=1)
    from transformers import Trainer

    # the clock joins the trainer grpo() builds: every Trainer made while this is open gets it
    original_init = Trainer.__init__

    def with_clock(self: Any, *a: Any, **kw: Any) -> None:
        original_init(self, *a, **kw)
        self.add_callback(clock)

    Trainer.__init__ = with_clock
    try:
        with timed(phases):
            if args.trl_scoring:
                import kit.train

                kit.train.score_by_length = lambda trainer: None
            grpo(
                model,
                tokenizer,
                args.game,
                args.steps + 1,
                args.seed,
                args.out / "grpo",
                where=where or None,
                **lora,
                **{**settings, **overrides},
            )
    finally:
        Trainer.__init__ = original_init
    return report(phases, clock.steps)


if __name__ == "__main__":
    main()
