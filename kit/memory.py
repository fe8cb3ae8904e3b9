"""What a model needs of a machine: its parameters, the bytes training keeps, the KV cache of
its rollouts, and the GRPO batch that fits (``kit.train.recipe`` sizes a GPU run from them).

Full fine-tuning with AdamW holds about 16 bytes per parameter (fp32 weights, gradients and two
moments), LoRA about the weights alone in 16 bits. A model's parameter count comes from its
``config.json`` alone (:func:`count_parameters` builds it on PyTorch's ``meta`` device, which
allocates nothing), so a recipe is decided before any weight is loaded, and a hub model's memory
needs no weight download.

Activations are measured, not guessed (:func:`measure_activations`): the bytes autograd keeps
for the backward pass of GRPO's loss, computed as TRL computes it (its fused LM head, which never
holds the logits), on the CPU, for the published architecture cut to one and two layers (its
weights' values do not matter, only their shapes). Kept bytes are linear in the layers and in
the tokens, so two depths and two lengths give every model's figure at any depth and length, and
a third point checks it (``tests/test_memory.py``). ``python -m kit.memory --measure`` writes
them to ``data/hardware/activations.json``, which the profile table reads.

vLLM colocated with training takes its share of the GPU for its own 16-bit copy of the weights
and its KV cache; training gets what is left (:func:`grpo_batch`, :func:`vllm_kv_room`).
:func:`profile_table` is docs/gpu.md's table of it (``python -m kit.memory [--vllm]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.hardware import A100_40, A100_80, GIB, L4, T4, Device, vision_stack_check

# Bytes per parameter of full fine-tuning with AdamW in mixed precision: fp32 master weights (4),
# fp32 gradients (4), Adam's two fp32 moments (8). Activations come on top.
FULL_BYTES_PER_PARAMETER = 16
# The share of an accelerator's memory that full fine-tuning's fixed part may take; the rest is
# left to activations, the generation's KV cache and (colocated) vLLM. Past it, the recipe
# trains LoRA adapters instead.
FULL_SHARE = 0.5
# The share of an accelerator's memory the planner hands out (training, generation and, colocated,
# vLLM); the rest is left to the CUDA context, the allocator's fragmentation and kernels' scratch.
USABLE_SHARE = 0.9
# vLLM holds its own copy of the weights in 16 bits (bf16, or fp16 where there is no native bf16:
# vLLM picks fp16 on a T4 for a model stored in bf16).
VLLM_BYTES_PER_PARAMETER = 2


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


def count_parameters(config: Any) -> int:
    """The parameter count of a causal LM with ``config`` (a ``PretrainedConfig``, a hub id or a
    local folder), built on the ``meta`` device: exact, and nothing is allocated or downloaded
    but the config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(config, (str, Path)):
        config = AutoConfig.from_pretrained(str(config))
    with torch.device("meta"), vision_stack_check():
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

    with torch.device("meta"), vision_stack_check():
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    return sum(
        rank * (module.in_features + module.out_features)
        for module in model.modules()
        if isinstance(module, torch.nn.Linear) and module is not head
    )


# -- activations, measured ------------------------------------------------------------------------
# A GRPO micro-batch in the profile table: the recipe's rows (``PRETRAINED_GRPO``'s
# per_device_train_batch_size), each a prompt (assumed: a game's system prompt, tool schemas and
# first board come to a few hundred tokens) and a completion of the 1,024-token budget that Catch
# and Wordle use. Sudoku's 4,096 costs about three times as much.
PROMPT_TOKENS = 512
COMPLETION_TOKENS = 1024
MODES = ("full", "lora")  # full fine-tuning: fp32 weights under bf16 autocast; LoRA: bf16 weights


@dataclass(frozen=True)
class KeptBytes:
    """What a training forward pass keeps for its backward pass, as a function of depth and
    length: ``tokens * (layers * layer + outside) + layers * layer_fixed + outside_fixed``
    bytes. ``*_fixed`` is what does not grow with the tokens (autocast's 16-bit copies of the
    weights, which a forward pass without checkpointing keeps)."""

    layer: float  # each decoder layer, each token of a row's prompt and completion
    outside: float  # outside the layers (embedding output, final norm, the fused head), each token
    layer_fixed: float
    outside_fixed: float

    def __call__(self, layers: int, tokens: int) -> float:
        return (
            tokens * (layers * self.layer + self.outside)
            + layers * self.layer_fixed
            + self.outside_fixed
        )


