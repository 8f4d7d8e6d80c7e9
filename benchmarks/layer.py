"""Time and memory of one Stage-1 layer (exact kernel path).

Usage: python benchmarks/layer.py [--n 16384] [--d 2] [--repeat 5]

Prints the median, min and max wall time of ``repeat`` layers and the peak memory
of the temporaries (tracemalloc, which numpy reports its buffers to) next to the
budget the kernels were given.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np

from numerics import flow, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--h2", type=float, default=0.05)
    parser.add_argument("--eta", type=float, default=0.05)
    args = parser.parse_args()

    x = np.random.default_rng(0).normal(size=(args.n, args.d))
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        flow.particle_flow(x, args.h2, args.eta, eta=args.eta)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    flow.particle_flow(x, args.h2, args.eta, eta=args.eta)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}")
    print(f"one Stage-1 layer, N={args.n}, d={args.d} ({args.n**2:.3g} kernel entries)")
    print(f"time: median {np.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s over {args.repeat} runs")
    print(f"peak traced memory: {peak / 2**20:.1f} MiB (kernel budget {kernels.DEFAULT_BUDGET_BYTES / 2**20:.0f} MiB; "
          f"the N x N float64 matrix alone would be {args.n**2 * 8 / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
