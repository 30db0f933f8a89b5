#!/usr/bin/env bash
# One GPU session: the GPU tests, then the benchmark grid (one device call of at most 6 minutes on
# one H200; what is left resumes in the next call with the same --out).
#
#   bash scripts/gpu_check.sh [--out DIR] [--budget-s S] [--dry-run]
#
# Needs python with torch >= 2.11 (CUDA) and Triton; nothing else, no network: pyyaml, tqdm,
# pytest, pandas, numpy and ninja (to compile the fused CPU kernels of the host placement)
# come as wheels from wheels/gpu/ (`make gpu-wheels`) when missing.
# On a copy of the tree without .git, set DLRM_STUDY_COMMIT=<commit> so records name it.
# Records land in --out (default results/gpu-run): python scripts/merge_records.py results/gpu-run adds
# them to results/; commit.
# --dry-run: the same on the CPU at tiny sizes (CI runs it; TRITON_INTERPRET=1 adds the Triton kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
# 340 s: the grid stops starting points at --budget-s (290 s by default); this ends a point that overruns.
# GPU_CHECK_TIMEOUT_S changes it (the CPU dry run's test lifts both: a busy machine is no overrun).
exec timeout "${GPU_CHECK_TIMEOUT_S:-340}" "$PYTHON" -m dlrm_study.lending.gpu_session "$@"