def kept_bytes(
    config: Any, layers: int, tokens: int, lora: bool, checkpointing: bool, prompt: float = 0.5
) -> int:
    """Bytes autograd keeps for the backward pass of GRPO's loss on one row of ``tokens`` tokens
    (the first ``prompt`` share of them unscored, as a prompt is), for ``config`` cut to
    ``layers`` layers, on the CPU. The loss is TRL's: its fused LM head scores the completion in
    tiles (``trl.trainer.utils.add_fused_lm_head``, as ``GRPOTrainer`` installs it), times the
    importance ratio of one iteration. Full fine-tuning runs fp32 weights under bf16 autocast
    (TRL's mixed precision); LoRA runs :data:`kit.defaults.LORA` adapters on bf16 weights. Counted
    once per storage; the weights themselves are not counted."""
    import gc

    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    values = {**config.to_dict(), "num_hidden_layers": layers}
    if values.get("layer_types"):  # one type a layer (full or sliding attention)
        values["layer_types"] = values["layer_types"][:layers]
    config = type(config).from_dict(values)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16 if lora else torch.float32
        )
    model.to_empty(device="cpu")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()  # any values: what is kept depends on the shapes alone
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    if lora:
        from peft import get_peft_model

        from kit.defaults import lora_config

        model = get_peft_model(model, lora_config())
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            model.enable_input_require_grads()
    model.train()
    torch.manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (1, tokens))
    labels = ids.clone()
    labels[:, : int(tokens * prompt)] = -100
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not lora):
            out = model(input_ids=ids, labels=labels, fused_lm_head=True)
            logps = out.log_probs
            loss = -(torch.exp(logps - logps.detach()) * out.label_mask).sum()
    loss.backward()  # the graph must be one a backward pass accepts
    total = sum(kept.values())
    # the fused head's forward is bound to the model (a reference cycle): free it now, not at
    # the collector's leisure, or a run through every model holds them all
    del model, out, logps, loss
    gc.collect()
    return total


def measure_activations(
    config: Any, lora: bool, checkpointing: bool, tokens: int = 64
) -> KeptBytes:
    """:class:`KeptBytes` of ``config`` (a ``PretrainedConfig``), from :func:`kept_bytes` at one
    and two layers and at ``tokens`` and twice as many tokens."""
    k = {
        (layers, n): kept_bytes(config, layers, n, lora, checkpointing)
        for layers in (1, 2)
        for n in (tokens, 2 * tokens)
    }
    per_token = {layers: (k[layers, 2 * tokens] - k[layers, tokens]) / tokens for layers in (1, 2)}
    fixed = {layers: k[layers, tokens] - tokens * per_token[layers] for layers in (1, 2)}
    return KeptBytes(
        layer=per_token[2] - per_token[1],
        outside=2 * per_token[1] - per_token[2],
        layer_fixed=fixed[2] - fixed[1],
        outside_fixed=2 * fixed[1] - fixed[2],
    )


def _activations_file() -> Path:
    from kit.paths import data_dir

    return data_dir() / "hardware" / "activations.json"


def measured_activations() -> dict[str, dict[str, dict[str, KeptBytes]]]:
    """The stored measurements: ``[model][mode][checkpointing]`` with ``mode`` in :data:`MODES`
    and ``"checkpointed"`` or ``"plain"``; written by ``python -m kit.memory --measure``."""
    import json

    stored = json.loads(_activations_file().read_text())["models"]
    return {
        model: {
            mode: {kind: KeptBytes(**values) for kind, values in kinds.items()}
            for mode, kinds in modes.items()
        }
        for model, modes in stored.items()
    }


def measure_all(models: tuple[str, ...] = tuple(ARCHITECTURES)) -> dict[str, Any]:
    """Measure every model of :data:`ARCHITECTURES` in both modes, with and without gradient
    checkpointing, and write them where :func:`measured_activations` reads them."""
    import dataclasses
    import json

    import torch
    import transformers
    import trl

    results: dict[str, Any] = {}
    for name in models:
        config = architecture(name)
        results[name] = {
            mode: {
                kind: dataclasses.asdict(
                    measure_activations(config, mode == "lora", kind == "checkpointed")
                )
                for kind in ("checkpointed", "plain")
            }
            for mode in MODES
        }
        print(f"measured {name}", flush=True)
    stored = {
        "how": "python -m kit.memory --measure (kit.memory.measure_activations)",
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
        },
        "models": results,
    }
    path = _activations_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, indent=1) + "\n")
    return stored


