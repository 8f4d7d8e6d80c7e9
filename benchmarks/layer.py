"""Time and memory of one Stage-1 layer (exact kernel path).

Usage: python benchmarks/layer.py [--n 16384] [--d 2] [--repeat 5] [--accelerator auto] [--threads 2]

Prints the median, min and max wall time of ``repeat`` layers, and its ratio to the time
numpy.exp takes for the layer's N^2 float64 exponentials on one core (measured in turn with
the layers, in place in a cached block of 2**16 values); then the peak memory of one layer:
traced (tracemalloc, which numpy reports its buffers to) and resident (growth of the
high-water mark ``VmHWM`` over the resident memory before the layer, on Linux).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np

from numerics import flow, kernels

_EXP_BLOCK = 2**16


def exp_yardstick(entries: int) -> None:
    """``numpy.exp`` over ``entries`` float64 values on one core (numpy's ufuncs do not thread)."""
    block = np.random.default_rng(1).uniform(-10.0, 0.0, _EXP_BLOCK)
    out = np.empty_like(block)
    full, rest = divmod(entries, _EXP_BLOCK)
    for _ in range(full):
        np.exp(block, out=out)
    np.exp(block[:rest], out=out[:rest])


def status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field + ":"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--h2", type=float, default=0.05)
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--accelerator", choices=kernels.ACCELERATORS, default="auto")
    parser.add_argument("--threads", type=int, default=None, help="kernel threads (default: kernels' default)")
    args = parser.parse_args()
    kernels.set_accelerator(args.accelerator)
    kernels.set_num_threads(args.threads)

    x = np.random.default_rng(0).normal(size=(args.n, args.d))

    def layer():
        flow.particle_flow(x, args.h2, args.eta, eta=args.eta)

    layer()
    times, exp_times = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        layer()
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        exp_yardstick(args.n**2)
        exp_times.append(time.perf_counter() - start)
    tracemalloc.start()
    layer()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    resident = status_bytes("VmRSS")
    layer()
    rss_growth = status_bytes("VmHWM") - resident

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"one Stage-1 layer, N={args.n}, d={args.d} ({args.n**2:.3g} kernel entries), "
          f"accelerator {args.accelerator}, {kernels.get_num_threads()} threads")
    print(f"time: median {np.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s over {args.repeat} runs")
    print(f"numpy.exp of N^2 values, one core: median {np.median(exp_times):.3f} s; "
          f"layer / exp = {np.median(times) / np.median(exp_times):.2f}")
    print(f"peak traced memory: {peak / 2**20:.1f} MiB (kernel budget {kernels.DEFAULT_BUDGET_BYTES / 2**20:.0f} MiB; "
          f"the N x N float64 matrix alone would be {args.n**2 * 8 / 2**20:.0f} MiB); "
          f"peak resident memory grew by {rss_growth / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
