"""The predicted gap of :mod:`attneb.theory.gap` against E1's measured gaps, N by N (issue 26; reported, not decided).

Reads the two-stage rows of E1's 1-D priors (the Gaussian and the two clusters) from the store of a ``verify`` run,
computes at each of their ``(N, h2, T, eta)`` the predicted terms (bias, Stage-2 variance, amplified fluctuations;
no constant fitted), and prints a markdown table: prior, schedule, N, each term, the prediction, its local log-log
slope along the schedule and the factor on N that would halve it at that slope, the measured gap
in-sample and on fresh queries (mean over seeds and its 95% t-interval), their ratios to the prediction and the
term that dominates. For the Gaussian the bias is :func:`attneb.theory.gap.gaussian_bias` (exact layers), for the
clusters the first-order :func:`attneb.theory.gap.bias`. ``--mean-field`` adds, per point, the mean field's bias
computed numerically instead: 2^20 tokens at the noisy density's quantiles through the same Euler layers, Stage 2
over them on a grid of queries (about 25 s a point); it tells whether a misfit is in the first-order bias or
elsewhere. ``--figure F`` draws the gaps against N with the prediction and each term (PNG).

Usage::

    attneb verify --out REPORT                      # E1's full runs (or --quick, then --quick here)
    python benchmarks/gap_table.py --store REPORT/results.sqlite [--quick] [--schedule log power]
                                   [--mean-field] [--figure gap.png]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np
from scipy import stats

from attneb.numerics import binned, flow, meanfield, priors
from attneb.numerics.sweep import ResultStore
from attneb.numerics.sweep.spec import H2Schedule
from attneb.proofs_check.topics.designs import SCHEDULES, SIGMA2
from attneb.theory import gap

#: E1's 1-D priors as mixtures (weights, means, tau2s).
PRIORS = {"gaussian": ([1.0], [0.0], [1.0]), "clusters": ([0.5, 0.5], [-2.0, 2.0], [0.25, 0.25])}


def mean_field_bias(weights, means, tau2s, h2, depth, eta, n=1 << 20) -> float:
    """The mean field's Stage-2 bias, numerically: quantile tokens through the Euler layers, Stage 2 on a query grid."""
    weights, means, tau2s = (np.asarray(a, dtype=float) for a in (weights, means, tau2s))
    tokens = flow.particle_flow(meanfield.mixture_quantile_tokens(weights, means, tau2s + SIGMA2, n), h2, depth, eta=eta)
    reach = 8 * np.sqrt(tau2s.max() + SIGMA2)
    q = np.linspace(means.min() - reach, means.max() + reach, 1601)
    prior = priors.GaussianMixture([[m] for m in means], weights=list(weights), var=float(tau2s[0]))
    error = binned.kernel_mean(q[:, None], tokens, SIGMA2)[:, 0] - prior.posterior_mean(q[:, None], SIGMA2)[:, 0]
    density = sum(w * np.exp(-(q - m) ** 2 / (2 * (t + SIGMA2))) / np.sqrt(2 * np.pi * (t + SIGMA2))
                  for w, m, t in zip(weights, means, tau2s))
    return float(np.trapezoid(density * error**2, q))


def terms_at(prior: str, h2: float, depth: float, eta: float, n: int) -> dict[str, float]:
    """The predicted terms and their sum (``predicted``) for E1's ``prior``: the Gaussian's bias through its exact
    layers, the clusters' to first order; the Stage-2 variance and the amplified fluctuations of :mod:`attneb.theory.gap`."""
    weights, means, tau2s = PRIORS[prior]
    bias = (gap.gaussian_bias(tau2s[0], SIGMA2, h2, depth, eta) if prior == "gaussian"
            else gap.bias(weights, means, tau2s, SIGMA2, h2, depth))
    variance, amplified = gap.variance(weights, means, tau2s, SIGMA2, h2, depth, eta, n)
    return {"bias": bias, "variance": variance, "fluctuation": amplified - variance, "predicted": bias + amplified}


def predicted(prior: str, schedule: str, n: float, eta: float = 0.05) -> float:
    """The predicted gap at ``n`` tokens along E1's ``schedule`` (its ``h2``, ``T = T*``, Euler step ``eta``)."""
    h2 = H2Schedule.parse(SCHEDULES[schedule][1]).at(max(2, round(n)))[0]
    return terms_at(prior, h2, SIGMA2 / (2 * h2), eta, max(1, round(n)))["predicted"]


def local_slope(prior: str, schedule: str, n: int) -> float:
    """d log G / d log N of the predicted gap along the schedule, by a central difference over ``N 2^(+-1/4)``."""
    up, down = predicted(prior, schedule, n * 2**0.25), predicted(prior, schedule, n * 2**-0.25)
    return float(np.log(up / down) / np.log(2**0.5))


def _interval(values) -> tuple[float, float, float]:
    values = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean(), values.mean() - half, values.mean() + half


