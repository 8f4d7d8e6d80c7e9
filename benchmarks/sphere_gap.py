"""Where the sphere's predicted gap (question G6) goes wrong: four comparisons the check does not make (reported).

``--large-n N``: the two-stage estimator on the uniform sphere in R^3 (sigma2 = 0.5, ``T = T*``, Euler step 0.05,
exact kernel sums) at one large ``N`` and ``h2``, a few seeds, its gap to Bayes on 4000 fresh and 4000 in-sample
queries, beside :mod:`attneb.theory.gap_sphere`'s bias and amplified variance. At ``N = 16384``, ``h2 = 0.1327``
about 30 s a seed on 2 cores.

``--split N``: the same estimator over ``--seeds`` contexts (at least 2) on one fixed set of 4000 fresh queries, its
gap split into the squared bias of the mean estimate over contexts (less its own noise, the variance over the
number of contexts) and the variance over contexts, beside the prediction's bias and its variance terms (unamplified
and amplified): which of the predicted terms falls short.

``--blur``: is the mean field at ``T*`` the sphere blurred by a residual variance? At each ``h2`` of E1's log
schedule (N = 256 to 4096), the residual ``eps = (E r^2 - R^2)/3`` of the mean field's shells (a sphere blurred by
``eps`` has ``E r^2 = R^2 + 3 eps``) and the bias of that blurred sphere to leading order, ``C eps^2``
(:func:`attneb.theory.gap_sphere.blur_bias_coefficient`), beside the mean field's bias to all orders.

``--depth-zero STORE``: E1's Stage-2-alone rows (``stage-two-only``, depth 0) of the sphere from a verify store,
against the same theory at ``T = 0`` (bias of Stage 2 over the noisy tokens, Nadaraya-Watson variance).

Usage::

    python benchmarks/sphere_gap.py --large-n 16384 --h2 0.1327 --seeds 2
    python benchmarks/sphere_gap.py --split 1024 --h2 0.1062 --seeds 20
    python benchmarks/sphere_gap.py --blur
    python benchmarks/sphere_gap.py --depth-zero REPORT/results.sqlite [--quick]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from attneb.numerics import flow, kernels, priors
from attneb.numerics.sweep import ResultStore
from attneb.numerics.sweep.spec import H2Schedule
from attneb.proofs_check.topics.designs import SCHEDULES, SIGMA2
from attneb.theory import gap_sphere


def large_n(n: int, h2: float, seeds: int) -> None:
    prior = priors.UniformSphere(dim=3, radius=1.0)
    depth = SIGMA2 / (2 * h2)
    gaps = []
    for seed in range(seeds):
        rng = np.random.default_rng(100 + seed)
        noisy = prior.sample(n, rng) + np.sqrt(SIGMA2) * rng.standard_normal((n, 3))
        refined = flow.particle_flow(noisy, h2, depth, eta=0.05, backend="exact", record_energy=False)
        fresh = prior.sample(4000, rng) + np.sqrt(SIGMA2) * rng.standard_normal((4000, 3))
        gaps.append([np.mean((kernels.kernel_mean(q, refined, SIGMA2) - prior.posterior_mean(q, SIGMA2)) ** 2)
                     for q in (fresh, noisy[:4000])])
        print(f"seed {seed}: gap fresh {gaps[-1][0]:.4g}, in-sample {gaps[-1][1]:.4g}", flush=True)
    bias = gap_sphere.mean_field_bias(1.0, SIGMA2, h2, depth, 0.05)["bias"]
    amplified = gap_sphere.variance(1.0, SIGMA2, h2, depth, 0.05, n)["amplified"]
    fresh, inside = np.mean(gaps, axis=0)
    print(f"N = {n}, h2 = {h2}: measured fresh {fresh:.4g}, in-sample {inside:.4g}; predicted {bias + amplified:.4g} "
          f"(bias {bias:.4g}, amplified variance {amplified:.4g}); fresh / predicted {fresh / (bias + amplified):.3g}")


def split(n: int, h2: float, seeds: int) -> dict[str, float]:
    """The gap on fresh queries and its parts (``gap = bias + variance`` exactly), beside the predicted terms
    (``predicted_bias``, ``predicted_variance``, ``predicted_amplified``)."""
    if seeds < 2:
        raise SystemExit(f"--seeds == {seeds}: the split needs at least 2 contexts")
    prior = priors.UniformSphere(dim=3, radius=1.0)
    depth = SIGMA2 / (2 * h2)
    rng = np.random.default_rng(999)
    queries = prior.sample(4000, rng) + np.sqrt(SIGMA2) * rng.standard_normal((4000, 3))
    bayes = prior.posterior_mean(queries, SIGMA2)
    estimates = []
    for seed in range(seeds):
        rng = np.random.default_rng(100 + seed)
        noisy = prior.sample(n, rng) + np.sqrt(SIGMA2) * rng.standard_normal((n, 3))
        refined = flow.particle_flow(noisy, h2, depth, eta=0.05, backend="exact", record_energy=False)
        estimates.append(kernels.kernel_mean(queries, refined, SIGMA2))
    estimates = np.stack(estimates)
    variance = float(estimates.var(axis=0, ddof=1).mean())  # per coordinate, averaged over the queries
    bias = float(np.mean((estimates.mean(axis=0) - bayes) ** 2)) - variance / seeds
    gap_ = float(np.mean((estimates - bayes) ** 2))
    mean_field = gap_sphere.mean_field_bias(1.0, SIGMA2, h2, depth, 0.05)["bias"]
    terms = gap_sphere.variance(1.0, SIGMA2, h2, depth, 0.05, n)
    print(f"N = {n}, h2 = {h2}, {seeds} contexts, fresh queries: gap {gap_:.4g} = squared bias {bias:.4g} + variance "
          f"{variance:.4g}; predicted: bias {mean_field:.4g}, variance {terms['variance']:.4g} (amplified "
          f"{terms['amplified']:.4g})")
    return {"gap": gap_, "bias": bias, "variance": variance, "predicted_bias": mean_field,
            "predicted_variance": terms["variance"], "predicted_amplified": terms["amplified"]}


def blur() -> list[dict]:
    """Per h2 of E1's log schedule: the mean field's residual blur, the blurred sphere's leading-order bias, and the
    mean field's bias."""
    coefficient = gap_sphere.blur_bias_coefficient(1.0, SIGMA2)
    rows = []
    for n in (256, 512, 1024, 2048, 4096):
        h2 = H2Schedule.parse(SCHEDULES["log"][1]).at(n)[0]
        record = gap_sphere.mean_field_bias(1.0, SIGMA2, h2, SIGMA2 / (2 * h2), 0.05)
        eps = (record["square_end"] - 1.0) / 3
        rows.append({"n": n, "h2": h2, "eps": eps, "blurred": coefficient * eps**2, "mean_field": record["bias"]})
        print(f"h2 = {h2:.4f} (N = {n}): eps = {eps:.4g} = {eps / h2:.3g} h2; C eps^2 = {coefficient * eps**2:.4g} "
              f"(C = {coefficient:.4g}); mean-field bias {record['bias']:.4g}; ratio {record['bias'] / (coefficient * eps**2):.3g}")
    return rows


