"""The depth-noise relation: C6, and experiment E2 (the risk-minimising depth against T* and T_G).

C6 says Stage 1 removes the noise variance ``sigma2`` at depth ``T* = sigma2/(2 h2)`` to leading
order; the derivations ``depth_noise`` and ``gaussian`` (the exact Gaussian horizon ``T_G``) bear on
it. E2 measures the gap to Bayes on fresh queries against depth near ``T_G`` for Gaussian priors, at
three ``N``, and extrapolates the risk-minimising depth to ``N -> oo``; its rows are declarative sweeps
in the report folder's store (:mod:`attneb.proofs_check.engine.replication`), its figure is drawn from
them (``attneb plot E2``). Predictions are read from :mod:`attneb.theory.depth_noise` at call time and
the stored rows reach each decision through :func:`depth_data`, so that a wrong theory, or wrong
data, can be swapped in.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
from matplotlib.figure import Figure
from scipy import stats as sstats

from attneb.numerics import stats
from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.plotting import colour_cycle, grouped_intervals
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, claim, swap
from attneb.proofs_check.engine.replication import plot_study, resample_weights, run_pooled, seed_table, stored
from attneb.proofs_check.engine.studies import mode_name, study
from attneb.proofs_check.topics.designs import REGIME, SIGMA2, fast_options
from attneb.theory import depth_noise, stability

claim(
    "C6",
    "depth-noise relation",
    "To leading order Stage 1 removes the noise variance sigma2 at depth T* = sigma2/(2 h2), "
    "i.e. L* = sigma2/(2 eta h2) layers.",
    ("h2 -> 0",),
)

register_derivation("depth_noise", theory_derivation("depth_noise"), ("C6",))
register_derivation("gaussian", theory_derivation("gaussian"), ("C6",))


#: E2 depth grid: 5 depths T* + k * DEPTH_STEP (DEPTH_STEP = the layer step eta, so every depth is
#: a whole number of layers), k = k_c - 2 .. k_c + 2 with k_c = round(c / DEPTH_STEP) and
#: c = (1/2) log(1 + sigma2/tau2) (sized by a pilot: 7 points cost 40% more for no better interval,
#: and a window shifted towards one end of the grid biases the minimiser).
DEPTH_STEP = 0.05


#: Grid points on each side of the grid minimum in the quadratic fit of the minimiser.
HALF_WINDOW = 2


#: How far above T_G the extrapolated minimiser may lie: Euler layers of step 0.05 need 0.003-0.004
#: more depth than the continuous-depth T_G (theory.depth_noise.gaussian_layers_fractional).
EULER_ALLOWANCE = 0.005


def depth_grid(tau2: float, h2: float) -> list[float]:
    """E2's five depths for a prior ``N(0, tau2)`` at bandwidth ``h2``: ``T* + k * DEPTH_STEP`` around ``T* + c``.

    The grid is a design choice (where to look: the measured minimisers and the parabola windows
    around them, sized by a pilot); the decisions read their predictions from
    :mod:`attneb.theory.depth_noise` at call time, never from here.
    """
    lead = SIGMA2 / (2 * h2)
    centre = round(0.5 * math.log1p(SIGMA2 / tau2) / DEPTH_STEP)
    return [round(lead + k * DEPTH_STEP, 10) for k in range(max(0, centre - 2), centre + 3)]


def depth_configs(quick: bool) -> dict[str, dict]:
    """E2: Gaussian priors N(0, tau2), three N, depths on a grid around T_G, one sweep per (tau2, h2).

    Quick: h2 = 0.25 for both tau2 and h2 = 0.125 for tau2 = 1, 4 seeds; full: both h2 for both
    tau2, 10 seeds. N in {4096, 16384, 65536} (N / N_c >= 200 at h2 = 0.125).
    """
    pairs = [(1.0, 0.25), (0.25, 0.25), (1.0, 0.125)] + ([] if quick else [(0.25, 0.125)])
    return {
        f"tau2={tau2:g}-h2={h2:g}": {
            "name": mode_name("E2", f"tau2={tau2:g}-h2={h2:g}", quick),
            "prior": {"family": "Gaussian", "mean": [0.0], "var": tau2},
            "sigma2": SIGMA2,
            "n": [4096, 16384, 65536],
            "seeds": {"start": 0, "count": 4 if quick else 10},
            "estimators": ["two-stage"],
            "h2": h2,
            "T": {"rule": "grid", "values": depth_grid(tau2, h2)},
            "options": fast_options(["two-stage"]),
        }
        for tau2, h2 in pairs
    }


def parabola_minima(T: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """Per row of ``curves`` (positive, over the depths ``T``): the vertex of the least-squares parabola in
    ``log curve`` over the grid minimum and :data:`HALF_WINDOW` grid points on each side (shifted inwards at
    the ends of the grid); the grid minimum itself where the parabola is not convex. Vectorised over rows.
    """
    T = np.asarray(T, dtype=float)
    curves = np.atleast_2d(curves)
    width = 2 * HALF_WINDOW + 1
    log_curves = np.log(curves)
    grid_min = np.argmin(curves, axis=1)
    starts = np.clip(grid_min - HALF_WINDOW, 0, len(T) - width)
    out = np.empty(len(curves))
    for start in np.unique(starts):
        rows = np.flatnonzero(starts == start)
        t = T[start:start + width]
        centre = t.mean()
        design = np.column_stack([(t - centre) ** 2, t - centre, np.ones_like(t)])
        a, b, _ = np.linalg.pinv(design) @ log_curves[rows, start:start + width].T
        convex = a > 0
        out[rows] = np.where(convex, centre - b / (2 * np.where(convex, a, 1.0)), T[grid_min[rows]])
    return out


def depth_data(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The E2 rows as the decisions see them (the identity; a data alternative may swap this function)."""
    return rows_by_part


