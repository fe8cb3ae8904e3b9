"""The version floors and ranges of pyproject.toml hold what the kit relies on (issue 8 §6)."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirement(name: str) -> Requirement:
    found = [
        Requirement(text)
        for texts in PROJECT["optional-dependencies"].values()
        for text in texts
        if Requirement(text).name == name
    ]
    assert found, f"{name} is not required by any extra"
    # several extras may require it (notebook and colab both need trackio), all alike
    assert len({str(r) for r in found}) == 1, f"{name} is pinned differently: {found}"
    return found[0]


def test_python_floor_is_trls():
    from importlib import metadata

    trl_floor = SpecifierSet(metadata.metadata("trl")["Requires-Python"])
    ours = SpecifierSet(PROJECT["requires-python"])
    floor = Version(str(next(iter(ours))).lstrip(">="))
    assert floor in trl_floor, f"requires-python {ours} admits Pythons TRL ({trl_floor}) refuses"


def test_trl_range_is_the_one_capture_enforces():
    from kit.capture import TRL_RANGE, check_trl

    assert requirement("trl").specifier == SpecifierSet(TRL_RANGE)
    check_trl()  # the installed TRL is in range
    for outside in ("1.15.2", "1.17.0", "2.0.0"):
        with pytest.raises(RuntimeError, match=r"supports trl>=1\.16\.0,<1\.17.*trl " + outside):
            check_trl(outside)
    check_trl("1.16.3")


def test_accelerate_floor_is_at_least_trls():
    from importlib import metadata

    trl_needs = next(
        Requirement(text) for text in metadata.requires("trl") if text.startswith("accelerate")
    )
    ours = requirement("accelerate").specifier
    trl_floor = Version(str(next(iter(trl_needs.specifier))).lstrip(">="))
    our_floor = Version(str(next(iter(ours))).lstrip(">="))
    assert our_floor >= trl_floor


def test_installed_trackio_has_what_the_kit_and_transformers_pass():
    """kit.notebook passes init(embed=...), transformers' callback init(bucket_id=...): 0.21.0 is
    the first trackio with both (0.20.0 lacks bucket_id), and the floor says so."""
    trackio = pytest.importorskip("trackio")
    parameters = inspect.signature(trackio.init).parameters
    assert {"embed", "bucket_id", "space_id"} <= set(parameters)
    assert requirement("trackio").specifier == SpecifierSet(">=0.21")
