"""Test setup beyond the repository-wide one (../conftest.py): the oracles' offline data."""

import os
from pathlib import Path

# TextArena's Wordle loads NLTK corpora at construction; the project keeps an offline copy
# beside the checkout (../shared/reference/nltk_data).
_NLTK = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data"
if "NLTK_DATA" not in os.environ and _NLTK.is_dir():
    os.environ["NLTK_DATA"] = str(_NLTK)