def _prior_var(row: dict) -> float:
    return json.loads(row["spec"])["prior"]["var"]


def depth_minimisers(rows: list[dict], column: str = "oos_gap", level: float = 0.95) -> dict:
    """The minimiser of the mean gap over depth at each N and its extrapolation ``T_min(N) = T_inf - b N^(-1/2)``.

    Per N, the minimiser of the mean ``column`` over seeds (:func:`parabola_minima`), and over
    :data:`BOOTSTRAP` resamples of the seeds (shared across N). ``T_inf`` is the weighted least-squares
    intercept in ``N^(-1/2)`` (weights 1 / bootstrap variance of each N's minimiser); its interval is
    ``T_inf +- t_{S-1} sqrt(S/(S-1)) se`` at ``level``, ``se`` the standard deviation of ``T_inf`` over the
    resamples (S seeds).
    """
    by_n = defaultdict(list)
    for r in rows:
        by_n[r["n"]].append(r)
    ns = sorted(by_n)
    tables = [seed_table(by_n[n], column, x="T") for n in ns]
    T = tables[0][0]
    seeds = tables[0][1]
    if any(not np.array_equal(t[0], T) or t[1] != seeds for t in tables):
        raise LookupError("E2 needs the same depths and seeds at every N")
    weights = resample_weights(len(seeds))
    point = np.array([parabola_minima(T, t[2].mean(axis=0))[0] for t in tables])
    boots = np.column_stack([parabola_minima(T, weights @ t[2]) for t in tables])
    variance = boots.var(axis=0, ddof=1)
    x = np.asarray(ns, dtype=float) ** -0.5
    design = np.column_stack([np.ones_like(x), -x])
    w = 1.0 / np.maximum(variance, 1e-12)
    solve = np.linalg.solve(design.T @ (w[:, None] * design), design.T * w)  # coefficients = solve @ minimisers
    t_inf = float(solve[0] @ point)
    spread = float((boots @ solve[0]).std(ddof=1)) * math.sqrt(len(seeds) / (len(seeds) - 1))
    half = float(sstats.t.ppf(0.5 + level / 2, len(seeds) - 1)) * spread
    last_min = int(np.argmin(tables[-1][2].mean(axis=0)))
    return {"ns": ns, "per_n": point.tolist(), "per_n_se": np.sqrt(variance).tolist(), "T_inf": t_inf,
            "bracketed": 0 < last_min < len(T) - 1,
            "ci": [t_inf - half, t_inf + half], "se": spread, "slope_b": float(solve[1] @ point), "seeds": len(seeds),
            "grid": [float(T[0]), float(T[-1])], "level": level}


