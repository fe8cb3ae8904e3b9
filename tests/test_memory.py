"""kit.memory's figures (issue 8 §2): activations measured on the CPU as TRL's GRPO loss
keeps them, and the stored measurements docs/gpu.md's profile table is made of.

Kept bytes are exact counts (every storage autograd saves, once), so the checks are equalities:
the linear model fitted from one and two layers predicts a deeper, longer run to the byte, and
what checkpointing and autocast keep is what the architecture says they must.
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from kit.memory import (  # noqa: E402
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
@pytest.mark.slow
def test_one_and_two_layers_predict_a_deeper_longer_run_to_the_byte(config, lora):
    fitted = measure_activations(config, lora=lora, checkpointing=False)
    assert kept_bytes(config, 4, 192, lora, checkpointing=False) == fitted(4, 192)
    assert fitted.layer > fitted.outside > 0


@pytest.mark.slow
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
@pytest.mark.slow
def test_the_stored_measurements_are_what_this_code_measures(config, lora):
    stored = measured_activations()[QWEN]["lora" if lora else "full"]["checkpointed"]
    fresh = measure_activations(config, lora=lora, checkpointing=True)
    # exact on the stored versions of torch, transformers and TRL; a new release may move a
    # byte here and there, not the figures docs/gpu.md gives
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


@pytest.mark.slow
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


# -- vLLM colocated: its share of the GPU, by hand (issue 9) ---------------------------------------
# Qwen3-1.7B on a T4 (15 GiB), LoRA r=16: the figures the planner must reproduce, from the
# published architecture: 1,720,574,976 parameters; LoRA on every linear layer of its 28 (q and o
# 2,048 -> 2,048, k and v 2,048 -> 1,024, gate and up 2,048 -> 6,144, down 6,144 -> 2,048) adds
# 16 * (4,096 + 3,072 + 3,072 + 4,096 + 8,192 * 3) = 622,592 a layer; a token's KV cache is
# 2 (key, value) * 28 layers * 8 KV heads * 128 * 2 bytes.
PARAMETERS_1_7B = 1_720_574_976
LORA_1_7B = 28 * 16 * (4_096 + 3_072 + 3_072 + 4_096 + 8_192 * 3)
KV_PER_TOKEN_1_7B = 2 * 28 * 8 * 128 * 2
GIB_ = 1024**3


def test_vllm_s_share_holds_its_weights_and_its_kv_cache_and_training_gets_the_rest():
    from kit.hardware import T4
    from kit.memory import (
        checkpointed_peak,
        generated_at_once,
        grpo_batch,
        lora_parameters,
        training_bytes,
        vllm_kv_room,
    )

    config = architecture("Qwen/Qwen3-1.7B")
    assert lora_parameters(config, 16) == LORA_1_7B == 17_432_576
    assert kv_cache_bytes(config, 1) == KV_PER_TOKEN_1_7B == 114_688
    fixed = 2 * PARAMETERS_1_7B + 16 * LORA_1_7B  # 16-bit weights, fp32 adapters with Adam
    assert training_bytes(config, lora=True) == fixed == 3_720_071_168
    # vLLM's 0.3 of 15 GiB = 4.5 GiB, less its 16-bit copy of the weights
    room = 4.5 * GIB_ - 2 * PARAMETERS_1_7B
    assert vllm_kv_room(config, T4, 0.3) == pytest.approx(room) == 1_390_688_256

    # rows of 512 tokens: 32 rollouts' KV cache (1.75 GiB) overflows vLLM's room, 16 (0.875)
    # fit; transformers' generate, in training's 13.5 GiB, holds all 32
    assert 32 * 512 * KV_PER_TOKEN_1_7B > room >= 16 * 512 * KV_PER_TOKEN_1_7B
    assert grpo_batch(config, T4, True, 512, 8, 32, 8) == (8, 32)
    assert grpo_batch(config, T4, True, 512, 8, 32, 8, vllm_share=0.3) == (8, 16)

    # rows of 4,608 tokens: training gets 0.9 - 0.3 = 0.6 of the T4 (9 GiB), where 8 rows'
    # activations no longer fit beside the weights and 4 do; vLLM generates one group at a
    # time (8 rollouts' KV cache overflows its room, but TRL generates whole groups; vLLM queues)
    training = 0.6 * 15 * GIB_
    assert fixed + checkpointed_peak(config, True, 8 * 4608) > training
    assert fixed + checkpointed_peak(config, True, 8 * 4608) <= 0.9 * 15 * GIB_
    assert fixed + checkpointed_peak(config, True, 4 * 4608) <= training
    assert grpo_batch(config, T4, True, 4608, 8, 32, 8) == (8, 16)
    assert grpo_batch(config, T4, True, 4608, 8, 32, 8, vllm_share=0.3) == (4, 8)

    # evaluation (transformers' generate beside the trainer) gets training's part less its
    # fixed memory: 13.5 GiB - 3.46 = 10.04 GiB holds 20 rows of 4,608 tokens, 16 of them
    # halving from 64; beside vLLM, 9 GiB - 3.46 = 5.54 GiB holds 11, so 8
    row = 4608 * KV_PER_TOKEN_1_7B
    assert (0.9 * 15 * GIB_ - fixed) // row == 20 and (training - fixed) // row == 11
    assert generated_at_once(config, T4, True, 4608, 64) == 16
    assert generated_at_once(config, T4, True, 4608, 64, vllm_share=0.3) == 8

    # one rollout of 16,384 tokens (1.75 GiB) does not fit vLLM's room: vLLM would not start
    with pytest.raises(ValueError, match="vLLM would refuse to start"):
        grpo_batch(config, T4, True, 16_384, 8, 32, 8, vllm_share=0.3)
    # Qwen3-4B's 16-bit weights alone are more than vLLM's 4.5 GiB
    with pytest.raises(ValueError, match="less than one rollout"):
        grpo_batch(architecture("Qwen/Qwen3-4B"), T4, True, 1536, 8, 32, 8, vllm_share=0.3)


def test_the_profile_table_accounts_for_vllm_where_asked():
    from kit.hardware import T4
    from kit.memory import profile_table

    table = profile_table(models=("Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B"), devices=(T4,), vllm=True)
    assert "vLLM's 0.3: its weights / room for KV cache" in table
    assert (
        "| Tesla T4 (15 GiB) | Qwen/Qwen3-1.7B | LoRA r=16 | fp16 | 3.5 | 3.2 | 3.2 / 1.3 "
        "| yes: 8 rows a micro-batch, 8 rollouts generated at once |"
    ) in table
    assert "| Qwen/Qwen3-4B | LoRA r=16 | fp16 | 8.0 | 4.9 | 7.5 / 0.0 | no: vLLM's share" in table
    plain = profile_table(models=("Qwen/Qwen3-1.7B",), devices=(T4,))
    assert "| 3.5 | 3.2 | 5.2 | yes |" in plain  # transformers' generate: docs/gpu.md's table


# -- the vllm extra on a CPU torch: a mismatched torchvision, named with its fix (issue 9) ------
# A torchvision whose compiled operators did not load (built for another torch) fails on import
# where its _meta_registrations registers a fake kernel for an operator that does not exist: the
# RuntimeError below is torch's own, raised by the same call the real package makes.
_FAKE_TORCHVISION = {
    "torchvision/__init__.py": "from torchvision import _meta_registrations  # noqa: F401\n",
    "torchvision/_meta_registrations.py": (
        "import torch\n\n\n"
        '@torch.library.register_fake("torchvision::nms")\n'
        "def meta_nms(dets, scores, iou_threshold):\n"
        "    return dets.new_empty(0, dtype=torch.long)\n"
    ),
    # transformers imports torchvision only where its metadata says it is installed
    "torchvision-0.28.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n"
    ),
}

_ENTRY_POINTS = r"""
import json, sys
results = {}
try:
    import torchvision
