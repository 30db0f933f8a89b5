# Sourced by gpu_check.sh and gpu_lending.sh, from the repository root: PYTHON, PYTHONPATH, and the
# packages a bare GPU image may lack (pyyaml, tqdm, pytest, pandas, numpy; ninja to compile the host
# placement's CPU kernels), installed offline from wheels/gpu (`make gpu-wheels`) where missing.
PYTHON=${PYTHON:-python3}
# module:package pairs; ninja is optional (without it the host placement's CPU kernels are PyTorch's).
missing=()
for pair in yaml:pyyaml tqdm:tqdm pytest:pytest pandas:pandas numpy:numpy ninja:ninja; do
  "$PYTHON" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair##*:}")
done
# Into the environment where pip may; else (an externally managed Python) into .gpu-site here.
export PYTHONPATH="$PWD/src:$PWD/.gpu-site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ ${#missing[@]} -gt 0 ] && [ -d wheels/gpu ]; then
  echo "gpu env: installing ${missing[*]} from wheels/gpu (offline)"
  "$PYTHON" -m pip install -q --no-index --find-links wheels/gpu "${missing[@]}" 2>/dev/null \
    || "$PYTHON" -m pip install -q --no-index --find-links wheels/gpu --target .gpu-site "${missing[@]}" \
    || true
fi
if ! "$PYTHON" -c "import yaml, tqdm, pytest, pandas, numpy" 2>/dev/null; then
  echo "gpu env: needs pyyaml, tqdm, pytest, pandas and numpy: run make gpu-wheels and bring wheels/gpu" >&2
  exit 2
fi
