#!/usr/bin/env bash
# One GPU session: the GPU tests, then the benchmark grid (at most 8 minutes on one H200).
#
#   bash scripts/gpu_check.sh [--out DIR] [--budget-s S] [--dry-run]
#
# Needs python with torch >= 2.11 (CUDA) and Triton; nothing else, no network: pyyaml,
# tqdm and pytest come as wheels from wheels/gpu/ (`make gpu-wheels`) when missing.
# Records land in --out (default results/gpu-run): copy them into results/ and commit.
# --dry-run: the same on the CPU at tiny sizes (CI runs it; TRITON_INTERPRET=1 adds the Triton kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import yaml, tqdm, pytest" 2>/dev/null; then
  echo "gpu_check: installing pyyaml, tqdm, pytest from wheels/gpu (offline)"
  "$PYTHON" -m pip install -q --no-index --find-links wheels/gpu pyyaml tqdm pytest
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec timeout 480 "$PYTHON" -m dlrm_study.gpu_check "$@"
