"""How alike does a model see Catch's boards? The cosine similarity of the input embeddings of
the five rows that hold the ball, in each checkpoint given.

    python -m kit.demo --seed 0 --out runs/seed0                          # tied (the default)
    python -m kit.demo --seed 0 --no-tie-word-embeddings --out runs/untied0
    python examples/board_tokens.py runs/seed0 runs/untied0                  # seconds

The tiny model's tokenizer writes each board row as one token (``'...o.'``, the ball in column
3), so telling the ball's column is telling five embeddings apart, and the paddle starts in the
middle: only the first of them says LEFT for certain where the fourth says RIGHT. With tied
embeddings each of these rows is also an output row of the model, one it never writes, and the
loss of every position pushes all such rows down together; SFT then leaves them alike. The
script prints, per checkpoint (a ``kit.demo`` run folder's ``sft-model``, or any model folder;
and the random tiny model it started from, ``--seed``), the similarity matrix and the mean of
its off-diagonal entries (docs/results.md, "Does it learn?").
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kit.builtin.catch import CATCH_COLUMNS, CatchEnv


def ball_rows() -> list[str]:
    """The top row of a Catch board with the ball in each column, as the env draws it."""
    return [CatchEnv().reset(rows=5, ball_col=c).splitlines()[0] for c in range(CATCH_COLUMNS)]


def similarity(model: Any, tokenizer: Any) -> list[list[float]]:
    """The cosine similarity of the input embeddings of :func:`ball_rows`, which must each be
    one token of ``tokenizer`` (else telling them apart is not a matter of embeddings)."""
    import torch

    ids = []
    for row in ball_rows():
        tokens = tokenizer(row, add_special_tokens=False)["input_ids"]
        if len(tokens) != 1:
            raise ValueError(f"{row!r} is {len(tokens)} tokens of this tokenizer, not one")
        ids.append(tokens[0])
    with torch.no_grad():
        vectors = torch.nn.functional.normalize(model.get_input_embeddings().weight[ids], dim=1)
        return (vectors @ vectors.T).tolist()


def off_diagonal_mean(matrix: Sequence[Sequence[float]]) -> float:
    """The mean similarity of two different rows."""
    n = len(matrix)
    return sum(matrix[i][j] for i in range(n) for j in range(n) if i != j) / (n * (n - 1))


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    from kit.models import load, tiny_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path, help="run folders or model folders")
    parser.add_argument("--seed", type=int, default=0, help="the random tiny model's seed")
    args = parser.parse_args(argv)
    models = {f"random tiny model (seed {args.seed})": tiny_model(seed=args.seed)}
    for path in args.checkpoints:
        folder = path / "sft-model" if (path / "sft-model").is_dir() else path
        models[str(folder)] = load(folder)
    rows = ball_rows()
    means = {}
    for name, (model, tokenizer) in models.items():
        matrix = similarity(model, tokenizer)
        means[name] = off_diagonal_mean(matrix)
        tied = model.config.tie_word_embeddings
        print(f"{name} ({'tied' if tied else 'untied'} embeddings)")
        print("         " + " ".join(f"{row:>6}" for row in rows))
        for row, values in zip(rows, matrix, strict=True):
            print(f"  {row:>6} " + " ".join(f"{v:6.2f}" for v in values))
        print(f"  mean of two different rows: {means[name]:.2f}\n", flush=True)
    return means


if __name__ == "__main__":
    main()
