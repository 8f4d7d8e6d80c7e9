#!/usr/bin/env bash
# The GPU checks in one prepared script: the timing and accuracy table of one exact layer
# (N = 65536, 262144, 10^6; d = 1, 3, 16; float32 and float64) after choosing the kernel's
# configuration, E1's sphere and E3's Gaussian on the GPU at N = 262144, then the GPU tests.
# Installs nothing: it needs this repository, numpy, scipy, sympy, mpmath, matplotlib, tqdm,
# threadpoolctl, pytest and hypothesis, and torch with CUDA and triton (the [gpu] extra).
# Usage: bash benchmarks/gpu.sh   (from the repository root; about 4 minutes on one H100)
set -uo pipefail
status=0
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 - <<'PY'
import torch, triton
print(f"torch {torch.__version__}, triton {triton.__version__}, device {torch.cuda.get_device_name()}")
PY
timeout 220 python3 benchmarks/gpu.py --choose --reach --reach-n 262144 --max-seconds 12 || status=$?
timeout 75 python3 -m pytest -q -p no:cacheprovider -m gpu tests/numerics/test_gpu.py || status=$?
exit $status