def depth_zero(store_path: Path, quick: bool) -> None:
    mode = "quick" if quick else "full"
    bias = gap_sphere.mean_field_bias(1.0, SIGMA2, 0.1, 0.0, 0.05)["bias"]  # T = 0: h2 does not enter
    with ResultStore(store_path, reuse_other_code=True) as store:
        for schedule in ("log", "power"):
            by_n = collections.defaultdict(list)
            for r in store.rows(f"E1-sphere-{schedule}-{mode}"):
                if r["estimator"] == "stage-two-only":
                    by_n[r["n"]].append(r)
            for n in sorted(by_n):
                variance = gap_sphere.variance(1.0, SIGMA2, 0.1, 0.0, 0.05, n)["variance"]
                print(f"{schedule} N = {n}: measured fresh {np.mean([r['oos_gap'] for r in by_n[n]]):.4g}, in-sample "
                      f"{np.mean([r['gap'] for r in by_n[n]]):.4g}; predicted {bias + variance:.4g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large-n", type=int, help="run the two-stage estimator at this N")
    parser.add_argument("--h2", type=float, default=0.1327)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--split", type=int, metavar="N", help="split the gap at this N into bias and variance")
    parser.add_argument("--blur", action="store_true", help="the mean field's residual blur and its leading-order bias")
    parser.add_argument("--depth-zero", type=Path, metavar="STORE", help="results.sqlite of a verify run")
    parser.add_argument("--quick", action="store_true", help="with --depth-zero: read the quick mode's E1 rows")
    args = parser.parse_args(argv)
    if args.large_n is None and args.depth_zero is None and args.split is None and not args.blur:
        parser.error("give --large-n N, --split N, --blur or --depth-zero STORE")
    if args.blur:
        blur()
    if args.large_n is not None:
        large_n(args.large_n, args.h2, args.seeds)
    if args.split is not None:
        split(args.split, args.h2, args.seeds)
    if args.depth_zero is not None:
        depth_zero(args.depth_zero, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
