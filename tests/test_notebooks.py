"""The notebooks run clean from top to bottom, and are stored the way nbval can check them.

nbval (``python -m pytest`` collects ``notebooks/``, see pyproject.toml) compares the outputs of
the cells tagged ``nbval-check-output`` with the stored ones. It cannot see two failures: a cell
whose magic is misplaced prints a ``UsageError`` that nbval lets pass (NOTES §5), and a notebook
stored unexecuted, whose cells it then never compares. So every notebook is also executed here
once with papermill (in smoke mode, set by the root conftest.py), every output is searched, and
the stored files are checked: they carry the outputs of a full run (``scripts/run_notebooks.sh``),
and nbval compares only the cells whose output is the same in both modes. Notebook 4 runs with
``MODEL`` set to a local checkpoint, the ``kit.models.load`` path a GPU user takes with a hub id,
and with no checkpoint of notebooks 1 and 2 to load, as when it runs alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK = "nbval-check-output"
MAX_BYTES = 1_500_000  # stored outputs stay small: no widget state, few token views
CHECKPOINTS = 'CHECKPOINTS = os.environ.get("KIT_CHECKPOINTS", "runs/notebooks")'
# Which checkpoint each notebook saves, and which it loads (making it where it is missing).
SAVES = {"01_sft_warmup": ["sft-model"], "02_grpo": ["grpo-model"]}
LOADS = {"02_grpo": ["sft-model"], "04_evaluation": ["sft-model", "grpo-model"]}


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


def _text(cell) -> str:
    """A cell's printed and displayed text."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_stored_notebook_is_a_full_run_executed_small_and_parametrised(path):
    notebook = nbformat.read(path, as_version=4)
    cells = _code(notebook)
    first = cells[0]
    assert first.metadata.get("tags") == ["parameters"]
    assert 'SMOKE = os.environ.get("KIT_SMOKE") == "1"' in first.source
    assert 'MODEL = "tiny"' in first.source
    # every choice that depends on the model and the machine comes from kit.train.recipe
    assert any("RECIPE = recipe(MODEL, " in c.source for c in cells)
    # the model too, loaded directly or through the call that makes notebook 1's checkpoint
    loads = r"RECIPE\.load_model\(seed=SEED\)|sft_checkpoint\(\s*RECIPE, "
    assert any(re.search(loads, c.source) for c in cells)
    assert 'if importlib.util.find_spec("kit") is None:' in cells[1].source  # Colab install
    assert (
        "TRACKING = setup(RUN, SMOKE, trackio=TRACKIO, space_id=TRACKIO_SPACE)" in cells[2].source
    )
    if path.stem in SAVES or path.stem in LOADS:  # on Colab, "drive" keeps them past a recycle
        assert "CHECKPOINTS = checkpoints(CHECKPOINTS)" in cells[2].source
    # what a reader sees on GitHub is a real run: kit.notebook.setup says which run it was
    run = first.source.split('RUN = "')[1].split('"')[0]
    assert _text(cells[2]).startswith(f"{run}: full run;"), _text(cells[2])
    for cell in cells:
        lines = [line.strip() for line in cell.source.splitlines()]
        assert not [line for line in lines if line.startswith(("%", "!"))], "no magics"
    # executed top to bottom in one kernel, so nbval has stored outputs to compare
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1))
    assert sum(CHECK in cell.metadata.get("tags", []) for cell in cells) >= 2
    for cell in cells:  # a compared cell must not depend on the mode the stored run had
        if CHECK in cell.metadata.get("tags", []):
            assert "SMOKE" not in cell.source and "STEPS" not in cell.source, cell.source
    assert not _problems(notebook)
    assert "widgets" not in notebook.metadata
    assert not [cell for cell in notebook.cells if "execution" in cell.metadata], "no timestamps"
    assert path.stat().st_size < MAX_BYTES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_checkpoints_are_handed_on_from_notebook_to_notebook(path):
    source = "\n".join(cell.source for cell in _code(nbformat.read(path, as_version=4)))
    if path.stem in SAVES or path.stem in LOADS:
        assert CHECKPOINTS in _code(nbformat.read(path, as_version=4))[0].source
    # each checkpoint is saved with, and loaded against, the record of what made it
    for name in SAVES.get(path.stem, []):
        saved = f'save(model, tokenizer, CHECKPOINTS / "{name}", replace=True, record=record)'
        assert saved in source
        assert f'record = checkpoint_record(RECIPE, "{name.split("-")[0]}", ' in source
    # each loads through the one kit call that also makes a missing checkpoint with the recipe
    # of the notebook that saves it (and checks its record)
    for name in LOADS.get(path.stem, []):
        assert re.search(rf"{name.split('-')[0]}_checkpoint\(\s*RECIPE, CHECKPOINTS, ", source)
    # no notebook repeats another's training, nor copies its fallback: 2 never warms up and 4
    # never trains, not even inside a function of its own
    repeated = {"02_grpo": ("SFTTrainer(", "warm_up("), "04_evaluation": ("warm_up(", "grpo(")}
    for call in repeated.get(path.stem, ()):
        calls = [line for line in source.splitlines() if call in line]
        assert not calls, f"{path.stem} trains itself: {calls}"


