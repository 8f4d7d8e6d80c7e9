"""Cross-validated ``h2`` and ``T`` of the two-stage denoiser on E1's two-cluster batch, beside the theory's.

Usage: python benchmarks/grid_search.py [--n 4096] [--seed 0] [--folds 3] [--backend binned]
                                        [--h2-factors 0.25 0.5 1 2 4] [--t-factors 0.5 1 2]

Draws ``N`` clean points from E1's two-cluster prior :math:`\\tfrac12 N(\\pm 2, 0.25)` (in 1-D,
``proofs_check.topics.designs.RECOVERY_PRIORS["clusters"]``) and their noisy copies at E1's noise
variance ``sigma2 = 0.5`` (``designs.SIGMA2``), from ``numpy.random.default_rng(seed)``
(:func:`attneb.numerics.experiments.draw_batch`). Then scikit-learn's ``GridSearchCV`` with
``KFold(folds)`` (no shuffle: the points are i.i.d.) searches, for
:class:`attneb.numerics.estimators.TwoStageDenoiser`,

* ``h2``: the theory's bandwidth times each of ``--h2-factors``; the theory's is E1's schedule
  ``h2 = (4 sigma2 / e) / log N`` as the sweeps evaluate it (:class:`attneb.numerics.sweep.H2Schedule`
  on ``designs.SCHEDULES["log"]``);
* ``T``: for each ``h2``, its leading-order depth :math:`T^*(h_2) = \\sigma^2/(2h_2)`
  (:func:`attneb.theory.depth_noise.leading_horizon`) times each of ``--t-factors``, plus ``T = 0``
  (Stage 2 alone, the same for every ``h2``: one grid point).

Each grid point is fitted on the noisy points of the training folds (the context), with the clean
points as ``y``, and scored on the held-out fold: fresh noisy queries, not in the context, by
:meth:`~attneb.numerics.base.Denoiser.score` (minus the MSE per coordinate). The step is E1's
``eta = 0.05``. The kernel path is ``--backend``: by default ``"binned"`` (grid and FFT sums within
``tol = 1e-7`` of the exact ones, E1's tolerance, ``designs.FAST``), which in 1-D is about 20 times
faster here than the exact sums that E1's ``"auto"`` picks at these ``N`` (pass ``--backend auto``
for E1's path; the MSEs agree to about 1e-9).

It prints the parameters the search picks beside the theory's, the MSE of the Bayes posterior mean
(:class:`~attneb.numerics.estimators.OracleBayes`) on the same held-out folds and the prior's Bayes
risk per coordinate (:meth:`attneb.numerics.priors.Prior.mmse`) for scale, and the table of
cross-validated MSEs (mean and standard deviation over the folds, rank), best first. Needs
scikit-learn (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from attneb.numerics import experiments
from attneb.numerics.estimators import OracleBayes, TwoStageDenoiser
from attneb.numerics.sweep import H2Schedule
from attneb.numerics.sweep.registry import build_prior
from attneb.proofs_check.topics.designs import FAST, RECOVERY_PRIORS, SCHEDULES, SIGMA2
from attneb.theory.depth_noise import leading_horizon

ETA = 0.05


def _rounded(value: float) -> float:
    """``value`` to 6 significant digits, so that the grid prints as it is."""
    return float(f"{value:.6g}")


def _grid(h2_theory: float, sigma2: float, h2_factors, t_factors) -> list[dict]:
    """``GridSearchCV``'s grid: each ``h2`` with its own ``T*(h2)`` times each factor, and ``T = 0`` once."""
    grid = [{"h2": [_rounded(h2_theory)], "T": [0.0]}]
    for f in h2_factors:
        h2 = _rounded(h2_theory * f)
        grid.append({"h2": [h2], "T": [_rounded(leading_horizon(sigma2, h2) * g) for g in t_factors]})
    return grid


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4096, help="batch size N (E1 runs 256 to 131072; default 4096)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the batch (default 0)")
    parser.add_argument("--folds", type=int, default=3, help="number of cross-validation folds (default 3)")
    parser.add_argument("--backend", default="binned", choices=["binned", "auto", "exact"],
                        help="kernel path of both stages, tol 1e-7 (default binned; E1 uses auto)")
    parser.add_argument("--h2-factors", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0],
                        help="h2 as multiples of the theory's h2 (default 0.25 0.5 1 2 4)")
    parser.add_argument("--t-factors", type=float, nargs="+", default=[0.5, 1.0, 2.0],
                        help="T as multiples of each h2's own T*(h2), besides T = 0 (default 0.5 1 2)")
    args = parser.parse_args(argv)

    label, spec = RECOVERY_PRIORS["clusters"]
    prior = build_prior(spec)
    sigma2 = SIGMA2
    clean, noisy = experiments.draw_batch(prior, sigma2, args.n, args.seed)
    h2_theory = H2Schedule.parse(SCHEDULES["log"][1]).at(args.n)[0]
    t_theory = float(leading_horizon(sigma2, h2_theory))
    cv = KFold(args.folds)
    base = TwoStageDenoiser(sigma2, h2_theory, eta=ETA, backend=args.backend, tol=FAST["tol"])

    start = time.perf_counter()
    search = GridSearchCV(base, _grid(h2_theory, sigma2, args.h2_factors, args.t_factors), cv=cv, refit=False)
    search.fit(noisy, clean)
    wall = time.perf_counter() - start
    bayes = -cross_val_score(OracleBayes(prior, sigma2), noisy, clean, cv=cv)

    results = search.cv_results_
    theory = {"h2": _rounded(h2_theory), "T": _rounded(leading_horizon(sigma2, _rounded(h2_theory)))}
    theory_cv = [-s for p, s in zip(results["params"], results["mean_test_score"]) if p == theory]
    best = search.best_params_
    print(f"E1 two-cluster batch: {label}, sigma2 = {sigma2}, N = {args.n}, seed = {args.seed}, d = {noisy.shape[1]}")
    print(f"GridSearchCV of TwoStageDenoiser: {len(results['params'])} grid points x {args.folds} folds; context = "
          f"the other folds' noisy points (about {args.n * (args.folds - 1) // args.folds}), queries = the held-out "
          f"fold; eta = {ETA}, backend = {args.backend!r}, tol = {FAST['tol']}")
    print(f"theory: h2 = (4 sigma2/e)/log N = {h2_theory:.6g}, T* = sigma2/(2 h2) = {t_theory:.6g}"
          + (f"   CV MSE {theory_cv[0]:.6f}" if theory_cv else "   (not on the grid)"))
    print(f"picked: h2 = {best['h2']:.6g} ({best['h2'] / h2_theory:.3g} x theory's), T = {best['T']:.6g} "
          f"({best['T'] / t_theory:.3g} x theory's T*, {best['T'] / leading_horizon(sigma2, best['h2']):.3g} x "
          f"T*(h2))   CV MSE {-search.best_score_:.6f}")
    print(f"Bayes posterior mean on the same held-out folds: CV MSE {bayes.mean():.6f} (sd over folds "
          f"{bayes.std():.2g}); prior's Bayes risk per coordinate (prior.mmse): {prior.mmse(sigma2).value:.6f}")
    print()
    print(f"{'rank':>4}  {'h2':>9}  {'h2/theory':>9}  {'T':>8}  {'T/T*(h2)':>8}  {'T/T*':>6}  {'CV MSE':>9}  "
          f"{'sd folds':>8}  {'fit s':>6}")
    for i in np.argsort(results["rank_test_score"], kind="stable"):
        h2, t = results["params"][i]["h2"], results["params"][i]["T"]
        print(f"{results['rank_test_score'][i]:>4}  {h2:>9.4g}  {h2 / h2_theory:>9.3g}  {t:>8.4g}  "
              f"{t / leading_horizon(sigma2, h2):>8.3g}  {t / t_theory:>6.3g}  {-results['mean_test_score'][i]:>9.6f}  "
              f"{results['std_test_score'][i]:>8.2g}  {results['mean_fit_time'][i]:>6.2f}")
    print()
    print(f"wall time of the search: {wall:.1f} s ({platform.machine()}, {os.cpu_count()} cores visible, "
          f"load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
