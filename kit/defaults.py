"""The numbers every training recipe is made of, each with the measurement or source behind it.

Why a module of its own: ``kit.train`` builds configs from these, ``kit.memory`` sizes a GPU's
batches from them, and the runbook and the notebooks print them. A module that imports nothing
of the kit's can be read by all of them without an import circle, and a reader finds every
choice, and why it was made, in one place. ``kit.train.recipe`` picks among them per model and
machine.
"""

from __future__ import annotations

from typing import Any

# SFT warm-up: one whole conversation per step (a Catch game is 554 to 1,006 tokens with the tiny
# tokenizer; a conversation cut short teaches only its first turns, and later calls come out
# malformed). Learning rate 5e-4: at 2e-3 the tiny model learnt the format and when to stay, and
# never which side to move to, not even after 1,500 steps (its first move went LEFT or RIGHT
# whatever the ball's column); at 5e-4 it reads the side of the board. No gradient checkpointing
# (TRL's SFTConfig turns it on): the tiny model's activations fit, recomputing them made 100 steps
# 1.1-1.15 times as long for the same losses, and it stayed on for the GRPO that followed.
SFT = {
    "per_device_train_batch_size": 1,
    "learning_rate": 5e-4,
    "max_length": 2048,
    "gradient_checkpointing": False,
}
# 500 steps, two and a half passes over the 200 shipped games. The side of the board is learnt
# last (it decides one or two moves of a game, the format every token of it): 500 steps at 5e-4
# leave the tiny model with the format and part of the side (held-out win rate 0.60 on seed 0,
# random play's 0.20), and 1,000 read every held-out board on four seeds of four, which leaves
# GRPO nothing to learn. The runbook shows GRPO at work, so its warm-up stops at 500; for the
# best model, train SFT longer (docs/results.md, "Does it learn?": more SFT beats GRPO here).
SFT_STEPS = 500
# GRPO from the warmed-up tiny model, as measured on Catch (docs/results.md, "Does it learn?"): four
# groups of 8 rollouts per step (four tasks), sampled at temperature 0.5, learning rate 5e-5, a
# tenth of SFT's. Four tasks per step keep one task from steering a step; 8 rollouts per task give
# each group a spread. At 2e-4 the first update broke the tool-call format of the model warmed up
# at 5e-4 (no tool call at all in a third of the next steps): Adam's first steps move every weight
# by about the learning rate, whatever the gradient. At temperature 1.0 earlier warm-ups broke
# their tool-call JSON within a few turns in most episodes. No gradient checkpointing: the tiny
# model's activations fit, and recomputing them cost a tenth of a step.
GRPO = {
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "learning_rate": 5e-5,
    "temperature": 0.5,
    "gradient_checkpointing": False,
}
# 120 steps: from seed 0's 500-step warm-up, 40 steps took the held-out win rate from 0.60 to
# 0.70 (p 0.27), 120 to 0.81 (p 0.009): GRPO turns a half-read board into a habit slowly, at a
# learning rate that keeps the format (docs/results.md, "Does it learn?").
GRPO_STEPS = 120

# -- a pretrained model on a GPU: every choice that depends on the model and the machine ----------
# Learning rates for a pretrained model, not measured here (no GPU): TRL's Wordle example trains
# Qwen3-1.7B with GRPO at 1e-6; SFT of a small instruct model at 1e-5 is the usual start. LoRA's
# adapters start at zero and are few, so they take steps about ten times larger. (1e-3, the tiny
# random model's rate, would wreck a pretrained one.)
PRETRAINED_LEARNING_RATES = {"sft": 1e-5, "grpo": 1e-6}
LORA_LEARNING_RATES = {"sft": 2e-4, "grpo": 1e-5}
# Rank 16 on every linear layer: the usual LoRA for a 0.5-8B model (TRL's and PEFT's examples).
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}


def lora_config() -> Any:
    """A ``peft.LoraConfig`` of :data:`LORA`, the kit's LoRA, for ``peft_config=``."""
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", **LORA)


