"""A real GRPO step through an env at each model size, on this machine's GPU: peak memory and
step time beside what ``kit.memory`` predicts (issue 8 §2, docs/gpu.md's profile table).

    python scripts/gpu_profile.py                          # every Qwen3 size, Catch, 2 steps
    python scripts/gpu_profile.py --models Qwen/Qwen3-0.6B --game sudoku --steps 1
    python scripts/gpu_profile.py --smoke                  # on a CPU: the tiny architecture

Why a script: the profile table's activations are measured on a CPU and its KV cache computed;
only a GPU run says what a step holds at its peak (allocator, kernels, the trainer's own
buffers) and how long it takes. Nothing here reaches a hub: each model is its published
architecture (``kit.memory.ARCHITECTURES``) with random weights, which have the real memory
profile, and the tokenizer is the kit's tiny one padded with unused tokens to the model's
vocabulary (a random model may sample any id). Each model gets ``kit.train.recipe``'s settings
for this GPU (LoRA or not, precision, micro-batch and generation batch, checkpointing) and
``--steps`` steps of ``kit.train.grpo`` on the game's train tasks. A random model makes no tool
call, so every completion runs to the token budget: the worst case for memory.

One JSON line per model goes to ``--out``: the recipe's choices, the peak memory PyTorch
allocated during GRPO (``torch.cuda.max_memory_allocated``), TRL's logged step times, the
longest rollout in tokens, and the prediction for that length (``kit.memory.training_bytes``
plus the larger of the micro-batch's activations and the generation's KV cache). A model the
recipe refuses for this GPU gets a line with the reason.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GIB = 1024**3


def padded_tokenizer(vocab_size: int) -> Any:
    """The kit's tiny tokenizer, padded with unused tokens to ``vocab_size`` ids."""
    from kit.models import TINY_VOCAB_SIZE, tiny_tokenizer

    tokenizer = tiny_tokenizer("qwen3", TINY_VOCAB_SIZE)
    tokenizer.add_tokens([f"<unused_{i}>" for i in range(vocab_size - len(tokenizer))])
    return tokenizer


def profile(name: str, config: Any, game: str, steps: int, budget: int | None) -> dict[str, Any]:
    """One model's line: the recipe, peak memory, step times, the prediction."""
    import torch
    from transformers import AutoModelForCausalLM

    from kit import hardware, memory
    from kit.train import grpo, recipe

    device = hardware.detect()
    folder = Path(tempfile.mkdtemp(prefix="gpu-profile-"))
    config.save_pretrained(folder)  # recipe() reads the config and the tokenizer alone
    tokenizer = padded_tokenizer(config.vocab_size)
    tokenizer.save_pretrained(folder)
    line: dict[str, Any] = {"model": name, "game": game, "device": device.name}
    try:
        r = recipe(str(folder), game, device=device, max_completion_length=budget)
    except ValueError as error:
        return {**line, "fits": False, "why": str(error)}
    keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation")
    line.update(
        lora=r.lora,
        dtype=r.load["dtype"],
        budget=r.grpo["max_completion_length"],
        **{key: r.grpo.get(key) for key in keys},
    )
    torch.manual_seed(0)
    with torch.device(device.place()):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, r.load["dtype"]))
    if device.gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    clock = time.perf_counter()
    trainer, capture = grpo(
        model, tokenizer, game, steps, 0, folder / "grpo", peft_config=r.peft_config, **r.grpo
    )
    line["wall_s"] = round(time.perf_counter() - clock, 1)
    line["step_time_s"] = [
        round(entry["step_time"], 2) for entry in trainer.state.log_history if "step_time" in entry
    ]
    line["peak_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 2) if device.gpu else None
    tokens = max(
        len(t.prompt_ids) + len(t.completion_ids) for b in capture.batches for t in b.trajectories
    )
    line["longest_rollout_tokens"] = tokens
    rows = r.grpo["per_device_train_batch_size"]
    generated = rows * (r.grpo.get("steps_per_generation") or r.grpo["gradient_accumulation_steps"])
    activations = memory.checkpointed_peak(config, r.lora, rows * tokens)
    cache = memory.kv_cache_bytes(config, generated * tokens)
    fixed = memory.training_bytes(config, r.lora)
    line["predicted_gib"] = {
        "weights_and_optimiser": round(fixed / GIB, 2),
        "activations": None if activations is None else round(activations / GIB, 2),
        "kv_cache": round(cache / GIB, 2),
        "peak": round((fixed + max(activations or 0, cache)) / GIB, 2),
    }
    del model, trainer, capture
    gc.collect()
    if device.gpu:
        torch.cuda.empty_cache()
    return {**line, "fits": True}


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from kit.memory import ARCHITECTURES, architecture

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(ARCHITECTURES), metavar="NAME")
    parser.add_argument("--game", default="catch")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, help="default: the game's budget")
    parser.add_argument("--out", default="gpu_profile.jsonl", help="JSON lines, appended")
    parser.add_argument(
        "--smoke", action="store_true", help="the tiny architecture, 1 step, 64 tokens: a CPU check"
    )
    args = parser.parse_args(argv)
    from kit.runs import quiet_libraries

    quiet_libraries()
    if args.smoke:
        from kit.models import tiny_config

        models = [("tiny", tiny_config())]
        args.steps, args.max_completion_length = 1, 64
    else:
        unknown = sorted(set(args.models) - set(ARCHITECTURES))
        if unknown:
            parser.error(f"no published architecture for {unknown}; known: {sorted(ARCHITECTURES)}")
        models = [(name, architecture(name)) for name in args.models]
    lines = []
    for name, config in models:
        line = profile(name, config, args.game, args.steps, args.max_completion_length)
        lines.append(line)
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)
    return lines


if __name__ == "__main__":
    main()