def depth_cases(rows_by_part: dict[str, list[dict]], level: float = 0.95) -> dict[str, dict]:
    """Per (tau2, h2): the extrapolated minimiser (fresh queries, and in-sample), with T*, T_G and N_c at call time."""
    cases = {}
    for part, rows in rows_by_part.items():
        first = rows[0]
        tau2, h2, sigma2 = _prior_var(first), first["h2"], first["sigma2"]
        lead = float(depth_noise.leading_horizon(sigma2, h2))
        exact = float(depth_noise.gaussian_horizon(sigma2, tau2, h2))
        cases[part] = {
            "tau2": tau2, "h2": h2, "leading": lead, "exact": exact,
            "N_c": float(stability.token_scaling(sigma2, h2)),
            "oos": depth_minimisers(rows, "oos_gap", level), "in_sample": depth_minimisers(rows, "gap", level),
        }
    return cases


@study("E2", "gap to Bayes vs depth T at three N, two tau2, against T* and T_G (C6)",
       claims=("C6",), files=("E2_depth",))
def draw_depth(store: ResultStore, quick: bool) -> tuple[Figure]:
    rows = stored(depth_configs(quick), store)
    return (plot_depth_sweep(rows, depth_cases(rows)),)


def _shifted_correction(fraction: float):
    """``gaussian_horizon`` replaced by ``T* + fraction x (T_G - T*)`` (T* read at call time)."""
    def make(real):
        def wrong(sigma2, tau2, h2):
            lead = depth_noise.leading_horizon(sigma2, h2)
            return lead + fraction * (real(sigma2, tau2, h2) - lead)
        return wrong
    return make


#: The wrong theories of the T_G check (and of the superseded check it replaces).
_T_G_ALTERNATIVES = [
    alternative("minimiser = T* (the paper's leading order taken as exact)",
                "gaussian_horizon replaced by leading_horizon: no O(1) correction",
                swap("attneb.theory.depth_noise:gaussian_horizon",
                     lambda real: lambda sigma2, tau2, h2: depth_noise.leading_horizon(sigma2, h2))),
    alternative("correction 0.75 c_G", "gaussian_horizon replaced by T* + 0.75 (T_G - T*)",
                swap("attneb.theory.depth_noise:gaussian_horizon", _shifted_correction(0.75))),
    alternative("correction 1.25 c_G", "gaussian_horizon replaced by T* + 1.25 (T_G - T*)",
                swap("attneb.theory.depth_noise:gaussian_horizon", _shifted_correction(1.25))),
]


def _meets(interval, low: float, high: float) -> bool:
    return interval[0] <= high and interval[1] >= low


_E2_DESIGN = ("Gaussian prior N(0, tau2), sigma2 = 0.5, Euler layers of step 0.05, N in {4096, 16384, 65536} "
              "(4 seeds quick, 10 full), five depths T* + 0.05 k, k = k_c - 2 .. k_c + 2, k_c = round(20 c) with "
              "c = (1/2) log(1 + sigma2/tau2); minimiser at each N = vertex of the least-squares parabola in log(mean "
              "gap to Bayes on fresh queries) over the five depths (the grid minimum where that parabola is not convex); finite-N model fixed "
              "in advance: T_min(N) = T_inf - b N^(-1/2), weighted least squares over the three N (weights 1/bootstrap "
              "variance); interval of T_inf = estimate +- t_{S-1} sqrt(S/(S-1)) x its standard deviation over 2000 "
              "resamples of the S seeds (shared across N)")


