"""Guards around a training run: it stops at the first non-finite figure, and it never continues
from, or loads, a checkpoint that another model, game or recipe made.

Why the first: a trainer keeps stepping on a NaN loss to the end (an fp16 overflow on a T4 is the
usual cause: Qwen3 was trained in bf16), and what it saves afterwards is garbage that looks like
a checkpoint. :func:`non_finite_guard` raises :class:`NonFiniteError` at the first logged loss,
gradient norm or reward that is not finite, naming the step and the remedy, before that step's
checkpoint is saved.

Why the second: a rerun continues from the last checkpoint in its output folder (a lost Colab
runtime), and a notebook loads the checkpoint an earlier one saved. Neither folder says what made
it, so a rerun with another ``GAME`` resumed at ``max_steps`` and trained nothing, another
``MODEL`` failed on tensor shapes far from the cause, and notebook 4 evaluated whatever
``sft-model`` held. Now each folder carries a small JSON record (:data:`RUN_RECORD` in a
trainer's output folder, :data:`CHECKPOINT_RECORD` in a saved model), written before anything
is trained or saved, and a mismatch is refused with a message that names both sides.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUN_RECORD = "kit-run.json"  # in a trainer's output_dir: what its checkpoint-N folders train
CHECKPOINT_RECORD = "kit.json"  # in a model folder written by kit.models.save
# Logged figures that are never legitimately NaN. (A routed reward's per-environment mean is NaN
# in a batch with no row of that environment, so rewards/<name>/mean is not watched.)
WATCHED = ("loss", "grad_norm", "reward")
# The TrainingArguments fields that decide what a resumed run computes. Not among them: max_steps,
# so that a rerun may train further than the first one planned; and what the recipe sizes to the
# GPU (how a step's rows split into micro-batches, the precision), so that a run whose Colab
# runtime was recycled onto another GPU continues (the rows an optimiser step takes are recorded
# apart, as "rows_per_step").
TRAINING_FIELDS = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "num_generations",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "max_completion_length",
    "max_length",
    "max_tool_calling_iterations",
    "beta",
    "loss_type",
    "num_iterations",
    "seed",
)
# What a saved checkpoint must agree on with the notebook that loads it. Its steps, seed, LoRA
# and budget are recorded but may differ: notebook 2's SFT_STEPS only matter when it makes the
# checkpoint, adapters are merged into the saved weights, and LORA=None follows the GPU.
CHECKPOINT_FIELDS = ("model", "game", "phase")
# The config fields that make two models' weights interchangeable.
_ARCHITECTURE = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "tie_word_embeddings",
)


class NonFiniteError(FloatingPointError):
    """A training run logged a non-finite loss, gradient norm or reward."""


def non_finite_guard() -> Any:
    """A ``transformers.TrainerCallback`` that raises :class:`NonFiniteError` at the first logged
    :data:`WATCHED` figure that is NaN or infinite. ``kit.train.train`` adds it to every trainer.

    It acts on the log, which the Trainer writes before it saves that step's checkpoint, so the
    last checkpoint left is one from before the failure as long as a log falls on every saving
    step (``kit.train.train`` makes it so). With ``logging_steps`` above 1 a NaN step is caught at
    the next log (a logged loss is the mean of the steps since the last). In fp16 an infinite
    gradient norm on a step the loss scaler skipped is how the scaler calibrates, not a failure:
    it is let through."""
    from transformers import TrainerCallback

    class NonFiniteGuard(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            skipped = bool(getattr(kw.get("optimizer"), "step_was_skipped", False))
            bad = {
                key: value
                for key in WATCHED
                if isinstance(value := (logs or {}).get(key), (int, float))
                and not math.isfinite(value)
                and not (key == "grad_norm" and skipped)
            }
            if bad:
                figures = ", ".join(f"{key} {value}" for key, value in bad.items())
                precision = "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"
                raise NonFiniteError(
                    f"training stopped at step {state.global_step}: {figures} (training in "
                    f"{precision}). Nothing from this step on is saved; the last checkpoint in "
                    f"{args.output_dir}, if any, is from before it. Remedies: a lower "
                    "learning_rate; on a T4 (fp16), which overflows where a model trained in "
                    "bf16 does not, keep the recipe's cast_lm_head_to_fp32, or train in fp32 "
                    "(fp16=False) or on a GPU with bf16 (Ampere or later); a reward function "
                    "that returns inf or NaN is a bug in the reward."
                )

    return NonFiniteGuard()


def model_identity(model: Any) -> dict[str, Any]:
    """What makes ``model``'s weights what they are, for a record: its architecture's shape
    fields, its LoRA rank when wrapped in adapters, and its name when it has one (a hub id, or
    the ``model`` of the :data:`CHECKPOINT_RECORD` in the folder it was loaded from, else that
    folder's full path)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config
    identity: dict[str, Any] = {key: getattr(config, key, None) for key in _ARCHITECTURE}
    source = getattr(config, "_name_or_path", "") or ""
    if source and Path(source).is_dir():
        source = (read_record(source) or {}).get("model") or str(Path(source).resolve())
    identity["name"] = source or None
    peft = getattr(model, "peft_config", None)
    if isinstance(peft, Mapping) and peft:
        identity["lora_r"] = getattr(next(iter(peft.values())), "r", None)
    return identity


def run_record(trainer: Any, about: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record of what ``trainer`` trains: ``about`` (the game and phase, which the trainer
    does not know: ``kit.train.sft_trainer`` sets ``trainer.kit_about``, ``kit.train.grpo``
    passes it to ``train``), the model's identity, the :data:`TRAINING_FIELDS` of its arguments
    and the rows an optimiser step takes."""
    args = trainer.args
    recorded = {key: getattr(args, key) for key in TRAINING_FIELDS if hasattr(args, key)}
    recorded["rows_per_step"] = args.per_device_train_batch_size * args.gradient_accumulation_steps
    return {
        **dict(about or getattr(trainer, "kit_about", None) or {}),
        "model": model_identity(trainer.model),
        "args": recorded,
    }


def check_run_folder(trainer: Any, about: Mapping[str, Any] | None = None) -> None:
    """Before ``trainer`` trains (and may resume) in its output folder: refuse a folder whose
    :data:`RUN_RECORD` says another model, game or recipe made its checkpoints, or that holds
    checkpoints without a record; otherwise write the record. ``ValueError`` names both sides.
    A record left without checkpoints (a run that stopped before its first save) is replaced:
    there is nothing to continue from, so a rerun with a lower learning rate may start there.
    Nothing is checked or written for a trainer that saves no checkpoints."""
    if trainer.args.save_strategy == "no":
        return
    folder = Path(trainer.args.output_dir)
    record = json.loads(json.dumps(run_record(trainer, about), default=str))
    checkpoints = any(folder.glob("checkpoint-*"))
    stored = read_record(folder, RUN_RECORD)
    if stored is None and checkpoints:
        raise ValueError(
            f"{folder} holds checkpoints but no {RUN_RECORD} saying what trained them (another "
            "tool's, or an older kit's): a rerun would continue from them blindly. Move the "
            "folder away or give this run another output folder."
        )
    if stored is None or not checkpoints:
        folder.mkdir(parents=True, exist_ok=True)
        # written whole and renamed into place: every process of a multi-GPU run writes it
        partial = folder / f".{RUN_RECORD}.{os.getpid()}"
        partial.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        os.replace(partial, folder / RUN_RECORD)
        return
    changed = differences(stored, record)
    if changed:
        raise ValueError(
            f"{folder} holds checkpoints of another run, and this one would continue from them: "
            f"{'; '.join(changed)}. Give this run another output folder (or move that one away "
            "to start over)."
        )


def check_checkpoint(path: str | Path, expected: Mapping[str, Any]) -> None:
    """Refuse the saved checkpoint at ``path`` unless its :data:`CHECKPOINT_RECORD` agrees with
    ``expected`` on :data:`CHECKPOINT_FIELDS` (those ``expected`` names). ``ValueError`` names
    both sides, or says the checkpoint has no record."""
    stored = read_record(path)
    wanted = {key: expected[key] for key in CHECKPOINT_FIELDS if key in expected}
    if stored is None:
        raise ValueError(
            f"{path} has no {CHECKPOINT_RECORD} saying which model, game and recipe made it, so "
            f"it cannot be checked against this run ({_show(wanted)}). Move it away to have it "
            "made again, or save it with kit.models.save(..., record=...)."
        )
    changed = differences({key: stored.get(key) for key in wanted}, wanted)
    if changed:
        raise ValueError(
            f"{path} is a checkpoint of another run: {'; '.join(changed)}. Point this notebook "
            "at that run's settings, or move the checkpoint away to have it made again."
        )


def read_record(folder: str | Path, name: str = CHECKPOINT_RECORD) -> dict[str, Any] | None:
    """The JSON record ``name`` in ``folder``; None where there is none."""
    path = Path(folder) / name
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable record: {error}") from error
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not a record (a JSON object), got {type(value).__name__}")
    return value


def differences(saved: Mapping[str, Any], wanted: Mapping[str, Any], where: str = "") -> list[str]:
    """``"<key>: saved X, now Y"`` for each key whose values differ (nested mappings compared
    key by key), in key order."""
    found = []
    for key in sorted(set(saved) | set(wanted)):
        old, new = saved.get(key), wanted.get(key)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            found += differences(old, new, f"{where}{key}.")
        elif old != new:
            found.append(f"{where}{key}: saved {old!r}, now {new!r}")
    return found


def _show(record: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {value!r}" for key, value in record.items())
