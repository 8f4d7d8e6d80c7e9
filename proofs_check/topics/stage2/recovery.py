"""E1: recovery of the Bayes posterior mean as N grows (C8), and on heavy-tailed priors (H1).

Along ``h2 = (4 sigma2/e)/log N`` (``N`` far above the stability bound ``N_c`` of S1) and along
``h2 = 0.5 N^(-1/4)`` (where ``N_c`` overtakes ``N``), with ``T = T*``, the gap of the two-stage
estimator to Bayes is measured for three priors, in-sample and on fresh noisy queries; the same on
two Student-t priors along the first schedule (H1). Checks: the per-seed log-log slope below 0, the
fall and rise around ``N_c``, and the floor of ``gap = c + b N^-a``. The stored rows reach every
decision through :func:`recovery_data`, so that wrong data (a floor, no Stage 1) can be swapped in.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from attneb.numerics import stats
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.replication import (
    FLOOR_FIT_INTERVAL,
    FLOOR_FIT_T_INTERVAL,
    floor_fit,
    floor_fit_t,
    gap_slopes,
    interval_list,
    interval_text,
    per_seed_slope_decision,
    plot_study,
    run_pooled,
    seed_slopes,
    seed_table,
    with_seed_count,
)
from attneb.proofs_check.engine.studies import mode_name
from attneb.proofs_check.topics.designs import (
    RECOVERY_PRIORS,
    REGIME,
    SCHEDULES,
    SIGMA2,
    STUDENT_T_PRIORS,
    fast_options,
)
from attneb.theory import stability

#: E1 and E5: the floor alternatives, as fractions of the Bayes risk; a check passes when the upper
#: end of the floor's interval lies below half of its alternative (midway between no floor and it).
FLOOR_OF_MMSE = 0.03


#: E1 floor check: per-prior floor alternatives at the resolution of the design, fixed from the stored runs that
#: preceded them (quick pool of 12 seeds, full pool of 24): each about the mean in-sample gap of two-stage at the
#: largest N, 131072 (Gaussian 0.030-0.032% of the MMSE, clusters 0.85-0.88%), as fractions of the Bayes risk.
RESOLUTION_FLOORS = {"gaussian-log": 0.0003, "clusters-log": 0.0085}


def recovery_configs(quick: bool) -> dict[str, dict]:
    """E1: one sweep per prior and bandwidth schedule; N grows with T = T*.

    The 1-D priors reach N = 131072 on the binned path; the sphere in R^3 (exact path) stops at
    2048 (quick) or 4096.
    """
    configs = {}
    for prior_part, (_, prior) in RECOVERY_PRIORS.items():
        if prior["family"] == "UniformSphere":
            ns = [256, 512, 1024, 2048] if quick else [256, 512, 1024, 2048, 4096]
        else:
            ns = [256, 1024, 4096, 16384, 131072] if quick else [256, 1024, 4096, 16384, 65536, 131072]
        for schedule, (_, h2) in SCHEDULES.items():
            part = f"{prior_part}-{schedule}"
            configs[part] = {
                "name": mode_name("E1", part, quick),
                "prior": prior,
                "sigma2": SIGMA2,
                "n": ns,
                "seeds": {"start": 0, "count": 4 if quick else 6},
                "estimators": ["two-stage", "stage-two-only"],
                "h2": h2,
                "T": "leading",
                "options": fast_options(["two-stage", "stage-two-only"]),
            }
    return configs


#: Seeds of the Student-t-interval floor check in quick mode, for the priors it decides (full mode: E1's 6).
FLOOR_T_QUICK_SEEDS = 8


def floor_t_configs(quick: bool) -> dict[str, dict]:
    """E1 along the log schedule with the seeds of the Student-t-interval floor check: quick mode runs the Gaussian and
    the clusters (the priors it decides) on :data:`FLOOR_T_QUICK_SEEDS` seeds, E1's first 4 and 4 more; the sphere, and
    full mode, as E1."""
    configs = _schedule(recovery_configs(quick), "log")
    return with_seed_count(configs, FLOOR_T_QUICK_SEEDS, FLOOR_PRIORS) if quick else configs


def recovery_data(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The E1 rows as the decisions see them (the identity; a data alternative swaps this function)."""
    return rows_by_part


