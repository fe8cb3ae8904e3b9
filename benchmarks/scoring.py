"""The loss's forward and backward passes scored as TRL lays a batch out, against
``kit.train.score_by_length`` at several pass sizes, as ratios on this machine.

    python benchmarks/scoring.py                      # the runbook's warm-up, 2 GRPO steps' batches
    python benchmarks/scoring.py --sft-steps 20 --steps 1 --rounds 1 --rows 8

Why: TRL scores a GRPO batch padded to its longest rollout, prompts on the left, with an
attention mask; ``score_by_length`` scores it in passes of rollouts of similar length,
right-padded, without a mask. How many rollouts a pass should hold (``kit.train.SCORING_ROWS``)
is a trade between padding (fewer rows, less of it) and the size of each matrix product (more
rows, better use of the cores), so it is measured here: the runbook's recipe trains a few GRPO
steps after its warm-up, every batch the loss saw is kept, and each is then scored, with a
gradient, by TRL's method and by the kit's at each pass size, in rounds that alternate the order.
Each figure is a median over rounds and batches, printed as a ratio to TRL's. No time is asserted
anywhere: ``tests/test_benchmarks.py`` runs this with tiny counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the checkout this file is in, not whichever one an editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Print and return each contender's median seconds as a ratio to TRL's."""
    parser = argparse.ArgumentParser(prog="python benchmarks/scoring.py")
    parser.add_argument("--game", default="catch")
    parser.add_argument("--sft-steps", type=int, default=None, help="default: the runbook's")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps whose batches are scored")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="*", default=[32, 16, 8, 4])
    parser.add_argument("--grpo", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/scoring"))
    args = parser.parse_args(argv)

    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOTrainer

    from kit.demo import _pairs
    from kit.models import tiny_model
    from kit.runs import pin_threads, quiet_libraries
    from kit.train import GRPO, SCORING_ROWS, SFT, SFT_STEPS, grpo, score_by_length, warm_up

    quiet_libraries()
    pin_threads(args.threads)
    model, tokenizer = tiny_model(seed=args.seed, tie_word_embeddings=False)
    steps = SFT_STEPS if args.sft_steps is None else args.sft_steps
    warm_up(model, tokenizer, args.game, steps, args.seed, args.out / "sft", **SFT)

    batches: list[tuple[Any, Any, int]] = []
    original = GRPOTrainer._compute_loss

    def keep(self: Any, model: Any, inputs: dict[str, Any]) -> Any:
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        batches.append((ids.clone(), mask.clone(), inputs["completion_ids"].size(1)))
        return original(self, model, inputs)

    GRPOTrainer._compute_loss = keep
    try:
        trainer, _ = grpo(
            model,
            tokenizer,
            args.game,
            args.steps,
            args.seed,
            args.out / "grpo",
            **{**GRPO, **_pairs(args.grpo)},
        )
    finally:
        GRPOTrainer._compute_loss = original

    contenders = {"TRL": type(trainer)._get_per_token_logps_and_entropies.__get__(trainer)}
    for rows in args.rows:
        for share in (True, False) if rows == SCORING_ROWS else (True,):
            del trainer._get_per_token_logps_and_entropies  # the instance's: TRL's method again
            score_by_length(trainer, rows=rows, share_prompts=share)
            name = f"kit, {rows} a pass" + ("" if share else ", every prompt read")
            contenders[name] = trainer._get_per_token_logps_and_entropies
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    model = trainer.model
    for round_ in range(args.rounds):
        names = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
        for ids, mask, keep_ in batches:
            for name in names:
                start = time.perf_counter()
                logps, entropies, _ = contenders[name](
                    model, ids, mask, keep_, compute_entropy=True
                )
                (logps.sum() + entropies.sum()).backward()
                seconds[name].append(time.perf_counter() - start)
                model.zero_grad()
    rows, widths = sum(len(ids) for ids, _, _ in batches), [ids.size(1) for ids, _, _ in batches]
    print(
        f"\n{len(batches)} batches of {rows // len(batches)} rollouts (padded widths "
        f"{min(widths)} to {max(widths)} tokens), {args.rounds} rounds, {args.threads} threads"
    )
    base = statistics.median(seconds["TRL"])
    ratios = {}
    for name, values in seconds.items():
        ratios[name] = statistics.median(values) / base
        print(f"{name:20} {statistics.median(values):7.2f} s   {ratios[name]:.2f}x TRL's")
    return ratios


if __name__ == "__main__":
    main()