@check(
    "C6", "E2: the risk-minimising depth, extrapolated to N -> oo, is T_G = T* + (1/2) log(1 + sigma2/tau2) "
    "(tau2 = 1 and 0.25; h2 = 0.25 and 0.125)",
    criterion=f"{_E2_DESIGN}. Cases (tau2, h2): (1, 0.25), (0.25, 0.25), (1, 0.125), and (0.25, 0.125) in full mode. "
    "Passes when, for every case, the grid minimum of the mean gap at the largest N lies strictly inside the grid (the "
    "minimiser is bracketed) and the interval of T_inf at level 1 - 0.05/(number of cases) (Bonferroni) meets "
    "[T_G, T_G + 0.005], T_G = theory.depth_noise.gaussian_horizon read at call time (0.005: Euler layers of step "
    "0.05 need 0.003-0.004 more depth than T_G, theory.depth_noise.gaussian_layers_fractional)",
    replication="subsample",
    alternatives=_T_G_ALTERNATIVES,
    note="resolution: about +-6% of the correction c_G in quick mode, +-2-8% in full; a 1% error in T_G (6% of c_G at "
    "tau2 = 1) is below it, and is rejected by G1 and by the evaluators' check instead",
)
def depth_minimiser_is_t_g(ctx: Context) -> Evidence:
    rows = depth_data(run_pooled(depth_configs(ctx.quick), ctx))
    figs = plot_study("E2", ctx)
    cases = depth_cases(rows, level=1 - 0.05 / len(rows))
    verdicts = {part: case["oos"]["bracketed"]
                and _meets(case["oos"]["ci"], case["exact"], case["exact"] + EULER_ALLOWANCE)
                for part, case in cases.items()}

    def line(part, case):
        c_g = case["exact"] - case["leading"]
        c_g = c_g if c_g != 0 else math.nan  # a theory without the correction (T_G = T*) has no unit c_G
        m = case["oos"]
        rel = [(v - case["leading"]) / c_g for v in (m["T_inf"], *m["ci"])]
        per_n = ", ".join(f"N={n}: {(t - case['leading']) / c_g:.3f}" for n, t in zip(m["ns"], m["per_n"]))
        ins = case["in_sample"]
        verdict = (f" -> {'meets' if verdicts[part] else 'misses'} [T_G, T_G + 0.005]"
                   + ("" if m["bracketed"] else " (grid minimum at the end of the grid)"))
        return (f"tau2={case['tau2']:g}, h2={case['h2']:g} (T* {case['leading']:.3f}, T_G {case['exact']:.4f}): "
                f"T_inf {m['T_inf']:.4f} [{m['ci'][0]:.4f}, {m['ci'][1]:.4f}] = T* + {rel[0]:.3f} [{rel[1]:.3f}, "
                f"{rel[2]:.3f}] c_G (per N: {per_n}; in-sample T_inf {ins['T_inf']:.4f} [{ins['ci'][0]:.4f}, "
                f"{ins['ci'][1]:.4f}]){verdict}")

    return Evidence(
        passed=bool(verdicts) and all(verdicts.values()),
        kind="interval",
        summary="; ".join(line(p, c) for p, c in cases.items())
        + f" ({100 * next(iter(cases.values()))['oos']['level']:.1f}% intervals; passes when every minimiser is "
        "bracketed by the grid at the largest N and every interval of T_inf meets [T_G, T_G + 0.005])",
        data={"cases": cases, "verdicts": verdicts},
        figures=figs,
    )


def _scaled_leading(factor: float):
    return lambda real: lambda sigma2, h2: factor * real(sigma2, h2)


def _sqrt_scaling(real):
    """``T*`` growing like ``h2^(-1/2)``, equal to ``sigma2/(2 h2)`` at h2 = 0.25."""
    return lambda sigma2, h2: real(sigma2, 0.25) * math.sqrt(0.25 / h2)


#: The wrong scalings of T* that the leading-order check (and the superseded one it replaces) must reject.
_LEADING_ALTERNATIVES = [
    alternative("T* = sigma2/h2", "leading_horizon doubled", swap("attneb.theory.depth_noise:leading_horizon",
                                                                   _scaled_leading(2.0))),
    alternative("T* = sigma2/(4 h2)", "leading_horizon halved", swap("attneb.theory.depth_noise:leading_horizon",
                                                                      _scaled_leading(0.5))),
    alternative("T* ~ h2^(-1/2)", "leading_horizon = sigma2/(2 sqrt(0.25 h2)): right at h2 = 0.25, wrong scaling",
                swap("attneb.theory.depth_noise:leading_horizon", lambda real: _sqrt_scaling(real))),
]


