"""Episodes per second of one model played two ways: in-process (``kit.evaluate`` with the model)
and through ``transformers serve`` on this machine (``kit.endpoint``), on the same Catch tasks.

    python benchmarks/endpoint.py [--seconds 60] [--rounds 3] [--sft-steps 300] [--concurrency 4]
    python benchmarks/endpoint.py --model runs/demo/RUN/sft-model

Why: an endpoint evaluation pays HTTP, JSON and the server's chat template on every turn, and
gains a server that batches what it is sent at once. On a CPU both sides generate with the same
torch, so the ratio says what the transport costs; on a GPU server (vLLM) the same command says
what is gained. The model (default: the tiny model after ``--sft-steps`` SFT steps on Catch, so
that it plays whole games) is served from a folder and loaded from the same folder in-process.
Each batch plays the same 4 held-out tasks x 2 episodes at the runbook's temperature, so both
contenders play the same kind of episode; rates alternate in rounds (``harness``). No speed is
asserted anywhere; ``tests/test_benchmarks.py`` runs it with tiny counts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import harness
from harness import Contender

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kit


def run(args: argparse.Namespace) -> harness.Result:
    from kit.defaults import GRPO
    from kit.endpoint import Endpoint, serve
    from kit.evaluate import evaluate
    from kit.models import load, save, tiny_model
    from kit.runs import pin_threads, quiet_libraries
    from kit.train import warm_up

    quiet_libraries()
    pin_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.model
        if folder is None:
            model, tokenizer = tiny_model(seed=0)
            warm_up(model, tokenizer, ["catch"], args.sft_steps, 0, Path(scratch) / "sft")
            folder = Path(scratch) / "model"
            save(model, tokenizer, folder)
        model, tokenizer = load(folder)
        settings = {
            "split": "eval",
            "num_tasks": 4,
            "num_generations": 2,
            "greedy": False,
            "temperature": GRPO["temperature"],
        }

        def played(player: object) -> harness.Batch:
            def batch() -> int:
                result = evaluate(player, "catch", tokenizer, **settings)["catch"]
                return result.episodes  # failures are not episodes played

            return batch

        with serve(folder) as url:
            endpoint = Endpoint(url, str(folder), concurrency=args.concurrency)
            return harness.compare(
                "catch",
                f"4 held-out tasks x 2 episodes, T={GRPO['temperature']}",
                "episodes/s",
                [Contender("in-process", played(model)), Contender("endpoint", played(endpoint))],
                args.seconds,
                args.rounds,
                reference="in-process",
                notes=[
                    f"model: {args.model or f'tiny, {args.sft_steps} SFT steps on Catch'}; "
                    f"{args.threads} torch threads in-process, the server's own in its process; "
                    f"endpoint concurrency {args.concurrency}"
                ],
            )


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.set_defaults(seconds=60.0, rounds=3)
    parser.add_argument("--model", type=Path, help="a saved model's folder (default: tiny + SFT)")
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT steps of the tiny model")
    parser.add_argument("--concurrency", type=int, default=4, help="endpoint episodes at once")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in-process")
    args = parser.parse_args(argv)
    harness.header(args.seconds, args.rounds)
    harness.report([run(args)])


if __name__ == "__main__":
    main()
