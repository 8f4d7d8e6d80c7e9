"""Time and memory of the Gaussian-kernel sums of one Stage-1 layer, per size, dimension and path.

Usage: python benchmarks/kernels_table.py [--sizes 4096 16384 65536] [--dims 1 2 16] [--repeat 5]

One layer is ``kernels.kernel_mean(x, x, h2)`` for ``N`` standard normal tokens in ``d``
dimensions. Rows of the table, for each ``(N, d)``:

* ``exp N^2, 1 core``: ``numpy.exp`` over ``N^2`` float64 values in [-10, 0] on one core, in
  place in a block of 2**16 values that stays in cache (its fastest form): the yardstick.
* ``exact numpy`` and ``exact numba``: the layer with ``kernels.set_accelerator(...)`` and
  the default number of threads. The exp yardstick and these two are run in turn, ``--repeat``
  times, so that they see the same load on the machine.
* ``other queries (auto)``: ``kernels.kernel_mean(y, x, h2)`` for ``N`` other standard normal
  points ``y``: the general path, without the symmetry of tokens attending to themselves.
* ``binned``: ``attneb.numerics.binned.kernel_mean`` for ``d <= 2`` when that module exists (else n/a),
  with its largest deviation from the exact path.
* ``naive``: broadcast differences, then ``scipy.special.softmax``, in blocks of rows whose
  differences take at most 256 MiB (``N <= --naive-max`` only: it is slow).
* ``log_kde (auto)`` and ``sklearn KDE``: log-densities at the tokens, ours and scikit-learn's
  ``KernelDensity(kernel="gaussian", bandwidth=sqrt(h2)).fit(x).score_samples(x)``
  (``N <= --reference-max``), with their largest difference.

Columns: median, min and max wall time (after one warm-up run; the naive and scikit-learn rows
are run ``--slow-repeat`` times without warm-up), the median's ratio to the exp yardstick's, the
naive median's ratio to the row's median (speed-up), the peak of traced memory (tracemalloc;
numpy reports its buffers to it) during one run, and for the exact paths the growth of the
peak resident memory during one run in a fresh subprocess: its high-water mark ``VmHWM``,
reset (``/proc/self/clear_refs``) after a warm-up on 512 queries that starts the threads,
minus its resident memory ``VmRSS`` before the run (Linux). ``ru_maxrss`` would not do: a
child's starts at its parent's peak, which ``exec`` carries over.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
import tracemalloc

import numpy as np
from scipy.special import softmax

from layer import exp_yardstick  # benchmarks/layer.py, beside this script
from attneb.numerics import kernels

_NAIVE_BLOCK_BYTES = 256 * 2**20
_RSS_PROBE = """
import sys
import numpy as np
from attneb.numerics import kernels

def status_bytes(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field + ":"))

n, d, h2 = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
kernels.set_accelerator(sys.argv[4])
x = np.random.default_rng(0).normal(size=(n, d))
kernels.kernel_mean(x[:512], x, h2)
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
before = status_bytes("VmRSS")
kernels.kernel_mean(x, x, h2)
print(status_bytes("VmHWM") - before)
"""


def naive_kernel_mean(q: np.ndarray, k: np.ndarray, h2: float) -> np.ndarray:
    """The straightforward implementation: broadcast differences, then a softmax, in row blocks."""
    rows = max(1, _NAIVE_BLOCK_BYTES // (8 * k.size))
    out = np.empty_like(q)
    for r0 in range(0, q.shape[0], rows):
        diff = q[r0 : r0 + rows, None, :] - k[None, :, :]
        logits = -(diff**2).sum(axis=-1) / (2.0 * h2)
        out[r0 : r0 + rows] = softmax(logits, axis=1) @ k
    return out


def timed(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def traced_peak(func) -> int:
    """Peak bytes traced by tracemalloc while ``func`` runs."""
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def rss_growth(n: int, d: int, h2: float, accelerator: str) -> int:
    """Growth of the resident memory's peak (bytes) during one layer in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(n), str(d), repr(h2), accelerator],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(result.stdout.split()[-1])


def optional(module: str, attribute: str):
    """``module.attribute``, or ``None`` when the module or the attribute is missing."""
    try:
        return getattr(importlib.import_module(module), attribute, None)
    except ImportError:
        return None


def row(label, times, *, yardstick=None, naive=None, peak=None, rss=None, note=""):
    med = float(np.median(times))
    return {
        "path": label,
        "median": f"{med:.3f}",
        "min": f"{min(times):.3f}",
        "max": f"{max(times):.3f}",
        "/exp": "" if yardstick is None else f"{med / yardstick:.2f}",
        "naive/": "" if naive is None else f"{naive / med:.1f}",
        "peak MiB": "" if peak is None else f"{peak / 2**20:.1f}",
        "+RSS MiB": "" if rss is None else f"{rss / 2**20:.1f}",
        "note": note,
    }


def empty_row(label, note):
    return {"path": label, "note": note}


