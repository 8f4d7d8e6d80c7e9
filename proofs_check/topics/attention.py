"""Attention as a kernel-weighted posterior mean: C1, C2 and the clean-context special case G3.

C1: one attention step is the posterior mean under the empirical prior of its keys; C2: its
residual is ``h2`` times the score of the keys' kernel density (Tweedie); G3: one attention step of
bandwidth ``sigma2`` over clean draws of the prior tends to the Bayes posterior mean as ``N`` grows
(experiment E5, the predecessor paper's one-layer result). The derivation ``attention`` bears on C1
and C2. Each numeric check calls the implementation through its module (``kernels.kernel_mean``, not
a name imported from it) and reads what the theory asserts (the factor of the score) through a
module attribute, so that a test, or the power analysis, can swap in a broken implementation or a
wrong theory and see the check fail.
"""

from __future__ import annotations

import dataclasses

import mpmath
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attneb.numerics import binned, kernels, priors, transformer
from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.finite_differences import five_point_gradient
from attneb.proofs_check.engine.plotting import colour_cycle, grouped_intervals, loglog
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, claim, swap
from attneb.proofs_check.engine.replication import (
    FLOOR_FIT_INTERVAL,
    FLOOR_FIT_T_INTERVAL,
    floor_fit,
    floor_fit_t,
    gap_slopes,
    per_seed_slope_decision,
    plot_study,
    run_pooled,
    seed_table,
    stored,
    with_seed_count,
)
from attneb.proofs_check.engine.studies import mode_name, study
from attneb.proofs_check.topics.designs import RECOVERY_PRIORS, SIGMA2, fast_options, labelled

claim(
    "C1",
    "attention step = posterior mean under the empirical prior",
    "Softmax attention with key-query matrix beta*I and key-norm bias -beta*||x_j||^2/2 equals the "
    "Gaussian-kernel mean with h2 = 1/beta, which is the posterior mean of x given q ~ N(x, h2 I) "
    "under the empirical prior (1/N) sum_j delta_{x_j}.",
    ("identity value/output maps", "h2 = 1/beta > 0"),
)
claim(
    "C2",
    "kernel-mean residual = h2 x score (Tweedie)",
    "a(q) - q = h2 * grad_q log((1/N) sum_j phi_h2(q - x_j)).",
    ("Gaussian kernel of variance h2 > 0",),
)
claim(
    "G3",
    "clean-context special case",
    "One attention step with bandwidth sigma2 over N clean draws x_j of the prior, queried by xt, is the "
    "posterior mean under the empirical prior of the draws; as N -> inf it tends to E[x | xt] (the "
    "one-layer result of the predecessor paper), with no Stage 1 needed.",
    ("clean context (the draws themselves are seen)",),
)

register_derivation("attention", theory_derivation("attention"), ("C1", "C2"))


IDENTITY_TOL = 1e-10


#: Five-point finite differences with step 1e-3 on O(1) data: truncation ~1e-12 * f^(5), rounding ~1e-13.
FD_TOL = 1e-7


FD_STEP = 1e-3


#: Digits of the mpmath evaluation of the log-KDE gradient (independent of numpy's kernel code).
MP_DIGITS = 30


#: The binned path's tolerance relative to the keys' coordinate range, and the margin allowed on it.
BINNED_TOL = 1e-7


BANDWIDTHS = (0.05, 0.5, 5.0)


def score_factor(h2: float) -> float:
    """The factor C2 puts between the attention residual and the score of the log-KDE: ``h2``."""
    return h2


def context(seed: int, n: int = 40, m: int = 25, d: int = 3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, d)) * 1.5, rng.normal(size=(n, d))


def identity_evidence(residuals: dict[str, float], tol: float, what: str) -> Evidence:
    worst = max(residuals.values())
    return Evidence(
        passed=bool(worst <= tol),
        kind="identity",
        summary=f"{what}: max residual {worst:.2e} (tolerance {tol:.0e})",
        data={"residuals": residuals, "tolerance": tol},
    )


def _kernel_bandwidth_doubled(real):
    return lambda queries, keys, h2, **kw: real(queries, keys, 2 * h2, **kw)


KERNEL_BANDWIDTH_DOUBLED = alternative("kernel bandwidth 2 h2", "kernel_mean computed with bandwidth 2 h2",
                                       swap("attneb.numerics.kernels:kernel_mean", _kernel_bandwidth_doubled),
                                       kind="implementation")


