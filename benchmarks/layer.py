"""Time, thread scaling and memory of one exact Stage-1 layer.

Usage: python benchmarks/layer.py [--n 32768] [--d 3] [--threads 1,2,4,8,16] [--repeat 5]
                                  [--accelerator numpy] [--ratio-n 16384] [--ratio-d 2] [--ratio-threads 1,2]

One layer is the Euler step ``x + eta (a(x) - x)`` of ``N`` standard normal tokens in ``d``
dimensions, with ``a = kernels.kernel_mean(x, x, h2)`` (tokens attending to themselves: each
weight computed once). The yardstick is ``numpy.exp`` over the layer's ``N^2`` float64 values on
one core (numpy's ufuncs do not thread), in place in a block of 2**16 values that stays in cache.

Prints, for each thread count of ``--threads`` (those above the cores this process may use are
skipped): the median, min and max wall time over ``--repeat`` rounds, the speed-up over the first
thread count, and the median's ratio to the yardstick's. Each round times the yardstick once and
the layer once per thread count, in turn, so that every row sees the same load; then the peak
memory of one layer at ``--n``: traced (tracemalloc, which numpy reports its buffers to) and
resident (growth of the high-water mark ``VmHWM`` over the resident memory before the layer, on
Linux). Then the layer at ``--ratio-n``, ``--ratio-d`` on each of ``--ratio-threads``, against its
own yardstick (the issue's goal on 2 cores: at most 0.35; run it under ``taskset -c 0,1``).
An empty ``--threads`` or ``--ratio-threads`` leaves that part out: for both figures of both paths,

    for a in numpy numba; do python benchmarks/layer.py --accelerator $a --ratio-threads=;
      taskset -c 0,1 python benchmarks/layer.py --accelerator $a --threads=; done
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np

from attneb.numerics import kernels

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


def timed(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def scaling(x: np.ndarray, h2: float, eta: float, threads: list[int], repeat: int) -> tuple[dict, list]:
    """Times of one layer per thread count, and of the exp yardstick, over ``repeat`` interleaved rounds."""

    def layer():
        return x + eta * (kernels.kernel_mean(x, x, h2) - x)

    reference = None
    for t in threads:  # warm-up, which also checks that the threads do not change the result
        kernels.set_num_threads(t)
        result = layer()
        if reference is None:
            reference = result
        elif not np.array_equal(result, reference):
            raise AssertionError(f"the layer with {t} threads differs from the layer with {threads[0]}")
    times = {t: [] for t in threads}
    exp_times = []
    for _ in range(repeat):
        exp_times.append(timed(lambda: exp_yardstick(x.shape[0] ** 2)))
        for t in threads:
            kernels.set_num_threads(t)
            times[t].append(timed(layer))
    return times, exp_times


def stats(times: list[float]) -> str:
    return f"{np.median(times):7.3f} {min(times):7.3f} {max(times):7.3f}"


def thread_counts(option: str, available: int) -> list[int]:
    """The thread counts of a comma-separated option, those above ``available`` left out (and named)."""
    asked = [int(t) for t in option.split(",")]
    if any(t > available for t in asked):
        print(f"skipped (more threads than the {available} cores): {[t for t in asked if t > available]}")
    return [t for t in asked if t <= available]


def table(x: np.ndarray, args, threads: list[int]) -> None:
    """Print the layer's times against ``threads`` and its peak memory on the last of them."""
    n, d = x.shape
    print(f"one exact Stage-1 layer, N={n}, d={d} ({n**2:.3g} kernel entries, h2={args.h2}); median, min, max "
          f"of {args.repeat} rounds; exp = numpy.exp of N^2 values on one core")
    times, exp_times = scaling(x, args.h2, args.eta, threads, args.repeat)
    first = np.median(times[threads[0]])
    yardstick = np.median(exp_times)
    print(f"{'threads':>7} {'median':>7} {'min':>7} {'max':>7} {'speed-up':>8} {'/exp':>6}")
    print(f"{'exp':>7} {stats(exp_times)}")
    for t in threads:
        print(f"{t:>7} {stats(times[t])} {first / np.median(times[t]):8.2f} {np.median(times[t]) / yardstick:6.2f}",
              flush=True)

    kernels.set_num_threads(threads[-1])
    tracemalloc.start()
    kernels.kernel_mean(x, x, args.h2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    resident = status_bytes("VmRSS")
    kernels.kernel_mean(x, x, args.h2)
    rss_growth = status_bytes("VmHWM") - resident
    print(f"memory of one layer at N={n} on {threads[-1]} threads: peak traced {peak / 2**20:.1f} MiB "
          f"(kernel budget {kernels.DEFAULT_BUDGET_BYTES / 2**20:.0f} MiB; the N x N float64 matrix alone would be "
          f"{n**2 * 8 / 2**20:.0f} MiB); peak resident memory grew by {rss_growth / 2**20:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--d", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4,8,16", help="comma-separated thread counts (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--h2", type=float, default=0.05)
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--accelerator", choices=kernels.ACCELERATORS, default="numpy")
    parser.add_argument("--ratio-n", type=int, default=16384)
    parser.add_argument("--ratio-d", type=int, default=2)
    parser.add_argument("--ratio-threads", default="1,2", help="comma-separated thread counts (default %(default)s)")
    args = parser.parse_args()
    kernels.set_accelerator(args.accelerator)
    available = cores()
    print(f"machine: {platform.processor() or platform.machine()}, {available} cores for this process, "
          f"numpy {np.__version__}, accelerator {args.accelerator}, "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rng = np.random.default_rng(0)
    if args.threads:
        table(rng.normal(size=(args.n, args.d)), args, thread_counts(args.threads, available))
    if args.ratio_threads:
        threads = thread_counts(args.ratio_threads, available)
        y = rng.normal(size=(args.ratio_n, args.ratio_d))
        times, exp_times = scaling(y, args.h2, args.eta, threads, args.repeat)
        for t in threads:
            print(f"N={args.ratio_n}, d={args.ratio_d} on {t} threads: layer {np.median(times[t]):.3f} s, "
                  f"exp {np.median(exp_times):.3f} s: layer / exp = {np.median(times[t]) / np.median(exp_times):.2f}")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

if __name__ == "__main__":
    main()
