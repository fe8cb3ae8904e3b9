"""Sampling settings as ``GRPOTrainer`` applies them, for the tests of ``kit.rollout`` and
``kit.evaluate``: a tiny model whose own generation config disagrees with GRPO's defaults, the
``GenerationConfig`` TRL builds from ``GRPOConfig``, and a way to see the logits processors
``generate`` really applies (no part of ``generate`` is replaced)."""

from __future__ import annotations

from typing import Any

SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
MODEL_MIN_P = 0.02  # qwen_like_model's own min_p
# Non-default values of every sampling setting, as GRPOConfig fields (and rollout keywords).
EXPLICIT = dict(temperature=0.7, top_p=0.9, top_k=5, min_p=0.05, repetition_penalty=1.1)


def qwen_like_model() -> tuple[Any, Any]:
    """A fresh tiny model whose generation config samples as Qwen3's ships (T 0.6, top_k 20,
    top_p 0.95), with a repetition penalty and a ``min_p`` besides: whatever sampling setting a
    ``generate`` call leaves unset, transformers fills from it. GRPO leaves ``min_p`` unset by
    default (None), so that one the model's config does decide, under GRPO too."""
    from kit.models import tiny_model

    model, tokenizer = tiny_model()
    model.generation_config.update(
        do_sample=True,
        temperature=0.6,
        top_k=20,
        top_p=0.95,
        repetition_penalty=1.3,
        min_p=MODEL_MIN_P,
    )
    return model, tokenizer


def grpo_generation_config(tokenizer: Any, max_new_tokens: int, **fields: Any) -> Any:
    """The ``GenerationConfig`` ``GRPOTrainer`` samples with on the transformers path (TRL 1.16,
    ``grpo_trainer.py``), built from ``GRPOConfig``'s own defaults with ``fields`` overriding
    them, as ``GRPOConfig(**fields)`` would."""
    import dataclasses

    from transformers import GenerationConfig
    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    args = {name: defaults[name] for name in (*SAMPLING, "cache_implementation")} | fields
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id],
        **args,
        disable_compile=True,
    )


def record_processors(model: Any) -> list[list[tuple]]:
    """Swap ``model``'s class for a subclass that records, for every ``generate`` call, the
    logits processors transformers built: what the sampling actually applies, after merging the
    call's generation config with the model's own. Nothing of ``generate`` is replaced."""
    seen: list[list[tuple]] = []

    class Recording(type(model)):
        def _get_logits_processor(self, generation_config, *args, **kwargs):
            processors = super()._get_logits_processor(generation_config, *args, **kwargs)
            seen.append(describe_processors(processors))
            return processors

    model.__class__ = Recording
    return seen


def describe_processors(processors: Any) -> list[tuple]:
    """Each processor's class and scalar settings (``TopKLogitsWarper``'s ``top_k``, ...)."""
    return [
        (
            type(p).__name__,
            sorted((k, v) for k, v in vars(p).items() if isinstance(v, (int, float, str))),
        )
        for p in processors
    ]
