"""The README's main command works with only the `train` extra installed.

Why: `bash scripts/setup.sh train && python -m kit.demo` once failed on a fresh machine with
``ModuleNotFoundError: No module named 'IPython'`` (kit imported ``transformers.utils.notebook``),
while CI stayed green: CI installs the `dev` extra, which brings IPython along with jupyter,
matplotlib, pytest and the rest. Installing a second environment per test run is slow and needs
the network, so this test hides instead: in a subprocess, every installed distribution outside
the dependency closure of ``kit[train]`` (plus torch, which setup.sh installs first, and
pip/setuptools) is made invisible to imports and to ``importlib.metadata``, as if it had never
been installed, and the main command runs there with tiny step counts.

The hiding is done by a ``sitecustomize.py`` on ``PYTHONPATH`` (so it also covers any Python
process the demo starts) that wraps every ``sys.meta_path`` finder: a hidden top-level module is
not found (``import`` raises ``ModuleNotFoundError``, ``importlib.util.find_spec`` returns None,
as on a real fresh install) and a hidden distribution is not listed. Not covered: code that
scans ``sys.path`` itself (``pkg_resources``), and a top-level name that a distribution of the
closure shares with a hidden one (a namespace package) stays importable.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest

pytest.importorskip("trl")
from packaging.markers import Marker  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXTRA = "train"
# What a fresh machine has besides the extra: torch (setup.sh installs it first), and what a new
# virtual environment ships.
BASE = ("torch", "pip", "setuptools")

SITECUSTOMIZE = '''
"""Hide every module and distribution listed in hidden.json (written by tests/test_fresh_install.py)."""
import json
import re
import sys
from pathlib import Path

_SPEC = json.loads(Path(__file__).with_name("hidden.json").read_text())
_MODULES = frozenset(_SPEC["modules"])
_DISTRIBUTIONS = frozenset(_SPEC["distributions"])


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class _Hiding:
    """Wraps one meta path finder: hidden names are not found, hidden dists not listed."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _MODULES:
            return None
        find = getattr(self._finder, "find_spec", None)
        return None if find is None else find(name, path, target)

    def find_distributions(self, *args, **kwargs):
        find = getattr(self._finder, "find_distributions", None)
        if find is None:
            return iter(())
        return (
            dist
            for dist in find(*args, **kwargs)
            if _canonical(dist.metadata["Name"] or "") not in _DISTRIBUTIONS
        )

    def invalidate_caches(self):
        invalidate = getattr(self._finder, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()

    def __getattr__(self, name):
        return getattr(self._finder, name)


sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
for _name in list(sys.modules):  # anything a .pth file imported before this ran
    if _name.partition(".")[0] in _MODULES:
        del sys.modules[_name]
'''


def _requirements(extra: str) -> list[str]:
    """The extra's requirements as pyproject.toml states them now (what `pip install -e` reads)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    out = list(project.get("dependencies", []))
    for text in extras[extra]:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == "kit":  # kit[other] inside an extra
            out += [r for other in requirement.extras for r in _requirements(other)]
        else:
            out.append(text)
    return out


def _applies(marker: Marker | None, extras: Iterable[str]) -> bool:
    """Whether a requirement's marker holds here, for the extras asked of its distribution."""
    return marker is None or any(marker.evaluate({"extra": e}) for e in ("", *extras))


def closure(requirements: Iterable[str]) -> set[str]:
    """Canonical names of the installed distributions that ``requirements`` pull in, recursively,
    extras included. A requirement that is not installed here has nothing to hide: skipped."""
    todo = [Requirement(text) for text in requirements]
    todo = [r for r in todo if _applies(r.marker, ())]
    done: dict[str, set[str]] = {}
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        extras = {canonicalize_name(e) for e in requirement.extras}
        if name in done and extras <= done[name]:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        done.setdefault(name, set()).update(extras)
        for text in dist.requires or []:
            child = Requirement(text)
            if _applies(child.marker, done[name]):
                todo.append(child)
    return set(done)


def hidden(kept: set[str]) -> tuple[set[str], set[str]]:
    """``(modules, distributions)``: the top-level import names and the canonical distribution
    names installed here outside ``kept``. A name any kept distribution provides stays visible,
    and so does the standard library."""
    dists = {canonicalize_name(d.metadata["Name"] or "") for d in metadata.distributions()}
    modules = {
        module
        for module, owners in metadata.packages_distributions().items()
        if not any(canonicalize_name(owner) in kept for owner in owners)
        and module not in sys.stdlib_module_names
        and module.isidentifier()
    }
    return modules, dists - kept


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> dict[str, str]:
    """Environment variables for a subprocess that sees only what `setup.sh train` installs."""
    kept = closure([*_requirements(EXTRA), *BASE]) | {"kit"}
    modules, dists = hidden(kept)
    site = tmp_path_factory.mktemp("fresh-install")
    (site / "hidden.json").write_text(
        json.dumps({"modules": sorted(modules), "distributions": sorted(dists)})
    )
    (site / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE).lstrip())
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def _python(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


PROBE = """
import importlib.metadata, importlib.util, json
out = {"find_spec_IPython": importlib.util.find_spec("IPython") is not None}
try:
    importlib.metadata.version("ipython")
    out["ipython_metadata"] = True
except importlib.metadata.PackageNotFoundError:
    out["ipython_metadata"] = False
for name in ("IPython", "pytest", "trl", "transformers", "torch", "datasets", "peft"):
    try:
        __import__(name)
        out[name] = "ok"
    except ModuleNotFoundError as error:
        out[name] = str(error)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_hiding_hides_the_dev_extra_and_keeps_the_train_extra(fresh):
    done = _python(fresh, "-c", PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("trl", "transformers", "torch", "datasets", "peft"):
        assert seen[name] == "ok", (name, seen[name])
    assert seen["pytest"] == "No module named 'pytest'"  # this very process runs it
    if importlib.util.find_spec("IPython") is not None:  # installed here (the dev extra): hidden
        assert seen["IPython"] == "No module named 'IPython'"
        assert not seen["find_spec_IPython"] and not seen["ipython_metadata"]


def test_the_hiding_reproduces_the_old_bug(fresh):
    if importlib.util.find_spec("IPython") is None:
        pytest.skip("IPython is not installed here: nothing to hide, the old bug cannot show")
    done = _python(fresh, "-c", "import transformers.utils.notebook")
    assert done.returncode != 0
    assert "ModuleNotFoundError: No module named 'IPython'" in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_the_main_command_runs_with_only_the_train_extra(fresh, tmp_path):
    out = tmp_path / "run"
    args = (
        "--sft-steps",
        "2",
        "--grpo-steps",
        "1",
        "--eval-generations",
        "1",
        "--max-completion-length",
        "64",
    )
    done = _python(fresh, "-m", "kit.demo", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "summary.json").is_file() and (out / "sft-model").is_dir()
