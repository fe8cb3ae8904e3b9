"""Test-session setup for the whole repository, the notebooks included.

nbval (``python -m pytest`` collects ``notebooks/`` too) and ``tests/test_notebooks.py`` run the
notebooks in Jupyter kernels that inherit this process's environment, so it is set here, before
any kernel starts:

* ``KIT_SMOKE=1``: every notebook's parameter cell then picks tiny step counts (same code path);
* offline: nothing may reach the hub or download a dataset, in a kernel or in a test;
* no inherited ``MPLBACKEND``: a kernel must pick its inline backend (``Agg`` from a CI shell would
  turn every pyplot figure into a text repr, a GUI backend fails headless), and a plain test
  process falls back to a headless backend by itself.
"""

import os

os.environ.setdefault("KIT_SMOKE", "1")
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MPLBACKEND", None)
