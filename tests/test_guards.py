"""kit.guards: a run stops at its first non-finite figure, and never continues from (or loads)
what another model, game or recipe made. Each test trains the real tiny model for a step or two
with the real trainers, the way ``kit.train`` trains every phase."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("trl")

from kit.guards import (  # noqa: E402
    CHECKPOINT_RECORD,
    RUN_RECORD,
    NonFiniteError,
    check_checkpoint,
    differences,
    non_finite_guard,
)
from kit.models import save, tiny_model  # noqa: E402
from kit.train import checkpoint, checkpoint_record, recipe, sft_trainer, train  # noqa: E402

SAVING = {"save_strategy": "steps", "save_steps": 1, "logging_steps": 1}


def _sft(folder, game="catch", steps=2, hidden_size=128, **overrides):
    model, tokenizer = tiny_model(hidden_size=hidden_size, seed=0)
    return sft_trainer(model, tokenizer, game, steps, 0, folder, **{**SAVING, **overrides})


def test_a_nan_loss_stops_sft_at_its_first_step_before_a_checkpoint_is_saved(tmp_path):
    trainer = _sft(tmp_path / "sft", steps=3)
    with torch.no_grad():
        trainer.model.model.norm.weight.fill_(float("nan"))  # every logit NaN from step 1
    with pytest.raises(NonFiniteError, match=r"step 1: loss nan.*learning_rate") as error:
        train(trainer)
    assert "fp32" in str(error.value)  # the precision it trained in, for the remedy
    assert trainer.state.global_step == 1
    assert not list((tmp_path / "sft").glob("checkpoint-*"))  # nothing saved from the NaN step


def test_an_infinite_reward_stops_grpo(tmp_path):
    from trl import GRPOTrainer

    from kit.envs import CatchEnv
    from kit.tasks import task_dataset
    from kit.train import grpo_config

    def infinite(completions, **_):
        return [float("inf")] * len(completions)

    model, tokenizer = tiny_model(seed=0)
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(
            str(tmp_path / "grpo"),
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=64,
        ),
        reward_funcs=infinite,
        train_dataset=task_dataset("catch", "train", num_tasks=4, seed=0),
        processing_class=tokenizer,
        environment_factory=CatchEnv,
    )
    with pytest.raises(NonFiniteError, match=r"step 1: .*reward inf"):
        train(trainer, {"game": "catch", "phase": "grpo"})


@pytest.mark.slow
def test_a_rerun_continues_only_from_checkpoints_of_the_same_model_game_and_recipe(
    tmp_path, capsys
):
    folder = tmp_path / "sft"
    first = _sft(folder)
    train(first)
    assert sorted(p.name for p in folder.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    record = json.loads((folder / RUN_RECORD).read_text())
    assert record["game"] == ["catch"] and record["phase"] == "sft"
    assert record["model"]["hidden_size"] == 128 and record["args"]["learning_rate"] == 5e-4

    # another game: it would resume at max_steps and train nothing
    with pytest.raises(ValueError, match=r"game: saved \['catch'\], now \['wordle'\]"):
        train(_sft(folder, game="wordle"))
    # another model: it would fail on tensor shapes inside transformers
    with pytest.raises(ValueError, match=r"model.hidden_size: saved 128, now 64"):
        train(_sft(folder, hidden_size=64))
    # another recipe
    with pytest.raises(ValueError, match=r"args.learning_rate: saved 0.0005, now 0.001"):
        train(_sft(folder, learning_rate=1e-3))
    # the same run, asked for more steps, continues
    capsys.readouterr()
    again = _sft(folder, steps=3)
    train(again)
    assert "resuming from" in capsys.readouterr().out
    assert again.state.global_step == 3


def test_a_folder_of_checkpoints_without_a_record_is_refused(tmp_path):
    (tmp_path / "sft" / "checkpoint-5").mkdir(parents=True)
    with pytest.raises(ValueError, match=f"no {RUN_RECORD}"):
        train(_sft(tmp_path / "sft"))


def test_checkpoint_refuses_a_saved_model_of_another_game_or_model_and_names_both(tmp_path):
    tiny = recipe("tiny", "catch")
    made = []

    def make():
        made.append(1)
        return tiny_model(seed=1)

    path = tmp_path / "sft-model"
    checkpoint(path, make, checkpoint_record(tiny, "sft", 5, 0))
    stored = json.loads((path / CHECKPOINT_RECORD).read_text())
    assert stored["game"] == "catch" and stored["model"] == "tiny" and stored["steps"] == 5
    # the same model and game, other steps: loaded (the steps only matter when making it)
    checkpoint(path, make, checkpoint_record(tiny, "sft", 500, 0))
    assert made == [1]
    wordle = recipe("tiny", "wordle")
    with pytest.raises(ValueError, match=r"game: saved 'catch', now 'wordle'"):
        checkpoint(path, make, checkpoint_record(wordle, "sft", 5, 0))
    with pytest.raises(ValueError, match=r"phase: saved 'sft', now 'grpo'"):
        checkpoint(path, make, checkpoint_record(tiny, "grpo", 5, 0))
    with pytest.raises(ValueError, match=r"model: saved 'tiny', now 'Qwen/Qwen3-0.6B'"):
        check_checkpoint(path, {**stored, "model": "Qwen/Qwen3-0.6B"})
    assert made == [1]


def test_a_checkpoint_saved_without_a_record_is_refused_when_one_is_expected(tmp_path):
    path = save(*tiny_model(seed=1), tmp_path / "old")
    with pytest.raises(ValueError, match=f"no {CHECKPOINT_RECORD}"):
        checkpoint(path, tiny_model, {"model": "tiny", "game": "catch"})


def test_differences_name_each_changed_key_nested():
    saved = {"game": "catch", "model": {"hidden_size": 128, "name": None}}
    now = {"game": "catch", "model": {"hidden_size": 64, "name": None}, "phase": "sft"}
    assert differences(saved, now) == [
        "model.hidden_size: saved 128, now 64",
        "phase: saved None, now 'sft'",
    ]


@pytest.mark.slow
def test_a_run_that_stopped_before_its_first_save_may_rerun_with_another_recipe(tmp_path):
    folder = tmp_path / "sft"
    first = _sft(folder, steps=3, save_steps=2)
    with torch.no_grad():
        first.model.model.norm.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteError):
        train(first)
    assert not list(folder.glob("checkpoint-*"))  # stopped at step 1, before any save
    again = _sft(folder, steps=1, learning_rate=1e-4)  # the error's remedy: a lower rate
    train(again)
    assert json.loads((folder / RUN_RECORD).read_text())["args"]["learning_rate"] == 1e-4


def test_an_fp16_step_the_loss_scaler_skipped_is_not_a_failure(tmp_path):
    from types import SimpleNamespace

    guard = non_finite_guard()
    args = SimpleNamespace(fp16=True, bf16=False, output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=7)
    skipped = SimpleNamespace(step_was_skipped=True)
    logs = {"loss": 2.5, "grad_norm": float("inf")}
    guard.on_log(args, state, None, logs=logs, optimizer=skipped)  # the scaler calibrating
    with pytest.raises(NonFiniteError, match=r"step 7: grad_norm inf \(training in fp16\)"):
        guard.on_log(
            args, state, None, logs=logs, optimizer=SimpleNamespace(step_was_skipped=False)
        )
    with pytest.raises(NonFiniteError, match="loss nan"):
        guard.on_log(args, state, None, logs={"loss": float("nan")}, optimizer=skipped)


def test_a_saving_trainer_logs_on_every_saving_step(tmp_path):
    trainer = _sft(tmp_path / "sft", steps=2, save_steps=2, logging_steps=3)
    train(trainer)
    assert trainer.args.logging_steps == 1  # gcd(2, 3): the guard sees every step that is saved


def test_a_failed_lora_run_leaves_the_callers_model_without_adapters(tmp_path):
    from kit.train import lora_config

    model, tokenizer = tiny_model(seed=0)
    trainer = sft_trainer(model, tokenizer, "catch", 2, 0, tmp_path / "sft", lora_config())
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteError):
        train(trainer)
    assert not [name for name, _ in model.named_modules() if "lora_" in name]


def test_a_local_model_without_a_record_is_named_by_its_full_path(tmp_path):
    from kit.guards import model_identity
    from kit.models import load

    path = save(*tiny_model(seed=1), tmp_path / "mine")
    loaded, _ = load(path, device_map="cpu")
    assert model_identity(loaded)["name"] == str(path.resolve())
    recorded = save(*tiny_model(seed=1), tmp_path / "kept", record={"model": "tiny"})
    assert model_identity(load(recorded, device_map="cpu")[0])["name"] == "tiny"
