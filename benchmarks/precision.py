"""A forward pass in bf16 weights against fp32, on this CPU, as a ratio.

    python benchmarks/precision.py               # SmolLM2-135M's shape, 16 rows x 400 tokens
    python benchmarks/precision.py --rounds 3 --rows 4 --tokens 64

Why: ``kit.train.recipe`` loads a pretrained model's weights in bf16 on a CPU that multiplies bf16
natively (``kit.hardware.Device.cpu_bf16``: AVX512-BF16 or AMX) and in fp32 elsewhere, because
on a CPU rollouts are the cost of GRPO and evaluation, and they are forward passes. This measures
that choice on the machine at hand: the model is SmolLM2-135M's architecture (its published
config) with random weights, so nothing is downloaded, and the cost per token is the real
model's. Each round times one fp32 and one bf16 forward pass back to back, alternating which
goes first, so the load of a shared machine hits both alike; the figure is the median ratio of
the rounds. No time is asserted anywhere.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

# the checkout this file is in, not whichever one an editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.hardware import detect  # noqa: E402

# SmolLM2-135M-Instruct's config.json (HuggingFaceTB), the shape kit.models.smollm2 converts
SMOLLM2_135M = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}


def main(argv: list[str] | None = None) -> float:
    """Print the timings and return the median ratio fp32 time / bf16 time."""
    from transformers import LlamaConfig, LlamaForCausalLM

    parser = argparse.ArgumentParser(prog="python benchmarks/precision.py")
    parser.add_argument("--rows", type=int, default=16, help="sequences in the batch")
    parser.add_argument("--tokens", type=int, default=400, help="tokens per sequence")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds")
    parser.add_argument("--layers", type=int, default=SMOLLM2_135M["num_hidden_layers"])
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(**{**SMOLLM2_135M, "num_hidden_layers": args.layers})
    models = {"fp32": LlamaForCausalLM(config).eval()}
    models["bf16"] = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (args.rows, args.tokens))
    times: dict[str, list[float]] = {name: [] for name in models}
    with torch.inference_mode():
        for model in models.values():  # warm-up: first calls allocate
            model(ids[:1, :8])
        for round_ in range(args.rounds):
            order = list(models) if round_ % 2 == 0 else list(reversed(models))
            for name in order:
                clock = time.perf_counter()
                models[name](ids, logits_to_keep=1)  # as generation's prefill computes it
                times[name].append(time.perf_counter() - clock)
    ratios = [a / b for a, b in zip(times["fp32"], times["bf16"], strict=True)]
    ratio = statistics.median(ratios)
    device = detect()
    print(
        f"forward pass, {args.rows} x {args.tokens} tokens, {args.layers} layers, "
        f"{args.threads} threads; native bf16 on this CPU: {device.cpu_bf16}"
    )
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.3f} s over {args.rounds} rounds")
    print(
        f"fp32 / bf16: {ratio:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}); "
        f"kit.train.recipe loads bf16 weights for LoRA here: {device.cpu_bf16}"
    )
    return ratio


if __name__ == "__main__":
    main(sys.argv[1:])
