"""Runs per second of a sweep on a dask LocalCluster with 1 and with 2 workers (extra ``dist``).

Prints one line per cluster size: workers, runs, wall time, runs per second, and the speed-up
over one worker. Each size starts a fresh cluster (one thread per worker process, whose kernel
sums and BLAS run single-threaded: ``OMP_NUM_THREADS=1`` is set for the workers, as the local
pool of :func:`attneb.numerics.sweep.run_sweep` does) and a fresh store, so every run executes; the
cluster's start-up is not timed.

    python benchmarks/distributed_sweep.py [--workers 1 2] [--seeds 16] [--n 4000]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from distributed import LocalCluster

from attneb.numerics import sweep
from attneb.numerics.distributed import dask_executor


def experiment(n: int, seeds: int) -> sweep.Experiment:
    return sweep.Experiment.from_dict({
        "name": "dask-benchmark", "prior": {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25},
        "sigma2": 0.5, "n": [n], "seeds": {"start": 0, "count": seeds},
        "estimators": ["two-stage"], "h2": 0.1, "T": "leading", "eta": 0.05,
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seeds", type=int, default=16, help="runs of the sweep (one two-stage run per seed)")
    parser.add_argument("--n", type=int, default=4000, help="tokens per run")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the worker processes the clusters spawn
    exp = experiment(args.n, args.seeds)
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}; "
          f"sweep: {args.seeds} two-stage runs, N = {args.n}, 50 layers each (exact path)")
    print(f"{'workers':>7} {'runs':>5} {'wall s':>8} {'runs/s':>8} {'speed-up':>9}")
    base = None
    for workers in args.workers:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                dask_executor(cluster.scheduler_address) as executor, tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            summary = sweep.run_sweep(exp, Path(tmp) / "s.db", executor=executor, progress=False)
            wall = time.perf_counter() - start
        rate = summary.ran / wall
        base = base or rate
        print(f"{workers:>7} {summary.ran:>5} {wall:>8.2f} {rate:>8.2f} {rate / base:>8.2f}x", flush=True)


if __name__ == "__main__":
    main()
