"""The notebooks run clean from top to bottom, and are stored the way nbval can check them.

nbval (``python -m pytest`` collects ``notebooks/``, see pyproject.toml) compares the outputs of
the cells tagged ``nbval-check-output`` with the stored ones. It cannot see two failures: a cell
whose magic is misplaced prints a ``UsageError`` that nbval lets pass (NOTES §5), and a notebook
stored unexecuted, whose cells it then never compares. So every notebook is also executed here
once with papermill (in smoke mode, set by the root conftest.py), every output is searched, and
the stored files are checked. One notebook runs with ``MODEL`` set to a local checkpoint, the
``kit.models.load`` path a GPU user takes with a hub id.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CHECK = "nbval-check-output"
MAX_BYTES = 600_000  # stored outputs stay small: no widget state, smoke-sized figures


def _code(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _problems(notebook) -> list[str]:
    found = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                found.append(f"cell {index}: {output.ename}: {output.evalue}")
            elif "UsageError" in json.dumps(output):
                found.append(f"cell {index}: UsageError in its output")
    return found


def test_there_are_the_four_notebooks():
    assert [path.name for path in NOTEBOOKS] == [
        "01_sft_warmup.ipynb",
        "02_grpo.ipynb",
        "03_multi_env.ipynb",
        "04_evaluation.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_stored_notebook_is_executed_small_and_parametrised(path):
    notebook = nbformat.read(path, as_version=4)
    cells = _code(notebook)
    first = cells[0]
    assert first.metadata.get("tags") == ["parameters"]
    assert 'SMOKE = os.environ.get("KIT_SMOKE") == "1"' in first.source
    assert 'MODEL = "tiny"' in first.source
    assert any(
        'tiny_model(seed=SEED) if MODEL == "tiny" else load(MODEL)' in c.source for c in cells
    )
    assert 'if importlib.util.find_spec("kit") is None:' in cells[1].source  # Colab install
    for cell in cells:
        lines = [line.strip() for line in cell.source.splitlines()]
        assert not [line for line in lines if line.startswith(("%", "!"))], "no magics"
    # executed top to bottom in one kernel, so nbval has stored outputs to compare
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1))
    assert sum(CHECK in cell.metadata.get("tags", []) for cell in cells) >= 2
    assert not _problems(notebook)
    assert "widgets" not in notebook.metadata
    assert not [cell for cell in notebook.cells if "execution" in cell.metadata], "no timestamps"
    assert path.stat().st_size < MAX_BYTES


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from kit.models import tiny_model

    folder = tmp_path_factory.mktemp("checkpoint")
    model, tokenizer = tiny_model(seed=1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_without_an_error_or_a_usage_error(path, tmp_path, checkpoint):
    papermill = pytest.importorskip("papermill")
    parameters = {"MODEL": str(checkpoint)} if path.stem == "04_evaluation" else {}
    executed = papermill.execute_notebook(
        str(path),
        str(tmp_path / path.name),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(path.parent),
        progress_bar=False,
    )
    assert not _problems(executed)
    outputs = json.dumps([cell.get("outputs", []) for cell in executed.cells])
    if parameters:
        assert f"{checkpoint}: " in outputs  # the model cell loaded the checkpoint
    else:
        assert "tiny: " in outputs
