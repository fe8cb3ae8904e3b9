#!/usr/bin/env bash
# Install the kit with one set of extras (default: train). Safe on a fresh CPU machine and on
# Colab: torch is installed first, pinned to the CPU build cached here, and only if it is missing,
# so no resolver pulls a multi-GB CUDA wheel (and Colab keeps the torch it ships).
set -euo pipefail
extras="${1:-train}"
cd "$(dirname "$0")/.."
python -m pip --version >/dev/null
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${extras}]"
# The browser test (tests/test_viz_browser.py) drives Debian's chromium with Playwright; never
# `playwright install`, which downloads a browser of its own. Best effort: without chromium the
# test skips and says why.
if [[ "${extras}" == "dev" && ! -x /usr/bin/chromium ]] && command -v apt-get >/dev/null; then
    as_root=()
    if [[ "$(id -u)" -ne 0 ]] && command -v sudo >/dev/null; then as_root=(sudo -n); fi
    { "${as_root[@]}" apt-get update -q \
        && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
        >/dev/null 2>&1 || echo "setup.sh: could not install chromium; the browser test will skip" >&2
fi
