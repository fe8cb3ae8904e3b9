"""Training: configs right for the machine, one recipe per model, and the two phases.

TRL's configs default to bf16 and to logging integrations found on the machine; on a CPU the
first fails and the second may try the network. ``grpo_config`` and ``sft_config`` pick safe
defaults for the device at hand (bf16 on Ampere, fp16 on a T4, fp32 on a CPU) and leave every
field overridable. ``recipe(MODEL, GAME)`` makes every choice that depends on the model and the
machine in one place (precision, LoRA where full tuning would not fit, learning rates, Qwen3's
thinking, budgets, checkpoints, vLLM); for the offline tiny model it is the measured :data:`SFT`
and :data:`GRPO`. ``warm_up`` (SFT on the shipped solver games, built by ``sft_trainer``) and
``grpo`` (GRPO on a game's train tasks, every batch captured) are the two training phases of
``python -m kit.demo`` and the notebooks; both train through ``train``, which continues from a
saved checkpoint and merges LoRA adapters back into the model. ``checkpoint`` loads a phase's
saved model or makes and saves it, which is how the notebooks hand checkpoints on;
The command line that runs the phases for any model and game, under ``accelerate`` too, is
``python -m kit.demo``; ``kit.viz.plot_log`` and ``kit.viz.log_table`` show a run's log.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.defaults import (
    CHATML_TEMPLATE,
    CHECKPOINTING,
    CPU_GRPO,
    CPU_LEARNING_RATE,
    CPU_STEPS,
    CPU_TURN_TOKENS,
    GRPO,
    GRPO_STEPS,
    LORA_LEARNING_RATES,
    PRETRAINED_GRPO,
    PRETRAINED_LEARNING_RATES,
    PRETRAINED_STEPS,
    SAMPLING,
    SFT,
    SFT_STEPS,
    STEPS_BASIS,
    VLLM_MEMORY_SHARE,
    lora_config,
)
from kit.hardware import Device


def _device_defaults(device: Device | None = None) -> dict[str, Any]:
    """The config fields that depend on the machine (default: this one's)."""
    from kit.hardware import detect

    device = device or detect()
    return {
        "bf16": device.bf16,  # Ampere and later
        "fp16": device.fp16,  # a T4 only emulates bf16, slowly
        "use_cpu": not device.gpu,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "seed": 0,
        "dataloader_num_workers": 0,
        # transformers logs a NaN or infinite loss as the mean of the earlier ones (its default
        # True): kit.guards must see it to stop the run
        "logging_nan_inf_filter": False,
    }


def grpo_config(output_dir: str, **overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` with device-appropriate defaults; ``overrides`` win."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from kit.hardware import vision_stack_check

    with vision_stack_check():  # a vLLM install's torchvision breaks TRL's imports
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
    """A ``trl.SFTConfig`` that trains only the assistant turns of tool-call conversations, at
    TRL's own learning rate unless ``overrides`` set one (:func:`recipe` has each model's: the
    tiny random model's 5e-4 would wreck a pretrained one)."""
    from kit.hardware import vision_stack_check

    with vision_stack_check():  # a vLLM install's torchvision breaks TRL's imports
        from trl import SFTConfig

    defaults = {
        **_device_defaults(),
        "per_device_train_batch_size": 4,
        "assistant_only_loss": True,
    }
    return SFTConfig(output_dir=output_dir, **{**defaults, **overrides})


@dataclass(frozen=True)
class Recipe:
    """How to load, train and evaluate one model on one game on one machine. Made by
    :func:`recipe`; print it to see every choice. With ``r = recipe(MODEL, GAME)``::

        model, tokenizer = r.load_model(seed)
        warm_up(model, tokenizer, GAME, r.sft_steps, seed, folder, peft_config=r.peft_config, **r.sft)
        grpo(model, tokenizer, GAME, r.grpo_steps, seed, folder, peft_config=r.peft_config, **r.grpo)
        evaluate(model, GAME, tokenizer, num_generations=8, greedy=False, **r.evaluation)
    """

    model: str  # "tiny", a hub id or a local folder
    game: str
    device: Device
    parameters: int
    peft_config: Any  # a peft.LoraConfig (LoRA, merged after each phase), or None: full tuning
    load: dict[str, Any]  # kit.models.load(model, **load)
    sft: dict[str, Any]  # SFTConfig fields: warm_up(..., **sft)
    grpo: dict[str, Any]  # GRPOConfig fields: grpo(..., **grpo)
    evaluation: dict[str, Any]  # kit.evaluate.evaluate(..., **evaluation), sampled as in GRPO
    sft_steps: int  # the warm-up's steps for this kind of model
    grpo_steps: int
    steps_basis: str  # "measured: <where>" or "estimated: <why>"
    # the prompt length rollouts are sized for (kit.memory.longest_prompt); None: nothing is
    # sized (the tiny model)
    prompt_tokens: int | None
    generation: str  # what generates GRPO's rollouts, and why

    @property
    def lora(self) -> bool:
        return self.peft_config is not None

    def load_model(self, seed: int = 0) -> tuple[Any, Any]:
        """``(model, tokenizer)``: the tiny model built with ``seed``, or the model loaded."""
        from kit.models import load, tiny_model, tokenizer_games

        if self.model == "tiny":
            model, tokenizer = tiny_model(seed=seed, games=tokenizer_games(self.game))
            return model.to(self.device.place()), tokenizer
        return load(self.model, **self.load)

    def __str__(self) -> str:
        mode = f"LoRA r={self.peft_config.r}" if self.lora else "full fine-tuning"
        lines = [f"{self.model} ({self.parameters:,} parameters) on {self.device.name}: {mode}"]
        lines += [f"  {phase}: {getattr(self, phase)}" for phase in ("load", "sft", "grpo")]
        lines.append(f"  evaluation: {self.evaluation}")
        lines.append(f"  steps: SFT {self.sft_steps}, GRPO {self.grpo_steps} ({self.steps_basis})")
        lines.append(f"  generation: {self.generation}")
        return "\n".join(lines)


def recipe(
    model: str = "tiny",
    game: str = "catch",
    device: Device | None = None,
    lora: bool | None = None,
    thinking: bool = False,
    max_completion_length: int | None = None,
    vllm: bool | None = None,
) -> Recipe:
    """The recipe for ``model`` on ``game`` on ``device`` (default: this machine's,
    ``kit.hardware.detect``). ``max_completion_length`` replaces the game's token budget (the
    notebooks' smoke runs use a small one). ``vllm``: colocate vLLM for GRPO's generation
    (``True``: on a GPU, or ``ValueError``), generate with transformers (``False``), or, by
    default, vLLM where it is installed (``kit.hardware.vllm_installed``) on a GPU and fits.

    ``"tiny"``: :data:`SFT` and :data:`GRPO`, as measured (docs/results.md, "Does it learn?"), with
    :data:`SFT_STEPS` and :data:`GRPO_STEPS`. Any other model (a hub id or a local folder; only
    its config and tokenizer are read here):

    * precision: on a GPU with native bf16 (Ampere and later) ``bf16=True``; on an older one
      (a T4) ``fp16=True``; full fine-tuning loads fp32 weights (TRL's own choice: bf16 master
      weights round small updates away), LoRA loads them in 16 bits and trains fp32 adapters;
      in fp16, GRPO computes the LM head in fp32 (``cast_lm_head_to_fp32``) where TRL 1.16
      can (:func:`fp32_lm_head`);
    * LoRA (:data:`LORA`) when full fine-tuning would not fit (``kit.memory.fits_full``), or
      as ``lora`` says; learning rates :data:`PRETRAINED_LEARNING_RATES` or
      :data:`LORA_LEARNING_RATES`; gradient checkpointing on a GPU;
    * steps :data:`PRETRAINED_STEPS`, estimated (``steps_basis`` says so);
    * the model on this process's GPU, evaluation batched there;
    * the chat template: the tokenizer's own where TRL recognises it, TRL's
      :data:`CHATML_TEMPLATE` on a ChatML tokenizer whose template it does not (SmolLM2's),
      ``ValueError`` otherwise (:func:`chat_template_for`); a template that reads
      ``enable_thinking`` (Qwen3's) gets it set to ``thinking``, in training and in evaluation:
      left on, an untrained model spends the token budget inside ``<think>``;
    * the game's token budget (``kit.evaluate.BUDGETS``) and turn limit in GRPO and evaluation,
      and the same sampling in both (:data:`SAMPLING`, at the recipe's temperature);
    * on a GPU, rows a micro-batch and rollouts generated at once, halved from
      :data:`PRETRAINED_GRPO`'s until the step fits (``kit.memory.grpo_batch``: measured
      activations, computed KV cache, rows of the game's longest prompt,
      ``kit.memory.longest_prompt``, and its budget); ``ValueError`` if one group does not;
      evaluation generates up to 64 episodes together, fewer where their KV cache would not fit;
    * on a GPU, checkpoints every 25 steps, which a rerun continues from (:data:`CHECKPOINTING`);
    * vLLM colocated with training (:data:`VLLM_MEMORY_SHARE` of the GPU, a context of the
      prompt and the budget) where it fits beside training.
    """
    from kit.evaluate import BUDGETS
    from kit.hardware import detect, vllm_installed
    from kit.memory import (
        PROMPT_TOKENS,
        count_parameters,
        fits_full,
        generated_at_once,
        grpo_batch,
        longest_prompt,
    )
    from kit.registry import game as game_spec
    from kit.tasks import TURN_LIMITS

    game_spec(game)  # ValueError for an unknown game
    device = device or detect()
    if vllm and not device.gpu:
        raise ValueError(
            f"vLLM generates on a CUDA GPU only, and this recipe is for {device.name}: "
            "vllm=False (or leave it unset) generates with transformers"
        )
    limits = {
        "max_completion_length": max_completion_length or BUDGETS[game],
        "max_tool_calling_iterations": TURN_LIMITS[game],
    }
    if model == "tiny":
        from kit.models import tiny_config

        if vllm:
            raise ValueError(
                "vLLM loads a model from its hub id or folder, and the tiny model is built in "
                "memory: save it (kit.models.save) and give the recipe that folder"
            )
        sampling = {**SAMPLING, "temperature": GRPO["temperature"]}
        return Recipe(
            model,
            game,
            device,
            count_parameters(tiny_config()),
            lora_config() if lora else None,  # full tuning unless asked: 0.56M parameters fit
            {},
            dict(SFT),
            # untied output layer (tiny_config): TRL can run it in fp32 with or without LoRA
            {**limits, **GRPO, **sampling, **fp32_lm_head(device, bool(lora), tied=False)},
            # one batch: a tiny model's step costs the same for 8 rows or 80
            {**limits, **sampling, "batch_size": 256},
            sft_steps=SFT_STEPS,
            grpo_steps=GRPO_STEPS,
            steps_basis=STEPS_BASIS["tiny"],
            prompt_tokens=None,
            generation="transformers generate (the tiny model has no folder for vLLM to load)",
        )
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(model))
    parameters = count_parameters(config)
    if lora is None:
        # on a CPU with native bf16, LoRA on bf16 weights (2.2 times as fast a forward pass as
        # fp32: benchmarks/precision.py); full fine-tuning needs fp32 weights, whose updates bf16
        # would round away
        lora = device.cpu_bf16 if not device.gpu else not fits_full(parameters, device)
    weights = "float32"
    if lora and (device.bf16 or device.cpu_bf16):
        weights = "bfloat16"
    elif lora and device.fp16:
        weights = "float16"
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    template = chat_template_for(tokenizer, str(model))
    if template is not None:
        from kit.models import trl_chat_template

        tokenizer.chat_template = trl_chat_template(template)
    text = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    thinking_kwargs = {"enable_thinking": thinking} if "enable_thinking" in text else None
    # the longest prompt of the game's tasks with this tokenizer and template, with a tenth
    # more for tasks not among those measured; never under the profile table's assumption
    prompt = max(PROMPT_TOKENS, math.ceil(1.1 * longest_prompt(tokenizer, game, thinking_kwargs)))
    rates = LORA_LEARNING_RATES if lora else PRETRAINED_LEARNING_RATES
    on_gpu = {**CHECKPOINTING, "gradient_checkpointing": True} if device.gpu else {}
    peft_config = lora_config() if lora else None
    batch = dict(PRETRAINED_GRPO if device.gpu else CPU_GRPO)
    sampling = {**SAMPLING, "temperature": batch.pop("temperature")}
    # a turn's cap on a CPU (CPU_TURN_TOKENS), in GRPO and in the evaluations alike
    turn = {} if device.gpu else {"generation_kwargs": {"max_new_tokens": CPU_TURN_TOKENS}}
    evaluation_rows = 64
    use_vllm = False
    generation = "transformers generate"
    if not device.gpu:
        generation += " (vLLM needs a CUDA GPU)"
    else:
        # as many rows a micro-batch, rollouts generated at once and evaluation episodes played
        # together as the GPU holds (measured activations, computed KV cache), the rollouts of
        # an optimiser step unchanged; with vLLM where it fits beside training
        row_tokens = prompt + limits["max_completion_length"]
        rollouts = batch["per_device_train_batch_size"] * batch["gradient_accumulation_steps"]
        sizes = (row_tokens, batch["per_device_train_batch_size"], rollouts)

        def fit(share: float) -> tuple[int, int]:
            return grpo_batch(config, device, lora, *sizes, batch["num_generations"], share)

        fitted = None
        if vllm or (vllm is None and vllm_installed()):
            try:
                fitted, use_vllm = fit(VLLM_MEMORY_SHARE), True
            except ValueError as error:
                if vllm:
                    raise
                generation += f" (vLLM is installed but does not fit: {error})"
        elif vllm is None:
            generation += " (vLLM is not installed)"
        rows, generated = fitted or fit(0.0)
        batch.update(
            per_device_train_batch_size=rows,
            gradient_accumulation_steps=rollouts // rows,
            steps_per_generation=generated // rows,
        )
        share = VLLM_MEMORY_SHARE if use_vllm else 0.0
        evaluation_rows = generated_at_once(
            config, device, lora, row_tokens, evaluation_rows, vllm_share=share
        )
    vllm_fields = {}
    if use_vllm:
        vllm_fields = {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": VLLM_MEMORY_SHARE,
            # the prompt and the budget: TRL's episode never grows past it (its tool results
            # count in max_completion_length), and vLLM then holds one sequence of this, not
            # of the model's whole context
            "vllm_max_model_length": prompt + limits["max_completion_length"],
        }
        generation = (
            f"vLLM colocated: {VLLM_MEMORY_SHARE:g} of the GPU, a context of "
            f"{vllm_fields['vllm_max_model_length']:,} tokens ({prompt:,} of prompt, "
            f"{limits['max_completion_length']:,} of budget)"
        )
    tied = bool(getattr(config.get_text_config(), "tie_word_embeddings", False))
    return Recipe(
        str(model),
        game,
        device,
        parameters,
        peft_config,
        {
            "dtype": weights,
            "device_map": device.place() if device.gpu else "cpu",
            **({"chat_template": template} if template else {}),
        },
        {
            **on_gpu,
            "learning_rate": rates["sft"],
            "per_device_train_batch_size": 1,
            "max_length": 4096,
        },
        {
            **on_gpu,
            **limits,
            **batch,
            **sampling,
            **vllm_fields,
            **fp32_lm_head(device, lora, tied),
            "learning_rate": rates["grpo"] if device.gpu else CPU_LEARNING_RATE,
            "chat_template_kwargs": thinking_kwargs,
            **turn,
        },
        {
            **limits,
            **sampling,
            "chat_template_kwargs": thinking_kwargs,
            **turn,
            "batch_size": evaluation_rows,
        },
        sft_steps=(PRETRAINED_STEPS if device.gpu else CPU_STEPS)["sft"],
        grpo_steps=(PRETRAINED_STEPS if device.gpu else CPU_STEPS)["grpo"],
        steps_basis=STEPS_BASIS["pretrained" if device.gpu else "cpu"],
        prompt_tokens=prompt,
        generation=generation,
    )


def fp32_lm_head(device: Device, lora: bool, tied: bool) -> dict[str, Any]:
    """``{"cast_lm_head_to_fp32": True}`` for GRPO in fp16 (a T4) where TRL 1.16 supports it,
    else ``{}``.

    Why: Qwen3 was trained in bf16, whose range fp16 lacks, and fp16 overflow to inf and NaN is
    a known report with it; the LM head's logits, over 151,936 tokens, are where GRPO's loss and
    its sampling probabilities come from, and TRL's option computes them in fp32, outside
    autocast. Not in bf16 or fp32, whose range is fp32's. Not for LoRA on a model whose output
    layer shares the embedding's weights (``tie_word_embeddings``: Qwen3 up to 4B, SmolLM2):
    TRL 1.16's cast then looks for ``model.model.embed_tokens`` on the PEFT wrapper and fails
    with ``AttributeError`` when the trainer is built (``tests/test_recipe.py`` shows it)."""
    if not device.fp16 or (lora and tied):
        return {}
    return {"cast_lm_head_to_fp32": True}


def chat_template_for(tokenizer: Any, name: str = "the model") -> str | None:
    """The TRL template (a ``kit.models.CHAT_TEMPLATES`` name) to load ``tokenizer``'s model
    with, or None to keep its own. ``ValueError`` when neither works.

    Why: tool training needs TRL to parse the model's tool calls, and TRL 1.16 knows how for a
    fixed set of templates, recognised by their exact text (``trl.chat_template_utils.
    add_response_schema``, which ``GRPOTrainer`` calls and which refuses any other), unless the
    tokenizer ships a parser of its own (``response_template``). A ChatML tokenizer (single
    ``<|im_start|>`` and ``<|im_end|>`` tokens) with another template, SmolLM2's for one, takes
    TRL's :data:`CHATML_TEMPLATE`, which speaks the same tokens; any other would fail only once
    the trainer is built, so it is refused here, by name."""
    import copy

    from trl.chat_template_utils import add_response_schema

    if any(getattr(tokenizer, key, None) for key in ("response_template", "response_schema")):
        return None
    try:
        add_response_schema(copy.copy(tokenizer))  # sets the parser on the copy alone
        return None
    except ValueError:
        pass
    vocabulary = tokenizer.get_vocab()
    if all(token in vocabulary for token in ("<|im_start|>", "<|im_end|>")):
        return CHATML_TEMPLATE
    raise ValueError(
        f"TRL 1.16 does not recognise {name}'s chat template, so it cannot parse its tool calls "
        "(trl.chat_template_utils.add_response_schema), and the tokenizer has no <|im_start|> "
        f"and <|im_end|> tokens for TRL's {CHATML_TEMPLATE} template to use: give the tokenizer "
        "one of TRL's templates (trl/chat_templates/*.jinja) or a response_template of its own"
    )


def sft_trainer(
    model: Any,
    tokenizer: Any,
    games: str | Sequence[str] | Any,
    steps: int,
    seed: int,
    output_dir: str | Path,
    peft_config: Any = None,
    **overrides: Any,
) -> Any:
    """An ``SFTTrainer`` for ``steps`` steps on the shipped solver conversations of one game or
    several (shuffled together), or on a ``datasets.Dataset`` of your own in their format
    (``kit.sft.sft_dataset``, e.g. played by another ``policy``); not yet trained:
    :func:`warm_up` builds and trains one, notebook 1 looks at the tokens its loss covers first.
    ``overrides`` change the recipe (:data:`SFT`) or any ``SFTConfig`` field; ``peft_config``
    (a ``peft.LoraConfig``) trains LoRA adapters."""
    from datasets import Dataset, concatenate_datasets
    from trl import SFTTrainer

    from kit.sft import load_sft

    if isinstance(games, Dataset):
        data = games
    else:
        games = [games] if isinstance(games, str) else list(games)
        data = concatenate_datasets([load_sft(game) for game in games])
        if len(games) > 1:
            data = data.shuffle(seed=seed)
    recipe = {"logging_steps": max(1, steps // 8), **SFT, **overrides}
    args = sft_config(str(output_dir), max_steps=steps, seed=seed, **recipe)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    # what the trainer cannot know, for the record kit.guards keeps of its checkpoints
    trainer.kit_about = {
        "phase": "sft",
        "game": "a dataset of your own" if isinstance(games, Dataset) else sorted(games),
    }
    quiet(trainer, "sft", steps)
    return trainer


def warm_up(
    model: Any,
    tokenizer: Any,
    games: str | Sequence[str] | Any,
    steps: int,
    seed: int,
    output_dir: str | Path,
    peft_config: Any = None,
    **overrides: Any,
) -> list[dict[str, float]]:
    """SFT ``model`` in place (:func:`sft_trainer`, then :func:`train`); return the logged
    losses. For a model of your own: ``warm_up(..., peft_config=r.peft_config, **r.sft)`` with
    ``r = recipe(MODEL, GAME)``."""
    trainer = sft_trainer(
        model, tokenizer, games, steps, seed, output_dir, peft_config, **overrides
    )
    train(trainer)
    return [
        {"step": entry["step"], "loss": entry["loss"]}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]


def train(trainer: Any, about: Mapping[str, Any] | None = None) -> None:
    """``trainer.train()``, continuing from the last checkpoint in its ``output_dir`` when it
    saves checkpoints and has one (a rerun after a lost Colab runtime), and folding LoRA
    adapters into the model at the end: the model the trainer was given is then the trained
    one, with no adapter layers left (``kit.models.save`` writes it whole).

    Guarded (``kit.guards``): the run stops with ``NonFiniteError`` at the first non-finite
    loss, gradient norm or reward, and it refuses to continue from checkpoints that another
    model, game or recipe left in the folder. ``about`` says what the trainer cannot know (the
    game and phase; :func:`sft_trainer` sets it on its trainer as ``trainer.kit_about``,
    :func:`grpo` passes it here): a trainer of your own passes e.g. ``{"game":
    "catch", "phase": "grpo"}``. A trainer that saves every ``save_steps`` logs at least as
    often, so that no checkpoint is saved past a non-finite step the guard has not seen. If
    training raises, LoRA adapters are taken out of the model again, unmerged: the model the
    caller holds is the one it gave."""
    from transformers.trainer_utils import get_last_checkpoint

    from kit.guards import check_run_folder, non_finite_guard

    args = trainer.args
    if args.save_strategy == "steps" and args.save_steps % args.logging_steps:
        args.logging_steps = math.gcd(int(args.save_steps), int(args.logging_steps))
    check_run_folder(trainer, about)
    trainer.add_callback(non_finite_guard())
    folder = Path(trainer.args.output_dir)
    last = None
    if trainer.args.save_strategy != "no" and folder.is_dir():
        last = get_last_checkpoint(str(folder))
    if last:
        print(f"   resuming from {last}", flush=True)
    try:
        trainer.train(resume_from_checkpoint=last)
    except BaseException:
        if hasattr(trainer.model, "unload"):  # PEFT put its layers into the caller's model
            trainer.model = trainer.model.unload()
        raise
    if hasattr(trainer.model, "merge_and_unload"):
        trainer.model = trainer.model.merge_and_unload()


def grpo_args(game: str, steps: int, seed: int, output_dir: str | Path, **overrides: Any) -> Any:
    """The ``trl.GRPOConfig`` :func:`grpo` trains with: the recipe (:data:`GRPO`), the game's
    budget (``kit.evaluate.BUDGETS``) and turn limit, then ``overrides``. Building it runs TRL's
    own checks, so a caller can check overrides before anything trains (``kit.demo --grpo``)."""
    from kit.evaluate import BUDGETS
    from kit.tasks import TURN_LIMITS

    recipe = {
        "max_completion_length": BUDGETS[game],
        "max_tool_calling_iterations": TURN_LIMITS[game],
        **GRPO,
        **overrides,
    }
    return grpo_config(str(output_dir), max_steps=steps, seed=seed, **recipe)


# Rollouts a scoring pass holds (score_by_length): on two of the runbook's batches of 32 after its
# warm-up, the loss's forward and backward took 0.52 of TRL's time at 8 a pass, 0.55 at 16 and at
# 4, 0.70 in one pass of all 32 (`python benchmarks/scoring.py`, a 2-core CPU without AVX-512).
# With each prompt read once a pass holds at most one prompt's rollouts (GRPO's 8): 0.35 at 8,
# 0.34 and 0.37 at 16 and 32 (the same passes), 0.39 at 4.
SCORING_ROWS = 8


def score_by_length(trainer: Any, rows: int = SCORING_ROWS, share_prompts: bool = True) -> None:
    """Make ``trainer`` (a TRL 1.16 ``GRPOTrainer``) score its rollouts (the per-token log-probs
    and entropies of the loss, and of the old and reference policies when it needs them) in
    passes of ``rows`` rollouts of similar length, each pass right-padded to its own longest and
    run without an attention mask; with ``share_prompts``, a group's prompt is read once.

    Why: TRL scores a batch as it pads it, prompts on the left and completions on the right, to
    the batch's longest, with a mask. With a mask, attention computes every (query, key) pair,
    the masked future and padding included, and every row runs to the longest one. A row moved
    to the left of its pass needs no mask: attention is causal and skips the future, and sorted
    by length a pass stops at its own longest. And GRPO plays each task ``num_generations``
    times from one prompt, which TRL reads once per rollout: here the rollouts of one prompt are
    scored after one forward pass over it (all but its last token), whose keys and values they
    attend to, so the gradient reaches the prompt's positions through them as it would through
    eight copies. On the runbook's Catch batches (prompts about 380 of a rollout's 500 to 1,000
    tokens) the loss's forward and backward passes took 0.63 of TRL's time on a 2-core CPU
    without AVX-512 by length alone, and 0.35 with each prompt read once (`python
    benchmarks/scoring.py`, docs/results.md). The log-probs are
    TRL's to float rounding, and so is the update: the loss's normaliser counts the batch's
    tokens whatever the passes (``tests/test_scoring.py``). A rollout's positions count from its
    first token, as in generation; TRL counts from the batch's first column, which a model with
    rotary positions (Qwen3, Llama, SmolLM2) cannot tell apart.

    Only plain text batches whose rows are one run of tokens each, a prompt token first, are
    taken over; images, MoE auxiliary losses or a mask with holes go to TRL's own method. A
    prompt is shared only by a model whose cache keeps every position (no sliding window)."""
    import torch
    from transformers import DynamicCache

    from kit.rollout import cache_kwarg, full_cache

    if type(rows) is not int or rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows!r}")
    trl_score = trainer._get_per_token_logps_and_entropies
    config = trainer.model.config
    # a sliding-window layer would keep only the prompt's last positions
    share_prompts = share_prompts and full_cache(DynamicCache(config=config))
    cache_name = cache_kwarg(trainer.model)

    def score(
        model: Any,
        input_ids: Any,
        attention_mask: Any,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **multimodal: Any,
    ) -> tuple[Any, Any, Any]:
        width = input_ids.size(1)
        device = input_ids.device
        lengths = attention_mask.sum(1)
        first = attention_mask.argmax(1)  # each row's first token
        rows_at = torch.arange(len(first), device=device)
        one_run = bool((attention_mask[rows_at, first] == 1).all()) and bool(
            (attention_mask.flip(1).argmax(1) == width - first - lengths).all()
        )
        # a row's completion starts after its prompt_lengths[b] tokens, from column first[b] on; a
        # prompt token before each completion, since its first token is scored from one
        prompt_lengths = width - logits_to_keep - first
        prompted = bool((prompt_lengths >= 1).all())
        plain = not compute_aux_loss and all(v is None for v in multimodal.values())
        if not (plain and one_run and prompted):
            return trl_score(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size,
                compute_entropy,
                compute_aux_loss,
                **multimodal,
            )
        completion = attention_mask[:, width - logits_to_keep :].bool()
        per_pass = min(rows, batch_size or rows)
        logps, entropies, scored = [], [], []
        # a model that recomputes its activations in training keeps no cache (transformers)
        share = share_prompts and not (model.training and _checkpointing(model))
        for group, shared in _passes(input_ids, first, lengths, prompt_lengths, share):
            cache = None
            if len(shared):  # the group's prompt but its last token, read once
                prompt = DynamicCache(config=config)
                with trainer.accelerator.autocast():
                    model(
                        input_ids=shared[None],
                        use_cache=True,
                        logits_to_keep=1,
                        **{cache_name: prompt},
                    )
                cache = [(layer.keys, layer.values) for layer in prompt.layers]
                if any(keys is None for keys, _ in cache):  # kept none: each row reads it
                    cache, shared = None, shared[:0]
            skip = len(shared)
            for start in range(0, len(group), per_pass):
                chunk = group[start : start + per_pass]
                n = int(lengths[chunk].max()) - skip
                columns = torch.arange(n, device=device)[None]
                # row b of the pass: its tokens from column first[b] + skip on, then padding
                real = columns < lengths[chunk, None] - skip
                at_first = (columns + first[chunk, None] + skip).clamp(max=width - 1)
                ids = input_ids[chunk].gather(1, at_first).masked_fill(~real, 0)
                # completion token j of row b sits at column opening[b] + j of the pass
                opening = prompt_lengths[chunk] - skip
                labels = ids.masked_fill(~real, -100)
                labels[columns < opening[:, None]] = -100
                past = {}
                if cache is not None:  # every row of the pass attends to the one prompt
                    past[cache_name] = DynamicCache(
                        [
                            (k.expand(len(chunk), -1, -1, -1), v.expand(len(chunk), -1, -1, -1))
                            for k, v in cache
                        ]
                    )
                with trainer.accelerator.autocast():
                    out = model(input_ids=ids, labels=labels, fused_lm_head=True, **past)
                # out.log_probs[b, k] scores ids[b, k + 1]
                at = opening[:, None] - 1 + torch.arange(logits_to_keep, device=device)[None]
                at = at.clamp(max=n - 2)
                logps.append(out.log_probs.gather(1, at))
                if compute_entropy:
                    entropies.append(out.entropy.gather(1, at))
                scored.append(chunk)
        back = torch.argsort(torch.cat(scored))
        logp = torch.cat(logps)[back].masked_fill(~completion, 0.0)
        entropy = (
            torch.cat(entropies)[back].masked_fill(~completion, 0.0) if compute_entropy else None
        )
        return logp, entropy, None

    trainer._get_per_token_logps_and_entropies = score


def _checkpointing(model: Any) -> bool:
    """Whether ``model`` recomputes its activations in the backward pass (transformers' new name
    for it first: the old one warns)."""
    on = getattr(model, "is_activation_checkpointing", None)
    return bool(getattr(model, "is_gradient_checkpointing", False) if on is None else on)


def _passes(
    input_ids: Any, first: Any, lengths: Any, prompt_lengths: Any, share: bool
) -> list[tuple[Any, Any]]:
    """The batch's rows in groups to score, each as ``(rows sorted by length, shared ids)``: the
    rows of one prompt (two or more, of two tokens or more) with that prompt but its last token
    when ``share``, and every other row in one group with nothing shared."""
    import torch

    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for row, (start, size) in enumerate(zip(first.tolist(), prompt_lengths.tolist(), strict=True)):
        prompt = tuple(input_ids[row, start : start + size].tolist()) if share else (row,)
        by_prompt.setdefault(prompt, []).append(row)
    groups, alone = [], []
    for prompt, members in by_prompt.items():
        if share and len(members) > 1 and len(prompt) > 1:
            shared = input_ids[members[0], first[members[0]] : first[members[0]] + len(prompt) - 1]
            groups.append((members, shared))
        else:
            alone += members
    empty = input_ids.new_empty(0)
    groups.append((alone, empty))
    ordered = []
    for members, shared in groups:
        if members:
            rows = torch.tensor(members, device=input_ids.device)
            ordered.append((rows[torch.argsort(lengths[rows], stable=True)], shared))
    return ordered


def grpo(
    model: Any,
    tokenizer: Any,
    game: str,
    steps: int,
    seed: int,
    output_dir: str | Path,
    where: Mapping[str, Any] | None = None,
    peft_config: Any = None,
    **overrides: Any,
) -> tuple[Any, Any]:
    """``steps`` GRPO steps on ``game``'s train tasks with its default reward, every batch
    recorded by ``kit.capture.Capture``; ``where`` keeps only the tasks with these column values
    (``kit.tasks.TaskProvider``); ``overrides`` change the recipe (:data:`GRPO`) or any
    ``GRPOConfig`` field (``max_completion_length`` defaults to ``kit.evaluate.BUDGETS``;
    :func:`recipe` gives a model's: ``grpo(..., peft_config=r.peft_config, **r.grpo)``);
    ``peft_config`` trains LoRA adapters, as in :func:`warm_up`. Trained with :func:`train`.
    Return ``(trainer, capture)``; the model is trained in place."""
    from trl import GRPOTrainer

    from kit.capture import Capture
    from kit.envs import ENVS
    from kit.rewards import default_reward
    from kit.rollout import render_tools_once, reuse_turn_caches
    from kit.tasks import task_dataset

    args = grpo_args(game, steps, seed, output_dir, **overrides)
    if not args.gradient_checkpointing and _checkpointing(model):
        # left on by an earlier trainer of this model (SFT's is on by default), and Trainer turns
        # it on, never off: the recipe that says off would recompute every forward pass anyway
        disable = getattr(model, "activation_checkpointing_disable", None)
        (disable or model.gradient_checkpointing_disable)()
    # Enough rows for every step: an optimiser step takes (batch x processes x accumulation) /
    # num_generations rows of the task set.
    per_step = args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps
    rows = max(1, steps * per_step // args.num_generations)
    trainer = GRPOTrainer(
        model=model,
        args=args,
        reward_funcs=default_reward(game),
        train_dataset=task_dataset(game, "train", num_tasks=rows, seed=seed, where=where),
        processing_class=tokenizer,
        environment_factory=ENVS[game],
        peft_config=peft_config,
    )
    reuse_turn_caches(trainer)
    render_tools_once(trainer)
    score_by_length(trainer)
    quiet(trainer, "grpo", steps)
    capture = Capture(trainer)
    try:
        train(trainer, {"phase": "grpo", "game": game, "where": dict(where or {})})
    finally:
        capture.close()
    return trainer, capture


def checkpoint_record(recipe: Recipe, phase: str, steps: int, seed: int) -> dict[str, Any]:
    """What a saved checkpoint records of the run that made it (``kit.models.save(...,
    record=)``): the model and game of ``recipe``, the ``phase`` (``"sft"`` or ``"grpo"``),
    LoRA or not, the token budget, and the steps and seed. :func:`checkpoint` refuses a
    checkpoint whose model, game or phase differ (``kit.guards.CHECKPOINT_FIELDS``); the rest
    is recorded for the reader."""
    return {
        "model": recipe.model,
        "game": recipe.game,
        "phase": phase,
        "lora": recipe.lora,
        "max_completion_length": recipe.grpo["max_completion_length"],
        "steps": steps,
        "seed": seed,
    }


def checkpoint(
    path: str | Path,
    make: Callable[[], tuple[Any, Any]],
    record: Mapping[str, Any] | None = None,
    **load_kwargs: Any,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from the checkpoint at ``path``; if there is none yet, ``make()``
    them, save them there (``kit.models.save``, with ``record``) and return them. Says which in
    one line. With ``record`` (:func:`checkpoint_record`), a checkpoint already there must have
    been saved with the same model, game and phase, or ``ValueError`` names both
    (``kit.guards.check_checkpoint``): a notebook never trains on, or evaluates, another run's
    model by mistake.

    Why: the notebooks hand checkpoints on (notebook 1 saves the SFT model, 2 reads it and saves
    the GRPO model, 4 reads both), yet each must also run alone, under papermill or on a fresh
    Colab runtime. ``make`` is the recipe of the notebook that would have written the checkpoint,
    so a notebook run alone measures the same thing. A folder at ``path`` that is neither a
    complete checkpoint nor empty is refused before ``make`` trains anything. ``load_kwargs`` go
    to ``kit.models.load``.
    """
    from kit.guards import check_checkpoint
    from kit.models import load, missing_files, save

    path = Path(path)
    if not missing_files(path):
        if record is not None:
            check_checkpoint(path, record)
        print(f"loaded the checkpoint {path}", flush=True)
        return load(path, **load_kwargs)
    if path.exists() and not (path.is_dir() and not any(path.iterdir())):
        raise ValueError(
            f"{path} is neither a checkpoint (no {'; no '.join(missing_files(path))}) nor an "
            "empty folder: move it away or name another folder"
        )
    print(f"no checkpoint at {path} yet: making it", flush=True)
    model, tokenizer = make()
    save(model, tokenizer, path, record=record)
    print(f"saved the checkpoint {path}", flush=True)
    return model, tokenizer


def sft_checkpoint(
    recipe: Recipe,
    checkpoints: str | Path,
    steps: int,
    seed: int,
    output_dir: str | Path,
    **overrides: Any,
) -> tuple[Any, Any]:
    """The SFT model notebook 1 saves in ``checkpoints/"sft-model"``, or, where it has not,
    the same warm-up run here and saved there: ``recipe.load_model(seed)``, then
    :func:`warm_up` for ``steps`` with the recipe's LoRA and SFT fields, writing its trainer's
    files under ``output_dir/"sft"``; ``overrides`` (trackio's ``report_to``, ...) go to the
    ``SFTConfig``. Refused if the saved one was made for another model, game or phase
    (:func:`checkpoint`, :func:`checkpoint_record`).

    Why: notebooks 2 and 4 each start from notebook 1's model, yet each must run alone (under
    papermill, on a fresh Colab runtime); one call keeps the fallback the same recipe in both."""

    def make() -> tuple[Any, Any]:
        model, tokenizer = recipe.load_model(seed=seed)
        warm_up(
            model,
            tokenizer,
            recipe.game,
            steps,
            seed,
            Path(output_dir) / "sft",
            peft_config=recipe.peft_config,
            **{**recipe.sft, **overrides},
        )
        return model, tokenizer

    record = checkpoint_record(recipe, "sft", steps, seed)
    return checkpoint(Path(checkpoints) / "sft-model", make, record, **recipe.load)


def grpo_checkpoint(
    recipe: Recipe,
    checkpoints: str | Path,
    sft_steps: int,
    grpo_steps: int,
    seed: int,
    output_dir: str | Path,
    **overrides: Any,
) -> tuple[Any, Any]:
    """The GRPO model notebook 2 saves in ``checkpoints/"grpo-model"``, or, where it has not,
    notebook 2's run made here and saved there: :func:`grpo` for ``grpo_steps`` from
    :func:`sft_checkpoint`'s model (itself loaded or made with ``sft_steps``), writing under
    ``output_dir/"grpo"``. ``overrides`` go to the ``GRPOConfig`` and, where the SFT model is
    made here too, to its ``SFTConfig``: fields both trainers share and should share
    (trackio's ``report_to``, ...), not one phase's recipe (a ``learning_rate`` would change
    both). Refused as :func:`sft_checkpoint`'s is."""

    def make() -> tuple[Any, Any]:
        model, tokenizer = sft_checkpoint(
            recipe, checkpoints, sft_steps, seed, output_dir, **overrides
        )
        grpo(
            model,
            tokenizer,
            recipe.game,
            grpo_steps,
            seed,
            Path(output_dir) / "grpo",
            peft_config=recipe.peft_config,
            **{**recipe.grpo, **overrides},
        )
        return model, tokenizer

    record = checkpoint_record(recipe, "grpo", grpo_steps, seed)
    return checkpoint(Path(checkpoints) / "grpo-model", make, record, **recipe.load)


_PROGRESS_CALLBACKS = ("PrinterCallback", "ProgressCallback", "NotebookProgressCallback")


def quiet(trainer: Any, label: str, steps: int) -> None:
    """Replace the trainer's progress bars and per-log dict dumps (in a terminal or a notebook)
    with one short line per logging step."""
    from transformers import TrainerCallback

    class Line(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "loss" in logs and state.is_world_process_zero:
                extra = "".join(
                    f"  {name} {logs[key]:.3f}"
                    for key, name in (("reward", "reward"), ("tools/call_frequency", "calls"))
                    if key in logs
                )
                print(
                    f"   {label} step {state.global_step}/{steps}  loss {logs['loss']:.4f}"
                    f"{extra}  ({time.perf_counter() - self.started:.0f} s)",
                    flush=True,
                )

    for callback in list(trainer.callback_handler.callbacks):
        if type(callback).__name__ in _PROGRESS_CALLBACKS:
            trainer.remove_callback(callback)
    trainer.add_callback(Line())