@check(
    "C6", "E2, leading order: the minimising depth grows like T* = sigma2/(2 h2) as h2 halves (O(1) remainder)",
    criterion=f"{_E2_DESIGN}. For every tau2 simulated at both h2 = 0.25 and 0.125 (tau2 = 1 quick; 1 and 0.25 full): "
    "the slope (T_inf(0.125) - T_inf(0.25)) / (T*(0.125) - T*(0.25)), T* = theory.depth_noise.leading_horizon read at "
    "call time, has its interval at level 1 - 0.05/(number of such tau2) (Bonferroni: 95% quick, 97.5% full; the two T_inf independent, their standard errors "
    "added in quadrature, t with S-1 degrees of freedom) containing 1, and both minimisers are bracketed by the grid "
    "at the largest N (its grid minimum is not at an end of the grid)",
    replication="subsample",
    alternatives=_LEADING_ALTERNATIVES,
    note="T_G is not an alternative of this check: T_G = T* + O(1) obeys the leading-order relation; the O(1) offset "
    "is decided by the T_G check, whose registered alternatives include 'minimiser = T*'. Resolution: about +-3% on "
    "the slope, so a 1% error in T* is rejected by the evaluators' check, not here",
)
def depth_leading_order(ctx: Context) -> Evidence:
    rows = depth_data(run_pooled(depth_configs(ctx.quick), ctx))
    cases = depth_cases(rows)
    by_tau2 = defaultdict(dict)
    for case in cases.values():
        by_tau2[case["tau2"]][case["h2"]] = case
    pairs = {tau2: hs for tau2, hs in by_tau2.items() if len(hs) >= 2}
    level = 1 - 0.05 / max(1, len(pairs))
    slopes = {}
    for tau2, hs in pairs.items():
        wide, narrow = hs[max(hs)], hs[min(hs)]
        rise = narrow["oos"]["T_inf"] - wide["oos"]["T_inf"]
        run = narrow["leading"] - wide["leading"]
        se = math.hypot(narrow["oos"]["se"], wide["oos"]["se"]) / abs(run)
        half = float(sstats.t.ppf(0.5 + level / 2, min(narrow["oos"]["seeds"], wide["oos"]["seeds"]) - 1)) * se
        slopes[tau2] = {"slope": rise / run, "ci": [rise / run - half, rise / run + half], "h2": [max(hs), min(hs)],
                        "offsets": [wide["oos"]["T_inf"] - wide["leading"], narrow["oos"]["T_inf"] - narrow["leading"]],
                        "bracketed": wide["oos"]["bracketed"] and narrow["oos"]["bracketed"]}
    passed = bool(slopes) and all(s["ci"][0] <= 1 <= s["ci"][1] and s["bracketed"] for s in slopes.values())
    text = "; ".join(f"tau2={tau2:g}: slope {s['slope']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] (T_inf - T* = "
                     f"{s['offsets'][0]:.3f} at h2={s['h2'][0]:g}, {s['offsets'][1]:.3f} at h2={s['h2'][1]:g}"
                     f"{'' if s['bracketed'] else '; a grid minimum at the end of the grid'})"
                     for tau2, s in slopes.items())
    return Evidence(passed=passed, kind="interval",
                    summary=f"{text} ({100 * level:.1f}% intervals; passes when every interval contains 1 and the "
                    "minimisers are bracketed: the minimising depth grows like sigma2/(2 h2), whatever its O(1) offset)",
                    data={"slopes": {str(k): v for k, v in slopes.items()}})


def measured_minimiser(rows: list[dict], *, level: float = 0.95, column: str = "gap") -> stats.Interval:
    """Depth minimising the mean gap over seeds, with a percentile bootstrap interval (resampling seeds).

    The E2 minimiser of the first registered criterion: :func:`parabola_minima` of the mean
    ``column`` over seeds, and its ``level`` percentile interval over :data:`BOOTSTRAP` resamples.
    """
    T, seeds, table = seed_table(rows, column, x="T")
    best = parabola_minima(T, table.mean(axis=0))[0]
    boots = parabola_minima(T, resample_weights(len(seeds)) @ table)
    low, high = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return stats.Interval(float(best), float(low), float(high), level, len(seeds))


def _superseded_cases(rows_by_part):
    """The first registered E2 design: tau2 = 1, every h2, the in-sample minimiser at the largest N."""
    cases = {}
    for part, rows in rows_by_part.items():
        if _prior_var(rows[0]) != 1.0:
            continue
        n = max(r["n"] for r in rows)
        first = rows[0]
        iv = measured_minimiser([r for r in rows if r["n"] == n])
        case = {"h2": first["h2"], "n": n, "measured": iv.estimate, "ci": [iv.low, iv.high],
                "leading": float(depth_noise.leading_horizon(first["sigma2"], first["h2"])),
                "exact": float(depth_noise.gaussian_horizon(first["sigma2"], 1.0, first["h2"])),
                "N_c": float(stability.token_scaling(first["sigma2"], first["h2"]))}
        case["in_regime"] = n >= REGIME * case["N_c"]
        cases[part] = case
    return cases


