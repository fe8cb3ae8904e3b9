"""The README's code runs as written (offline, on the tiny model): documentation that is tested."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.slow
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write under runs/
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), {})


def test_readme_has_examples():
    assert len(BLOCKS) >= 2
