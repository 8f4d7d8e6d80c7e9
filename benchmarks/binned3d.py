"""Stage 1 in three dimensions on the binned path (numerics.binned): time to T* and error against the exact path.

Usage: python benchmarks/binned3d.py [--n 1000000] [--h2 0.9] [--sigma2 0.5] [--tol 1e-6] [--eta 0.05]
                                     [--sample 2000] [--repeat 1] [--e1]

Data: E1's sphere prior, ``x = u + sqrt(sigma2) z`` with ``u`` uniform on the unit sphere S^2 in
R^3. Stage 1 runs to ``T* = sigma2 / (2 h2)`` with ``backend="binned"`` in three segments, so that the
tokens at the start of layers 0, L/2 and L-1 can be checked (benchmarks/fast_path.py's
``staged_flow``: the printed time is the sum of the segments); ``--repeat`` runs it that many
times and prints the median.

Error, relative to the data scale (largest coordinate range of ``x``): at those three layers, the
binned velocity of a random subsample of ``--sample`` tokens (computed over all N tokens, as the
flow does) against the exact kernel mean of the same tokens over all N tokens
(``attneb.numerics.kernels``), and the largest error bound the binned path reports.

The default bandwidth is about the smallest at which the grid for 10^6 tokens at ``tol = 1e-6``
fits in ``attneb.numerics.binned.MAX_GRID_CELLS``: the 3-D grid has ``(range / spacing + cut-off)^3``
cells with spacing ~0.1 sqrt(h2) and cut-off 8.6 sqrt(h2), so it fits only where the data span at
most ~12 sqrt(h2), i.e. (for noisy data of range ~10 sigma) where T* = sigma2/(2 h2) <~ 0.7.
``--e1`` prints, without running them, the grids E1's sphere runs would need at N = 131072
(both bandwidth schedules, E1's tolerance 1e-7).

Prints a table; asserts nothing. Speed depends on the load of the machine: run it alone.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics

import numpy as np
import scipy.fft

from fast_path import layer_errors, staged_flow  # benchmarks/fast_path.py, beside this script
from attneb.numerics import binned, flow
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import UniformSphere


def sphere_tokens(n, sigma2, seed):
    """Noisy draws of the uniform prior on the unit sphere S^2 in R^3."""
    return draw_batch(UniformSphere(dim=3, radius=1.0), sigma2, n, seed)[1]


def grid_cells(x, h2, tol):
    """Zero-padded FFT cells of the grid over the box of ``x`` (the layout's rule: nodes, stencil, cut-off)."""
    plan = binned.plan_grid(x, h2, tol=tol)
    nodes = np.floor(np.ptp(x, axis=0) / plan.spacing).astype(int) + plan.order
    fft = [scipy.fft.next_fast_len(int(n + min(plan.half_width, n - 1)), real=(k == 2)) for k, n in enumerate(nodes)]
    return int(np.prod(fft)), plan


def print_e1_grids(sigma2):
    n = 131072
    x = sphere_tokens(n, sigma2, 0)
    print(f"\nE1's sphere at N = {n}, tol = 1e-7 (grids not built; MAX_GRID_CELLS = {binned.MAX_GRID_CELLS}):")
    for name, h2 in (("log", (4 * sigma2 / math.e) / math.log(n)), ("power", 0.5 * n ** -0.25)):
        cells, plan = grid_cells(x, h2, 1e-7)
        print(f"  {name:>5} schedule: h2 = {h2:.4f}, spacing {plan.spacing:.4g}, {cells:.3g} cells "
              f"({cells / binned.MAX_GRID_CELLS:.0f} x MAX_GRID_CELLS)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--h2", type=float, default=0.9)
    parser.add_argument("--sigma2", type=float, default=0.5)
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--e1", action="store_true")
    args = parser.parse_args()

    horizon = flow.leading_horizon(args.sigma2, args.h2)
    layers = flow.n_layers(horizon, args.eta)
    checks = [0, layers // 2, layers - 1]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"Stage 1 in 3-D to T* = sigma2/(2 h2) = {horizon:g}: {layers} layers of eta = {args.eta}, h2 = {args.h2}, "
          f"sigma2 = {args.sigma2}, N = {args.n}, tol = {args.tol:g}; errors relative to the data scale")
    x0 = sphere_tokens(args.n, args.sigma2, args.seed)
    cells, plan = grid_cells(x0, args.h2, args.tol)
    print(f"scale {plan.scale:.3f}, spacing {plan.spacing:.4g} (sqrt(h2)/{np.sqrt(args.h2) / plan.spacing:.1f}), "
          f"{plan.order} nodes per dimension, cut-off {plan.half_width} cells, grid at depth 0: {cells:.3g} FFT cells")
    walls, cpus = [], []
    for _ in range(args.repeat):
        wall, cpu, snapshots = staged_flow(x0, args.h2, args.eta, layers, checks, args.tol)
        walls.append(wall)
        cpus.append(cpu)
        print(f"  run: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    wall = statistics.median(walls)
    print(f"Stage 1 binned: median {wall:.1f} s wall of {args.repeat} ({statistics.median(cpus):.1f} s CPU, "
          f"{wall / layers:.1f} s per layer)")
    rows = layer_errors(snapshots, args.h2, args.tol, plan.scale, args.sample, np.random.default_rng(args.seed + 1))
    print(f"  {'layer':>6} {'max |v - v_exact|':>18} {'max bound':>10} {'exact rows':>10}  fft grid")
    for layer, error, bound, n_exact, fft_shape in rows:
        print(f"  {layer:>6} {error:>18.2e} {bound:>10.2e} {n_exact:>10}  {'x'.join(map(str, fft_shape))}")
    print(f"largest error on the subsamples: {max(r[1] for r in rows):.2e} of the data scale (tol {args.tol:g})")
    if args.e1:
        print_e1_grids(args.sigma2)


if __name__ == "__main__":
    main()
