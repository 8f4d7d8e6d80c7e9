#!/usr/bin/env bash
# The GPU checks in one prepared script: the timing and accuracy table of one exact layer
# (N = 65536, 262144, 10^6; d = 1, 3, 16; float32 and float64; the direct kernel and the
# matrix-product kernel) after choosing the kernels' configurations, then the GPU tests.
# E1 and E3 at 10^6 tokens are a separate command (about 2 minutes in float32):
#   python3 benchmarks/gpu.py --no-table --reach --reach-precision float32
# Installs nothing: it needs this repository, numpy, scipy, sympy, mpmath, matplotlib, tqdm,
# threadpoolctl, pytest and hypothesis, and torch with CUDA and triton (the [gpu] extra).
# Usage: bash benchmarks/gpu.sh   (from the repository root; under 5 minutes on one H100 or H200)
set -uo pipefail
status=0
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 - <<'PY'
import torch, triton
print(f"torch {torch.__version__}, triton {triton.__version__}, device {torch.cuda.get_device_name()}")
PY
timeout 225 python3 benchmarks/gpu.py --choose --max-seconds 8 || status=$?
timeout 70 python3 -m pytest -q -p no:cacheprovider -m gpu tests/numerics/test_gpu.py || status=$?
exit $status
