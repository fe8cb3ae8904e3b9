"""Shared test setup: offline by construction, and the oracles' data where the machine has it."""

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# TextArena's Wordle loads NLTK corpora at construction; the project keeps an offline copy
# beside the checkout (../shared/reference/nltk_data).
_NLTK = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nltk_data"
if "NLTK_DATA" not in os.environ and _NLTK.is_dir():
    os.environ["NLTK_DATA"] = str(_NLTK)
