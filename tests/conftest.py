"""Test setup beyond the repository-wide one (../conftest.py): the oracles' offline data."""

import os
from pathlib import Path

import pytest

# TextArena's Wordle loads NLTK corpora at construction; the project keeps an offline copy
# beside the checkout (../shared/reference/nltk_data).
_NLTK = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data"
if "NLTK_DATA" not in os.environ and _NLTK.is_dir():
    os.environ["NLTK_DATA"] = str(_NLTK)

# What TextArena's Wordle loads from NLTK: the word lists and the POS tagger.
NLTK_RESOURCES = ("corpora/words", "taggers/averaged_perceptron_tagger_eng")


def in_ci() -> bool:
    """Whether the tests run in CI (which sets ``CI=true``): there, missing data is a failure."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture
def nltk_data() -> None:
    """Skip a test that needs :data:`NLTK_RESOURCES` where they are missing, with the reason.

    Why: a plain clone of the repository has no sibling ``shared/`` folder, and the oracle would
    crash with NLTK's ``LookupError`` (it cannot download offline). In CI (``CI`` set) the test
    runs anyway, so that data gone missing there fails loudly instead of skipping silently.
    """
    nltk = pytest.importorskip("nltk")
    paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    missing = []
    for resource in NLTK_RESOURCES:
        try:
            nltk.data.find(resource, paths=[*paths, *nltk.data.path])
        except LookupError:
            missing.append(resource)
    if missing and not in_ci():
        pytest.skip(
            f"NLTK data {', '.join(missing)} not found (looked in NLTK_DATA={os.pathsep.join(paths)!r} "
            f"and NLTK's default folders): put it in {_NLTK} or point NLTK_DATA at it; "
            "with CI set this test runs and fails instead"
        )
