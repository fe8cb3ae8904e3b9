"""The machine a run trains on, and what a model needs of it: the facts ``kit.train.recipe``
decides from.

Why a module: whether to train in bf16 or fp16, whether a model fits fully or only with LoRA,
and where its weights go are decided by the accelerator, not by the notebook; writing them once,
from measured facts, is what makes the same notebook right on a laptop CPU, a Colab T4 and an
A100. Facts it rests on (NOTES §8): a T4 (compute capability 7.5) reports bf16 as supported but
only emulates it, slowly, so it gets fp16; Ampere (8.0) and later get bf16; full fine-tuning
with AdamW holds about 16 bytes per parameter (fp32 weights, gradients and two moments), LoRA
about the weights alone in 16 bits.

A model's parameter count comes from its ``config.json`` alone (:func:`count_parameters` builds
it on PyTorch's ``meta`` device, which allocates nothing), so a recipe is decided before any
weight is loaded, and a hub model's memory needs no weight download.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
# Bytes per parameter of full fine-tuning with AdamW in mixed precision: fp32 master weights (4),
# fp32 gradients (4), Adam's two fp32 moments (8). Activations come on top.
FULL_BYTES_PER_PARAMETER = 16
# The share of an accelerator's memory that full fine-tuning's fixed part may take; the rest is
# left to activations, the generation's KV cache and (colocated) vLLM. Past it, the recipe
# trains LoRA adapters instead.
FULL_SHARE = 0.5


@dataclass(frozen=True)
class Device:
    """An accelerator (or the CPU), as a training recipe needs to know it."""

    name: str  # "cpu", or the GPU's name ("Tesla T4", "NVIDIA A100-SXM4-80GB")
    memory_gib: float = 0.0  # the GPU's memory; 0 on the CPU
    capability: tuple[int, int] | None = None  # CUDA compute capability; None on the CPU

    @property
    def gpu(self) -> bool:
        return self.capability is not None

    @property
    def bf16(self) -> bool:
        """Native bf16 (Ampere, 8.0, and later); a T4 (7.5) only emulates it."""
        return self.capability is not None and self.capability >= (8, 0)

    @property
    def fp16(self) -> bool:
        """Mixed precision in fp16: a GPU without native bf16."""
        return self.gpu and not self.bf16

    def place(self) -> str:
        """Where a process's model goes: its own GPU (``LOCAL_RANK`` under ``accelerate``)."""
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if self.gpu else "cpu"


CPU = Device("cpu")
# The GPUs the README's profile table names, as ``torch.cuda`` reports them.
T4 = Device("Tesla T4", 15.0, (7, 5))
L4 = Device("NVIDIA L4", 22.0, (8, 9))
A100_40 = Device("NVIDIA A100-SXM4-40GB", 39.4, (8, 0))
A100_80 = Device("NVIDIA A100-SXM4-80GB", 79.1, (8, 0))


# Published architectures (each model's config.json on the hub), so that a model's memory is known
# without downloading it: ``count_parameters(ARCHITECTURES[name])``.
_QWEN3 = {
    "vocab_size": 151936,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
}
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": {
        **_QWEN3,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen3-1.7B": {
        **_QWEN3,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen3-4B": {
        **_QWEN3,
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen3-8B": {
        **_QWEN3,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "tie_word_embeddings": False,
    },
}


def architecture(name: str) -> Any:
    """The ``PretrainedConfig`` of a model in :data:`ARCHITECTURES`, built offline."""
    from transformers import AutoConfig

    if name not in ARCHITECTURES:
        raise ValueError(f"no published architecture for {name!r}; known: {sorted(ARCHITECTURES)}")
    values = dict(ARCHITECTURES[name])
    return AutoConfig.for_model(values.pop("model_type"), **values)


def detect() -> Device:
    """This process's accelerator: its GPU (``LOCAL_RANK``'s) if CUDA has one, else the CPU."""
    import torch

    if not torch.cuda.is_available():
        return CPU
    index = int(os.environ.get("LOCAL_RANK", 0))
    properties = torch.cuda.get_device_properties(index)
    return Device(
        properties.name,
        round(properties.total_memory / GIB, 1),
        (properties.major, properties.minor),
    )


def count_parameters(config: Any) -> int:
    """The parameter count of a causal LM with ``config`` (a ``PretrainedConfig``, a hub id or a
    local folder), built on the ``meta`` device: exact, and nothing is allocated or downloaded
    but the config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(config, (str, Path)):
        config = AutoConfig.from_pretrained(str(config))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def fits_full(parameters: int, device: Device) -> bool:
    """Whether full fine-tuning's fixed memory (:data:`FULL_BYTES_PER_PARAMETER` a parameter)
    takes at most :data:`FULL_SHARE` of ``device``'s memory. Always True on the CPU, whose
    memory the recipe does not police."""
    if not device.gpu:
        return True
    return parameters * FULL_BYTES_PER_PARAMETER <= FULL_SHARE * device.memory_gib * GIB


def lora_parameters(config: Any, rank: int) -> int:
    """The parameters LoRA of ``rank`` adds on every linear layer but the output head, as
    ``target_modules="all-linear"`` places it: ``rank * (in + out)`` a layer."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    return sum(
        rank * (module.in_features + module.out_features)
        for module in model.modules()
        if isinstance(module, torch.nn.Linear) and module is not head
    )


def profile_table(
    models: tuple[str, ...] = tuple(ARCHITECTURES),
    devices: tuple[Device, ...] = (T4, L4, A100_40, A100_80),
) -> str:
    """A markdown table: for each GPU and model, what ``kit.train.recipe`` chooses and the
    memory its weights, gradients and optimiser state take. Estimated from the published
    architecture (exact parameter counts, 16 bytes a parameter for full fine-tuning; 2 for
    16-bit base weights plus 16 an adapter parameter for LoRA); activations, the KV cache and
    vLLM's share come on top and are not in it. ``python -m kit.hardware`` prints it."""
    from kit.train import LORA

    lines = [
        "| GPU | model | recipe | precision | weights + optimiser (GiB, estimated) | fits |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for device in devices:
        for name in models:
            config = architecture(name)
            parameters = count_parameters(config)
            if fits_full(parameters, device):
                mode, needed = "full", parameters * FULL_BYTES_PER_PARAMETER
            else:
                adapters = lora_parameters(config, LORA["r"])
                mode = f"LoRA r={LORA['r']}"
                needed = parameters * 2 + adapters * FULL_BYTES_PER_PARAMETER
            precision = "bf16" if device.bf16 else "fp16"
            # past 90% nothing is left for activations: a 4-bit base model (QLoRA) would be needed
            fits = "yes" if needed <= 0.9 * device.memory_gib * GIB else "no: needs 4-bit weights"
            lines.append(
                f"| {device.name} ({device.memory_gib:g} GiB) | {name} | {mode} | {precision} "
                f"| {needed / GIB:.1f} | {fits} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(profile_table())
