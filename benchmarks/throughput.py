"""How many cores' worth of work this machine does at once: P processes, the same fixed work each.

Usage: python benchmarks/throughput.py [--processes 1,2,4,8,16] [--seconds 1.0]

Each of ``P`` processes (one thread each) waits at a barrier, then times the same two pieces of
work: ``numpy.exp`` in place over a 362 x 362 float64 tile (about 1 MiB, the exact kernels' tile,
so that it stays in a core's cache) repeated, and a pure-Python loop (what sympy and the checks'
own code are made of). The work is sized on one process to last about ``--seconds``. Printed per
``P``: the median seconds of a process, and the throughput against one process,
``P * t(1) / t(P)`` (``t(1)`` the fastest of three single-process runs, ``t(P)`` the median): ``P`` where every process has a core of its own at full speed, less where the
"cores" are hardware threads of fewer cores, or where many busy cores run at a lower clock rate.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the thread count


def _exp(repeats: int) -> float:
    tile = np.linspace(-30.0, 0.0, 362 * 362).reshape(362, 362)
    start = time.perf_counter()
    for _ in range(repeats):
        np.exp(tile, out=tile)
        tile -= 30.0
    return time.perf_counter() - start


def _python(repeats: int) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(repeats):
        total += (i * i) % 7
    return time.perf_counter() - start


WORK = {"numpy.exp, tile in cache": _exp, "pure Python loop": _python}


def _worker(name: str, repeats: int, barrier, results) -> None:
    barrier.wait()
    results.put(WORK[name](repeats))


def timed(name: str, repeats: int, processes: int) -> list[float]:
    """Seconds each of ``processes`` processes took for ``repeats`` of the work ``name``, started together."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    pool = [context.Process(target=_worker, args=(name, repeats, barrier, results)) for _ in range(processes)]
    for process in pool:
        process.start()
    seconds = [results.get() for _ in pool]
    for process in pool:
        process.join()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", default="1,2,4,8,16", help="comma-separated process counts")
    parser.add_argument("--seconds", type=float, default=1.0, help="the work of one process, sized on one process")
    args = parser.parse_args()
    counts = [int(p) for p in args.processes.split(",")]
    if any(p < 1 for p in counts):
        raise SystemExit(f"--processes: counts must be >= 1, got {args.processes!r}")
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores available to this process")
    for name, work in WORK.items():
        repeats = 1000
        while work(repeats) < args.seconds / 4:
            repeats *= 4
        repeats = max(1, round(repeats * args.seconds / work(repeats)))
        base = min(min(timed(name, repeats, 1)) for _ in range(3))  # the first can run at a lower clock rate
        print(f"{name}: {base:.3f} s on one process (the fastest of 3)")
        print(f"  {'P':>4} {'median s':>9} {'slowest s':>9} {'throughput':>10}")
        for p in counts:
            seconds = timed(name, repeats, p)
            note = "  (more processes than cores)" if p > cores else ""
            print(f"  {p:>4} {statistics.median(seconds):>9.3f} {max(seconds):>9.3f} "
                  f"{p * base / statistics.median(seconds):>9.1f}x{note}")


if __name__ == "__main__":
    main()