def _head_without_key_norm_bias(real):
    return classmethod(lambda cls, dim, h2: dataclasses.replace(real(dim, h2), key_norm_coef=0.0))


def _head_with_squared_temperature(real):
    def gaussian(cls, dim, h2):
        head = real(dim, h2)
        return dataclasses.replace(head, W_Q=head.W_Q / h2**0.5, W_K=head.W_K / h2**0.5)
    return classmethod(gaussian)


def _head_with_full_key_norm_bias(real):
    return classmethod(lambda cls, dim, h2: dataclasses.replace(real(dim, h2), key_norm_coef=2.0 / h2))


def _kernel_bandwidth_halved(real):
    return lambda queries, keys, h2, **kw: real(queries, keys, h2 / 2, **kw)


@check(
    "C1", "attention head = kernel mean = empirical posterior mean",
    criterion=f"every residual between the softmax head (beta = 1/h2, key-norm bias), the kernel mean and "
    f"Discrete(keys).posterior_mean at h2 in {BANDWIDTHS} is <= {IDENTITY_TOL:g}",
    alternatives=[
        alternative("head without key-norm bias", "the head's logits lack -beta ||x_j||^2 / 2",
                    swap("attneb.numerics.transformer:AttentionHead.gaussian", _head_without_key_norm_bias),
                    kind="implementation"),
        alternative("head with logits beta^2 q.x", "W_Q = W_K = beta I instead of sqrt(beta) I",
                    swap("attneb.numerics.transformer:AttentionHead.gaussian", _head_with_squared_temperature),
                    kind="implementation"),
        alternative("key-norm bias -beta ||x_j||^2", "the bias without its factor 1/2",
                    swap("attneb.numerics.transformer:AttentionHead.gaussian", _head_with_full_key_norm_bias),
                    kind="implementation"),
        KERNEL_BANDWIDTH_DOUBLED,
        alternative("kernel exp(-||u||^2 / h2)", "kernel_mean computed with bandwidth h2 / 2",
                    swap("attneb.numerics.kernels:kernel_mean", _kernel_bandwidth_halved), kind="implementation"),
    ],
    covers=("attneb.numerics.kernels:kernel_mean", "attneb.numerics.priors:Discrete.posterior_mean",
            "attneb.numerics.transformer:AttentionHead.__call__"),
)
def attention_is_posterior_mean(ctx: Context) -> Evidence:
    queries, keys = context(seed=1)
    residuals = {}
    for h2 in BANDWIDTHS:
        head = transformer.AttentionHead.gaussian(keys.shape[1], h2)(queries, keys)
        mean = kernels.kernel_mean(queries, keys, h2)
        post = priors.Discrete(keys).posterior_mean(queries, h2)
        residuals[f"head-kernel h2={h2}"] = float(np.abs(head - mean).max())
        residuals[f"kernel-posterior h2={h2}"] = float(np.abs(mean - post).max())
    return identity_evidence(residuals, IDENTITY_TOL, "attention vs kernel mean vs Discrete.posterior_mean")


@check(
    "C1", "binned (grid and FFT) kernel sums = exact sums within the stated tolerance",
    criterion=f"in d = 1 and d = 2, binned.kernel_mean and binned.kde_score differ from the exact sums by at most "
    f"{BINNED_TOL:g} x the keys' coordinate range (kernel mean) and that over h2 (score), the tolerance they are "
    "asked for",
    alternatives=[
        alternative("grid sums at bandwidth 2 h2", "binned.kernel_mean computed with bandwidth 2 h2",
                    swap("attneb.numerics.binned:kernel_mean", _kernel_bandwidth_doubled), kind="implementation"),
    ],
    covers=("attneb.numerics.binned:kernel_mean", "attneb.numerics.binned:kde_score"),
)
def binned_sums_are_exact_sums(ctx: Context) -> Evidence:
    residuals = {}
    for d, n in ((1, 3000), (2, 2000)):
        rng = np.random.default_rng(20 + d)
        keys = rng.normal(size=(n, d))
        queries = rng.normal(size=(400, d)) * 1.3
        scale = float(np.ptp(keys, axis=0).max())
        for h2 in (0.02, 0.2):
            mean = binned.kernel_mean(queries, keys, h2, tol=BINNED_TOL)
            score = binned.kde_score(queries, keys, h2, tol=BINNED_TOL)
            exact_mean = kernels.kernel_mean(queries, keys, h2)
            residuals[f"mean d={d} h2={h2}"] = float(np.abs(mean - exact_mean).max() / scale)
            residuals[f"score d={d} h2={h2}"] = float(np.abs(score - (exact_mean - queries) / h2).max() * h2 / scale)
    return identity_evidence(residuals, BINNED_TOL, "binned vs exact kernel mean and KDE score, relative to the keys' range")