def table(store_path: Path, quick: bool, schedules: list[str], with_mean_field: bool) -> list[dict]:
    rows = []
    with ResultStore(store_path, reuse_other_code=True) as store:
        for prior, (weights, means, tau2s) in PRIORS.items():
            for schedule in schedules:
                experiment = f"E1-{prior}-{schedule}-{'quick' if quick else 'full'}"
                by_n = collections.defaultdict(list)
                for r in store.rows(experiment):
                    if r["estimator"] == "two-stage":
                        by_n[r["n"]].append(r)
                for n in sorted(by_n):
                    first = by_n[n][0]
                    h2, depth, eta = first["h2"], first["T"], first["eta"]
                    terms = terms_at(prior, h2, depth, eta, n)
                    row = {"prior": prior, "schedule": schedule, "n": n, "h2": h2, "seeds": len(by_n[n]), **terms,
                           "gap": _interval([r["gap"] for r in by_n[n]]),
                           "oos_gap": _interval([r["oos_gap"] for r in by_n[n]]),
                           "dominant": max(("bias", "variance", "fluctuation"), key=terms.get),
                           "slope": local_slope(prior, schedule, n)}
                    if with_mean_field:
                        row["mean_field_bias"] = mean_field_bias(weights, means, tau2s, h2, depth, eta)
                    rows.append(row)
    return rows


def _halving(slope: float) -> str:
    """The factor on N that halves the predicted gap at this local slope: 2^(-1/slope) (never, for a slope >= 0)."""
    return f"{2 ** (-1 / slope):.3g}" if slope < 0 else "never"


def print_table(rows: list[dict]) -> None:
    mf = "mean_field_bias" in rows[0] if rows else False
    head = ("| prior | schedule | N | h2 | bias | variance | fluctuation | predicted | local slope | N x to halve | "
            "gap (95%) | ratio | fresh (95%) | ratio | dominant |")
    print(head + (" mean-field bias (numeric) |" if mf else ""))
    print("|" + "---|" * (head.count("|") - 1 + mf))
    for r in rows:
        g, o = r["gap"], r["oos_gap"]
        line = (f"| {r['prior']} | {r['schedule']} | {r['n']} | {r['h2']:.4f} | {r['bias']:.2e} | {r['variance']:.2e} | "
                f"{r['fluctuation']:.2e} | {r['predicted']:.2e} | {r['slope']:.2f} | {_halving(r['slope'])} | "
                f"{g[0]:.2e} [{g[1]:.2e}, {g[2]:.2e}] | "
                f"{g[0] / r['predicted']:.2f} | {o[0]:.2e} [{o[1]:.2e}, {o[2]:.2e}] | {o[0] / r['predicted']:.2f} | "
                f"{r['dominant']} |")
        print(line + (f" {r['mean_field_bias']:.2e} |" if mf else ""))


def draw(rows: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure

    groups = sorted({(r["prior"], r["schedule"]) for r in rows})
    cols = min(2, len(groups))
    rows_ = -(-len(groups) // cols)
    fig = Figure(figsize=(6.5 * cols, 4.5 * rows_))
    axes = fig.subplots(rows_, cols, squeeze=False).ravel()
    for ax, (prior, schedule) in zip(axes, groups):
        part = [r for r in rows if (r["prior"], r["schedule"]) == (prior, schedule)]
        n = np.array([r["n"] for r in part])
        for key, style, label in (("predicted", "k-", "predicted gap"), ("bias", "C0--", "bias"),
                                  ("variance", "C1:", "Stage-2 variance"), ("fluctuation", "C2-.", "amplified fluctuations")):
            ax.loglog(n, [r[key] for r in part], style, label=label)
        if "mean_field_bias" in part[0]:
            ax.loglog(n, [r["mean_field_bias"] for r in part], "C0x", label="mean-field bias (numeric)")
        for key, marker, label in (("gap", "o", "measured, in-sample"), ("oos_gap", "s", "measured, fresh queries")):
            mean = np.array([r[key][0] for r in part])
            err = np.array([[m - r[key][1], r[key][2] - m] for m, r in zip(mean, part)]).T
            ax.errorbar(n, mean, yerr=err, fmt=marker, ms=4, capsize=2, label=label, mfc="none")
        ax.set_xlabel("N")
        ax.set_ylabel("gap to Bayes (per coordinate)")
        ax.set_title(f"E1, {prior}, schedule {schedule}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="results.sqlite of a verify run")
    parser.add_argument("--quick", action="store_true", help="read the quick mode's E1 runs (default: full)")
    parser.add_argument("--schedule", nargs="+", default=["log"], choices=["log", "power"])
    parser.add_argument("--mean-field", action="store_true", help="add the mean field's bias computed numerically")
    parser.add_argument("--figure", type=Path, help="write the figure here (PNG)")
    args = parser.parse_args(argv)
    rows = table(args.store, args.quick, args.schedule, args.mean_field)
    if not rows:
        parser.error(f"{args.store} holds no E1 two-stage rows of the {'quick' if args.quick else 'full'} mode")
    print_table(rows)
    if args.figure:
        draw(rows, args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