def _with_floor(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """E1 data alternative: every two-stage gap (in-sample and fresh queries) plus FLOOR_OF_MMSE x the Bayes risk."""
    out = {}
    for part, rows in rows_by_part.items():
        out[part] = [{**r, "gap": r["gap"] + FLOOR_OF_MMSE * r["mmse"], "oos_gap": r["oos_gap"] + FLOOR_OF_MMSE * r["mmse"]}
                     if r["estimator"] == "two-stage" else r for r in rows]
    return out


def n_over_n_c(row: dict) -> float:
    """``N / N_c`` of a row, with the stability bound ``N_c = exp(2 sigma2 / (e h2))`` of S1."""
    return row["n"] / stability.token_scaling(row["sigma2"], row["h2"])


def turn_around(rows: list[dict]) -> dict:
    """Where the mean two-stage gap is smallest over N, and the gap at the largest N against it.

    Returns the two batch sizes, their ``N / N_c`` and the paired interval (over seeds) of
    ``gap(N_max) - gap(N_best)``.
    """
    ours = [r for r in rows if r["estimator"] == "two-stage"]
    by_n = defaultdict(dict)
    for r in ours:
        by_n[r["n"]][r["seed"]] = r
    best = min(by_n, key=lambda n: np.mean([r["gap"] for r in by_n[n].values()]))
    last = max(by_n)
    rise = stats.mean_interval([by_n[last][s]["gap"] - by_n[best][s]["gap"] for s in by_n[last]])
    return {"best_n": best, "best_n_over_n_c": n_over_n_c(next(iter(by_n[best].values()))),
            "last_n": last, "last_n_over_n_c": n_over_n_c(next(iter(by_n[last].values()))),
            "rise": [rise.estimate, rise.low, rise.high]}


def _schedule(rows_by_part: dict, schedule: str) -> dict:
    return {part: rows for part, rows in rows_by_part.items() if part.endswith(f"-{schedule}")}


_E1_NOTE = ("N from 256 up to 131072 for the 1-D priors, to 2048 quick / 4096 full for the sphere in R^3; 4 seeds quick, "
            "6 full, subsampled from a pool in a power analysis")


#: The wrong theories of the E1 slope checks (the per-seed check and the superseded pooled one).
_E1_SLOPE_ALTERNATIVES = [
    alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                swap(f"{__name__}:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
    alternative("gap with a floor of 3% of the Bayes risk",
                "every two-stage gap (in-sample and fresh queries) plus 0.03 x MMSE",
                swap(f"{__name__}:recovery_data", lambda real: _with_floor), kind="data"),
]


@check(
    "C8", "E1: gap to Bayes falls with N along h2 = (4 sigma2/e)/log N (N >> N_c), T = T* (three priors; interval "
    "over per-seed slopes)",
    criterion="for each of the three priors (Gaussian N(0,1), two clusters, uniform sphere in R^3), sigma2 = 0.5, "
    "along h2 = (4 sigma2/e)/log N with T = T*, the least-squares slope of log(gap to Bayes, in-sample) against log N "
    "is fitted to each seed's batches alone (over its N), and the 95% Student-t interval of the mean of these per-seed "
    f"slopes over the S seeds (S - 1 degrees of freedom) lies below 0 ({_E1_NOTE})",
    replication="subsample",
    alternatives=_E1_SLOPE_ALTERNATIVES,
    note="supersedes the pooled interval over every (N, seed) point, which treats one seed's nested batches at "
    "different N as independent points. Cannot tell a gap that vanishes from one that falls onto a floor (power 0 "
    "against a floor of 3% of the MMSE, quick and full); the floor check below does",
)
def recovery_per_seed(ctx: Context) -> Evidence:
    rows = _schedule(recovery_data(run_pooled(recovery_configs(ctx.quick), ctx)), "log")
    figs = plot_study("E1", ctx)
    passed, text, data = per_seed_slope_decision(rows, "two-stage")
    n_max = {part: max(r["n"] for r in part_rows) for part, part_rows in rows.items()}
    return Evidence(
        passed=passed,
        kind="rate",
        summary=f"gap ~ N^p, slope fitted per seed over N (up to {n_max}), t-interval of the mean over seeds, "
        f"N/N_c = N^(1/2): {text} (passes when every in-sample per-seed interval lies below 0)",
        data={**data, "n_max": n_max},
        figures=figs,
    )


@check(
    "C8", "E1 (superseded, pooled slope interval): gap to Bayes falls with N along h2 = (4 sigma2/e)/log N (N >> N_c), "
    "T = T* (three priors)",
    criterion="for each of the three priors (Gaussian N(0,1), two clusters, uniform sphere in R^3), sigma2 = 0.5, "
    "along h2 = (4 sigma2/e)/log N with T = T*, the least-squares slope of log(gap to Bayes, in-sample) against log N "
    f"over every N and seed has its 95% t-interval below 0 ({_E1_NOTE})",
    replication="subsample",
    alternatives=_E1_SLOPE_ALTERNATIVES,
    gating=False,
    note="superseded by 'E1: gap to Bayes falls with N ... (interval over per-seed slopes)': this interval pools every "
    "(N, seed) point as independent, but one seed's batches at different N share random numbers, so its stated 95% "
    "level does not hold (on the stored runs the per-seed interval is 0.7-1.8x as wide); same decision on the stored "
    "quick and full runs",
)
def recovery(ctx: Context) -> Evidence:
    rows = recovery_data(run_pooled(recovery_configs(ctx.quick), ctx))
    fits = gap_slopes(_schedule(rows, "log"), "two-stage")
    oos = gap_slopes(_schedule(rows, "log"), "two-stage", column="oos_gap")
    text = "; ".join(f"{part}: {fit.slope} (out-of-sample {oos[part].slope})" for part, fit in fits.items())
    n_max = {part: max(r["n"] for r in part_rows) for part, part_rows in _schedule(rows, "log").items()}
    return Evidence(
        passed=bool(fits) and all(fit.slope.high < 0 for fit in fits.values()),
        kind="rate",
        summary=f"gap ~ N^p fitted over N (up to {n_max}) and seeds, N/N_c = N^(1/2): {text} "
        "(passes when every in-sample interval lies below 0)",
        data={"slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in fits.items()},
              "oos_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in oos.items()}, "n_max": n_max},
    )


def _two_stage_is_l0(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Data alternative "depth unnecessary": the two-stage rows carry the Stage-2-alone numbers of their batch."""
    out = {}
    for part, rows in rows_by_part.items():
        alone = {(r["n"], r["seed"]): r for r in rows if r["estimator"] == "stage-two-only"}
        out[part] = [{**r, **{k: alone[(r["n"], r["seed"])][k] for k in ("mse", "gap", "excess", "oos_mse", "oos_gap",
                                                                           "oos_excess")}}
                     if r["estimator"] == "two-stage" else r for r in rows]
    return out


def _scaled_token_scaling(factor: float):
    """``token_scaling`` (N_c) multiplied by ``factor``."""
    return lambda real: lambda sigma2, h2: factor * real(sigma2, h2)


def _token_scaling_at_rate(rate: float):
    """``N_c = exp(rate x sigma2 / h2)`` in place of ``exp(2 sigma2 / (e h2))`` (rate 2/e = 0.736)."""
    return lambda real: lambda sigma2, h2: math.exp(rate * sigma2 / h2)


#: Fewest points (and distinct N) the scope check fits its early-regime slope to.
EARLY_POINTS, EARLY_NS = 3, 2


#: The wrong theories of the C8 scope checks (the per-seed check and the superseded pooled one).
SCOPE_ALTERNATIVES = [
    alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                swap(f"{__name__}:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
    alternative("N_c x 4", "attneb.theory.stability.token_scaling multiplied by 4",
                swap("attneb.theory.stability:token_scaling", _scaled_token_scaling(4.0)), kind="theory"),
    alternative("N_c / 4", "attneb.theory.stability.token_scaling divided by 4",
                swap("attneb.theory.stability:token_scaling", _scaled_token_scaling(0.25)), kind="theory"),
    alternative("rate 1/e: N_c = exp(sigma2/(e h2))", "token_scaling = exp(sigma2/(e h2)), the square root of S1's",
                swap("attneb.theory.stability:token_scaling", _token_scaling_at_rate(1 / math.e)), kind="theory"),
]


@check(
    "C8", "E1, scope: along h2 = 0.5 N^(-1/4) the gap falls while N >> N_c and rises once N < N_c (S1's bound)",
    criterion="along h2 = 0.5 N^(-1/4) (T = T*): the log-log slope of the in-sample gap over the N with N >= 10 N_c has "
    "its 95% interval, pooled over every (N, seed) point, below 0 for every prior, and for every prior whose "
    "largest N is below N_c the gap there exceeds the smallest mean gap over N (paired 95% t-interval above 0), which is reached at N >= N_c",
    replication="subsample",
    gating=False,
    alternatives=SCOPE_ALTERNATIVES,
    note="superseded by 'E1, scope (interval over per-seed slopes)' (issue 24): this check decided the early slope on "
    "the interval pooled over every (N, seed) point, whose level does not hold (one seed's batches share random "
    "numbers; see the E1 slope checks); its criterion did not name the interval, and its summary printed the "
    "per-seed one beside the pooled one. A prior with fewer than 3 points (or 2 distinct N) at N >= 10 N_c has no "
    "early slope: the check then fails "
    "(it raised before). What it cannot tell apart, on the stored quick and full runs (seeds 0-3 / 0-5): an N_c "
    "smaller than S1's by any factor up to 9 (the largest N stays below N_c / 9; power against N_c / 4: 0 in full, "
    "0.40 in quick, which is its size there), nor a rate c in N_c = exp(c sigma2/h2) from 0.65 to 0.74 (quick) or "
    "0.8 (full) against S1's 2/e = 0.736; it rejects N_c x 1.5 and more (too few early points; power 1 against "
    "N_c x 4) and the rate 1/e (no prior's largest N below N_c; power 1). Quick-mode size 0.40 (40 subsets of a "
    "12-seed pool; 0.025 in full): with 4 seeds the clusters' paired rise past N_c and early slope often reach 0",
)
def recovery_needs_stability(ctx: Context) -> Evidence:
    return _scope_evidence(ctx, per_seed=False)


#: What the per-seed scope checks decide (the 4-seed check and its 8-seed successor), after their design.
_PER_SEED_SCOPE_DECISION = (
    "the log-log slope of the in-sample gap over the N with N >= 10 N_c, "
    "fitted to each seed's points alone, has the 95% Student-t interval of its mean over seeds (S - 1 degrees of "
    "freedom) below 0 for every prior, each prior having at least 3 two-stage points over at least 2 distinct N with "
    "N >= 10 N_c (else it fails); at least one prior's largest N lies below N_c (else it fails), and for every such "
    "prior the gap there exceeds the smallest mean gap over N (paired 95% t-interval above 0), which is reached at "
    "N >= N_c"
)


@check(
    "C8", "E1, scope (interval over per-seed slopes): along h2 = 0.5 N^(-1/4) the gap falls while N >> N_c and rises "
    "once N < N_c (S1's bound)",
    criterion="along h2 = 0.5 N^(-1/4) (T = T*): " + _PER_SEED_SCOPE_DECISION,
    replication="subsample",
    gating=False,
    alternatives=SCOPE_ALTERNATIVES,
    note="superseded by 'E1, scope (per-seed slopes, 8 quick seeds)' (issue 24): its quick size was 0.42. It replaced "
    "the pooled-interval scope check (issue 24), criterion fixed before its first run: the same design "
    "and rise test, the early slope decided on the interval over per-seed slopes that the E1 slope checks use. Quick "
    "power (attneb verify --quick --power, started at 8ec6a6f; 40 subsets of a pool of 3 seed sets): size 0.42, above item 4's "
    "0.05 (with 4 seeds the rise's paired interval, e.g. the Gaussian's 0.00094 [0.00013, 0.00175] on seeds 0-3, "
    "often reaches 0), power 1.00 against no Stage 1, N_c x 4 and the rate 1/e, 0.40 against N_c / 4: a quick "
    "failure of this check does not show that recovery ignores S1's bound",
)
def recovery_needs_stability_per_seed(ctx: Context) -> Evidence:
    return _scope_evidence(ctx, per_seed=True)


#: Seeds of the 8-seed scope check in quick mode (full mode: E1's 6).
SCOPE_QUICK_SEEDS = 8


def scope_configs(quick: bool) -> dict[str, dict]:
    """E1 along the power schedule with the seeds of the 8-seed scope check: quick mode on :data:`SCOPE_QUICK_SEEDS`
    seeds, E1's first 4 and 4 more, at E1's N; full mode as E1."""
    configs = _schedule(recovery_configs(quick), "power")
    return with_seed_count(configs, SCOPE_QUICK_SEEDS) if quick else configs


@check(
    "C8", "E1, scope (per-seed slopes, 8 quick seeds): along h2 = 0.5 N^(-1/4) the gap falls while N >> N_c and rises "
    "once N < N_c (S1's bound)",
    criterion="along h2 = 0.5 N^(-1/4) (T = T*), on 8 seeds in quick mode (E1's 4 and 4 more, at E1's N) and E1's 6 in "
    "full mode: " + _PER_SEED_SCOPE_DECISION,
    replication="subsample",
    alternatives=SCOPE_ALTERNATIVES,
    note="replaces 'E1, scope (interval over per-seed slopes)' (issue 24), whose quick size was 0.42 on 4 seeds; "
    "criterion fixed before its first run: the same decision and N, 8 quick seeds. Full mode is unchanged (E1's 6 "
    "seeds). Seeds 4-7 were in the pool of the quick power run that measured that size (seeds 0-11), where a "
    "referee's scratch run finds this check passing: not a fresh confirmation. What it cannot tell apart, by its "
    "design's N (the largest stays below N_c / 9; quick has no N between N_c / 9 and N_c): an N_c smaller than S1's "
    "by any factor up to 9, so its power against N_c / 4 is 0 (the 4-seed check's 0.40 against it was about that "
    "check's own size, 0.42); and, on the stored quick pool (a "
    "referee's scratch runs), a rate c in N_c = exp(c sigma2/h2) of 0.65, 0.7 or 0.8 against S1's 2/e = 0.736. Quick "
    "power (attneb verify --quick --power --only C8 S1 --reuse-other-code at f3e8964; 40 subsets of a pool of 3 seed "
    "sets): size 0.00, power 1.00 against no Stage 1, N_c x 4 and the rate 1/e, 0.00 against N_c / 4",
)
def recovery_needs_stability_eight_seeds(ctx: Context) -> Evidence:
    return _scope_evidence(ctx, per_seed=True, configs=scope_configs(ctx.quick))


def _scope_evidence(ctx: Context, per_seed: bool, configs: dict[str, dict] | None = None) -> Evidence:
    configs = recovery_configs(ctx.quick) if configs is None else configs
    rows = _schedule(recovery_data(run_pooled(configs, ctx)), "power")

    def early_regime(r):
        return n_over_n_c(r) >= REGIME

    early_ns = {part: sorted({r["n"] for r in part_rows if r["estimator"] == "two-stage" and early_regime(r)})
                for part, part_rows in rows.items()}
    early_points = {part: sum(1 for r in part_rows if r["estimator"] == "two-stage" and early_regime(r))
                    for part, part_rows in rows.items()}
    short = {part for part in rows if early_points[part] < EARLY_POINTS or len(early_ns[part]) < EARLY_NS}
    fitted = {part: part_rows for part, part_rows in rows.items() if part not in short}
    early = gap_slopes(fitted, "two-stage", keep=early_regime)
    early_per_seed = seed_slopes(fitted, "two-stage", keep=early_regime)
    turns = {part: turn_around(part_rows) for part, part_rows in rows.items()}
    below = {part: t for part, t in turns.items() if t["last_n_over_n_c"] < 1}
    if per_seed:
        falls = all(f["interval"] is not None and f["interval"].high < 0 for f in early_per_seed.values())
    else:
        falls = all(f.slope.high < 0 for f in early.values())
    passed = bool(rows) and not short and falls and bool(below) and all(
        t["rise"][1] > 0 and t["best_n_over_n_c"] >= 1 for t in below.values())

    def slope_text(part):
        if part in short:
            return (f"only {early_points[part]} points (N = {early_ns[part]}) with N >= {REGIME:g} N_c: no slope "
                    "can be fitted there, which fails the check")
        per_seed_text = interval_text(early_per_seed[part]['interval'])
        if per_seed:
            return (f"slope over N >= {REGIME:g} N_c (N = {early_ns[part]}), interval over per-seed slopes "
                    f"{per_seed_text} (pooled over (N, seed) points {early[part].slope})")
        return (f"slope over N >= {REGIME:g} N_c (N = {early_ns[part]}) {early[part].slope} (interval over per-seed "
                f"slopes {per_seed_text})")

    text = "; ".join(
        f"{part}: {slope_text(part)}, smallest gap at N={t['best_n']} "
        f"(N/N_c={t['best_n_over_n_c']:.3g}), gap(N={t['last_n']}, N/N_c={t['last_n_over_n_c']:.3g}) - smallest = "
        f"{t['rise'][0]:.3g} [{t['rise'][1]:.3g}, {t['rise'][2]:.3g}]" for part, t in turns.items()
    )
    if not below:
        text += "; no prior's largest N lies below N_c, so the rise past N_c is not tested, which fails the check"
    return Evidence(
        passed=passed,
        kind="interval",
        summary=f"{text} (passes when the gap falls over N >= {REGIME:g} N_c ("
        f"{'interval over per-seed slopes' if per_seed else 'interval pooled over (N, seed) points'} below 0), fitted to at least {EARLY_POINTS} points "
        f"over {EARLY_NS} N or more, and, for every prior whose largest N is below N_c, the gap there exceeds the "
        "smallest gap (paired 95% interval above 0), reached at N >= N_c: recovery needs N >> exp(2 sigma2 / (e h2)), "
        "not only N -> oo and h2 -> 0)",
        data={"early_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in early.items()},
              "early_slopes_per_seed": {p: interval_list(f["interval"]) for p, f in early_per_seed.items()},
              "early_ns": early_ns, "too_few_early_points": sorted(short), "turns": turns},
    )


#: The E1 priors whose floor is decided (the sphere in R^3 stops at N = 4096, far from its floor resolution).
FLOOR_PRIORS = ("gaussian-log", "clusters-log")


def _with_floor_on(part: str, fraction: float):
    """E1 data alternative: the two-stage gaps of ``part`` only plus ``fraction`` x the Bayes risk."""
    def floored(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
        return {p: [{**r, "gap": r["gap"] + fraction * r["mmse"], "oos_gap": r["oos_gap"] + fraction * r["mmse"]}
                    if p == part and r["estimator"] == "two-stage" else r for r in rows]
                for p, rows in rows_by_part.items()}
    return floored


def floor_resolution(fit: dict, mmse: float, threshold_of_mmse: float) -> dict:
    """What one floor fit can tell apart.

    An added floor ``f`` shifts ``c`` and its interval by exactly ``f``, so the half-floor rule ("no floor
    ``f``" when c's upper end lies below ``f/2``) rejects, on these runs, every floor from
    ``2 x max(upper end, 0)`` up and none below it: the run's resolution. The registered check, with its
    threshold fixed at ``threshold_of_mmse`` x MMSE, fails when a floor of at least ``threshold - upper end``
    is added to the measured gaps. Both in absolute units, in units of the MMSE and of the gap at the largest N.
    """
    upper, gap = fit["ci"][1], fit["gap_at_largest_n"]
    smallest = 2 * max(upper, 0.0)
    detected = max(threshold_of_mmse * mmse - upper, 0.0)
    return {"smallest_floor_rejected": smallest, "smallest_floor_rejected_of_mmse": smallest / mmse,
            "smallest_floor_rejected_of_gap_at_largest_n": smallest / gap,
            "added_floor_failing_this_check": detected, "added_floor_failing_this_check_of_mmse": detected / mmse,
            "added_floor_failing_this_check_of_gap_at_largest_n": detected / gap}


def recovery_floors(rows_by_part: dict[str, list[dict]], estimator: str = "two-stage", fit=floor_fit) -> dict[str, dict]:
    """Per part and column (``gap``, ``oos_gap``): the fit of ``c + b N^-a`` and the Bayes risk.

    ``fit`` is :func:`~attneb.proofs_check.engine.replication.floor_fit` (percentile interval, the superseded checks)
    or :func:`~attneb.proofs_check.engine.replication.floor_fit_t` (Student-t interval).
    """
    out = {}
    for part, rows in rows_by_part.items():
        ours = [r for r in rows if r["estimator"] == estimator]
        out[part] = {"mmse": ours[0]["mmse"]}
        for column in ("gap", "oos_gap"):
            n, _, table = seed_table(ours, column)
            out[part][column] = fit(n, table)
    return out


#: The wrong theories of every floor check (E1's and H1's, Student-t and superseded percentile ones).
HEAVY_FLOOR_ALTERNATIVES = [
    alternative("gap with a floor of 3% of the Bayes risk",
                "every two-stage gap (in-sample and fresh queries) plus 0.03 x MMSE",
                swap(f"{__name__}:recovery_data", lambda real: _with_floor), kind="data"),
    alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                swap(f"{__name__}:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
]

#: The wrong theories of the E1 floor checks: those of every floor check and a floor at each prior's own gap.
FLOOR_ALTERNATIVES = [
    *HEAVY_FLOOR_ALTERNATIVES,
    *[alternative(f"{part.split('-')[0]}: floor at its gap at N = 131072 ({100 * fraction:g}% of the Bayes risk)",
                  f"every two-stage gap of {part} (in-sample and fresh queries) plus {fraction:g} x MMSE, about its "
                  "mean in-sample gap at the largest N (fixed from the stored runs); the other priors unchanged",
                  swap(f"{__name__}:recovery_data",
                       lambda real, part=part, fraction=fraction: _with_floor_on(part, fraction)), kind="data")
      for part, fraction in RESOLUTION_FLOORS.items()],
]

#: Measured coverage of :func:`floor_fit`'s percentile interval at a nominal 0.95 (``benchmarks/calibration.py``,
#: 1000 simulated data sets shaped like each check's, lognormal seeds), quick / full: why it was replaced.
PERCENTILE_COVERAGE = {"E1": "0.75 quick, 0.80 full", "E5": "0.68 quick, 0.70 full", "H1": "0.74 quick, 0.79 full"}


@check(
    "C8", "E1, floor: the gap along h2 = (4 sigma2/e)/log N does not stall at 3% of the Bayes risk, "
    "in-sample and for fresh queries",
    criterion="for the Gaussian N(0,1) and the two clusters (sigma2 = 0.5, h2 = (4 sigma2/e)/log N, T = T*, N = 256 .. "
    "131072): gap(N) = c + b N^-a is fitted to the mean gap over seeds (weights 1/variance over seeds; a profiled over "
    "0.25, 0.30, .., 2.00), and the 95% percentile interval of the floor c comes from 2000 resamples of the seeds "
    "(shared across N, each refitted with the data's weights); floor alternative: 3% of the Bayes risk (MMSE); passes when the upper end of c's "
    "interval lies below half of it, 1.5% of the MMSE, both for the in-sample gap and for the gap on fresh noisy queries "
    f"(new draws from the prior, not in the context). {_E1_NOTE}; the sphere's fit is reported beside",
    replication="subsample",
    gating=False,
    alternatives=FLOOR_ALTERNATIVES,
    note="superseded by 'E1, floor (Student-t interval)' (issue 24): its percentile interval over 4-6 seeds covers "
    f"{PERCENTILE_COVERAGE['E1']} at a nominal 0.95 on data shaped like E1's (benchmarks/calibration.py, rows "
    "floor_fit-E1-*), and it held each resample's weights at the data's. " + "Resolution of the decision: floors of 1.5-3% of the Bayes risk (its power 1.0 against the 3% floor follows "
    "from arithmetic: an added floor shifts c by itself, twice the threshold). Along h2 ~ 1/log N the O(h2^2) bias "
    "of T* at finite h2 "
    "decays only like 1/log^2 N, which a power law in N reads as a floor of a large fraction of the gap at the largest "
    "N (about 0.7 of it for the Gaussian and the clusters, below 1% of the Bayes risk); a floor at that scale is "
    "beyond what N <= 131072 can tell apart from a vanishing gap, so c's interval need not contain 0. The runs resolve "
    "floors down to about 2x the gap at N = 131072 (2 x c's upper end, in the evidence). Per-prior floors at that "
    "gap (0.03% of the MMSE for the Gaussian, 0.85% for the clusters): power 0 against the Gaussian's (this check's "
    "fixed 1.5% threshold is 45x its gap), 0.95 quick (40 subsets) and 0.99 full (200 subsets) against the clusters'",
)
def recovery_floor(ctx: Context) -> Evidence:
    return _floor_evidence(ctx, floor_fit, FLOOR_FIT_INTERVAL)


@check(
    "C8", "E1, floor (Student-t interval): the gap along h2 = (4 sigma2/e)/log N does not stall at 3% of the Bayes "
    "risk, in-sample and for fresh queries",
    criterion="for the Gaussian N(0,1) and the two clusters (sigma2 = 0.5, h2 = (4 sigma2/e)/log N, T = T*, N = 256 .. "
    "131072): gap(N) = c + b N^-a is fitted to the mean gap over the S seeds (weights 1/variance over seeds; a profiled "
    "over 0.25, 0.30, .., 2.00), and c's 95% interval is c +- t(S - 1) sqrt(S/(S - 1)) sd(c*), sd(c*) over 2000 "
    "resamples of the seeds (shared across N), each refitted with its own weights and exponent; floor alternative: 3% "
    "of the Bayes risk (MMSE); passes when the upper end of c's interval lies below half of it, 1.5% of the MMSE, both "
    "for the in-sample gap and for the gap on fresh noisy queries (new draws from the prior, not in the context). "
    f"{_E1_NOTE}, but {FLOOR_T_QUICK_SEEDS} seeds quick for the Gaussian and the clusters; the sphere's fit is "
    "reported beside",
    replication="subsample",
    alternatives=FLOOR_ALTERNATIVES,
    note="replaces the percentile-interval floor check (issue 24). Its interval covers 0.994 (quick) and 0.96 (full) "
    "at a nominal 0.95 on data shaped like E1's (benchmarks/calibration.py, rows floor_fit_t-E1-*), the percentile "
    "interval 0.75 and 0.80. Its first quick run, on E1's 4 seeds, failed: the clusters' upper end was 1.7% of the "
    "MMSE in-sample (1.6% on fresh queries), the Gaussian's 0.22%; 4 seeds cannot bound the clusters' floor below "
    "1.5% with a calibrated interval. The quick design was then given 8 seeds for the two decided priors (E1's 4 and "
    "4 more): a change of design made after seeing that run, stated here. Measured, upper ends in-sample / fresh "
    "queries: quick (8 seeds) passes, 0.032% / 0.027% (Gaussian) and 0.94% / 1.0% (clusters); full (6 seeds, "
    "decided once on the reference runs of 4fbf256) passes, 0.04% / 0.033% and 1.1% / 1.2%. Quick power (40 subsets "
    "of a pool of 3 seed sets): size 0; power 1.0 against the 3% floor, no Stage 1 and the clusters' floor at 0.85% "
    "(the percentile check's 0.95), 0 against the Gaussian's floor at 0.03% (as before). Full power not measured",
)
def recovery_floor_t(ctx: Context) -> Evidence:
    return _floor_evidence(ctx, floor_fit_t, FLOOR_FIT_T_INTERVAL,
                           floor_t_configs)


def _floor_evidence(ctx: Context, fit, interval_name: str, configs=None) -> Evidence:
    """The E1 floor decision with ``fit`` on the runs of ``configs`` (default: :func:`recovery_configs`, looked up at
    call time)."""
    rows = _schedule(recovery_data(run_pooled((configs or recovery_configs)(ctx.quick), ctx)), "log")
    floors = recovery_floors(rows, fit=fit)
    threshold = FLOOR_OF_MMSE / 2
    decided = [part for part in FLOOR_PRIORS if part in floors]
    passed = bool(decided) and all(floors[part][column]["ci"][1] < threshold * floors[part]["mmse"]
                                   for part in decided for column in ("gap", "oos_gap"))

    def one(fit, mmse):
        g = fit["gap_at_largest_n"]
        return (f"c = {fit['c']:.3g} [{fit['ci'][0]:.3g}, {fit['ci'][1]:.3g}] (= {fit['c'] / g:.2f} "
                f"[{fit['ci'][0] / g:.2f}, {fit['ci'][1] / g:.2f}] x the gap at the largest N; upper end "
                f"{100 * fit['ci'][1] / mmse:.2g}% of MMSE), a = {fit['a']:.2f}")

    text = "; ".join(f"{part}{'' if part in FLOOR_PRIORS else ' (reported, not decided)'}: in-sample "
                     f"{one(f['gap'], f['mmse'])}; fresh queries {one(f['oos_gap'], f['mmse'])}"
                     for part, f in floors.items())
    resolution = {part: {column: floor_resolution(floors[part][column], floors[part]["mmse"], threshold)
                         for column in ("gap", "oos_gap")} for part in decided}

    def reach(part):
        r, n_max = resolution[part], max(x["n"] for x in rows[part])
        return (f"{part}: {100 * r['gap']['smallest_floor_rejected_of_mmse']:.3g}% of MMSE = "
                f"{r['gap']['smallest_floor_rejected_of_gap_at_largest_n']:.2g} x the gap at N = {n_max} in-sample, "
                f"{100 * r['oos_gap']['smallest_floor_rejected_of_mmse']:.3g}% = "
                f"{r['oos_gap']['smallest_floor_rejected_of_gap_at_largest_n']:.2g} x on fresh queries (this check, at "
                f"its fixed {100 * threshold:g}%, fails only for an added floor of "
                f"{100 * r['gap']['added_floor_failing_this_check_of_mmse']:.3g}% / "
                f"{100 * r['oos_gap']['added_floor_failing_this_check_of_mmse']:.3g}% of MMSE or more)")

    return Evidence(
        passed=passed, kind="interval",
        summary=f"gap = c + b N^-a, {interval_name}: {text} (passes when, for the Gaussian and the "
        f"clusters, c's upper end lies below {100 * threshold:g}% of the MMSE in-sample and out-of-sample; floor "
        f"alternative {100 * FLOOR_OF_MMSE:g}%). Resolution reached (2 x c's upper end: an added floor shifts c by "
        f"itself, so the half-floor rule rejects floors from there up): {'; '.join(reach(p) for p in decided)}; "
        "floors below these cannot be told apart from no floor by these runs",
        data={"floors": floors, "floor_alternative_of_mmse": FLOOR_OF_MMSE, "threshold_of_mmse": threshold,
              "resolution": resolution, "resolution_floors_of_mmse": dict(RESOLUTION_FLOORS)},
    )


def student_recovery_configs(quick: bool) -> dict[str, dict]:
    """E1 on the Student-t priors, along h2 = (4 sigma2/e)/log N only: N to 16384 quick (4 seeds), to 131072 full (6).

    The 1-D priors' design on the first schedule; quick mode stops at 16384 and the second schedule is
    not run, to keep their cost to seconds (quick) and about a minute (full).
    """
    return {
        f"{part}-log": {
            "name": mode_name("E1", f"{part}-log", quick),
            "prior": prior,
            "sigma2": SIGMA2,
            "n": [256, 1024, 4096, 16384] if quick else [256, 1024, 4096, 16384, 65536, 131072],
            "seeds": {"start": 0, "count": 4 if quick else 6},
            "estimators": ["two-stage", "stage-two-only"],
            "h2": SCHEDULES["log"][1],
            "T": "leading",
            "options": fast_options(["two-stage", "stage-two-only"]),
        }
        for part, (_, prior) in STUDENT_T_PRIORS.items()
    }


def _student_label(part: str) -> str:
    return STUDENT_T_PRIORS[part.removesuffix("-log")][0]


def _horizon_times(factor):
    """Every Stage-1 horizon ``factor`` times the leading-order ``T*``."""
    return lambda real: lambda sigma2, h2: factor * real(sigma2, h2)


_STUDENT_E1_DESIGN = ("two 1-D Student-t priors, df 3 and df 5, scale sqrt((df - 2)/df) (variance 1), sigma2 = 0.5, "
                      "h2 = (4 sigma2/e)/log N, T = T*, N = 256, 1024, 4096, 16384 quick (4 seeds), and 65536, 131072 "
                      "full (6 seeds)")


#: Sizes (failure rates under the true theory) of the two H1 E1 checks, measured by power runs (their notes): a
#: question decided at these sizes answers nothing, so their summaries say so (issue 24).
HEAVY_TAIL_SIZES = {"slope": "0.32 in full mode (200 subsets of a 24-seed pool), 0.90 in quick (40 of 12)",
                    "floor": "0.68 in full mode (200 subsets of a 24-seed pool), 0.95 in quick (40 of 12)"}


@check(
    "H1", "E1, heavy tails: gap to Bayes falls with N along h2 = (4 sigma2/e)/log N on Student-t priors, df 3 and 5, "
    "in-sample and on fresh queries (interval over per-seed slopes)",
    criterion=f"{_STUDENT_E1_DESIGN}: the least-squares slope of log(gap to Bayes) against log N is fitted to each "
    "seed's batches alone (over its N), and the 95% Student-t interval of the mean of these per-seed slopes over the S "
    "seeds (S - 1 degrees of freedom) lies below 0 for both priors, for the in-sample gap and for the gap on fresh "
    "noisy queries (new draws from the prior, not in the context)",
    replication="subsample",
    alternatives=[
        *_E1_SLOPE_ALTERNATIVES,
        *(alternative(f"horizon {factor} T*", f"every Stage-1 horizon T = {factor} x sigma2/(2 h2)",
                      swap("attneb.numerics.flow:leading_horizon", _horizon_times(factor)), kind="implementation")
          for factor in (1.25, 1.5)),
    ],
    note="registered under C8 when first committed (1fcc984); after the full runs it moved, criterion unchanged, "
    "to the question H1: the paper proves recovery for well-behaved priors, and whether it reaches heavy tails is "
    "asked, not claimed. A new check rather than two more priors in 'E1: gap to Bayes falls with N ...', whose "
    "decision (three priors, in-sample) it leaves as it was; criterion fixed before the first full run. Measured: full mode passes on "
    "seeds 0-5 (df 3 on fresh queries -0.34 [-0.65, -0.03]) with size 0.32 (200 subsets of a 24-seed pool; power 0.995 "
    "against no Stage 1, 0.42 against a 3% floor); quick mode (N <= 16384, 4 seeds) fails, size 0.90 (40 subsets of a "
    "12-seed pool): both from df 3's fresh queries. Over the 24-seed pool the per-seed slopes on fresh queries are "
    "-0.33 [-0.45, -0.22] (df 3; sd 0.28 over seeds) and -0.64 [-0.69, -0.59] (df 5), in-sample -0.44 and -0.61. A "
    "fresh query in the far tail, beyond the context's reach, is sent to the nearest particle, so the fresh-query gap "
    "falls like the tail's share, N^((2 - df)/df) = N^-1/3 and N^-3/5 (a heuristic, not derived here): at N = 131072 "
    "with df 3, the 0.008% of fresh queries that lie more than sigma from every particle carry 70% of it. Intervals "
    "over seeds, not over the draws of one batch, for that reason. Added after the full run, on a referee's report: "
    "the pilot that preceded the criterion ran on the check's own seeds (0-3), so the quick decision is the pilot's "
    "data and the full one shares 4 of its 6 seeds with it (the pilot already showed df 3 failing on fresh queries); "
    "and the check does not pin the depth: the referee measured it passing with T = 1.25 T* (df 3 on fresh queries "
    "-0.33 [-0.60, -0.06]) and T = 1.5 T* (-0.198 [-0.379, -0.017]) on seeds 0-5 in full mode, alternatives now "
    "registered, power about 0 against them",
)
def recovery_heavy_tails(ctx: Context) -> Evidence:
    rows = recovery_data(run_pooled(student_recovery_configs(ctx.quick), ctx))
    figs = plot_study("E1", ctx)
    passed, text, data = per_seed_slope_decision(rows, "two-stage", label=_student_label, fresh_decides=True)
    n_max = {part: max(r["n"] for r in part_rows) for part, part_rows in rows.items()}
    return Evidence(
        passed=passed,
        kind="rate",
        summary=f"gap ~ N^p, slope fitted per seed over N (up to {n_max}), t-interval of the mean over seeds: {text} "
        "(passes when every per-seed interval, in-sample and on fresh queries, lies below 0). This decision's size, "
        f"measured by power runs (the check's note): {HEAVY_TAIL_SIZES['slope']}: a failure here does not show that "
        "the gap stops falling",
        data={**data, "n_max": n_max},
        figures=figs,
    )


@check(
    "H1", "E1, heavy tails, floor: the gap on Student-t priors (df 3 and 5) along h2 = (4 sigma2/e)/log N does not "
    "stall at 3% of the Bayes risk, in-sample and for fresh queries",
    criterion=f"{_STUDENT_E1_DESIGN}: gap(N) = c + b N^-a is fitted to the mean gap over seeds (weights 1/variance "
    "over seeds; a profiled over 0.25, 0.30, .., 2.00), and the 95% percentile interval of the floor c comes from 2000 "
    "resamples of the seeds (shared across N, each refitted with the data's weights); floor alternative: 3% of the Bayes risk (MMSE, by "
    "quadrature); passes when the upper end of c's interval lies below half of it, 1.5% of the MMSE, for both priors, "
    "both for the in-sample gap and for the gap on fresh noisy queries (new draws from the prior, not in the context)",
    replication="subsample",
    gating=False,
    alternatives=HEAVY_FLOOR_ALTERNATIVES,
    note="superseded by 'E1, heavy tails, floor (Student-t interval)' (issue 24): its percentile interval over 4-6 "
    f"seeds covers {PERCENTILE_COVERAGE['H1']} at a nominal 0.95 on data shaped like H1's (benchmarks/calibration.py, "
    "rows floor_fit-H1-*). " + "Registered under C8 when first committed (1fcc984); after the full runs it moved, criterion unchanged, "
    "to the question H1: the paper proves recovery for well-behaved priors, and whether it reaches heavy tails is "
    "asked, not claimed. The floor check of the three E1 priors, with its thresholds, on the Student-t priors; criterion fixed "
    "before the first full run. Fails in both modes on df 3's fresh queries: in full mode c's upper end is 6.3% of the "
    "MMSE on seeds 0-5 (3.0% over the 24-seed pool), and the mean gap at N = 131072 is 2.2% of the MMSE over the pool "
    "(sd 3.7% over seeds) against 0.19% in-sample: a decay like N^-1/3 with that spread is not told apart from a floor "
    "of 3% by N <= 131072. Size 0.68 full (200 subsets of 24 seeds), 0.95 quick (40 of 12); power 1.0 against the 3% "
    "floor and against no Stage 1 in both modes. df 5 passes (upper ends 0.05-0.16% of the MMSE)",
)
def recovery_floor_heavy_tails(ctx: Context) -> Evidence:
    return _heavy_floor_evidence(ctx, floor_fit, FLOOR_FIT_INTERVAL)


@check(
    "H1", "E1, heavy tails, floor (Student-t interval): the gap on Student-t priors (df 3 and 5) along h2 = (4 sigma2/e)"
    "/log N does not stall at 3% of the Bayes risk, in-sample and for fresh queries",
    criterion=f"{_STUDENT_E1_DESIGN}: gap(N) = c + b N^-a is fitted to the mean gap over the S seeds (weights 1/variance "
    "over seeds; a profiled over 0.25, 0.30, .., 2.00), and c's 95% interval is c +- t(S - 1) sqrt(S/(S - 1)) sd(c*), "
    "sd(c*) over 2000 resamples of the seeds (shared across N), each refitted with its own weights and exponent; floor "
    "alternative: 3% of the Bayes risk (MMSE, by quadrature); passes when the upper end of c's interval lies below half "
    "of it, 1.5% of the MMSE, for both priors, both for the in-sample gap and for the gap on fresh noisy queries (new "
    "draws from the prior, not in the context)",
    replication="subsample",
    alternatives=HEAVY_FLOOR_ALTERNATIVES,
    note="replaces the percentile-interval floor check of H1 (issue 24); criterion fixed before its first run. Its "
    "interval covers 0.985 (quick) and 0.973 (full) at a nominal 0.95 on data shaped like H1's "
    "(benchmarks/calibration.py, rows floor_fit_t-H1-*), the percentile interval 0.74 and 0.79. Its size is not "
    "measured; its interval is wider than the percentile one, whose size was 0.68 (full) and 0.95 (quick)",
)
def recovery_floor_heavy_tails_t(ctx: Context) -> Evidence:
    return _heavy_floor_evidence(ctx, floor_fit_t, FLOOR_FIT_T_INTERVAL)


def _heavy_floor_evidence(ctx: Context, fit, interval_name: str) -> Evidence:
    rows = recovery_data(run_pooled(student_recovery_configs(ctx.quick), ctx))
    floors = recovery_floors(rows, fit=fit)
    threshold = FLOOR_OF_MMSE / 2
    verdicts = {f"{part}, {column}": floors[part][column]["ci"][1] < threshold * floors[part]["mmse"]
                for part in floors for column in ("gap", "oos_gap")}

    def one(fit, mmse):
        gap = fit["gap_at_largest_n"]
        return (f"c = {fit['c']:.3g} [{fit['ci'][0]:.3g}, {fit['ci'][1]:.3g}] (upper end "
                f"{100 * fit['ci'][1] / mmse:.2g}% of MMSE), a = {fit['a']:.2f}, mean gap at the largest N {gap:.3g} "
                f"({100 * gap / mmse:.2g}% of MMSE)")

    text = "; ".join(f"{_student_label(part)} (MMSE {f['mmse']:.4f}): in-sample {one(f['gap'], f['mmse'])}; fresh "
                     f"queries {one(f['oos_gap'], f['mmse'])}" for part, f in floors.items())
    return Evidence(
        passed=bool(verdicts) and all(verdicts.values()), kind="interval",
        summary=f"gap = c + b N^-a, {interval_name}: {text} (passes when every upper end lies below "
        f"{100 * threshold:g}% of the MMSE; floor alternative {100 * FLOOR_OF_MMSE:g}%). Size (failure rate under the "
        f"true theory) of the percentile-interval decision, measured by power runs: {HEAVY_TAIL_SIZES['floor']}; the "
        "Student-t interval is wider: a failure here does not show a floor",
        data={"floors": floors, "verdicts": verdicts, "threshold_of_mmse": threshold},
    )