def _mp_log_kde(keys: np.ndarray, h2: float):
    """The log-KDE as an mpmath function of the query coordinates (an explicit sum of Gaussians)."""
    points = [[mpmath.mpf(float(v)) for v in key] for key in keys]
    h = mpmath.mpf(float(h2))

    def log_kde(*q):
        total = mpmath.fsum(mpmath.exp(-mpmath.fsum((qi - ki) ** 2 for qi, ki in zip(q, key)) / (2 * h))
                            for key in points)
        return mpmath.log(total / len(points)) - len(q) / 2 * mpmath.log(2 * mpmath.pi * h)

    return log_kde


def mp_log_kde(query: np.ndarray, keys: np.ndarray, h2: float) -> tuple[float, np.ndarray]:
    r"""Value and gradient of :math:`\log \frac1N \sum_j \varphi_{h_2}(q - x_j)` at one query, by mpmath.

    Evaluated at ``MP_DIGITS`` digits; ``mpmath.diff`` differentiates the log of the explicit sum of
    Gaussians numerically: a route that shares no code with :mod:`attneb.numerics.kernels`.
    """
    with mpmath.workdps(MP_DIGITS):
        log_kde = _mp_log_kde(keys, h2)
        at = [mpmath.mpf(float(v)) for v in query]
        gradient = [mpmath.diff(log_kde, at, tuple(int(i == c) for i in range(len(at)))) for c in range(len(at))]
        return float(log_kde(*at)), np.array([float(g) for g in gradient])


SIGMA_FOR_SIGMA2 = alternative("score times sqrt(h2) (sigma for sigma2)", "a(q) - q compared with sqrt(h2) grad log KDE",
                               swap(f"{__name__}:score_factor", lambda real: (lambda h2: h2**0.5)))


@check(
    "C2", "kernel-mean residual = h2 x gradient of the log-KDE (mpmath, independent of the kernel code)",
    criterion=f"at 8 query points and h2 in {BANDWIDTHS}, |a(q) - q - h2 grad log KDE(q)|, "
    f"|h2 kde_score(q) - h2 grad log KDE(q)| and |log_kde(q) - log KDE(q)| are <= {IDENTITY_TOL:g}, the log-KDE and "
    f"its gradient evaluated by mpmath at {MP_DIGITS} digits",
    alternatives=[
        SIGMA_FOR_SIGMA2,
        alternative("score times 2 h2", "a(q) - q compared with 2 h2 grad log KDE",
                    swap(f"{__name__}:score_factor", lambda real: (lambda h2: 2 * h2))),
        alternative("score times 1 (no h2)", "a(q) - q compared with grad log KDE",
                    swap(f"{__name__}:score_factor", lambda real: (lambda h2: 1.0))),
        alternative("score times 1/h2 (beta for h2)", "a(q) - q compared with grad log KDE / h2",
                    swap(f"{__name__}:score_factor", lambda real: (lambda h2: 1 / h2))),
        alternative("score times -h2 (a - q = grad E)", "a(q) - q compared with -h2 grad log KDE",
                    swap(f"{__name__}:score_factor", lambda real: (lambda h2: -h2))),
        alternative("log-KDE without its normalisation", "log_kde missing -log N - (d/2) log(2 pi h2)",
                    swap("attneb.numerics.kernels:log_kde", lambda real: (lambda q, k, h2, **kw: real(q, k, h2, **kw)
                                                                  + np.log(len(k)) + k.shape[1] / 2
                                                                  * np.log(2 * np.pi * h2))),
                    kind="implementation"),
        KERNEL_BANDWIDTH_DOUBLED,
    ],
    covers=("attneb.numerics.kernels:kernel_mean", "attneb.numerics.kernels:kde_score", "attneb.numerics.kernels:log_kde"),
)
def residual_is_mp_score(ctx: Context) -> Evidence:
    queries, keys = context(seed=2, n=12, m=8)
    residuals = {}
    for h2 in BANDWIDTHS:
        values, grads = zip(*(mp_log_kde(q, keys, h2) for q in queries))
        grad = np.array(grads)
        residual = kernels.kernel_mean(queries, keys, h2) - queries
        residuals[f"residual h2={h2}"] = float(np.abs(residual - score_factor(h2) * grad).max())
        residuals[f"kde_score h2={h2}"] = float(np.abs(h2 * kernels.kde_score(queries, keys, h2) - h2 * grad).max())
        residuals[f"log_kde h2={h2}"] = float(np.abs(kernels.log_kde(queries, keys, h2) - np.array(values)).max())
    return identity_evidence(residuals, IDENTITY_TOL,
                     "a(q) - q and h2 kde_score vs h2 x the mpmath gradient of the log-KDE; log_kde vs its mpmath value")


