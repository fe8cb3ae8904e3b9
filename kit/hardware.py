"""The machine a run trains on: its accelerator or the CPU, as ``kit.train.recipe`` reads it.

Why a module: whether to train in bf16 or fp16, and where the weights go, are decided by the
accelerator, not by the notebook; writing them once, from measured facts, is what makes the same
notebook right on a laptop CPU, a Colab T4 and an A100. Facts it rests on (NOTES §8): a T4
(compute capability 7.5) reports bf16 as supported but only emulates it, slowly, so it gets
fp16; Ampere (8.0) and later get bf16; a CPU with AVX512-BF16 or AMX multiplies bf16 natively.
What a model needs of the machine (parameters, activations, KV cache, the batch that fits) is
``kit.memory``.

Where the ``vllm`` extra was installed on a machine without CUDA, transformers cannot import its
models at all: :func:`vision_stack_check` turns that failure into one that names the fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Device:
    """An accelerator (or the CPU), as a training recipe needs to know it."""

    name: str  # "cpu", or the GPU's name ("Tesla T4", "NVIDIA A100-SXM4-80GB")
    memory_gib: float = 0.0  # the GPU's memory; 0 on the CPU
    capability: tuple[int, int] | None = None  # CUDA compute capability; None on the CPU
    # a CPU that multiplies bf16 natively (AVX512-BF16 or AMX): there a bf16 forward pass of
    # SmolLM2-135M's shape ran 2.2 times as fast as an fp32 one (benchmarks/precision.py, 2
    # cores of an AMD EPYC); a CPU without them keeps fp32 (bf16 there is not measured)
    cpu_bf16: bool = False

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
# The GPUs docs/gpu.md's profile table names, as ``torch.cuda`` reports them.
T4 = Device("Tesla T4", 15.0, (7, 5))
L4 = Device("NVIDIA L4", 22.0, (8, 9))
A100_40 = Device("NVIDIA A100-SXM4-40GB", 39.4, (8, 0))
A100_80 = Device("NVIDIA A100-SXM4-80GB", 79.1, (8, 0))


def vllm_installed() -> bool:
    """Whether vLLM can be imported here (found, not imported: importing it takes seconds and
    initialises CUDA). ``kit.train.recipe(vllm=None)`` colocates it where this is True on a
    GPU; ``recipe(vllm=True)`` decides without asking."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def detect() -> Device:
    """This process's accelerator: its GPU (``LOCAL_RANK``'s) if CUDA has one, else the CPU."""
    import torch

    if not torch.cuda.is_available():
        return Device("cpu", cpu_bf16=_native_cpu_bf16())
    index = int(os.environ.get("LOCAL_RANK", 0))
    properties = torch.cuda.get_device_properties(index)
    return Device(
        properties.name,
        round(properties.total_memory / GIB, 1),
        (properties.major, properties.minor),
    )


def _native_cpu_bf16() -> bool:
    """Whether this CPU has AVX512-BF16 or AMX (torch's own checks; private, so absent in
    another torch means no)."""
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


# -- an install that cannot import transformers' models -----------------------------------------
# What to run when the `vllm` extra was installed where vLLM cannot work (a machine without CUDA):
# its torchvision and torchaudio builds do not match the CPU torch, and transformers imports
# torchvision whenever it is installed.
VISION_STACK_FIX = "pip uninstall -y vllm torchvision torchaudio"


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every exception it was raised from or while handling, once each."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _broken_torchvision(error: BaseException) -> BaseException | None:
    """The ``RuntimeError: operator torchvision::... does not exist`` behind ``error``, if any:
    searched in its chain first (transformers and TRL re-raise import failures ``from`` them),
    then by importing torchvision alone, which fails the same way when it is the cause."""
    import importlib.util

    def matches(link: BaseException) -> bool:
        text = str(link)
        return (
            isinstance(link, RuntimeError) and "torchvision::" in text and "does not exist" in text
        )

    found = next((link for link in _causes(error) if matches(link)), None)
    if found is not None or importlib.util.find_spec("torchvision") is None:
        return found
    try:
        import torchvision  # noqa: F401
    except RuntimeError as probe:
        return probe if matches(probe) else None
    except Exception:
        return None
    return None


def check_vision_stack(error: BaseException) -> None:
    """Raise ``ImportError`` naming the cause and the fix when ``error`` (raised importing or
    loading one of transformers' model classes) comes from a torchvision build that does not
    match the installed torch; return otherwise, for the caller to re-raise ``error``.

    Why: installing the ``vllm`` extra on a machine with a CPU torch brings vLLM's torchvision
    and torchaudio builds, after which ``from transformers import Qwen3ForCausalLM`` fails with
    ``RuntimeError: operator torchvision::nms does not exist`` (transformers imports torchvision
    whenever it is installed), or with a ``ModuleNotFoundError`` that hides it; neither names
    vLLM, the extra or the remedy. vLLM needs a CUDA GPU, so the extra belongs on one."""
    cause = _broken_torchvision(error)
    if cause is None:
        return
    raise ImportError(
        "transformers cannot import its model classes: the installed torchvision does not "
        f"match the installed torch ({type(cause).__name__}: {cause}). This is what installing "
        "the `vllm` extra brings on a machine without CUDA: vLLM pulls torchvision and "
        "torchaudio builds made for another torch. vLLM generates on a CUDA GPU only, so the "
        "`vllm` extra is for a CUDA machine (a Colab GPU runtime, say), not this one. Fix: "
        f"{VISION_STACK_FIX}"
    ) from error


@contextmanager
def vision_stack_check() -> Iterator[None]:
    """Wrap an import or a load of transformers' model classes: an ``ImportError`` or
    ``RuntimeError`` from it goes through :func:`check_vision_stack`, which replaces it with one
    naming the cause and the fix when a mismatched torchvision is behind it. Nothing is checked
    unless it fails."""
    try:
        yield
    except (ImportError, RuntimeError) as error:
        check_vision_stack(error)
        raise