@check(
    "C6", "E2 (superseded, first criterion): T_G lies in the bootstrap interval of the minimiser at the largest N",
    criterion="Gaussian N(0, 1), sigma2 = 0.5, every h2 with N_max >= 10 N_c: T_G = T* + (1/2) log(1 + sigma2/tau2) lies "
    "in the 95% percentile bootstrap interval (seeds) of the in-sample risk-minimising depth at the largest N",
    replication="subsample",
    alternatives=_T_G_ALTERNATIVES,
    gating=False,
    note="superseded by 'E2: the risk-minimising depth, extrapolated to N -> oo, is T_G': at finite N the minimiser sits "
    "below T_G and approaches it as N grows, so an interval at one N misses T_G once it is narrow; evaluated on the "
    "current E2 runs (tau2 = 1)",
)
def depth_t_g_at_largest_n(ctx: Context) -> Evidence:
    cases = _superseded_cases(depth_data(run_pooled(depth_configs(ctx.quick), ctx)))
    judged = {p: c for p, c in cases.items() if c["in_regime"]}
    passed = bool(judged) and all(c["ci"][0] <= c["exact"] <= c["ci"][1] for c in judged.values())
    text = "; ".join(f"h2={c['h2']:g}, N={c['n']}: T_min {c['measured']:.4f} [{c['ci'][0]:.4f}, {c['ci'][1]:.4f}], "
                     f"T_G {c['exact']:.4f} ({'in' if c['ci'][0] <= c['exact'] <= c['ci'][1] else 'out'})"
                     for c in cases.values())
    return Evidence(passed=passed, kind="interval", summary=f"{text} (passes when T_G lies in every interval)",
                    data={"cases": cases})


def _closest_to_zero(interval) -> float:
    low, high = interval
    return 0.0 if low <= 0 <= high else min(abs(low), abs(high))


def _farthest_from_zero(interval) -> float:
    return max(abs(v) for v in interval)


@check(
    "C6", "E2 (superseded, second criterion): T_min/T* - 1 at the largest N shrinks as h2 halves",
    criterion="Gaussian N(0, 1), sigma2 = 0.5: at the largest N the 95% bootstrap interval of T_min/T* - 1 lies "
    "strictly closer to 0 than that of the next larger h2, for every h2",
    replication="subsample",
    alternatives=_LEADING_ALTERNATIVES,
    gating=False,
    note="superseded by 'E2: the risk-minimising depth, extrapolated to N -> oo, is T_G' and 'E2, leading order': "
    "this criterion passes for T* + c with any constant c != 0 and fails if the minimiser is exactly T*; evaluated on "
    "the current E2 runs (tau2 = 1)",
)
def depth_minimiser(ctx: Context) -> Evidence:
    cases = _superseded_cases(depth_data(run_pooled(depth_configs(ctx.quick), ctx)))
    largest = sorted(cases.values(), key=lambda c: -c["h2"])
    excess = [[c["ci"][0] / c["leading"] - 1, c["ci"][1] / c["leading"] - 1] for c in largest]
    shrinking = all(_farthest_from_zero(smaller) < _closest_to_zero(larger) for larger, smaller in zip(excess, excess[1:]))
    text = "; ".join(f"h2={c['h2']:g}, N={c['n']}: T_min/T* - 1 in [{e[0]:.4f}, {e[1]:.4f}]" for c, e in zip(largest, excess))
    return Evidence(passed=len(largest) >= 2 and shrinking, kind="interval",
                    summary=f"{text} (passes when each interval lies strictly closer to 0 than that of the larger h2)",
                    data={"relative_excess_at_largest_n": {str(c["h2"]): e for c, e in zip(largest, excess)}})