@check(
    "C2", "kernel-mean residual = h2 x finite-difference gradient of log_kde",
    criterion=f"at h2 in (0.5, 5): |a(q) - q - h2 FD5[log_kde](q)| <= {FD_TOL:g} (five-point differences, step "
    f"{FD_STEP:g}: truncation ~1e-12, rounding ~1e-13)",
    alternatives=[
        SIGMA_FOR_SIGMA2,
        alternative("log-KDE at bandwidth 2 h2", "log_kde computed with bandwidth 2 h2",
                    swap("attneb.numerics.kernels:log_kde", _kernel_bandwidth_doubled), kind="implementation"),
    ],
    covers=("attneb.numerics.kernels:log_kde", "attneb.numerics.kernels:kernel_mean"),
)
def residual_is_gradient_of_log_kde(ctx: Context) -> Evidence:
    queries, keys = context(seed=3)
    residuals = {}
    for h2 in (0.5, 5.0):
        residual = kernels.kernel_mean(queries, keys, h2) - queries
        grad = five_point_gradient(lambda x: kernels.log_kde(x, keys, h2), queries, FD_STEP)
        residuals[f"h2={h2}"] = float(np.abs(residual - score_factor(h2) * grad).max())
    return identity_evidence(residuals, FD_TOL, "a(q) - q vs h2 * 5-point FD of log_kde (numeric)")


CLEAN_FLOOR_OF_MMSE = 0.004


def clean_configs(quick: bool) -> dict[str, dict]:
    """E5: one attention step (bandwidth sigma2) over N clean draws, as N grows."""
    return {
        part: {
            "name": mode_name("E5", part, quick),
            "prior": prior,
            "sigma2": SIGMA2,
            "n": [256, 1024, 4096] if quick else [256, 1024, 4096, 16384],
            "seeds": {"start": 0, "count": 4 if quick else 8},
            "estimators": ["clean-context"],
            "options": fast_options(["clean-context"]),
        }
        for part, (_, prior) in RECOVERY_PRIORS.items()
    }


#: Seeds of the Student-t-interval floor check in quick mode (full mode: E5's 8).
FLOOR_T_QUICK_SEEDS = 8


def floor_t_configs(quick: bool) -> dict[str, dict]:
    """E5 with the seeds of the floor check: quick mode on :data:`FLOOR_T_QUICK_SEEDS` seeds, E5's first 4 and 4 more
    (the same N); full mode as E5."""
    return with_seed_count(clean_configs(quick), FLOOR_T_QUICK_SEEDS) if quick else clean_configs(quick)