def _parameters(path: Path) -> dict:
    namespace: dict = {}
    exec(_code(nbformat.read(path, as_version=4))[0].source, namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_full_run_parameters_are_the_kits_recipes(path, monkeypatch):
    """The parameter cell must be plain literals (papermill rewrites it, and on Colab it runs
    before the kit is installed), so it cannot import the recipes: this keeps the two equal."""
    from kit.evaluate import BUDGETS
    from kit.train import GRPO_STEPS, SFT_STEPS, recipe

    monkeypatch.delenv("KIT_SMOKE", raising=False)
    monkeypatch.delenv("KIT_CHECKPOINTS", raising=False)
    full = _parameters(path)
    assert full["SMOKE"] is False and full["MODEL"] == "tiny" and full["SEED"] == 0
    assert full["LORA"] is None  # the recipe decides
    assert full["TRACKIO"] is False and full["TRACKIO_SPACE"] is None
    games = [full["GAME"]] if "GAME" in full else list(full.get("TASKS", ()))
    assert games and full["BUDGET"] is None  # the game's own (kit.evaluate.BUDGETS)
    assert len({BUDGETS[game] for game in games}) == 1  # one recipe's budget serves them all
    if "GAME" in full:  # one game: the recipe's step counts for MODEL (the tiny model's here)
        tiny = recipe("tiny", full["GAME"])
        assert full["SFT_STEPS"] is None and (tiny.sft_steps, tiny.grpo_steps) == (
            SFT_STEPS,
            GRPO_STEPS,
        )
        assert full.get("GRPO_STEPS") is None
        if "SAMPLES" in full:
            assert full["SAMPLES"] == 8  # python -m kit.demo --eval-generations
    if "CHECKPOINTS" in full:
        assert full["CHECKPOINTS"] == "runs/notebooks"
        monkeypatch.setenv("KIT_CHECKPOINTS", "/elsewhere")
        assert _parameters(path)["CHECKPOINTS"] == "/elsewhere"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_training_and_evaluation_take_the_recipe_not_numbers_of_their_own(path):
    """A hub model on a GPU gets its learning rates, precision, LoRA and budgets from
    kit.train.recipe: a training or evaluation call that hard-codes one would wreck it."""
    source = "\n".join(cell.source for cell in _code(nbformat.read(path, as_version=4)))
    for number in ("learning_rate=", "max_completion_length=BUDGET,", "temperature="):
        assert number not in source, number
    assert "report_to=" not in source  # every trainer logs where setup's TRACKING says
    # the recipe plans a step's batch for the GPU's memory: a notebook that sets one of its
    # parts keeps the others (notebook 3's 16 rows once met steps_per_generation=4 on a GPU:
    # 64 rollouts generated at once, not the two groups of 8 it meant)
    for part in ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_"):
        assert part not in source, part
    calls = [
        call for call in ("sft_trainer(", "warm_up(", "grpo(", "GRPOTrainer(") if call in source
    ]
    for call in calls:
        block = source.split(call, 1)[1].split("\n)", 1)[0]
        assert "peft_config=RECIPE.peft_config" in block, (call, block)
        if call != "GRPOTrainer(":  # whose args come from grpo_config(..., **TRACKING)
            assert "**TRACKING" in block, (call, block)
    if "GRPOTrainer(" in source:
        assert "**TRACKING" in source.split("grpo_config(", 1)[1].split("\n)", 1)[0]
    # a missing checkpoint's training logs where the notebook's own does
    for call in re.findall(r"(?:sft|grpo)_checkpoint\([^)]*\)", source):
        assert "**TRACKING" in call, call


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_colab_badge_and_install_cell_name_the_one_repository_url(path):
    import tomllib

    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    notebook = nbformat.read(path, as_version=4)
    install = _code(notebook)[1].source
    assert f'KIT_REPO = "{url}"' in install
    assert 'if "/OWNER/" in KIT_REPO:' in install  # a placeholder stops with a clear message
    assert 'f"kit[colab] @ git+{KIT_REPO}"' in install  # Colab has its own Jupyter
    owner_repo = url.removeprefix("https://github.com/")
    badge = f"https://colab.research.google.com/github/{owner_repo}/blob/main/notebooks/{path.name}"
    assert badge in notebook.cells[0].source
    assert badge in (ROOT / "README.md").read_text()


def test_the_install_cell_refuses_the_placeholder_url_before_calling_pip(monkeypatch):
    """On Colab, where kit is not importable yet, the unchanged cell raises at once."""
    import importlib.util
    import subprocess

    notebook = nbformat.read(NOTEBOOKS[0], as_version=4)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setattr(subprocess, "check_call", lambda *a, **k: pytest.fail("pip was called"))
    with pytest.raises(RuntimeError, match="set KIT_REPO"):
        exec(_code(notebook)[1].source, {})  # noqa: S102


def test_the_test_session_keeps_smoke_checkpoints_out_of_the_repository():
    """conftest.py points KIT_CHECKPOINTS at a temporary folder before any kernel starts, so that
    a smoke run never replaces the checkpoints a full run saved in runs/notebooks."""
    folder = Path(os.environ["KIT_CHECKPOINTS"])
    assert folder.is_absolute() and folder.is_relative_to(Path(tempfile.gettempdir()))
    assert not folder.is_relative_to(ROOT)
    assert os.environ["KIT_SMOKE"] == "1"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from kit.models import tiny_model

    folder = tmp_path_factory.mktemp("checkpoint")
    model, tokenizer = tiny_model(seed=1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def handed_on(tmp_path_factory) -> Path:
    """The checkpoint folder notebooks 1 and 2 write and 2 reads in this module's runs."""
    return tmp_path_factory.mktemp("handed-on")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_without_an_error_or_a_usage_error(path, tmp_path, checkpoint, handed_on):
    from kit.models import missing_files

    papermill = pytest.importorskip("papermill")
    alone = path.stem == "04_evaluation"  # with MODEL a local folder, and no checkpoint to load
    folder = tmp_path / "nothing-yet" if alone else handed_on
    parameters = {"CHECKPOINTS": str(folder)}
    if alone:
        parameters["MODEL"] = str(checkpoint)
    there = {name: not missing_files(folder / name) for name in ("sft-model", "grpo-model")}
    executed = papermill.execute_notebook(
        str(path),
        str(tmp_path / path.name),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(path.parent),
        progress_bar=False,
    )
    assert not _problems(executed)
    outputs = "".join(_text(cell) for cell in executed.cells)
    assert ": smoke run (KIT_SMOKE=1)" in outputs
    if alone:
        assert f"{checkpoint}: " in outputs  # the model cell loaded the checkpoint
    else:
        assert "tiny: " in outputs or "tiny + SFT: " in outputs
    for name in LOADS.get(path.stem, []):
        said = f"loaded the checkpoint {folder / name}"
        if there[name]:
            assert said in outputs
        else:  # made with the recipe of the notebook that saves it, saved, and said so
            assert f"no checkpoint at {folder / name} yet: making it" in outputs
            assert f"saved the checkpoint {folder / name}" in outputs
    for name in SAVES.get(path.stem, []) + LOADS.get(path.stem, []):
        assert not missing_files(folder / name), f"{path.stem} left no {name}"


def test_the_fast_lane_leaves_the_notebooks_out():
    """conftest.py marks every nbval cell ``slow``: ``-m "not slow"`` collects none of them, and
    ``-m slow`` collects every code cell."""

    def collected(marks: str) -> str:
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        notebooks = [str(path) for path in NOTEBOOKS]
        done = subprocess.run(
            [*command, "-m", marks, *notebooks], cwd=ROOT, capture_output=True, text=True
        )
        return done.stdout

    cells = sum(len(_code(nbformat.read(path, as_version=4))) for path in NOTEBOOKS)
    assert f"no tests collected ({cells} deselected)" in collected("not slow")
    assert f"{cells} tests collected" in collected("slow")