def plot_depth_sweep(rows_by_part: dict[str, list[dict]], cases: dict[str, dict]) -> Figure:
    """E2: gap to Bayes on fresh queries against the depth offset T - T*, and the extrapolated minimiser.

    ``rows_by_part`` are the E2 rows per ``"tau2=..-h2=.."`` part; ``cases`` (from
    :func:`attneb.proofs_check.topics.depth_noise.depth_cases`) gives, per part, ``tau2``, ``h2``, T* (``leading``),
    T_G (``exact``) and the minimisers (``oos``: per N and extrapolated, with its interval). Left: one
    panel per tau2, mean gap over seeds per (h2, N) (solid: largest N), dotted at T*, dashed at T_G, the
    band T* + [0.75, 1.25] (T_G - T*) shaded. Right: each N's minimiser against N^(-1/2) in units of
    T_G - T*, the fitted line and the interval of T_inf at N^(-1/2) = 0. Returns the figure.
    """
    tau2s = sorted({c["tau2"] for c in cases.values()}, reverse=True)
    fig = Figure(figsize=(5.2 * (len(tau2s) + 1), 4.4))
    axes = fig.subplots(1, len(tau2s) + 1, squeeze=False)
    colours = dict(zip(sorted({c["h2"] for c in cases.values()}, reverse=True), colour_cycle()))
    for ax, tau2 in zip(axes.flat, tau2s):
        for part, case in cases.items():
            if case["tau2"] != tau2:
                continue
            rows = rows_by_part[part]
            ns = sorted({r["n"] for r in rows})
            for n in ns:
                T, mean, half = grouped_intervals([r for r in rows if r["n"] == n], "T", "oos_gap")
                ax.errorbar(T - case["leading"], mean, yerr=half, fmt="-o" if n == ns[-1] else "--", ms=2.5, capsize=2,
                            color=colours[case["h2"]], alpha=1.0 if n == ns[-1] else 0.45,
                            label=f"h2 = {case['h2']:g}, N = {n}")
            c_g = case["exact"] - case["leading"]
        ax.axvline(0.0, color="k", ls=":", lw=1, label="T*")
        ax.axvline(c_g, color="k", ls="--", lw=1, label="T_G")
        ax.axvspan(0.75 * c_g, 1.25 * c_g, color="grey", alpha=0.12, label="T* + [0.75, 1.25] (T_G - T*)")
        ax.set_yscale("log")
        ax.set_xlabel("depth beyond T*, T - T* (depth-time units)")
        ax.set_ylabel("gap to Bayes on fresh queries (squared data units)")
        ax.set_title(f"Gaussian prior, tau2 = {tau2:g}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    ax = axes.flat[-1]
    for (part, case), marker in zip(cases.items(), "osD^v<>"):
        m = case["oos"]
        c_g = case["exact"] - case["leading"]
        x = np.asarray(m["ns"], dtype=float) ** -0.5
        y = (np.asarray(m["per_n"]) - case["leading"]) / c_g
        err = 1.96 * np.asarray(m["per_n_se"]) / c_g
        colour = colours[case["h2"]]
        ax.errorbar(x, y, yerr=err, fmt=marker, color=colour, capsize=3, ms=4,
                    label=f"tau2 = {case['tau2']:g}, h2 = {case['h2']:g}")
        line = np.linspace(0.0, x.max(), 20)
        ax.plot(line, (m["T_inf"] - m["slope_b"] * line - case["leading"]) / c_g, ":", color=colour, lw=1)
        low, high = ((v - case["leading"]) / c_g for v in m["ci"])
        ax.errorbar([0.0], [(m["T_inf"] - case["leading"]) / c_g], yerr=[[(m["T_inf"] - case["leading"]) / c_g - low],
                    [high - (m["T_inf"] - case["leading"]) / c_g]], fmt=marker, color=colour, capsize=5, mfc="white")
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.axhspan(0.75, 1.25, color="grey", alpha=0.12)
    ax.axhline(0.0, color="k", ls=":", lw=1)
    ax.set_xlabel("N^(-1/2)")
    ax.set_ylabel("(T_min - T*) / (T_G - T*)")
    ax.set_title("minimiser per N (95% bootstrap), fit T_inf - b N^(-1/2),\nopen marker: T_inf with its interval",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)
    fig.suptitle("E2: risk-minimising depth against T* = sigma2/(2 h2) (dotted) and T_G (dashed)", fontsize=10)
    fig.tight_layout()
    return fig
