"""kit.train's helpers for the notebooks: checkpoints handed on, and a run's logged figures."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("trl")

from kit.models import tiny_model  # noqa: E402
from kit.train import checkpoint  # noqa: E402
from kit.viz import log_table, plot_log  # noqa: E402


def _logits(model, tokenizer):
    ids = torch.tensor([tokenizer.encode("[crane]", add_special_tokens=False)])
    with torch.no_grad():
        return model(ids).logits


def test_checkpoint_makes_and_saves_once_then_loads(tmp_path, capsys):
    made = []

    def make():
        made.append(1)
        return tiny_model(seed=2)

    path = tmp_path / "runs" / "sft-model"
    model, tokenizer = checkpoint(path, make)
    assert made == [1] and (path / "model.safetensors").exists()
    assert capsys.readouterr().out == (
        f"no checkpoint at {path} yet: making it\nsaved the checkpoint {path}\n"
    )
    loaded, loaded_tokenizer = checkpoint(path, make, dtype=torch.float32)
    assert made == [1]  # loaded, not made again
    assert capsys.readouterr().out == f"loaded the checkpoint {path}\n"
    assert torch.allclose(_logits(model, tokenizer), _logits(loaded, loaded_tokenizer))
    empty = tmp_path / "empty"
    empty.mkdir()
    checkpoint(empty, make)  # an empty folder is filled
    assert made == [1, 1]


def test_checkpoint_refuses_a_folder_that_is_no_checkpoint_before_training(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")

    def make():
        raise AssertionError("trained although the result could not be saved")

    with pytest.raises(ValueError, match="neither a checkpoint .* nor an empty folder"):
        checkpoint(folder, make)
    file = tmp_path / "model.bin"
    file.write_text("x")
    with pytest.raises(ValueError, match="neither a checkpoint"):
        checkpoint(file, make)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


# A GRPO log as TRL writes it: a training entry per step, then the run's summary entry.
LOG = [
    {"step": s, "loss": 0.1, "reward": float(s), "rewards/catch/mean": r}
    for s, r in zip(range(1, 7), [1.0, math.nan, 3.0, math.nan, 5.0, 7.0], strict=True)
] + [{"step": 6, "train_runtime": 12.0}]


def test_log_table_averages_each_part_of_the_run_and_skips_nan():
    frame = log_table(LOG, ["reward", "rewards/catch/mean"], parts=3)
    assert list(frame.index) == ["1-2", "3-4", "5-6"]
    assert list(frame["reward"]) == [1.5, 3.5, 5.5]
    assert list(frame["rewards/catch/mean"]) == [1.0, 3.0, 6.0]
    assert list(log_table(LOG, ["reward"], parts=100).index) == [
        str(s) + "-" + str(s) for s in range(1, 7)
    ]
    with pytest.raises(ValueError, match=r"never logged: \['entropy'\]; the log has"):
        log_table(LOG, ["reward", "entropy"])
    with pytest.raises(ValueError, match="no training step"):
        log_table(LOG[-1:], ["reward"])


def test_plot_log_draws_each_figure_and_its_trailing_mean():
    figure = plot_log(LOG, ["reward", "rewards/catch/mean", "loss", "reward"], window=2)
    shown = [axes for axes in figure.axes if axes.get_visible()]
    assert [axes.get_title() for axes in shown] == [
        "reward",
        "rewards/catch/mean",
        "loss",
        "reward",
    ]
    dots, trend = shown[1].lines
    assert list(dots.get_xdata()) == [1, 3, 5, 6]  # NaN steps skipped, not drawn as 0
    assert list(trend.get_ydata()) == [1.0, 2.0, 4.0, 6.0]
    assert figure._repr_png_().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="window must be"):
        plot_log(LOG, ["reward"], window=0)


@pytest.mark.slow
def test_grpo_with_where_trains_only_on_the_chosen_tasks(tmp_path):
    from kit.train import GRPO, grpo

    model, tokenizer = tiny_model(seed=1)
    trainer, capture = grpo(
        model, tokenizer, "catch", 2, 0, tmp_path, where={"ball_col": 0}, max_completion_length=32
    )
    batch, group = GRPO["per_device_train_batch_size"], GRPO["num_generations"]
    assert set(trainer.train_dataset["ball_col"]) == {0}
    # the tasks of 2 steps, as without where
    assert len(trainer.train_dataset) == 2 * batch // group
    tasks = [t.task for step in capture.batches for t in step.trajectories]
    assert len(tasks) == 2 * batch and all(task["ball_col"] == 0 for task in tasks)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_grpo_trains_with_the_recipes_checkpointing_whatever_sft_left_on(tmp_path, checkpointing):
    from kit.train import _checkpointing, grpo, warm_up

    model, tokenizer = tiny_model(seed=1)
    # on, as TRL's SFTConfig has it by default; a Trainer never turns it off
    warm_up(model, tokenizer, "catch", 1, 0, tmp_path / "sft", gradient_checkpointing=True)
    assert _checkpointing(model)
    small = {"per_device_train_batch_size": 4, "num_generations": 2, "max_completion_length": 32}
    trainer, _ = grpo(
        model, tokenizer, "catch", 1, 0, tmp_path, gradient_checkpointing=checkpointing, **small
    )
    assert trainer.args.gradient_checkpointing is checkpointing
    assert _checkpointing(model) is checkpointing


@pytest.mark.slow
def test_the_notebooks_fallback_makes_each_missing_checkpoint_once_then_loads_it(tmp_path, capsys):
    """Notebooks 2 and 4 run alone: ``grpo_checkpoint`` makes the SFT checkpoint, GRPO-trains
    from it and saves both, each with its record; a later call loads, and another game's run is
    refused before anything trains."""
    import json

    from kit.guards import CHECKPOINT_RECORD
    from kit.train import grpo_checkpoint, recipe, sft_checkpoint

    catch = recipe("tiny", "catch", max_completion_length=32)
    folder, run = tmp_path / "checkpoints", tmp_path / "04_evaluation"
    grpo_checkpoint(catch, folder, 2, 1, 0, run)
    out = capsys.readouterr().out
    for name in ("grpo-model", "sft-model"):
        assert f"no checkpoint at {folder / name} yet: making it" in out
        assert f"saved the checkpoint {folder / name}" in out
    records = {
        n: json.loads((folder / n / CHECKPOINT_RECORD).read_text())
        for n in ("sft-model", "grpo-model")
    }
    assert (records["sft-model"]["phase"], records["sft-model"]["steps"]) == ("sft", 2)
    assert (records["grpo-model"]["phase"], records["grpo-model"]["steps"]) == ("grpo", 1)
    assert (run / "grpo").is_dir()  # the GRPO run's trainer files, apart from the checkpoints
    sft_checkpoint(catch, folder, 2, 0, tmp_path / "elsewhere")
    grpo_checkpoint(catch, folder, 2, 1, 0, tmp_path / "elsewhere")
    assert capsys.readouterr().out == (
        f"loaded the checkpoint {folder / 'sft-model'}\nloaded the checkpoint {folder / 'grpo-model'}\n"
    )
    assert not (tmp_path / "elsewhere").exists()  # nothing trained
    wordle = recipe("tiny", "wordle", max_completion_length=32)
    with pytest.raises(ValueError, match=r"game: saved 'catch', now 'wordle'"):
        grpo_checkpoint(wordle, folder, 2, 1, 0, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