def measure(n: int, d: int, args, accelerators: list[str]) -> list[dict]:
    h2 = args.h2
    x = np.random.default_rng(0).normal(size=(n, d))
    layers = {}
    for name in accelerators:
        kernels.set_accelerator(name)
        layers[name] = kernels.kernel_mean(x, x, h2)
    exact = layers[accelerators[0]]
    times = {"exp": [], **{name: [] for name in accelerators}}
    for _ in range(args.repeat):
        times["exp"].append(timed(lambda: exp_yardstick(n * n)))
        for name in accelerators:
            kernels.set_accelerator(name)
            times[name].append(timed(lambda: kernels.kernel_mean(x, x, h2)))
    yardstick = float(np.median(times["exp"]))

    naive = None
    if n <= args.naive_max:
        naive_times = [timed(lambda: naive_kernel_mean(x, x, h2)) for _ in range(args.slow_repeat)]
        naive = float(np.median(naive_times))

    rows = [row("exp N^2, 1 core", times["exp"], yardstick=yardstick)]
    for name in accelerators:
        kernels.set_accelerator(name)
        peak = traced_peak(lambda: kernels.kernel_mean(x, x, h2))
        note = "" if name == accelerators[0] else f"max|diff| vs numpy {np.abs(layers[name] - exact).max():.1e}"
        rows.append(
            row(f"exact {name}", times[name], yardstick=yardstick, naive=naive, peak=peak,
                rss=rss_growth(n, d, h2, name), note=note)
        )
    kernels.set_accelerator("auto")
    y = np.random.default_rng(1).normal(size=(n, d))
    kernels.kernel_mean(y, x, h2)
    other_times = [timed(lambda: kernels.kernel_mean(y, x, h2)) for _ in range(args.repeat)]
    rows.append(row("other queries (auto)", other_times, yardstick=yardstick, naive=naive,
                    peak=traced_peak(lambda: kernels.kernel_mean(y, x, h2))))

    binned = optional("attneb.numerics.binned", "kernel_mean")
    if binned is None or d > 2:
        rows.append(empty_row("binned", "n/a" if binned is None else "n/a for d > 2"))
    else:
        binned(x, x, h2)
        binned_times = [timed(lambda: binned(x, x, h2)) for _ in range(args.repeat)]
        deviation = np.abs(binned(x, x, h2) - exact).max()
        rows.append(row("binned", binned_times, yardstick=yardstick, naive=naive,
                        peak=traced_peak(lambda: binned(x, x, h2)), note=f"max|diff| vs exact {deviation:.1e}"))

    if naive is None:
        rows.append(empty_row("naive", f"skipped (N > {args.naive_max})"))
    else:
        rows.append(row("naive", naive_times, yardstick=yardstick, naive=naive, note=f"{args.slow_repeat} run(s)"))

    if n > args.reference_max:
        rows.append(empty_row("sklearn KDE", f"skipped (N > {args.reference_max})"))
        return rows
    ours = kernels.log_kde(x, x, h2)
    kde_times = [timed(lambda: kernels.log_kde(x, x, h2)) for _ in range(args.repeat)]
    rows.append(row("log_kde (auto)", kde_times, yardstick=yardstick))
    kernel_density = optional("sklearn.neighbors", "KernelDensity")
    if kernel_density is None:
        rows.append(empty_row("sklearn KDE", "skipped: scikit-learn is not installed"))
        return rows
    reference = {}

    def score():
        reference["values"] = kernel_density(kernel="gaussian", bandwidth=np.sqrt(h2)).fit(x).score_samples(x)

    sk_times = [timed(score) for _ in range(args.slow_repeat)]
    gap = np.abs(reference["values"] - ours).max()
    rows.append(row("sklearn KDE", sk_times, yardstick=yardstick,
                    note=f"{args.slow_repeat} run(s); max|diff| vs log_kde {gap:.1e}"))
    return rows


_COLUMNS = {"N": 6, "d": 3, "path": 21, "median": 8, "min": 8, "max": 8, "/exp": 6, "naive/": 7,
            "peak MiB": 9, "+RSS MiB": 9, "note": 0}


def print_line(line: dict) -> None:
    print("  ".join(line.get(c, "").ljust(w) for c, w in _COLUMNS.items()).rstrip(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 2, 16])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--slow-repeat", type=int, default=1, help="runs of the naive and scikit-learn rows")
    parser.add_argument("--h2", type=float, default=0.05)
    parser.add_argument("--naive-max", type=int, default=16384)
    parser.add_argument("--reference-max", type=int, default=16384)
    args = parser.parse_args()

    accelerators = ["numpy"] + (["numba"] if optional("attneb.numerics._accel", "kernel_sums") is not None else [])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    versions = {m: optional(m, "__version__") for m in ("numpy", "numba", "sklearn")}
    print("versions: " + ", ".join(f"{m} {v or 'not installed'}" for m, v in versions.items()))
    print(f"h2 = {args.h2}, {kernels.get_num_threads()} kernel threads, times in seconds, "
          f"/exp = median / median of the exp yardstick, naive/ = naive median / median")
    print_line({c: c for c in _COLUMNS})
    for n in args.sizes:
        for d in args.dims:
            for line in measure(n, d, args, accelerators):
                print_line({"N": str(n), "d": str(d), **line})
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