except RuntimeError as error:
    results["torchvision"] = f"{type(error).__name__}: {error}"
from kit.models import load, tiny_config, tiny_model
from kit.memory import count_parameters
for name, call in (
    ("tiny_model", tiny_model),
    ("count_parameters", lambda: count_parameters(tiny_config())),
    ("load", lambda: load(sys.argv[1], device_map="cpu")),
):
    try:
        call()
        results[name] = "no error"
    except Exception as error:
        results[name] = f"{type(error).__name__}: {error}"
print(json.dumps(results))
"""


@pytest.mark.slow
def test_a_torchvision_that_does_not_match_torch_is_named_with_its_fix(tmp_path):
    """What installing the vllm extra next to a CPU torch leaves: every way the kit loads a
    transformers model class fails with an error that names the cause and the fix, instead of
    transformers' "Could not import module 'Qwen3ForCausalLM'"."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("PIL")  # transformers imports torchvision only with PIL installed
    from kit.models import save, tiny_model

    fix = "pip uninstall -y vllm torchvision torchaudio"
    fake = tmp_path / "site"
    for name, text in _FAKE_TORCHVISION.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    save(*tiny_model(), tmp_path / "tiny")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(root)])}
    run = subprocess.run(
        [sys.executable, "-c", _ENTRY_POINTS, str(tmp_path / "tiny")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert results.pop("torchvision") == "RuntimeError: operator torchvision::nms does not exist"
    for name, outcome in results.items():
        assert outcome.startswith("ImportError: transformers cannot import its model classes"), (
            name,
            outcome,
        )
        assert "operator torchvision::nms does not exist" in outcome, name
        assert "`vllm` extra is for a CUDA machine" in outcome, name
        assert outcome.endswith(fix), name


def test_other_import_errors_pass_through_unchanged():
    from kit.hardware import vision_stack_check

    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        with vision_stack_check():
            import no_such_module_here  # noqa: F401
    with pytest.raises(RuntimeError, match="unrelated"):
        with vision_stack_check():
            raise RuntimeError("unrelated")
