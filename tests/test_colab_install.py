"""The notebooks' Colab install works: `kit[colab]` from a git URL into a Python that already has
a torch (as a Colab runtime does) installs the kit and leaves that torch alone.

Why: an unpinned resolver that decides to "upgrade" Colab's torch pulls gigabytes of CUDA wheels
and can break the runtime's CUDA build.

The stand-in for Colab's runtime is built here, explicitly, from the packages of the Python that
runs the tests: a folder of links to everything in the site-packages that holds its torch
(Colab ships torch, transformers, accelerate, matplotlib, ...), the kit itself left out, made
visible to a new, bare venv by a ``.pth`` file. It cannot be ``venv --system-site-packages``:
made from a venv's Python (a newcomer's fresh venv, where ``scripts/setup.sh`` put torch), that
sees the *base* interpreter's packages, which need not include a torch at all. Links cost a
twentieth of a second; ``pip install torch==2.13.0`` into the venv would unpack a wheel of
hundreds of megabytes per run. The kit is installed as the install cell does it, from
``git+file://`` this repository's HEAD, with ``--no-index`` so that the test never downloads:
anything the runtime lacks fails the install, with pip's message, instead of fetching it.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

torch = pytest.importorskip("torch")
pytest.importorskip("hatchling")  # the build backend, taken from the runtime (no download)

PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.__file__]))"


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, cwd=cwd)


def _kit_entries(site: Path) -> set[str]:
    """The top-level names in ``site`` that belong to an installed kit (its package, its
    dist-info, an editable install's ``.pth``): a Colab runtime has no kit."""
    try:
        dist = importlib.metadata.distribution("kit")
    except importlib.metadata.PackageNotFoundError:
        return set()
    if Path(dist.locate_file("")).resolve() != site.resolve():
        return set()
    return {Path(str(file)).parts[0] for file in dist.files or []} - {".."}


def _colab_runtime(folder: Path) -> Path:
    """A folder of links to the packages beside this Python's torch, the kit's left out."""
    site = Path(torch.__file__).resolve().parents[1]
    skip = _kit_entries(site)
    folder.mkdir()
    for entry in site.iterdir():
        if entry.name not in skip:
            (folder / entry.name).symlink_to(entry)
    return folder


def _probe(python: str) -> list[str]:
    probed = _run(python, "-c", PROBE)
    assert probed.returncode == 0, probed.stderr[-2000:]
    return json.loads(probed.stdout)


@pytest.mark.slow
def test_colab_install_from_git_keeps_the_runtimes_torch(tmp_path):
    if _run("git", "-C", str(ROOT), "rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: there is no HEAD to install from a git URL")
    runtime = _colab_runtime(tmp_path / "runtime")
    venv = tmp_path / "colab"
    made = _run(sys.executable, "-m", "venv", "--without-pip", str(venv))  # pip: the runtime's
    assert made.returncode == 0, made.stderr[-2000:]
    (site,) = (venv / "lib").glob("python*/site-packages")
    (site / "colab-runtime.pth").write_text(f"{runtime}\n")
    python = str(venv / "bin" / "python")
    before = _probe(python)
    assert Path(before[1]).is_relative_to(runtime)  # the runtime's torch, as on Colab
    assert _run(python, "-c", "import kit", cwd=venv).returncode != 0, "the runtime has a kit"
    installed = _run(
        python,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--no-build-isolation",
        f"kit[colab] @ git+file://localhost{ROOT}",
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert _probe(python) == before  # the same torch, from the same place
    own = [path.name for path in site.iterdir() if path.name.lower().startswith("torch")]
    assert not own, f"pip installed a torch of its own into the venv: {own}"
    # from the venv's folder: run from the checkout, `import kit` would find the checkout's
    where = _run(python, "-c", "import kit, kit.train; print(kit.__file__)", cwd=venv)
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
