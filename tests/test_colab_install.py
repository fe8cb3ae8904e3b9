"""The notebooks' Colab install works: `kit[colab]` from a git URL into a Python that already has
a torch (as a Colab runtime does) installs the kit and leaves that torch alone.

Why: an unpinned resolver that decides to "upgrade" Colab's torch pulls gigabytes of CUDA wheels
and can break the runtime's CUDA build. The venv below sees this machine's packages
(``--system-site-packages``: Colab ships torch, transformers and the rest), and the kit is
installed from ``git+file://`` this repository's HEAD, as the install cell does from GitHub.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("torch")
pytest.importorskip("hatchling")  # the build backend, taken from this machine (no download)


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, cwd=cwd)


@pytest.mark.slow
def test_colab_install_from_git_keeps_the_runtimes_torch(tmp_path):
    if _run("git", "-C", str(ROOT), "rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: there is no HEAD to install from a git URL")
    venv = tmp_path / "colab"
    assert _run(sys.executable, "-m", "venv", "--system-site-packages", str(venv)).returncode == 0
    python = str(venv / "bin" / "python")
    probe = "import json, torch; print(json.dumps([torch.__version__, torch.__file__]))"
    before = json.loads(_run(python, "-c", probe).stdout)
    installed = _run(
        python,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-build-isolation",
        f"kit[colab] @ git+file://localhost{ROOT}",
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    after = json.loads(_run(python, "-c", probe).stdout)
    assert after == before  # the same torch, from the same place
    own = list((venv / "lib").glob("python*/site-packages/torch"))
    assert not own, "pip installed a torch of its own into the venv"
    # from the venv's folder: run from the checkout, `import kit` would find the checkout's
    where = _run(python, "-c", "import kit, kit.train; print(kit.__file__)", cwd=venv)
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
