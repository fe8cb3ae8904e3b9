"""``examples/board_tokens.py``: the similarity of the ball rows' embeddings, read from the
checkpoint itself, each row one token; refused where a row is not."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from kit.models import save, tiny_model


@pytest.fixture(scope="module")
def example():
    return importlib.import_module("examples.board_tokens")


def test_the_rows_are_the_boards_the_env_draws_one_token_each(example) -> None:
    rows = example.ball_rows()
    assert rows == ["o....", ".o...", "..o..", "...o.", "....o"]
    _, tokenizer = tiny_model()
    assert all(len(tokenizer(row, add_special_tokens=False)["input_ids"]) == 1 for row in rows)


def test_the_similarity_is_the_embeddings_cosine(example, tmp_path, capsys) -> None:
    model, tokenizer = tiny_model(seed=1)
    matrix = example.similarity(model, tokenizer)
    ids = [tokenizer.convert_tokens_to_ids(row) for row in example.ball_rows()]
    weight = model.get_input_embeddings().weight.detach()
    for i, a in enumerate(ids):
        assert matrix[i][i] == pytest.approx(1.0, abs=1e-6)
        for j, b in enumerate(ids):
            cosine = torch.nn.functional.cosine_similarity(weight[a], weight[b], dim=0)
            assert matrix[i][j] == pytest.approx(cosine.item(), abs=1e-6)
    # rows made alike in a saved checkpoint read as alike, through a run folder's sft-model
    with torch.no_grad():
        model.get_input_embeddings().weight[ids] = weight[ids[0]].clone()
    save(model, tokenizer, tmp_path / "run" / "sft-model")
    means = example.main([str(tmp_path / "run"), "--seed", "1"])
    assert means[str(tmp_path / "run" / "sft-model")] == pytest.approx(1.0, abs=1e-6)
    random = means["random tiny model (seed 1)"]
    assert random == pytest.approx(
        example.off_diagonal_mean(example.similarity(*tiny_model(seed=1)))
    )
    assert math.isfinite(random) and random < 0.5  # random vectors: far from alike
    assert "mean of two different rows: 1.00" in capsys.readouterr().out


def test_a_tokenizer_that_splits_a_row_is_refused(example) -> None:
    model, _ = tiny_model()
    with pytest.raises(ValueError, match=r"'o\.\.\.\.' is \d+ tokens of this tokenizer, not one"):
        example.similarity(model, _CharacterTokenizer())


class _CharacterTokenizer:
    """One id per character: every board row is five tokens."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) % 64 for c in text]}
