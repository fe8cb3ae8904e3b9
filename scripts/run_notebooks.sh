#!/usr/bin/env bash
# Regenerate the outputs stored in notebooks/*.ipynb: a full CPU run of the four notebooks, in
# order (1 saves the SFT checkpoint that 2 trains with GRPO; 4 evaluates both), each executed in
# place without timestamps or widget state, as tests/test_notebooks.py expects. Prints each
# notebook's wall time. Needs the `notebook` extra (bash scripts/setup.sh notebook).
#
#   bash scripts/run_notebooks.sh                      # all four
#   bash scripts/run_notebooks.sh notebooks/02_grpo.ipynb
#
# Full mode: KIT_SMOKE is unset here whatever the shell has. The checkpoints go to
# $KIT_CHECKPOINTS, by default notebooks/runs/notebooks (relative to the notebooks' folder).
set -euo pipefail
cd "$(dirname "$0")/.."
unset KIT_SMOKE
unset MPLBACKEND  # a kernel must pick its inline backend to store figures as PNG
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1
# Two torch threads, as `python -m kit.demo` runs by default: a GRPO run on a CPU repeats only at the
# same thread count, once set (each notebook's setup cell pins it: kit.runs.pin_threads), and at two
# notebook 2 matches `python -m kit.demo --seed 0`.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

if [ "$#" -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/0*.ipynb); fi
started=$SECONDS
for notebook in "${notebooks[@]}"; do
  begin=$SECONDS
  jupyter nbconvert --to notebook --execute --inplace \
    --ExecutePreprocessor.timeout=-1 \
    --ExecutePreprocessor.record_timing=False --ExecutePreprocessor.store_widget_state=False \
    "$notebook"
  echo "$notebook: $((SECONDS - begin)) s"
done
echo "all: $((SECONDS - started)) s"
