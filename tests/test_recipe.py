"""kit.train.recipe and kit.hardware: the hub-model path right by construction (issue 8 §1).

No GPU here: a device is described (``kit.hardware.T4`` and the like), and a "hub model" is a
local folder holding a published architecture's config (Qwen3-0.6B / 1.7B, from
``kit.hardware.ARCHITECTURES``) and a tokenizer with Qwen3's template, so every choice that
depends on a model's size and the machine is checked from real configs without a download.
What needs a GPU to run (fp16 and bf16 steps, vLLM) is checked as the configs that ask for it.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from kit.hardware import (  # noqa: E402
    A100_80,
    CPU,
    L4,
    T4,
    Device,
    architecture,
    count_parameters,
    fits_full,
)
from kit.models import load, save, tiny_model  # noqa: E402
from kit.train import (  # noqa: E402
    GRPO,
    LORA_LEARNING_RATES,
    PRETRAINED_LEARNING_RATES,
    SFT,
    _device_defaults,
    recipe,
    warm_up,
)


@pytest.fixture(scope="module")
def hub_like(tmp_path_factory):
    """Folders shaped like Qwen3-0.6B, 1.7B and 8B on the hub (the published config and a
    tokenizer whose template, TRL's qwen3.jinja, which is Qwen3's, reads enable_thinking), and
    one of an architecture kit.hardware never measured."""
    _, tokenizer = tiny_model()
    folders = {}
    for name in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B"):
        folder = tmp_path_factory.mktemp(name.split("/")[1])
        architecture(name).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[name] = str(folder)
    # Qwen3-1.7B with another MLP width: an architecture kit.hardware never measured
    folder = tmp_path_factory.mktemp("unmeasured")
    unmeasured = architecture("Qwen/Qwen3-1.7B")
    unmeasured.intermediate_size = 6000
    unmeasured.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    folders["unmeasured"] = str(folder)
    return folders


def test_parameter_counts_are_the_published_ones_without_weights():
    assert count_parameters(architecture("Qwen/Qwen3-0.6B")) == 596_049_920
    assert count_parameters(architecture("Qwen/Qwen3-1.7B")) == 1_720_574_976
    assert round(count_parameters(architecture("Qwen/Qwen3-8B")) / 1e9, 1) == 8.2
    with pytest.raises(ValueError, match="no published architecture"):
        architecture("Qwen/Qwen9")


def test_precision_follows_the_gpu_not_its_claims():
    assert (T4.bf16, T4.fp16) == (False, True)  # a T4 only emulates bf16
    assert (L4.bf16, L4.fp16) == (True, False)
    assert (CPU.bf16, CPU.fp16, CPU.gpu) == (False, False, False)
    assert _device_defaults(T4).items() >= {"fp16": True, "bf16": False, "use_cpu": False}.items()
    assert _device_defaults(A100_80).items() >= {"fp16": False, "bf16": True}.items()
    assert _device_defaults(CPU).items() >= {"fp16": False, "bf16": False, "use_cpu": True}.items()


def test_each_process_puts_its_model_on_its_own_gpu(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert A100_80.place() == "cuda:3"
    assert CPU.place() == "cpu"


def test_full_fine_tuning_only_where_it_fits():
    small, large = 596_049_920, 1_720_574_976
    assert not fits_full(small, T4) and fits_full(small, L4)
    assert not fits_full(large, L4) and fits_full(large, A100_80)
    assert fits_full(large, CPU)
    assert not fits_full(small, Device("tiny GPU", 1.0, (8, 0)))


def test_a_t4_gets_lora_in_fp16_with_thinking_off_and_checkpoints(hub_like):
    r = recipe(hub_like["Qwen/Qwen3-1.7B"], "wordle", device=T4)
    assert r.lora and r.parameters == 1_720_574_976
    assert r.load == {"dtype": "float16", "device_map": "cuda:0"}
    assert r.sft["learning_rate"] == LORA_LEARNING_RATES["sft"]
    assert r.grpo["learning_rate"] == LORA_LEARNING_RATES["grpo"]
    assert r.peft_config.r == 16 and r.peft_config.target_modules == "all-linear"
    for phase in (r.sft, r.grpo):
        assert phase["save_strategy"] == "steps" and phase["gradient_checkpointing"] is True
    assert r.grpo["chat_template_kwargs"] == {"enable_thinking": False}
    assert r.evaluation["chat_template_kwargs"] == {"enable_thinking": False}
    assert r.grpo["max_completion_length"] == r.evaluation["max_completion_length"] == 1024
    sudoku = recipe(hub_like["Qwen/Qwen3-1.7B"], "sudoku", device=T4)
    assert sudoku.grpo["max_completion_length"] == 4096  # per game, not one budget for all
    assert "use_vllm" not in r.grpo  # vllm is not installed here
    assert "LoRA r=16" in str(r) and "Tesla T4" in str(r)
    smoke = recipe(hub_like["Qwen/Qwen3-1.7B"], "sudoku", device=T4, max_completion_length=96)
    assert smoke.grpo["max_completion_length"] == smoke.evaluation["max_completion_length"] == 96


def test_an_a100_fine_tunes_fully_in_fp32_weights_with_bf16_autocast(hub_like):
    r = recipe(hub_like["Qwen/Qwen3-1.7B"], "catch", device=A100_80)
    assert not r.lora and r.peft_config is None
    assert r.load["dtype"] == "float32"  # TRL's choice: no bf16 master weights
    assert r.sft["learning_rate"] == PRETRAINED_LEARNING_RATES["sft"] == 1e-5
    assert r.grpo["learning_rate"] == PRETRAINED_LEARNING_RATES["grpo"] == 1e-6
    lora = recipe(hub_like["Qwen/Qwen3-1.7B"], "catch", device=A100_80, lora=True)
    assert lora.lora and lora.load["dtype"] == "bfloat16"
    thinking = recipe(hub_like["Qwen/Qwen3-0.6B"], "catch", device=L4, thinking=True)
    assert not thinking.lora and thinking.grpo["chat_template_kwargs"] == {"enable_thinking": True}


def test_a_gpu_gets_the_micro_batch_and_generation_batch_it_holds(hub_like):
    from kit.hardware import (
        GIB,
        PROMPT_TOKENS,
        checkpointed_peak,
        kv_cache_bytes,
        measured_for,
        training_bytes,
    )

    config = architecture("Qwen/Qwen3-1.7B")
    fixed = training_bytes(config, lora=True)
    kept = measured_for(config, lora=True)
    assert kept is not None  # a local folder is matched to its architecture, not its name
    usable = 0.9 * T4.memory_gib * GIB

    def holds(r, tokens):
        g = r.grpo
        rows, generated = (
            g["per_device_train_batch_size"],
            g["per_device_train_batch_size"] * g["steps_per_generation"],
        )
        assert rows * g["gradient_accumulation_steps"] == 32  # the rollouts of a step unchanged
        assert generated % g["num_generations"] == 0  # whole groups
        activations = checkpointed_peak(config, True, rows * tokens)
        return rows, generated, fixed + max(activations, kv_cache_bytes(config, generated * tokens))

    # Catch: 8 rows of a prompt + 1,024 tokens and 32 rollouts at once fit a T4
    rows, generated, needed = holds(
        recipe(hub_like["Qwen/Qwen3-1.7B"], "catch", device=T4), PROMPT_TOKENS + 1024
    )
    assert (rows, generated) == (8, 32) and needed <= usable
    # Sudoku's 4,096-token budget: 32 rollouts' KV cache would not fit, 16 do
    rows, generated, needed = holds(
        recipe(hub_like["Qwen/Qwen3-1.7B"], "sudoku", device=T4), PROMPT_TOKENS + 4096
    )
    assert kv_cache_bytes(config, 32 * (PROMPT_TOKENS + 4096)) + fixed > usable
    assert (rows, generated) == (8, 16) and needed <= usable
    # evaluation generates 64 episodes together where their KV cache fits, fewer where not
    for game, budget, together in (("catch", 1024, 32), ("sudoku", 4096, 16)):
        batch = recipe(hub_like["Qwen/Qwen3-1.7B"], game, device=T4).evaluation["batch_size"]
        assert batch == together
        assert fixed + kv_cache_bytes(config, batch * (PROMPT_TOKENS + budget)) <= usable
        assert fixed + kv_cache_bytes(config, 2 * batch * (PROMPT_TOKENS + budget)) > usable
    assert (
        recipe(hub_like["Qwen/Qwen3-1.7B"], "sudoku", device=A100_80).evaluation["batch_size"] == 64
    )
    # an A100 holds the recipe as written; the CPU is not sized
    assert holds(
        recipe(hub_like["Qwen/Qwen3-1.7B"], "sudoku", device=A100_80), PROMPT_TOKENS + 4096
    )[:2] == (8, 32)
    assert (
        "steps_per_generation" not in recipe(hub_like["Qwen/Qwen3-0.6B"], "catch", device=CPU).grpo
    )
    # an architecture never measured: the KV cache (computed from any config) still sizes the
    # generation; the micro-batch stays the recipe's, its activations unknown
    from transformers import AutoConfig

    assert measured_for(AutoConfig.from_pretrained(hub_like["unmeasured"]), lora=True) is None
    longer = architecture("Qwen/Qwen3-1.7B")
    longer.max_position_embeddings = 131072  # another context length: the same tensors
    assert measured_for(longer, lora=True) == kept
    unmeasured = recipe(hub_like["unmeasured"], "sudoku", device=T4).grpo
    assert (unmeasured["per_device_train_batch_size"], unmeasured["steps_per_generation"]) == (8, 2)
    # Qwen3-8B's 16-bit weights alone take more than a T4 holds: a clear error, not an OOM later
    with pytest.raises(ValueError, match=r"does not fit Tesla T4 .*4-bit weights"):
        recipe(hub_like["Qwen/Qwen3-8B"], "catch", device=T4)
    assert (
        recipe(hub_like["Qwen/Qwen3-8B"], "catch", device=L4).grpo["per_device_train_batch_size"]
        == 4
    )


def test_the_tiny_recipe_is_the_measured_one():
    from kit.tasks import TURN_LIMITS

    r = recipe("tiny", "catch", device=CPU)
    limits = {"max_completion_length": 1024, "max_tool_calling_iterations": TURN_LIMITS["catch"]}
    assert r.sft == SFT and r.grpo == {**GRPO, **limits} and r.peft_config is None
    assert r.evaluation == {**limits, "temperature": GRPO["temperature"], "batch_size": 256}
    model, _ = r.load_model(seed=0)
    # counted from tiny_config on the meta device, without training the tokenizer
    assert model.device.type == "cpu" and r.parameters == model.num_parameters() == 557_824
    with pytest.raises(ValueError, match="unknown game"):
        recipe("tiny", "chess")


def test_load_gives_fp32_weights_by_default_as_trl_does(tmp_path):
    model, tokenizer = tiny_model()
    save(model.to(torch.bfloat16), tokenizer, tmp_path / "bf16")
    loaded, _ = load(tmp_path / "bf16")
    assert loaded.dtype == torch.float32 and loaded.device.type == "cpu"
    assert load(tmp_path / "bf16", dtype="bfloat16")[0].dtype == torch.bfloat16


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_lora_warm_up_merges_into_the_model_it_was_given(tmp_path):
    from peft import LoraConfig

    model, tokenizer = tiny_model(seed=0)
    before = _weights(model)
    config = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules="all-linear")
    warm_up(model, tokenizer, "catch", 3, 0, tmp_path / "sft", peft_config=config)
    after = _weights(model)
    assert set(after) == set(before)  # no adapter layer left in the model
    assert not any("lora" in name for name, _ in model.named_modules())
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert any("proj" in k for k in changed)  # the merged adapters moved the linear layers
    assert all(torch.equal(before[k], after[k]) for k in before if "norm" in k)  # LoRA only
    save(model, tokenizer, tmp_path / "merged")
    reloaded = _weights(load(tmp_path / "merged")[0])
    assert all(torch.equal(after[k], reloaded[k]) for k in after)


def test_cpu_recipe_keeps_the_model_on_the_cpu_and_saves_nothing(hub_like):
    r = recipe(hub_like["Qwen/Qwen3-0.6B"], "catch", device=CPU)
    assert r.load == {"dtype": "float32", "device_map": "cpu"} and not r.lora
    assert "save_strategy" not in r.grpo and "gradient_checkpointing" not in r.sft


def test_a_rerun_resumes_from_the_last_checkpoint(tmp_path, capsys):
    """A run that saves checkpoints continues from its last one when run again (a lost Colab
    runtime); a run that saves none (the CPU default) starts afresh."""
    model, tokenizer = tiny_model(seed=0)
    saving = {"save_strategy": "steps", "save_steps": 2}
    warm_up(model, tokenizer, "catch", 2, 0, tmp_path, logging_steps=1, **saving)
    assert (tmp_path / "checkpoint-2").is_dir()
    capsys.readouterr()
    fresh, _ = tiny_model(seed=0)
    losses = warm_up(fresh, tokenizer, "catch", 4, 0, tmp_path, logging_steps=1, **saving)
    assert f"resuming from {tmp_path / 'checkpoint-2'}" in capsys.readouterr().out
    assert [entry["step"] for entry in losses] == [1, 2, 3, 4]  # 1-2 restored, 3-4 trained
    assert (tmp_path / "checkpoint-4").is_dir()
    capsys.readouterr()
    again = warm_up(tiny_model(seed=0)[0], tokenizer, "catch", 2, 0, tmp_path, logging_steps=1)
    assert "resuming" not in capsys.readouterr().out  # saves nothing: starts afresh
    assert [entry["step"] for entry in again] == [1, 2]


def test_lora_grpo_trains_and_merges(tmp_path):
    """Scripted generation gives the group a spread (half its rollouts make two invalid moves,
    which end the game and which the reward charges, half a valid one), so the advantages are not zero and the adapters learn."""
    import itertools

    from peft import LoraConfig

    from kit.train import grpo
    from tests.scripted import ScriptedGeneration, tool_call

    model, tokenizer = tiny_model(seed=0)
    first_turns = itertools.cycle([tool_call("stay"), tool_call("move", direction="up")])

    def script(text: str) -> list[str]:
        turn = text.count("<|im_start|>assistant") - 1
        if turn == 0:
            return [next(first_turns)]
        return ["", tool_call("move", direction="up")] if '"up"' in text and turn == 1 else []

    ScriptedGeneration(tokenizer, script).install(model)
    before = _weights(model)
    config = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules="all-linear")
    trainer, capture = grpo(
        model,
        tokenizer,
        "catch",
        1,
        0,
        tmp_path,
        peft_config=config,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=256,
        learning_rate=1e-2,
    )
    assert len(capture.batches) == 1 and trainer.model is model  # merged back into it
    after = _weights(model)
    assert set(after) == set(before)
    assert any(not torch.equal(before[k], after[k]) for k in before if "proj" in k)


def test_evaluation_renders_with_the_recipes_template_kwargs():
    """enable_thinking=False reaches Qwen3's template: the generation prompt ends in an empty
    think block, as GRPOConfig(chat_template_kwargs=...) renders it in training."""
    from kit.evaluate import evaluate

    model, tokenizer = tiny_model(seed=0)
    settings = {"max_completion_length": 8, "tasks": [{"ball_col": 1}], "name": "tiny"}
    off = evaluate(
        model, "catch", tokenizer, chat_template_kwargs={"enable_thinking": False}, **settings
    )
    plain = evaluate(model, "catch", tokenizer, **settings)
    empty_think = tokenizer.encode("<think>\n\n</think>\n\n", add_special_tokens=False)
    (with_kwargs,) = off.trajectories
    (without,) = plain.trajectories
    assert with_kwargs.prompt_ids[-len(empty_think) :] == empty_think
    assert with_kwargs.prompt_ids[: -len(empty_think)] == without.prompt_ids


def test_the_readmes_profile_table_is_the_code_s():
    from pathlib import Path

    from kit.hardware import profile_table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert profile_table() in readme
