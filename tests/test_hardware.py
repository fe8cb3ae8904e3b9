"""kit.hardware's memory figures (issue 8 §2): activations measured on the CPU as TRL's GRPO loss
keeps them, and the stored measurements the README's profile table is made of.

Kept bytes are exact counts (every storage autograd saves, once), so the checks are equalities:
the linear model fitted from one and two layers predicts a deeper, longer run to the byte, and
what checkpointing and autocast keep is what the architecture says they must.
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from kit.hardware import (  # noqa: E402
    architecture,
    kept_bytes,
    kv_cache_bytes,
    measure_activations,
    measured_activations,
)

QWEN = "Qwen/Qwen3-0.6B"


@pytest.fixture(scope="module")
def config():
    return architecture(QWEN)


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_one_and_two_layers_predict_a_deeper_longer_run_to_the_byte(config, lora):
    fitted = measure_activations(config, lora=lora, checkpointing=False)
    assert kept_bytes(config, 4, 192, lora, checkpointing=False) == fitted(4, 192)
    assert fitted.layer > fitted.outside > 0


def test_without_checkpointing_full_fine_tuning_keeps_autocast_s_16_bit_weights(config):
    # each layer's Linear weights, cast to bf16 once per forward pass and kept for the backward
    fitted = measure_activations(config, lora=False, checkpointing=False)
    h, i = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    linear = h * q + 2 * h * kv + q * h + 3 * h * i
    assert fitted.layer_fixed == 2 * linear
    lora = measure_activations(config, lora=True, checkpointing=False)
    assert lora.layer_fixed == 0  # bf16 weights: nothing to cast


def test_checkpointing_keeps_each_layer_s_input_alone():
    for name, modes in measured_activations().items():
        hidden = architecture(name).hidden_size
        # the residual stream: fp32 under autocast (full fine-tuning), bf16 with bf16 weights
        assert modes["full"]["checkpointed"].layer == 4 * hidden, name
        assert modes["lora"]["checkpointed"].layer == 2 * hidden, name
        for mode in modes.values():
            assert mode["plain"].layer > 10 * mode["checkpointed"].layer, name


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_the_stored_measurements_are_what_this_code_measures(config, lora):
    stored = measured_activations()[QWEN]["lora" if lora else "full"]["checkpointed"]
    fresh = measure_activations(config, lora=lora, checkpointing=True)
    # exact on the stored versions of torch, transformers and TRL; a new release may move a
    # byte here and there, not the figures the README gives
    for field in ("layer", "outside"):
        assert getattr(fresh, field) == pytest.approx(getattr(stored, field), rel=0.05), field


def test_the_kv_cache_is_what_generation_allocates():
    import torch

    from kit.models import tiny_model

    model, _ = tiny_model()
    ids = torch.randint(0, model.config.vocab_size, (3, 17))
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    allocated = sum(
        t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values)
    )
    assert allocated == kv_cache_bytes(model.config, 3 * 17, bytes_per_value=4)


# -- scripts/gpu_profile.py, the GPU check, run here in its CPU smoke mode ----------------------


def _gpu_profile():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu_profile.py"
    spec = importlib.util.spec_from_file_location("gpu_profile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_profile_script_runs_a_grpo_step_and_appends_its_line(tmp_path):
    import json

    from kit.hardware import GIB
    from kit.models import tiny_config, tiny_tokenizer

    script = _gpu_profile()
    padded = script.padded_tokenizer(2048)
    assert len(padded) == 2048
    text = "Let's play Catch."
    assert padded.encode(text) == tiny_tokenizer("qwen3", 1024).encode(text)

    out = tmp_path / "profile.jsonl"
    out.write_text('{"earlier": "run"}\n')
    (line,) = script.main(["--smoke", "--out", str(out)])
    assert line["fits"] and line["budget"] == 64 and line["device"] == "cpu"
    assert len(line["step_time_s"]) == 1 and line["step_time_s"][0] > 0
    assert line["longest_rollout_tokens"] > 64  # a prompt and a completion
    tokens, rollouts = line["longest_rollout_tokens"], 8 * line["gradient_accumulation_steps"]
    cache = kv_cache_bytes(tiny_config(), rollouts * tokens) / GIB
    assert line["predicted_gib"]["kv_cache"] == round(cache, 2)
    assert [json.loads(x) for x in out.read_text().splitlines()] == [{"earlier": "run"}, line]
    with pytest.raises(SystemExit):
        script.main(["--models", "Qwen/Qwen9", "--out", str(out)])
