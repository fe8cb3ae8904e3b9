"""Where the kit finds its data files: ``data/`` in a checkout, ``kit/_data`` in an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir() -> Path:
    """The folder holding the word lists, puzzle banks and generated datasets."""
    for candidate in (_PACKAGE.parent / "data", _PACKAGE / "_data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"kit data folder not found next to {_PACKAGE}")