# GRPO for a pretrained model: 4 tasks x 8 rollouts per optimiser step as in GRPO above, at
# TRL's temperature.
PRETRAINED_GRPO = {
    "per_device_train_batch_size": 8,
    "num_generations": 8,
    "gradient_accumulation_steps": 4,
    "temperature": 1.0,
}
# GRPO for a pretrained model on a CPU, where generation is the cost (TRL re-reads a rollout's
# whole context every turn): 2 tasks x 4 rollouts a step, LoRA at 1e-4 (ten times the GPU
# recipe's: an hour holds tens of steps, not hundreds), at TRL's temperature. Measured with
# benchmarks/grpo_step.py (SmolLM2-135M on Catch, docs/results.md): TRL generates a batch's turn
# until its longest rollout stops, and one rollout that rambled kept all eight decoding for
# hundreds of tokens (first turns wrote 113 tokens on average where a call is about 25;
# generation was 61% of a 332 s step). So a turn is capped at CPU_TURN_TOKENS new tokens
# (GRPOConfig.generation_kwargs, which the evaluations pass too, so they play the game GRPO
# played): a call is 20-30 tokens with TRL's template and a closing sentence fewer, and a turn
# cut there makes no call, which ends the episode like any other turn without one. No gradient
# checkpointing: the loss's forward and backward were 39% of that step, checkpointing recomputes
# the forward pass once more, and 8 rollouts' activations fit a CPU's memory.
CPU_TURN_TOKENS = 64
CPU_GRPO = {
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "gradient_accumulation_steps": 1,
    "temperature": 1.0,
    "gradient_checkpointing": False,
}
CPU_LEARNING_RATE = 1e-4
CPU_STEPS = {"sft": 40, "grpo": 24}
# On a GPU, a checkpoint every 25 steps (two kept): a rerun after a lost Colab runtime continues
# from the last one (:func:`train`) and loses at most 25 steps.
CHECKPOINTING = {"save_strategy": "steps", "save_steps": 25, "save_total_limit": 2}
# vLLM colocated with training takes this share of the GPU's memory (TRL 1.16's default too),
# written out because the planner divides the GPU by it; an estimate, not measured here. Training gets the planner's
# 0.9 less this (kit.memory.grpo_batch), and vLLM's context is the game's prompt and token
# budget, not the model's 40,960 positions (Qwen3), whose KV cache alone would not fit this share
# of a T4 and which vLLM must hold for one sequence before it starts.
VLLM_MEMORY_SHARE = 0.3
# Sampling, the same in GRPO and in evaluation (a win rate measured with other sampling than the
# policy trained with measures another policy): TRL 1.16's GRPOConfig defaults, written out.
# Written out because an evaluation that leaves them unset inherits the model's own
# generation_config (Qwen3's: top_k 20, top_p 0.95), which GRPO's GenerationConfig overrides.
# Temperature is each recipe's (GRPO's 0.5 for the tiny model, PRETRAINED_GRPO's 1.0).
SAMPLING = {"top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}
# Steps for a pretrained model, estimated, not measured (no GPU run here): GRPO 150, as TRL's
# Wordle example trains Qwen3-1.7B; SFT 200, about one pass over a game's shipped solver games
# (200, Wordle's 300): a pretrained instruct model learns the tool-call format in tens of steps
# (SmolLM2-135M in about 20 on a CPU), where the tiny random model needs SFT_STEPS to learn
# language at all.
PRETRAINED_STEPS = {"sft": 200, "grpo": 150}
STEPS_BASIS = {
    "tiny": "measured on Catch's held-out tasks by python -m kit.demo (docs/results.md, 'Four seeds')",
    "pretrained": "estimated: GRPO as TRL's Wordle example trains Qwen3-1.7B (150 steps), SFT "
    "about one pass over the shipped solver games; not measured on a GPU",
    "cpu": "measured, not yet learning: SmolLM2-135M on Catch, 40 SFT + 24, 30 and 36 GRPO steps "
    "in 79, 90 and 75 minutes on 2 CPU cores, GRPO's gain not separated from 0 in any "
    "(docs/results.md)",
}
# The template put on a ChatML tokenizer whose own template TRL does not recognise (SmolLM2's):
# TRL's own, with the same <|im_start|>/<|im_end|> tokens, and no thinking to switch off.
CHATML_TEMPLATE = "qwen3_instruct_2507"
