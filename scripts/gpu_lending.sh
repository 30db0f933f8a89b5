#!/usr/bin/env bash
# One GPU lending: one call of at most 10 minutes on one H200, everything under OUT_DIR.
#
#   bash scripts/gpu_lending.sh OUT_DIR [--budget-s 540] [--part A|B] [--resume-from DIR]... [--dry-run]
#
# Two lendings judge H1-H4 between them, each claim in 3 runs, each run a process (src/dlrm_study/lending/gpu_lending.py),
# each first checking its GPU kernels against their stand-ins (src/dlrm_study/lending/numerics.py). A: the targets,
# then H1 and H4; B: H2 and H3. --part A|B names one; without it the first whose claims have no verdict at today's
# code in results/ runs. Then, as far as --budget-s goes, the optional phases; each phase in its
# own process under a watchdog.
# OUT_DIR gets at most 7 files, rewritten whole as they change (no lock files): the records CSVs, summary.txt
# (rewritten after every phase) and lending.log. An earlier call's OUT_DIR, carried in, is resumed from with
# --resume-from DIR. Afterwards: python scripts/merge_records.py OUT_DIR (docs/reproduce.md).
# Needs the image's python (torch with CUDA, Triton); what else it lacks comes from wheels/gpu, carried in
# (scripts/gpu_env.sh). --dry-run: the same on the CPU at tiny sizes. On a copy of the tree without .git, set DLRM_STUDY_COMMIT=<commit> so records name it.
set -euo pipefail
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: bash scripts/gpu_lending.sh OUT_DIR [--budget-s S] [--part A|B] [--resume-from DIR] [--dry-run]" >&2
  exit 2
fi
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
# The session starts no phase past --budget-s (540 s by default) and a phase no point within 20 s of its
# watchdog; this ends it past that, by a margin, inside the device tool's 600 s with the wheels installed
# (GPU_LENDING_TIMEOUT_S changes it: the CPU dry run's test lifts it, a busy machine is no overrun).
exec timeout "${GPU_LENDING_TIMEOUT_S:-560}" "$PYTHON" -m dlrm_study.lending.gpu_session --lending --out "$out" \
  --budget-s 540 "$@"