def clean_data(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The E5 rows as the decisions see them (the identity; a data alternative swaps this function)."""
    return rows_by_part


def _clean_with_floor(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """E5 data alternative: every gap (in-sample and fresh queries) plus CLEAN_FLOOR_OF_MMSE x the Bayes risk."""
    return {part: [{**r, "gap": r["gap"] + CLEAN_FLOOR_OF_MMSE * r["mmse"],
                    "oos_gap": r["oos_gap"] + CLEAN_FLOOR_OF_MMSE * r["mmse"]} for r in rows]
            for part, rows in rows_by_part.items()}


@study("E5", "one attention step over N clean draws: gap to Bayes vs N (G3)", claims=("G3",),
       files=("E5_clean_context",))
def draw_clean(store: ResultStore, quick: bool) -> tuple[Figure]:
    rows = stored(clean_configs(quick), store)
    return (plot_clean_context(labelled(rows, RECOVERY_PRIORS)),)


_E5_DESIGN = ("three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
              "4096 quick with 4 seeds; to 16384 full with 8)")


_E5_SLOPE_ALTERNATIVES = [alternative("gap with a floor of 0.4% of the Bayes risk", "every gap plus 0.004 x MMSE",
                                      swap(f"{__name__}:clean_data", lambda real: _clean_with_floor),
                                      kind="data")]


@check(
    "G3", "E5: one attention step over clean draws reaches Bayes as N grows (three priors; interval over per-seed "
    "slopes)",
    criterion=f"{_E5_DESIGN}: the log-log slope of the in-sample gap to Bayes against N is fitted to each seed's "
    "batches alone (least squares over its N), and the 95% Student-t interval of the mean of these per-seed slopes "
    "over the S seeds (S - 1 degrees of freedom) lies below 0 for every prior",
    replication="subsample",
    alternatives=_E5_SLOPE_ALTERNATIVES,
    note="supersedes the pooled interval over every (N, seed) point, which treats one seed's nested batches at "
    "different N as independent points. In quick mode (4 seeds, 3 N) the Gaussian's per-seed slopes scatter widely: "
    "the upper end of its interval lies near 0 (-0.03 on seeds 0-3; size 0.025 over 40 subsets of a 12-seed pool, 0 "
    "in full mode). Cannot tell a gap that vanishes from one that falls onto a floor (power 0.3 quick, 0 full, against "
    "a floor of 0.4% of the MMSE); the floor check below does",
)
def clean_context_per_seed(ctx: Context) -> Evidence:
    rows = clean_data(run_pooled(clean_configs(ctx.quick), ctx))
    figs = plot_study("E5", ctx)
    passed, text, data = per_seed_slope_decision(rows, "clean-context", label=lambda part: RECOVERY_PRIORS[part][0])
    return Evidence(
        passed=passed,
        kind="rate",
        summary=f"gap ~ N^p, one step of bandwidth sigma2 = {SIGMA2} over clean draws, slope fitted per seed, "
        f"t-interval of the mean over seeds: {text} (passes when every in-sample per-seed interval lies below 0)",
        data=data,
        figures=figs,
    )


@check(
    "G3", "E5 (superseded, pooled slope interval): one attention step over clean draws reaches Bayes as N grows "
    "(three priors)",
    criterion="three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
    "4096 quick with 4 seeds; to 16384 full with 8): the log-log slope of the in-sample gap to Bayes against N over "
    "every N and seed has its 95% t-interval below 0 for every prior",
    replication="subsample",
    alternatives=_E5_SLOPE_ALTERNATIVES,
    gating=False,
    note="superseded by 'E5: one attention step ... (interval over per-seed slopes)': this interval pools every "
    "(N, seed) point as independent, but one seed's batches at different N share random numbers, so its stated 95% "
    "level does not hold (on the stored runs the per-seed interval is 0.6-2.0x as wide, 2.0x for the Gaussian in "
    "quick mode); same decision on the stored quick and full runs",
)
def clean_context(ctx: Context) -> Evidence:
    rows = clean_data(run_pooled(clean_configs(ctx.quick), ctx))
    fits = gap_slopes(rows, "clean-context")
    oos = gap_slopes(rows, "clean-context", column="oos_gap")
    text = "; ".join(f"{RECOVERY_PRIORS[p][0]}: {fit.slope} (fresh queries {oos[p].slope})" for p, fit in fits.items())
    return Evidence(
        passed=all(fit.slope.high < 0 for fit in fits.values()),
        kind="rate",
        summary=f"gap ~ N^p, one step of bandwidth sigma2 = {SIGMA2} over clean draws: {text} "
        "(passes when every in-sample interval lies below 0)",
        data={"slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in fits.items()},
              "oos_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in oos.items()}},
    )


_E5_FLOOR_ALTERNATIVES = [alternative("gap with a floor of 0.4% of the Bayes risk", "every gap plus 0.004 x MMSE",
                                      swap(f"{__name__}:clean_data", lambda real: _clean_with_floor), kind="data")]


@check(
    "G3", "E5, floor: the clean-context gap does not stall at 0.4% of the Bayes risk, in-sample and for fresh queries",
    criterion="three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
    "4096 quick with 4 seeds; to 16384 full with 8): gap(N) = c + b/N (the 1/N rate of a kernel mean over N draws at a "
    "fixed bandwidth) is fitted to the mean gap over seeds (weights 1/variance over seeds) and c's 95% percentile "
    "interval comes from 2000 resamples of the seeds (shared across N, each refitted with the data's weights); floor "
    "alternative: 0.4% of the Bayes risk (MMSE); passes when, for every prior and both the in-sample gap and the gap on "
    "fresh noisy queries (new draws, not in the context), the upper end of c's interval lies below half of it, 0.2% of "
    "the MMSE",
    replication="subsample",
    gating=False,
    alternatives=_E5_FLOOR_ALTERNATIVES,
    note="superseded by 'E5, floor (Student-t interval)' (issue 24): its percentile interval over 4-8 seeds covers "
    "0.68 (quick) and 0.70 (full) at a nominal 0.95 on data shaped like E5's (benchmarks/calibration.py, rows "
    "floor_fit-E5-*). Resolution: floors of 0.2-0.4% of the Bayes risk, a few times the gap at the largest N (the gaps "
    "of 4 seeds scatter by up to 100% at N = 4096)",
)
def clean_context_floor(ctx: Context) -> Evidence:
    return _clean_floor_evidence(ctx, floor_fit, FLOOR_FIT_INTERVAL)


@check(
    "G3", "E5, floor (Student-t interval): the clean-context gap does not stall at 0.4% of the Bayes risk, in-sample and "
    "for fresh queries",
    criterion="three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
    "4096 quick with 4 seeds; to 16384 full with 8): gap(N) = c + b/N (the 1/N rate of a kernel mean over N draws at a "
    "fixed bandwidth) is fitted to the mean gap over the S seeds (weights 1/variance over seeds), and c's 95% interval "
    "is c +- t(S - 1) sqrt(S/(S - 1)) sd(c*), sd(c*) over 2000 resamples of the seeds (shared across N), each refitted "
    "with its own weights; floor alternative: 0.4% of the Bayes risk (MMSE); passes when, for every prior and both the "
    "in-sample gap and the gap on fresh noisy queries (new draws, not in the context), the upper end of c's interval "
    "lies below half of it, 0.2% of the MMSE",
    replication="subsample",
    gating=False,
    alternatives=_E5_FLOOR_ALTERNATIVES,
    note="superseded by 'E5, floor (Student-t interval, 8 quick seeds)' (issue 24): its quick size, 0.15, is above "
    "0.05. Replaced the percentile-interval floor check (issue 24); criterion fixed before its first run. On data "
    "shaped like E5's (benchmarks/calibration.py, rows floor_fit_t-E5-*) its interval covers 0.995 (quick) and 0.902 "
    "(full) two-sided at a nominal 0.95, and its upper end, the side decided, lies above the truth in 1.0 and 0.995 "
    "of the simulated data sets (0.975 nominal): conservative where it decides. Quick power (40 subsets of a pool of "
    "3 seed sets): size 0.15, power 1.0 against the 0.4% floor; the percentile check's size 0 came with its "
    "undercoverage. With 4 quick seeds and N to 4096 the calibrated interval's upper end often reaches the 0.2% "
    "threshold: the quick decision fails under the true theory about once in seven (reported here, not redesigned)",
)
def clean_context_floor_t(ctx: Context) -> Evidence:
    return _clean_floor_evidence(ctx, floor_fit_t, FLOOR_FIT_T_INTERVAL)


@check(
    "G3", "E5, floor (Student-t interval, 8 quick seeds): the clean-context gap does not stall at 0.4% of the Bayes "
    "risk, in-sample and for fresh queries",
    criterion="three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
    f"4096 quick with {FLOOR_T_QUICK_SEEDS} seeds, E5's 4 and 4 more; to 16384 full with 8): gap(N) = c + b/N (the 1/N "
    "rate of a kernel mean over N draws at a fixed bandwidth) is fitted to the mean gap over the S seeds (weights "
    "1/variance over seeds), and c's 95% interval is c +- t(S - 1) sqrt(S/(S - 1)) sd(c*), sd(c*) over 2000 resamples "
    "of the seeds (shared across N), each refitted with its own weights; floor alternative: 0.4% of the Bayes risk "
    "(MMSE); passes when, for every prior and both the in-sample gap and the gap on fresh noisy queries (new draws, "
    "not in the context), the upper end of c's interval lies below half of it, 0.2% of the MMSE",
    replication="subsample",
    alternatives=_E5_FLOOR_ALTERNATIVES,
    note="replaces 'E5, floor (Student-t interval)', whose quick decision on 4 seeds failed under the true theory in "
    "0.15 of 40 subsets (issue 24, item 4: size at most 0.05); criterion fixed before its first run: the same interval "
    "and threshold on 8 quick seeds (full mode unchanged): with an estimate of c whose sd falls like 1/sqrt(S), the "
    "half-width goes from 1.59 to 0.84 per-seed sds (arithmetic; the power run measures the size). Its first quick "
    "run decided, through a cache keyed by experiment name alone (fixed in 6c33fe6), on the slope check's 4 seeds. "
    "Quick power (attneb verify --quick --power --only G3; 40 subsets of a pool of 3 seed sets): size 0.00, power 1.00 "
    "against the 0.4% floor. That floor shifts every gap by a constant, which moves c by exactly 0.4% of the MMSE "
    "and leaves its interval as it was, so its rejection says little and the size is the informative figure; on the "
    "quick runs, in a referee's scratch decisions, a floor added to all three priors passes up to 0.12% of the MMSE "
    "(0.13% fails), and one on the sphere alone up to 0.18%",
)
def clean_context_floor_t8(ctx: Context) -> Evidence:
    return _clean_floor_evidence(ctx, floor_fit_t, FLOOR_FIT_T_INTERVAL,
                                 floor_t_configs)


def _clean_floor_evidence(ctx: Context, floor, interval_name: str, configs=None) -> Evidence:
    """The E5 floor decision with ``floor`` on the runs of ``configs`` (default: :func:`clean_configs`, looked up at
    call time)."""
    rows = clean_data(run_pooled((configs or clean_configs)(ctx.quick), ctx))
    threshold = CLEAN_FLOOR_OF_MMSE / 2
    verdicts, fits = {}, {}
    for part, part_rows in rows.items():
        mmse = part_rows[0]["mmse"]
        for column in ("gap", "oos_gap"):
            n, seeds, table = seed_table(part_rows, column)
            fit = {**floor(n, table, exponents=(1.0,)), "mmse": mmse, "seeds": len(seeds)}
            fits[f"{part}, {column}"] = fit
            verdicts[f"{part}, {column}"] = fit["ci"][1] < threshold * mmse
    text = "; ".join(f"{k}, S = {f['seeds']}: c = {f['c']:.3g} [{f['ci'][0]:.3g}, {f['ci'][1]:.3g}] (= {f['c'] / f['gap_at_largest_n']:.2f} "
                     f"[{f['ci'][0] / f['gap_at_largest_n']:.2f}, {f['ci'][1] / f['gap_at_largest_n']:.2f}] x the gap "
                     f"at the largest N; upper end {100 * f['ci'][1] / f['mmse']:.2g}% of MMSE)" for k, f in fits.items())
    return Evidence(passed=all(verdicts.values()), kind="interval",
                    summary=f"gap = c + b/N, {interval_name}: {text} (passes when every upper end "
                    f"lies below {100 * threshold:g}% of the MMSE; floor alternative {100 * CLEAN_FLOOR_OF_MMSE:g}%)",
                    data={"fits": fits, "verdicts": verdicts, "threshold_of_mmse": threshold})


def plot_clean_context(rows_by_prior: dict[str, list[dict]], *, ax: Axes | None = None) -> Figure:
    """E5: gap to Bayes of one attention step over clean draws, against N, with a N^-1 guide.

    Parameters
    ----------
    rows_by_prior : dict of str to list of dict
        The E5 rows (``n``, ``gap``, ``seed``) per prior label; one line per prior, mean over seeds
        with its 95% t-interval, and a dotted line of slope -1 through its first point.
    ax : matplotlib.axes.Axes, optional
        The panel to draw into; by default a new figure of one panel.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the panel (``ax.figure`` when ``ax`` is given).
    """
    if ax is None:
        ax = Figure(figsize=(6.4, 4.4)).subplots()
    for (label, rows), colour in zip(rows_by_prior.items(), colour_cycle()):
        n, mean, half = grouped_intervals(rows, "n", "gap")
        ax.errorbar(n, mean, yerr=half, fmt="-o", color=colour, capsize=3, ms=4, label=label)
        ax.plot(n, mean[0] * n[0] / n, ":", color=colour, lw=1)
    loglog(ax)
    ax.set_title("E5: clean context, one step of bandwidth sigma2 (dotted: slope -1)", fontsize=10)
    ax.legend(fontsize=8)
    return ax.figure