def checkpointed_peak(config: Any, lora: bool, tokens: int) -> float | None:
    """The activations of a GRPO micro-batch of ``tokens`` tokens under gradient checkpointing,
    at their peak: what the forward pass keeps (each layer's input), plus the one layer the
    backward pass recomputes at a time, which holds what a pass without checkpointing keeps.
    From the stored measurement of ``config``'s architecture (:func:`measured_for`); None for an
    architecture not measured."""
    kept = measured_for(config, lora)
    if kept is None:
        return None
    plain = kept["plain"]
    return (
        kept["checkpointed"](config.num_hidden_layers, tokens) + plain(1, tokens) - plain(0, tokens)
    )


def kv_cache_bytes(config: Any, tokens: int, bytes_per_value: int = 2) -> int:
    """The KV cache of ``tokens`` tokens in 16 bits: a key and a value per layer, KV head and
    head dimension. Computed, not measured: it is the cache's definition."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return (
        2
        * config.num_hidden_layers
        * config.num_key_value_heads
        * head_dim
        * bytes_per_value
        * tokens
    )


def training_bytes(config: Any, lora: bool) -> int:
    """Weights, gradients and optimiser state of a model with ``config``: 16 bytes a parameter
    for full fine-tuning (:data:`FULL_BYTES_PER_PARAMETER`); 16-bit weights plus 16 bytes an
    adapter parameter for LoRA (:data:`kit.defaults.LORA`). Computed from exact parameter counts."""
    from kit.defaults import LORA

    parameters = count_parameters(config)
    if not lora:
        return parameters * FULL_BYTES_PER_PARAMETER
    return parameters * 2 + lora_parameters(config, LORA["r"]) * FULL_BYTES_PER_PARAMETER


def measured_for(config: Any, lora: bool) -> dict[str, KeptBytes] | None:
    """The stored measurement (:func:`measured_activations`) of the architecture ``config``
    has, whatever its name or folder; None for an architecture not measured. Matched on the
    fields that shape the tensors (a fine-tune with another context length is the same)."""
    for name, values in ARCHITECTURES.items():
        shapes = {k: v for k, v in values.items() if k != "max_position_embeddings"}
        if all(getattr(config, key, None) == value for key, value in shapes.items()):
            return measured_activations()[name]["lora" if lora else "full"]
    return None


def vllm_weights_bytes(config: Any) -> int:
    """vLLM's own copy of the weights of a model with ``config``: 16 bits a parameter
    (:data:`VLLM_BYTES_PER_PARAMETER`), from the exact parameter count."""
    return count_parameters(config) * VLLM_BYTES_PER_PARAMETER


def vllm_kv_room(config: Any, device: Device, vllm_share: float) -> float:
    """The bytes of KV cache colocated vLLM has: its share of ``device``'s memory
    (``vllm_gpu_memory_utilization``, which vLLM reads as a share of the whole GPU) less its
    copy of the weights (:func:`vllm_weights_bytes`). An upper bound: vLLM also sets aside
    what its profiling run and CUDA graphs take, which is not computed here."""
    return vllm_share * device.memory_gib * GIB - vllm_weights_bytes(config)


def generated_at_once(
    config: Any,
    device: Device,
    lora: bool,
    row_tokens: int,
    rows: int,
    minimum: int = 1,
    vllm_share: float = 0.0,
) -> int:
    """The most of ``rows`` episodes of ``row_tokens`` tokens to generate together with
    transformers' ``generate`` (halved down to ``minimum``) whose KV cache fits beside
    :func:`training_bytes` in what training may use: :data:`USABLE_SHARE` of ``device``'s memory
    less ``vllm_share``, what a colocated vLLM holds. Evaluation's ``batch_size``: training's
    memory counts, because a notebook evaluates with the trainer, its optimiser state and its
    vLLM engine still alive."""
    usable = (USABLE_SHARE - vllm_share) * device.memory_gib * GIB
    fixed = training_bytes(config, lora)
    while rows > minimum and fixed + kv_cache_bytes(config, rows * row_tokens) > usable:
        rows //= 2
    return rows


def grpo_batch(
    config: Any,
    device: Device,
    lora: bool,
    row_tokens: int,
    rows: int,
    generated: int,
    num_generations: int,
    vllm_share: float = 0.0,
) -> tuple[int, int]:
    """``(rows, generated)`` that fit ``device``: rows per micro-batch
    (``per_device_train_batch_size``) and rollouts generated at once, each of ``row_tokens``
    tokens, halved from the given ones. Rollouts stay whole groups of ``num_generations``.

    Training may use :data:`USABLE_SHARE` of the GPU less ``vllm_share``: there
    :func:`training_bytes` plus the micro-batch's activations (:func:`checkpointed_peak`, for an
    architecture :func:`measured_for` knows; not checked for others) must fit, and so must
    :func:`training_bytes` plus the generation's KV cache when transformers generates
    (``vllm_share=0``). With vLLM colocated (``vllm_share``, TRL's
    ``vllm_gpu_memory_utilization``), generation happens in vLLM's share instead: its room for
    KV cache (:func:`vllm_kv_room`) must hold one whole rollout (or vLLM refuses to start), and
    the rollouts generated at once are halved, down to one group, until their KV cache fits it
    (beyond that vLLM would only queue them). Raises ``ValueError`` when one row, one group or
    one rollout does not fit."""
    usable = (USABLE_SHARE - vllm_share) * device.memory_gib * GIB
    fixed = training_bytes(config, lora)

    def activations(rows: int) -> float:
        return checkpointed_peak(config, lora, rows * row_tokens) or 0

    def kv(generated: int) -> float:
        return kv_cache_bytes(config, generated * row_tokens)

    while rows > 1 and fixed + activations(rows) > usable:
        rows //= 2
    groups = max(1, generated // num_generations)
    if vllm_share:
        room = vllm_kv_room(config, device, vllm_share)
        if kv(1) > room:
            raise ValueError(
                f"vLLM's share of {device.name} ({vllm_share:g} of {device.memory_gib:g} GiB) "
                f"holds its {vllm_weights_bytes(config) / GIB:.1f} GiB copy of the weights and "
                f"leaves {max(room, 0) / GIB:.2f} GiB of KV cache, less than one rollout of "
                f"{row_tokens:,} tokens takes ({kv(1) / GIB:.2f} GiB): vLLM would refuse to "
                "start. Generate with transformers (vllm=False), or use a smaller model"
            )
        while groups > 1 and kv(groups * num_generations) > room:
            groups //= 2
        generated, training_kv = groups * num_generations, 0.0
    else:
        generated = generated_at_once(
            config, device, lora, row_tokens, groups * num_generations, num_generations
        )
        training_kv = kv(generated)
    if fixed + max(activations(rows), training_kv) > usable:
        beside = f" beside vLLM's {vllm_share:g}" if vllm_share else ""
        raise ValueError(
            f"a GRPO step of this model does not fit {device.name} ({device.memory_gib:g} GiB, "
            f"{usable / GIB:.1f} GiB of it for training{beside}): "
            f"{fixed / GIB:.1f} GiB of weights and optimiser state, then "
            f"{activations(rows) / GIB:.1f} GiB of activations for {rows} row(s) of "
            f"{row_tokens:,} tokens and {training_kv / GIB:.1f} GiB of KV cache for "
            f"{generated} rollouts; use a smaller model, shorter completions or 4-bit weights"
        )
    return rows, generated


def longest_prompt(
    tokenizer: Any,
    game: str,
    chat_template_kwargs: dict[str, Any] | None = None,
    num_tasks: int = 32,
) -> int:
    """The tokens of the longest opening prompt among ``game``'s first ``num_tasks`` train
    tasks, as TRL renders it for generation: the task's messages with the reset observation,
    the env's tool schemas and the generation prompt, through ``tokenizer``'s chat template
    with ``chat_template_kwargs``. Measured, because a game's prompt varies far more across
    games than across its tasks (with a Qwen-sized vocabulary: Echo about 250 tokens, Catch and
    Wordle about 400, Sudoku over 1,000), and a vLLM context sized for less cuts episodes."""
    from kit.episode import start, tool_schemas
    from kit.registry import game as game_spec
    from kit.tasks import TaskProvider

    env_cls = game_spec(game).env
    tools = tool_schemas(env_cls)
    longest = 0
    for task in TaskProvider(game, "train", num_tasks=num_tasks):
        ids = tokenizer.apply_chat_template(
            start(env_cls(), task.row()),
            tools=tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
            **(chat_template_kwargs or {}),
        )
        longest = max(longest, len(ids))
    return longest


def profile_table(
    models: tuple[str, ...] = tuple(ARCHITECTURES),
    devices: tuple[Device, ...] = (T4, L4, A100_40, A100_80),
    vllm: bool = False,
) -> str:
    """A markdown table: for each GPU and model, what ``kit.train.recipe`` chooses and what its
    GRPO step holds. Weights, gradients and optimiser state are computed from the published
    architecture (exact parameter counts, 16 bytes a parameter for full fine-tuning; 2 for
    16-bit base weights plus 16 an adapter parameter for LoRA). Activations are measured
    (:func:`measured_activations`) for one micro-batch of the recipe's rows of
    :data:`PROMPT_TOKENS` + :data:`COMPLETION_TOKENS` tokens under the recipe's gradient
    checkpointing, plus one layer recomputed without it, as the backward pass does.

    Generation with transformers (the default): the KV cache of the recipe's 32 rollouts a step
    at once is computed, and the step fits if the fixed part plus the larger of the two takes
    at most :data:`USABLE_SHARE` of the GPU. With ``vllm=True``, vLLM colocated with its share
    (``kit.defaults.VLLM_MEMORY_SHARE``): training's fixed part plus the activations must fit in
    :data:`USABLE_SHARE` less that share, and vLLM's share holds its 16-bit copy of the weights
    and the KV cache of the rollouts it generates at once (:func:`grpo_batch`). ``python -m
    kit.memory [--vllm]`` prints it."""
    from kit.defaults import LORA, PRETRAINED_GRPO, VLLM_MEMORY_SHARE

    rows = PRETRAINED_GRPO["per_device_train_batch_size"]
    generated = rows * PRETRAINED_GRPO["gradient_accumulation_steps"]  # TRL's default
    row = PROMPT_TOKENS + COMPLETION_TOKENS
    share = VLLM_MEMORY_SHARE if vllm else 0.0
    last = f"KV cache, {generated} × {row:,} tokens (GiB, computed)"
    if vllm:
        last = f"vLLM's {share:g}: its weights / room for KV cache (GiB, computed)"
    lines = [
        "| GPU | model | recipe | precision | weights + optimiser (GiB, computed) "
        f"| activations, {rows} × {row:,} tokens (GiB, measured) | {last} | fits |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for device in devices:
        for name in models:
            config = architecture(name)
            lora = not fits_full(count_parameters(config), device)
            try:
                fitted = grpo_batch(
                    config,
                    device,
                    lora,
                    row,
                    rows,
                    generated,
                    PRETRAINED_GRPO["num_generations"],
                    vllm_share=share,
                )
                fits = "yes"
                if fitted != (rows, generated):
                    fits = f"yes: {fitted[0]} rows a micro-batch, {fitted[1]} rollouts generated at once"
            except ValueError:
                fits = "no: needs 4-bit weights"
                if vllm and vllm_kv_room(config, device, share) < kv_cache_bytes(config, row):
                    fits = "no: vLLM's share cannot hold it; generate with transformers"
            activations = checkpointed_peak(config, lora, rows * row)
            mode = f"LoRA r={LORA['r']}" if lora else "full"
            generation = f"{kv_cache_bytes(config, generated * row) / GIB:.1f}"
            if vllm:
                room = max(vllm_kv_room(config, device, share), 0)
                generation = f"{vllm_weights_bytes(config) / GIB:.1f} / {room / GIB:.1f}"
            lines.append(
                f"| {device.name} ({device.memory_gib:g} GiB) | {name} | {mode} "
                f"| {'bf16' if device.bf16 else 'fp16'} "
                f"| {training_bytes(config, lora) / GIB:.1f} | {activations / GIB:.1f} "
                f"| {generation} | {fits} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--measure"]:
        measure_all()
    elif sys.argv[1:] not in ([], ["--vllm"]):
        raise SystemExit("usage: python -m kit.memory [--measure | --vllm]")
    print(profile_table(vllm=sys.argv[1:] == ["--vllm"]))
