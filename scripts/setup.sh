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
