"""Trainer configs that work the same on a laptop CPU and a Colab GPU.

TRL's configs default to bf16 and to logging integrations found on the machine; on a CPU the
first fails and the second may try the network. These helpers pick safe defaults for the
device at hand and leave every field overridable, so a notebook states only what it studies.
"""

from __future__ import annotations

import os
from typing import Any


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _device_defaults() -> dict[str, Any]:
    gpu = _on_gpu()
    return {
        "bf16": gpu,
        "use_cpu": not gpu,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "seed": 0,
        "dataloader_num_workers": 0,
    }


def grpo_config(output_dir: str, **overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` with device-appropriate defaults; ``overrides`` win."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig

    defaults = {
        **_device_defaults(),
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 256,
        "max_tool_calling_iterations": 8,
        "learning_rate": 1e-5,
    }
    return GRPOConfig(output_dir=output_dir, **{**defaults, **overrides})


def sft_config(output_dir: str, **overrides: Any) -> Any:
    """A ``trl.SFTConfig`` that trains only the assistant turns of tool-call conversations."""
    from trl import SFTConfig

    defaults = {
        **_device_defaults(),
        "per_device_train_batch_size": 4,
        "assistant_only_loss": True,
        "learning_rate": 1e-3,
    }
    return SFTConfig(output_dir=output_dir, **{**defaults, **overrides})
