"""Stage 1 on the binned path (numerics.binned): time and error against the exact path.

Usage: python benchmarks/fast_path.py [--n 1000000] [--d 1 2] [--tol-1d 1e-8] [--tol-2d 1e-7]
                                      [--sample 2000] [--e2e-n 20000] [--sigma2 0.5] [--h2 0.05]
                                      [--eta 0.05]

Data: ``x = prior draw + sqrt(sigma2) z`` with a two-cluster prior (means -1.5 and +1.5 on
every axis, component variance 0.5). Stage 1 runs to ``T* = sigma2 / (2 h2)`` (100 layers for
the defaults) with ``backend="binned"``, in three segments so that the tokens at the start of
layers 0, L/2 and L-1 can be checked; the printed time is the sum of the segments (each
re-sorts its tokens, which a single call does once).

Errors, relative to the data scale (largest coordinate range of ``x``):

* per layer: at those three layers, the binned velocity of a random subsample of ``--sample``
  tokens (computed over all N tokens, as the flow does) against the exact kernel mean of the
  same tokens over all N tokens; also the largest error bound the binned path reports;
* end to end: the whole flow, binned and exact, at ``--e2e-n`` tokens (where exact is affordable).

``tol`` bounds the velocity error of every layer. The flow itself amplifies a perturbation of
the tokens (by a few hundred for the defaults: 400x in 1-D and 70x in 2-D measured at N = 2000),
so the end to end error is larger than the per-layer one; the default tolerances leave room for
that (a tighter one in 1-D, where the grid costs next to nothing).

Prints a table; asserts nothing. Speed depends on the load of the machine: run it alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from attneb.numerics import binned, flow, kernels
from attneb.numerics.priors import GaussianMixture


def noisy_tokens(n, d, sigma2, seed):
    rng = np.random.default_rng(seed)
    prior = GaussianMixture(np.array([[-1.5] * d, [1.5] * d]), var=0.5)
    return prior.sample(n, rng) + np.sqrt(sigma2) * rng.standard_normal((n, d))


def staged_flow(x0, h2, eta, layers, checks, tol):
    """Binned Euler flow through ``layers`` layers.

    Returns the wall and CPU time (this process; on a shared machine the wall time also counts
    the waiting) and the tokens at the start of the layers in ``checks``.
    """
    snapshots, tokens, done, wall, cpu = {}, x0, 0, 0.0, 0.0
    for stop in sorted(set(checks) | {layers}):
        if stop > done:
            start, start_cpu = time.perf_counter(), time.process_time()
            tokens = flow.particle_flow(tokens, h2, (stop - done) * eta, eta=eta, backend="binned", tol=tol)
            wall += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            done = stop
        if stop in checks:
            snapshots[stop] = tokens
    return wall, cpu, snapshots


def layer_errors(snapshots, h2, tol, scale, sample, rng):
    """Largest binned-vs-exact velocity error on a subsample and largest reported bound, per checked layer."""
    rows = []
    for layer, tokens in sorted(snapshots.items()):
        res = binned.kernel_mean(tokens, tokens, h2, tol=tol, scale=scale, full_output=True)
        pick = rng.choice(len(tokens), min(sample, len(tokens)), replace=False)
        exact = kernels.kernel_mean(tokens[pick], tokens, h2)
        error = np.abs(res.values[pick] - exact).max()
        rows.append((layer, error / scale, res.error_bound.max() / scale, int(res.exact.sum()), res.fft_shape))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--d", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    parser.add_argument("--tol-1d", type=float, default=1e-8)
    parser.add_argument("--tol-2d", type=float, default=1e-7)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--e2e-n", type=int, default=20000)
    parser.add_argument("--sigma2", type=float, default=0.5)
    parser.add_argument("--h2", type=float, default=0.05)
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    horizon = flow.leading_horizon(args.sigma2, args.h2)
    layers = flow.n_layers(horizon, args.eta)
    checks = [0, layers // 2, layers - 1]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"Stage 1 to T* = sigma2/(2 h2) = {horizon:g}: {layers} layers of eta = {args.eta}, h2 = {args.h2}, "
          f"sigma2 = {args.sigma2}; errors relative to the data scale")
    for d in args.d:
        tol = args.tol_1d if d == 1 else args.tol_2d
        x0 = noisy_tokens(args.n, d, args.sigma2, args.seed)
        plan = binned.plan_grid(x0, args.h2, tol=tol)
        wall, cpu, snapshots = staged_flow(x0, args.h2, args.eta, layers, checks, tol)
        rows = layer_errors(snapshots, args.h2, tol, plan.scale, args.sample, np.random.default_rng(args.seed + 1))

        small = noisy_tokens(args.e2e_n, d, args.sigma2, args.seed + 2)
        small_scale = binned.plan_grid(small, args.h2, tol=tol).scale
        start = time.perf_counter()
        fast = flow.particle_flow(small, args.h2, horizon, eta=args.eta, backend="binned", tol=tol)
        fast_time = time.perf_counter() - start
        start = time.perf_counter()
        exact = flow.particle_flow(small, args.h2, horizon, eta=args.eta)
        exact_time = time.perf_counter() - start
        e2e = np.abs(fast - exact).max() / small_scale

        print(f"\nd = {d}, N = {args.n}, tol = {tol:g}: scale {plan.scale:.3f}, spacing {plan.spacing:.4g} "
              f"(sqrt(h2)/{np.sqrt(args.h2) / plan.spacing:.1f}), {plan.order} nodes per dimension")
        print(f"  Stage 1 binned: {wall:.1f} s wall, {cpu:.1f} s CPU ({1e3 * wall / layers:.0f} ms per layer)")
        print(f"  {'layer':>6} {'max |v - v_exact|':>18} {'max bound':>10} {'exact rows':>10}  fft grid")
        for layer, error, bound, n_exact, fft_shape in rows:
            print(f"  {layer:>6} {error:>18.2e} {bound:>10.2e} {n_exact:>10}  {'x'.join(map(str, fft_shape))}")
        print(f"  end to end at N = {args.e2e_n}: max |x_T - x_T exact| = {e2e:.2e} "
              f"(binned {fast_time:.1f} s, exact {exact_time:.1f} s)")


if __name__ == "__main__":
    main()
