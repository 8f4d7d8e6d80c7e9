r"""H1 on Student-t priors: does the depth that the paper's relation prescribes, :math:`T^* = \sigma^2/(2h_2)`, pin
the best depth on heavy tails?

The depth-noise relation (C6) is prior-independent at leading order: in mean field with a small bandwidth the
tokens of depth :math:`t` carry the noise :math:`s(t) = \sigma^2 - 2h_2 t`, whatever the prior, so Stage 1 has
removed the noise at :math:`T^*`; the prior enters at the next order (for a Gaussian :math:`N(m, \tau^2)` the best
depth is :math:`T_G = T^* + \tfrac12\log(1 + \sigma^2/\tau^2)`, :func:`attneb.theory.depth_noise.gaussian_horizon`, 5% above
:math:`T^*` for :math:`\tau^2 = 1` at the bandwidths here). H1's slope and floor checks
(:mod:`attneb.proofs_check.topics.stage2.recovery`) run at :math:`T = T^*` only and pass at :math:`1.25\,T^*` and
:math:`1.5\,T^*` too: they do not pin the depth. This check does: E1's design (one Student-t coordinate, df 3 and 5,
variance 1, :math:`\sigma^2 = 0.5`, :math:`h_2 = (4\sigma^2/e)/\log N`) at one ``N``, every seed run to each depth
of :data:`DEPTHS` (times :math:`T^*`), on seeds of its own.

Decision, from the theory and fixed before the runs: a leading-order relation leaves a relative error
:math:`O(h_2/\sigma^2)` (:math:`h_2/\sigma^2` = 0.15 at ``N = 16384``, 0.125 at 131072), so the best depth should
lie within a factor :data:`BAND` of :math:`T^*`. The check reads each seed's best depth :math:`T_{\min}` (the vertex
of a parabola in :math:`\log T` around the seed's grid minimum, :func:`best_depths`) and decides on the 95%
t-interval over seeds of the mean of :math:`\log(T_{\min}/T^*)`: it must lie within :math:`(-\log 1.25, \log 1.25)`,
for both priors, in-sample and on fresh noisy queries (new draws from the prior, not in the context).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attneb.numerics import flow, stats
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.replication import run_pooled
from attneb.proofs_check.engine.studies import mode_name
from attneb.proofs_check.topics.designs import SCHEDULES, SIGMA2, STUDENT_T_PRIORS, fast_options

#: Depths of every seed, as T / T*.
DEPTHS = (0.5, 2 / 3, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


#: The best depth must lie within this factor of T* (the band's ends are on DEPTHS).
BAND = 1.25


#: First seed of the check (the pool of a power analysis follows it); a pilot ran seeds 2000-2005.
SEED_START = 1000


def depth_configs(quick: bool) -> dict[str, dict]:
    """E1 on the Student-t priors at one N, each seed run to every depth of :data:`DEPTHS`: N = 4096 with 6 seeds
    (quick), N = 131072 with 8 (full), seeds from :data:`SEED_START`."""
    return {
        part: {
            "name": mode_name("E1", f"{part}-depth", quick),
            "prior": prior,
            "sigma2": SIGMA2,
            "n": [4096 if quick else 131072],
            "seeds": {"start": SEED_START, "count": 6 if quick else 8},
            "estimators": ["two-stage"],
            "h2": SCHEDULES["log"][1],
            "T": {"rule": "scale", "factor": list(DEPTHS)},
            "options": fast_options(["two-stage"]),
        }
        for part, (_, prior) in STUDENT_T_PRIORS.items()
    }


def depth_table(rows: list[dict], column: str) -> tuple[list[int], np.ndarray]:
    """``(seeds, gaps)`` with ``gaps[s, k]`` the ``column`` of seed ``s`` at depth ``DEPTHS[k] x T*``.

    A row's depth is its ``T`` over ``attneb.numerics.flow.leading_horizon`` at its bandwidth, read at call time; rows at
    other depths (a store shared with runs under another horizon) are left out.
    """
    seeds = sorted({r["seed"] for r in rows})
    gaps = np.full((len(seeds), len(DEPTHS)), np.nan)
    for r in rows:
        ratio = r["T"] / flow.leading_horizon(r["sigma2"], r["h2"])
        k = int(np.argmin([abs(ratio - d) for d in DEPTHS]))
        if abs(ratio - DEPTHS[k]) <= 1e-9 * DEPTHS[k]:
            gaps[seeds.index(r["seed"]), k] = r[column]
    if np.isnan(gaps).any():
        raise LookupError(f"incomplete table of {column!r}: some seed lacks some depth of {DEPTHS}")
    return seeds, gaps


def best_depths(gaps: np.ndarray) -> np.ndarray:
    """Per seed, ``log(T_min / T*)``: the vertex, in ``log T``, of the parabola through the log-gaps at the grid
    minimum of that seed and its two neighbours on :data:`DEPTHS` (the end of the grid where the minimum lies there).

    Parameters
    ----------
    gaps : ndarray, shape (seeds, len(DEPTHS))
        Gaps to Bayes, positive.
    """
    x, y = np.log(DEPTHS), np.log(np.asarray(gaps, dtype=float))
    out = np.empty(len(y))
    for s, row in enumerate(y):
        k = int(np.argmin(row))
        if k in (0, len(x) - 1):
            out[s] = x[k]
            continue
        (x0, x1, x2), (y0, y1, y2) = x[k - 1:k + 2], row[k - 1:k + 2]
        den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
        out[s] = x1 if den == 0 else x1 - 0.5 * ((x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)) / den
    return out


def decide(rows: dict[str, list[dict]], seeds: list[int]) -> dict:
    """Per prior and column (in-sample ``gap``, fresh queries ``oos_gap``): the t-interval over ``seeds`` of
    ``log(T_min / T*)`` (:func:`best_depths`), the geometric-mean gap at every depth over the gap at ``T*``, and
    whether the interval lies within ``(log(1 / BAND), log BAND)``."""
    out = {}
    for part, part_rows in rows.items():
        for column in ("gap", "oos_gap"):
            table_seeds, gaps = depth_table([r for r in part_rows if r["seed"] in set(seeds)], column)
            interval = stats.mean_interval(best_depths(gaps))
            logs = np.log(gaps)
            at_t_star = logs[:, DEPTHS.index(1.0)]
            out[(part, column)] = {
                "seeds": table_seeds, "interval": interval,
                "within": math.log(1 / BAND) < interval.low and interval.high < math.log(BAND),
                "profile": [float(np.exp(np.mean(logs[:, k] - at_t_star))) for k in range(len(DEPTHS))],
                "grid_minima": [DEPTHS[k] for k in np.argmin(logs, axis=1)]}
    return out


def _horizon_times(factor: float):
    """Every Stage-1 horizon ``factor`` times the leading-order ``T*``."""
    return lambda real: lambda sigma2, h2: factor * real(sigma2, h2)


def _stage_one_at_half_the_bandwidth(real):
    """Stage 1 with the bandwidth ``h2 / 2`` (the horizon still ``sigma2 / (2 h2)``): it removes half the noise."""
    return lambda x0, h2, T, **kwargs: real(x0, h2 / 2, T, **kwargs)


CRITERION = (
    "Two 1-D Student-t priors, df 3 and df 5, scale sqrt((df - 2)/df) (variance 1), sigma2 = 0.5, h2 = (4 sigma2/e)/"
    "log N, N = 131072 with 8 seeds (quick: N = 4096, 6 seeds), seeds 1000 on (fresh: not those of H1's other checks "
    "nor of the pilot); every seed's batch runs Stage 1 (Euler, step 0.05) to each depth T = k T*, k in {1/2, 2/3, "
    "0.8, 0.9, 1, 1.1, 1.25, 1.5, 2}, followed by Stage 2. Per seed, prior and column (in-sample gap to Bayes; gap on "
    "fresh noisy queries, new draws from the prior not in the context), the best depth T_min is the vertex, in log T, "
    "of the parabola through the log-gaps at the seed's grid minimum and its two neighbours (the grid's end where the "
    "minimum lies there). Passes when, for both priors and both columns, the 95% t-interval over seeds of the mean of "
    "log(T_min / T*) lies within (-log 1.25, log 1.25): the best depth lies within a factor 1.25 of T* (the band fixed "
    "from the theory before any run: T* is the leading order, off by O(h2/sigma2) = 0.125-0.15 here)"
)


@check(
    "H1", "E1, heavy tails, depth: the best depth on Student-t priors (df 3 and 5) along h2 = (4 sigma2/e)/log N lies "
    "within a factor 1.25 of T* = sigma2/(2 h2), in-sample and on fresh queries (fresh seeds)",
    criterion=CRITERION,
    replication="subsample",
    alternatives=[
        *(alternative(f"horizon {factor:g} T*", f"every Stage-1 horizon T = {factor:g} x sigma2/(2 h2)",
                      swap("attneb.numerics.flow:leading_horizon", _horizon_times(factor)), kind="theory")
          for factor in (0.8, 1.2, 1.25, 1.5)),
        alternative("Stage 1 at half the bandwidth", "attneb.numerics.flow.particle_flow runs at h2/2 (it then removes half "
                    "the noise by T*)", swap("attneb.numerics.flow:particle_flow", _stage_one_at_half_the_bandwidth),
                    kind="implementation"),
    ],
    note="criterion fixed before the runs of the check's seeds (1000 on); the band (a factor 1.25) was fixed from "
    "the theory before any run, and a pilot on seeds 2000-2005 then chose the form of the decision and the grid: a "
    "first form, 'the gap at T* below the gaps at 0.8 T* and 1.25 T*, paired over seeds', asks more than the band "
    "(df 3's minimum lies between T* and 1.25 T*: in-sample the gap at 1.25 T* was 0.77x that at T*, N = 16384), so "
    "the depths 0.9 and 1.1 T* were added and the best depth is read per seed. Pilot, T_min/T* [95% t-interval over 6 "
    "seeds], in-sample and fresh queries: N = 4096 df 3 1.117 [1.060, 1.178] and 1.112 [1.057, 1.171], df 5 1.035 "
    "[0.985, 1.087] and 1.031 [0.987, 1.076]; N = 16384 df 3 1.134 [1.113, 1.155] and 1.135, df 5 1.081 [1.050, "
    "1.113] and 1.078; N = 131072 df 3 1.103 [1.097, 1.109] and 1.096 [1.088, 1.104], df 5 1.065 [1.037, 1.094] and "
    "1.061 [1.037, 1.086] (the Gaussian N(0, 1)'s T_G is 1.05 T* there). So the band cannot reject the horizon "
    "1.25 T*: measured from it, the best depth lies near 0.88, inside the band (expected power about 0 against it). "
    "Measured on the check's seeds, T_min/T* in-sample and on fresh queries: quick (N = 4096, seeds 1000-1005) df 3 "
    "1.151 [1.079, 1.227] and 1.147 [1.079, 1.218], df 5 1.039 [0.981, 1.101] and 1.027 [0.970, 1.087]: PASS; full "
    "(N = 131072, seeds 1000-1007) df 3 1.105 [1.099, 1.111] and 1.100 [1.090, 1.109], df 5 1.076 [1.067, 1.085] "
    "and 1.071 [1.060, 1.082]: PASS. So on heavy tails T* pins the best depth to within 8-11%, above it like the "
    "Gaussian's T_G. Quick power (40 subsets of a pool of 3 x 6 seeds): size 0; power 1.0 against 0.8 T*, 1.5 T* and "
    "Stage 1 at half the bandwidth, 0.825 against 1.25 T*. Full mode, one decision on seeds 1000-1007 under 1.25 T*: "
    "passes (0.884 [0.878, 0.889] df 3 in-sample): not rejected, as expected; under 1.5 T* it fails (0.727 [0.710, "
    "0.745]); the full power analysis was not run "
    "(about 400 s a theory on a loaded 2-core machine, 4x that for its pool). Added on a referee's report (after the "
    "runs; criterion unchanged): the band is about 2.5x the effect and about 40x the precision. In full mode the data "
    "reject T_min = T* itself (df 3 1.105 [1.099, 1.111]), and, dividing the measured T_min by a horizon factor f, "
    "horizon rules with f in about (0.89, 1.33) pass, 1.2 T* and the Gaussian's T_G (about 1.05 T*) among them "
    "('horizon 1.2 T*' registered, expected power about 0 in full mode). Since the vertex cannot leave the cell "
    "around its grid minimum, the decision amounts to 'the grid minima lie in 0.8 to 1.25 T*'; on synthetic curves a "
    "gap flat inside [0.8, 1.25] T* passes 36-96% of the time, a flat gap with noise 1-1.5%, and a Stage 1 that does "
    "nothing fails (every depth ties, the argmin takes 0.5 T*). What the check shows is the depth to within 25%; "
    "what the runs show, beyond it, is a best depth 7-11% above T* at N = 131072",
)
def depth_heavy_tails(ctx: Context) -> Evidence:
    configs = depth_configs(ctx.quick)
    # the runs' depths follow the horizon rule in force (a theory alternative swaps it): a cache for each rule
    rule = flow.leading_horizon(SIGMA2, 1.0)
    rows = run_pooled(configs, dataclasses.replace(ctx, cache=ctx.cache.setdefault(("H1-depth", rule), {})))
    start, count = configs[next(iter(configs))]["seeds"].values()
    decision = decide(rows, ctx.subsample_seeds(count, start))
    labels = {part: STUDENT_T_PRIORS[part][0] for part in configs}
    columns = {"gap": "in-sample", "oos_gap": "fresh queries"}

    def text(iv: stats.Interval) -> str:
        return f"{math.exp(iv.estimate):.3f} [{math.exp(iv.low):.3f}, {math.exp(iv.high):.3f}]"

    def profile(v: dict) -> str:
        return ", ".join(f"{k:.3g}: {ratio:.2f}" for k, ratio in zip(DEPTHS, v["profile"]))

    lines = [f"{labels[part]}, {columns[column]}: T_min/T* {text(v['interval'])}, grid minima "
             f"{', '.join(f'{m:.3g}' for m in v['grid_minima'])}, gap over the gap at T* (T/T*: ratio) "
             f"{profile(v)}" for (part, column), v in decision.items()]
    passed = bool(decision) and all(v["within"] for v in decision.values())
    n = configs[next(iter(configs))]["n"][0]
    return Evidence(
        passed=passed, kind="interval",
        summary=f"N = {n}, geometric means over seeds [95% t-intervals]: " + "; ".join(lines)
        + f" (passes when every interval of T_min/T* lies within ({1 / BAND:g}, {BAND:g}))",
        data={"n": n, "depths": list(DEPTHS), "band": BAND,
              "cases": {f"{part}, {column}": {"seeds": v["seeds"], "log_t_min": v["interval"].__dict__,
                                              "within": v["within"], "profile": v["profile"],
                                              "grid_minima": v["grid_minima"]}
                        for (part, column), v in decision.items()}})
