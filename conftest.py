"""Test-session setup for the whole repository, the notebooks included.

nbval (``python -m pytest`` collects ``notebooks/`` too) and ``tests/test_notebooks.py`` run the
notebooks in Jupyter kernels that inherit this process's environment, so it is set here, before
any kernel starts:

* ``KIT_SMOKE=1``: every notebook's parameter cell then picks tiny step counts (same code path);
* ``KIT_CHECKPOINTS``: a new temporary folder for the session, always (not a default: a
  ``KIT_CHECKPOINTS`` of the user's must not be written over by smoke runs), where notebooks 1
  and 2 save the checkpoints that 2 and 4 load; removed when the session ends;
* offline: nothing may reach the hub or download a dataset, in a kernel or in a test;
* no inherited ``MPLBACKEND``: a kernel must pick its inline backend (``Agg`` from a CI shell would
  turn every pyplot figure into a text repr, a GUI backend fails headless), and a plain test
  process falls back to a headless backend by itself.
"""

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("KIT_SMOKE", "1")
_CHECKPOINTS = tempfile.mkdtemp(prefix="kit-checkpoints-")
atexit.register(shutil.rmtree, _CHECKPOINTS, ignore_errors=True)
os.environ["KIT_CHECKPOINTS"] = _CHECKPOINTS
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MPLBACKEND", None)


def pytest_collection_modifyitems(items: list) -> None:
    """Each notebook cell nbval runs is ``slow``: the four notebooks start kernels and train
    (smoke mode, half a minute together), so ``-m "not slow"``, the fast lane, leaves them out."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
