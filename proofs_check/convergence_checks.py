"""Risk experiments as evidence: E1 (recovery, C8), E2 (depth-noise relation, C6), E4 (the estimator
table, C9) and E5 (the clean-context special case, G3).

Each experiment is a set of declarative sweeps (:mod:`attneb.numerics.sweep`) whose rows land in the
report folder's SQLite store as they finish, so an interrupted ``attneb verify`` resumes where it
stopped, and ``attneb plot NAME --store PATH`` redraws the figure from the rows
(:mod:`attneb.proofs_check.studies`). Every run records its risks in-sample (the batch denoised with
itself as context) and out-of-sample (``oos_*``: fresh noisy tokens, the paper's query).

Every pass criterion is registered with its check (``criterion=``) and fixed before the run. The
checks are subsampled (``replication="subsample"``): a sweep simulates the pool of seeds
:meth:`~attneb.proofs_check.registry.Context.pool_seeds` and each decision, like each figure, uses only
the rows of its own seeds (:meth:`~attneb.proofs_check.registry.Context.subsample_seeds`), so that a
power analysis can decide again and again on subsets of one stored pool. Predictions are read
from :mod:`theory` at call time and the stored measurements reach each decision through a small
module-level function (``*_data``), so that a registered wrong theory, or wrong data, can be
swapped in (:mod:`attneb.proofs_check.power`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats as sstats

from attneb.numerics import stats
from attneb.numerics.sweep import ResultStore
from attneb.theory import depth_noise, stability

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from . import figures
from .registry import Context, Evidence, alternative, check, swap
from .studies import STUDIES, mode_name, run_configs, stored_rows, study

SIGMA2 = 0.5
#: Bandwidth schedules along which N grows (T = T*(h2) = sigma2 / (2 h2) throughout).
#: "log" keeps N far above the stability bound (S1): N_c = exp(2 sigma2 / (e h2)) = N^(1/2);
#: "power" shrinks h2 like N^(-1/4), so N_c overtakes N (at N ~ 3e4 here).
SCHEDULES = {
    "log": ("h2 = (4 sigma2 / e) / log N", {"rule": "log", "scale": round(4 * SIGMA2 / math.e, 4)}),
    "power": ("h2 = 0.5 N^(-1/4)", {"rule": "power", "scale": 0.5, "exponent": 0.25}),
}
#: Kernel path of the estimators that take one: binned (grid and FFT) where d <= 2 and it is the cheaper.
FAST = {"backend": "auto", "tol": 1e-7}


def fast_options(estimators) -> dict:
    """Sweep ``options`` putting every estimator of ``estimators`` that has a kernel path on :data:`FAST`."""
    return {name: FAST for name in estimators if name in ("two-stage", "stage-two-only", "tweedie-kde", "clean-context")}


RECOVERY_PRIORS = {
    "gaussian": ("Gaussian N(0, 1)", {"family": "Gaussian", "mean": [0.0], "var": 1.0}),
    "clusters": ("two clusters at +-2, var 0.25", {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25}),
    "sphere": ("uniform sphere S^2 in R^3", {"family": "UniformSphere", "dim": 3, "radius": 1.0}),
}
#: The six reference priors of the estimator table (d <= 2).
TABLE_PRIORS = {
    "gaussian": ("Gaussian N(0, 1)", {"family": "Gaussian", "mean": [0.0], "var": 1.0}),
    "clusters": ("two clusters at +-2, var 0.25", {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25}),
    "discrete": ("three atoms -1.5, 0, 1.5", {"family": "Discrete", "atoms": [[-1.5], [0.0], [1.5]]}),
    "sphere": ("uniform circle S^1 in R^2", {"family": "UniformSphere", "dim": 2, "radius": 1.0}),
    "box": ("uniform box [-1.5, 1.5]^2", {"family": "UniformBox", "low": [-1.5, -1.5], "high": [1.5, 1.5]}),
    "laplace": ("Laplace, scale 1/sqrt(2)", {"family": "Laplace", "scale": 0.5 ** 0.5, "dim": 1}),
}
TABLE_ESTIMATORS = ("two-stage", "stage-two-only", "tweedie-kde", "linear", "npmle", "oracle")

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
#: The asymptotic regime of the stability bound S1, with margin: N >= REGIME * N_c.
REGIME = 10.0
BOOTSTRAP = 2000
#: E1 and E5: the floor alternatives, as fractions of the Bayes risk; a check passes when the upper
#: end of the floor's interval lies below half of its alternative (midway between no floor and it).
FLOOR_OF_MMSE = 0.03
CLEAN_FLOOR_OF_MMSE = 0.004
#: E1: exponents tried for the power-law part of gap = c + b N^-a.
FLOOR_EXPONENTS = tuple(round(0.25 + 0.05 * i, 2) for i in range(36))
#: E1 floor check: per-prior floor alternatives at the resolution of the design, fixed from the stored runs that
#: preceded them (quick pool of 12 seeds, full pool of 24): each about the mean in-sample gap of two-stage at the
#: largest N, 131072 (Gaussian 0.030-0.032% of the MMSE, clusters 0.85-0.88%), as fractions of the Bayes risk.
RESOLUTION_FLOORS = {"gaussian-log": 0.0003, "clusters-log": 0.0085}
#: E4: first seed of the independent block of Stage-2-alone runs that the data alternatives stand in for two-stage
#: (far above any pool of the table's own seeds, 0 .. 10 x pool - 1).
SPARE_SEED_START = 50_000


# --------------------------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------------------------


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


def table_configs(quick: bool) -> dict[str, dict]:
    """E4: every estimator on the six reference priors along the bandwidth schedule."""
    return {part: _table_config(part, prior, quick) for part, (_, prior) in TABLE_PRIORS.items()}


def _table_config(part: str, prior: dict, quick: bool) -> dict:
    """E4's design for one prior: every estimator, h2 = (4 sigma2/e)/log N, T = T*, 10 seeds."""
    return {
        "name": mode_name("E4", part, quick),
        "prior": prior,
        "sigma2": SIGMA2,
        "n": [256, 1024] if quick else [256, 1024, 4096, 16384],
        "seeds": {"start": 0, "count": 10},
        "estimators": list(TABLE_ESTIMATORS),
        "h2": SCHEDULES["log"][1],
        "T": "leading",
        "options": fast_options(TABLE_ESTIMATORS),
    }


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


# --------------------------------------------------------------------------------------------
# Simulating a pool of seeds, deciding on a subset
# --------------------------------------------------------------------------------------------


def _seed_range(config: dict) -> tuple[int, int]:
    seeds = config["seeds"]
    return int(seeds.get("start", 0)), int(seeds["count"])


def intended_seeds(config: dict) -> set[int]:
    """The seeds a figure (and ``attneb verify``'s decision) uses: the config's own, not a power pool's."""
    start, count = _seed_range(config)
    return set(range(start, start + count))


def _keep(rows: list[dict], seeds: set[int]) -> list[dict]:
    return [r for r in rows if r["seed"] in seeds]


def _run(configs: dict[str, dict], ctx: Context) -> dict[str, list[dict]]:
    """Simulate the pool of seeds of every config (resuming the store); rows of this replicate's seeds, by part.

    The rows of the pool are cached in ``ctx.cache`` so that decisions repeated under other
    theories (and replicates) do not read the store again.
    """
    key = ("convergence-rows", tuple(c["name"] for c in configs.values()), ctx.pool, str(ctx.store_path))
    if key not in ctx.cache:
        pooled = []
        for config in configs.values():
            start, count = _seed_range(config)
            pooled.append({**config, "seeds": ctx.pool_seeds(count, start)})
        rows = run_configs(pooled, ctx.store_path, workers=ctx.workers)
        ctx.cache[key] = {part: rows[config["name"]] for part, config in configs.items()}
    out = {}
    for part, config in configs.items():
        start, count = _seed_range(config)
        out[part] = _keep(ctx.cache[key][part], set(ctx.subsample_seeds(count, start)))
    return out


def _stored(configs: dict[str, dict], store: ResultStore) -> dict[str, list[dict]]:
    """Rows of the configs' own seeds (a power analysis may have stored more)."""
    rows = stored_rows(store, [c["name"] for c in configs.values()])
    return {part: _keep(rows[config["name"]], intended_seeds(config)) for part, config in configs.items()}


def _stored_if_run(configs: dict[str, dict], store: ResultStore) -> dict[str, list[dict]]:
    """Rows of the configs' own seeds, for the configs the store holds (a figure drawn before their check ran
    leaves them out)."""
    rows = {part: _keep(store.rows(config["name"]), intended_seeds(config)) for part, config in configs.items()}
    return {part: part_rows for part, part_rows in rows.items() if part_rows}


def _plot(name: str, ctx: Context) -> tuple[str, ...]:
    """Draw study ``name``'s figure into the report folder, except inside a power analysis."""
    if ctx.power:
        return ()
    return (STUDIES[name].plot(ctx.store_path, ctx.out, quick=ctx.quick).name,)


def _resample_weights(seeds: int, seed: int = 0) -> np.ndarray:
    """``(BOOTSTRAP, seeds)`` weights of bootstrap resamples of the seeds (each row sums to 1)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, seeds, (BOOTSTRAP, seeds))
    weights = np.zeros((BOOTSTRAP, seeds))
    np.add.at(weights, (np.repeat(np.arange(BOOTSTRAP), seeds), picks.ravel()), 1.0)
    return weights / seeds


def _table(rows: list[dict], column: str, x: str = "n") -> tuple[np.ndarray, list[int], np.ndarray]:
    """``(xs, seeds, values)`` with ``values[s, i]`` = ``column`` of seed ``s`` at ``x = xs[i]``."""
    xs = np.array(sorted({r[x] for r in rows}), dtype=float)
    seeds = sorted({r["seed"] for r in rows})
    index = {v: i for i, v in enumerate(xs)}
    values = np.full((len(seeds), len(xs)), np.nan)
    for r in rows:
        values[seeds.index(r["seed"]), index[float(r[x])]] = r[column]
    if np.isnan(values).any():
        raise LookupError(f"incomplete table of {column!r}: some seed lacks some {x}")
    return xs, seeds, values


# --------------------------------------------------------------------------------------------
# Floors: gap = c + b N^-a, with an interval for c by a bootstrap over seeds
# --------------------------------------------------------------------------------------------


def floor_fit(n: np.ndarray, table: np.ndarray, exponents=FLOOR_EXPONENTS, level: float = 0.95) -> dict:
    """Least-squares fit of ``gap(N) = c + b N^-a`` to the mean over seeds, with a bootstrap interval for ``c``.

    ``table[s, i]`` is the gap of seed ``s`` at ``n[i]``. For each exponent ``a`` of ``exponents``
    the fit is linear in ``(c, b)``; the exponent with the smallest weighted residual is kept
    (profile least squares). Weights are ``1 / variance over seeds`` at each ``N`` (so adding a
    constant to every gap shifts ``c`` by exactly that constant). The interval is the percentile
    interval of ``c`` over :data:`BOOTSTRAP` resamples of the seeds, shared across ``N`` (batches
    of one seed at different ``N`` share random numbers), each refitted, exponent included.
    Vectorised: one least-squares solve per exponent for all resamples.
    """
    n = np.asarray(n, dtype=float)
    seeds = table.shape[0]
    means = np.vstack([table.mean(axis=0), _resample_weights(seeds) @ table])  # (1 + B, K)
    spread = table.var(axis=0, ddof=1)
    root_w = 1.0 / np.sqrt(np.where(spread > 0, spread, spread[spread > 0].min() if (spread > 0).any() else 1.0))
    best = np.full(len(means), np.inf)
    c = np.zeros(len(means))
    a_best = np.zeros(len(means))
    target = (means * root_w).T  # (K, 1 + B)
    for a in exponents:
        design = np.column_stack([np.ones_like(n), n ** -a]) * root_w[:, None]
        coef = np.linalg.pinv(design) @ target  # least squares for every resample at once
        sse = ((design @ coef - target) ** 2).sum(axis=0)
        better = sse < best
        best[better], c[better], a_best[better] = sse[better], coef[0][better], a
    low, high = np.quantile(c[1:], [(1 - level) / 2, (1 + level) / 2])
    return {"c": float(c[0]), "ci": [float(low), float(high)], "a": float(a_best[0]),
            "gap_at_largest_n": float(table[:, -1].mean())}


# --------------------------------------------------------------------------------------------
# E1: recovery (C8)
# --------------------------------------------------------------------------------------------


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


def gap_slopes(rows_by_part: dict[str, list[dict]], estimator: str, keep=lambda row: True,
               column: str = "gap") -> dict[str, stats.SlopeFit]:
    """Log-log fit of ``column`` (the gap to Bayes) against N, over every seed, per part (rows that ``keep`` accepts)."""
    fits = {}
    for part, rows in rows_by_part.items():
        ours = [r for r in rows if r["estimator"] == estimator and keep(r)]
        fits[part] = stats.loglog_slope([r["n"] for r in ours], [r[column] for r in ours])
    return fits


def seed_slopes(rows_by_part: dict[str, list[dict]], estimator: str, keep=lambda row: True, column: str = "gap",
                level: float = 0.95) -> dict[str, dict]:
    """Per part: the log-log slope of ``column`` against N fitted to each seed's rows alone, and the Student-t
    interval of their mean over seeds.

    One seed's batches at different N share random numbers, so the points of a seed are not independent of
    one another, while seeds are: the interval is over the per-seed slopes (``S - 1`` degrees of freedom),
    not over every (N, seed) point. A seed with fewer than two distinct N (among the rows ``keep`` accepts)
    has no slope; ``interval`` is ``None`` when fewer than two seeds have one.
    """
    out = {}
    for part, rows in rows_by_part.items():
        by_seed = defaultdict(list)
        for r in rows:
            if r["estimator"] == estimator and keep(r):
                by_seed[r["seed"]].append(r)
        slopes = {}
        for seed, seed_rows in sorted(by_seed.items()):
            x = np.log([r["n"] for r in seed_rows])
            if len(set(x.tolist())) < 2:
                continue
            y = np.log([r[column] for r in seed_rows])
            slopes[seed] = float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
        interval = stats.mean_interval(list(slopes.values()), level) if len(slopes) >= 2 else None
        out[part] = {"slopes": slopes, "interval": interval,
                     "ns": sorted({r["n"] for seed_rows in by_seed.values() for r in seed_rows})}
    return out


def _interval_list(iv) -> list | None:
    return None if iv is None else [iv.estimate, iv.low, iv.high]


def _interval_text(iv) -> str:
    return "no interval (fewer than two seeds with two N)" if iv is None else str(iv)


def _per_seed_slope_decision(rows: dict[str, list[dict]], estimator: str, label=lambda part: part,
                             fresh_decides: bool = False):
    """``(passed, text, data)`` of a per-seed slope check (E1, E5): every decided interval below 0.

    The t-interval over seeds of the per-seed log-log slopes of the in-sample gap decides; those of
    the gap on fresh queries (which decide too when ``fresh_decides``) and the slope pooled over
    (N, seed) points are reported beside it.
    """
    fits = seed_slopes(rows, estimator)
    oos = seed_slopes(rows, estimator, column="oos_gap")
    pooled = gap_slopes(rows, estimator)
    text = "; ".join(f"{label(part)}: {_interval_text(fit['interval'])} (fresh queries "
                     f"{_interval_text(oos[part]['interval'])}; pooled over (N, seed) points {pooled[part].slope})"
                     for part, fit in fits.items())
    decided = [*fits.values(), *(oos.values() if fresh_decides else ())]
    passed = bool(fits) and all(f["interval"] is not None and f["interval"].high < 0 for f in decided)
    data = {"slopes": {p: _interval_list(f["interval"]) for p, f in fits.items()},
            "oos_slopes": {p: _interval_list(f["interval"]) for p, f in oos.items()},
            "per_seed": {p: {str(k): v for k, v in f["slopes"].items()} for p, f in fits.items()},
            "pooled_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in pooled.items()}}
    return passed, text, data


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


def _labelled(rows_by_part, priors):
    return {priors[part][0]: rows for part, rows in rows_by_part.items()}


def _recovery_panels(rows_by_part):
    panels = defaultdict(dict)
    for part, rows in rows_by_part.items():
        prior, schedule = part.rsplit("-", 1)
        panels[{**RECOVERY_PRIORS, **STUDENT_T_PRIORS}[prior][0]][SCHEDULES[schedule][0]] = rows
    return dict(panels)


@study("E1", "gap to Bayes vs N along two bandwidth schedules, T = T* (C8, S1); Student-t priors along the first")
def draw_recovery(store: ResultStore, quick: bool, folder: Path) -> Path:
    rows = {**_stored_if_run(recovery_configs(quick), store), **_stored_if_run(student_recovery_configs(quick), store)}
    if not rows:  # panels of what has run: C8's priors, H1's, or both ('attneb verify --only H1' runs H1's alone)
        names = [c["name"] for c in (*recovery_configs(quick).values(), *student_recovery_configs(quick).values())]
        raise LookupError(f"{store.path} holds no rows of {', '.join(names)}; run 'attneb verify' (with --quick for "
                          "the quick mode) to compute them")
    return figures.plot_recovery(_recovery_panels(rows), folder)


def _schedule(rows_by_part: dict, schedule: str) -> dict:
    return {part: rows for part, rows in rows_by_part.items() if part.endswith(f"-{schedule}")}


_E1_NOTE = ("N from 256 up to 131072 for the 1-D priors, to 2048 quick / 4096 full for the sphere in R^3; 4 seeds quick, "
            "6 full, subsampled from a pool in a power analysis")


#: The wrong theories of the E1 slope checks (the per-seed check and the superseded pooled one).
_E1_SLOPE_ALTERNATIVES = [
    alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
    alternative("gap with a floor of 3% of the Bayes risk",
                "every two-stage gap (in-sample and fresh queries) plus 0.03 x MMSE",
                swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _with_floor), kind="data"),
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
    rows = _schedule(recovery_data(_run(recovery_configs(ctx.quick), ctx)), "log")
    figs = _plot("E1", ctx)
    passed, text, data = _per_seed_slope_decision(rows, "two-stage")
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
    rows = recovery_data(_run(recovery_configs(ctx.quick), ctx))
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


@check(
    "C8", "E1, scope: along h2 = 0.5 N^(-1/4) the gap falls while N >> N_c and rises once N < N_c (S1's bound)",
    criterion="along h2 = 0.5 N^(-1/4) (T = T*): the log-log slope of the in-sample gap over the N with N >= 10 N_c has "
    "its 95% interval below 0 for every prior, and for every prior whose largest N is below N_c the gap there exceeds "
    "the smallest mean gap over N (paired 95% t-interval above 0), which is reached at N >= N_c",
    replication="subsample",
    alternatives=[
        alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                    swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
        alternative("N_c x 4", "attneb.theory.stability.token_scaling multiplied by 4",
                    swap("attneb.theory.stability:token_scaling", _scaled_token_scaling(4.0)), kind="theory"),
        alternative("N_c / 4", "attneb.theory.stability.token_scaling divided by 4",
                    swap("attneb.theory.stability:token_scaling", _scaled_token_scaling(0.25)), kind="theory"),
        alternative("rate 1/e: N_c = exp(sigma2/(e h2))", "token_scaling = exp(sigma2/(e h2)), the square root of S1's",
                    swap("attneb.theory.stability:token_scaling", _token_scaling_at_rate(1 / math.e)), kind="theory"),
    ],
    note="a prior with fewer than 3 points (or 2 distinct N) at N >= 10 N_c has no early slope: the check then fails "
    "(it raised before). What it cannot tell apart, on the stored quick and full runs (seeds 0-3 / 0-5): an N_c "
    "smaller than S1's by any factor up to 9 (the largest N stays below N_c / 9; power against N_c / 4: 0 in full, "
    "0.40 in quick, which is its size there), nor a rate c in N_c = exp(c sigma2/h2) from 0.65 to 0.74 (quick) or "
    "0.8 (full) against S1's 2/e = 0.736; it rejects N_c x 1.5 and more (too few early points; power 1 against "
    "N_c x 4) and the rate 1/e (no prior's largest N below N_c; power 1). Quick-mode size 0.40 (40 subsets of a "
    "12-seed pool; 0.025 in full): with 4 seeds the clusters' paired rise past N_c and early slope often reach 0",
)
def recovery_needs_stability(ctx: Context) -> Evidence:
    rows = _schedule(recovery_data(_run(recovery_configs(ctx.quick), ctx)), "power")

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
    passed = bool(rows) and not short and all(f.slope.high < 0 for f in early.values()) and bool(below) and all(
        t["rise"][1] > 0 and t["best_n_over_n_c"] >= 1 for t in below.values())

    def slope_text(part):
        if part in short:
            return (f"only {early_points[part]} points (N = {early_ns[part]}) with N >= {REGIME:g} N_c: no slope "
                    "can be fitted there, which fails the check")
        return (f"slope over N >= {REGIME:g} N_c (N = {early_ns[part]}) {early[part].slope} (interval over per-seed "
                f"slopes {_interval_text(early_per_seed[part]['interval'])})")

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
        summary=f"{text} (passes when the gap falls over N >= {REGIME:g} N_c, fitted to at least {EARLY_POINTS} points "
        f"over {EARLY_NS} N or more, and, for every prior whose largest N is below N_c, the gap there exceeds the "
        "smallest gap (paired 95% interval above 0), reached at N >= N_c: recovery needs N >> exp(2 sigma2 / (e h2)), "
        "not only N -> oo and h2 -> 0)",
        data={"early_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in early.items()},
              "early_slopes_per_seed": {p: _interval_list(f["interval"]) for p, f in early_per_seed.items()},
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


def recovery_floors(rows_by_part: dict[str, list[dict]], estimator: str = "two-stage") -> dict[str, dict]:
    """Per part and column (``gap``, ``oos_gap``): the fit of ``c + b N^-a`` (:func:`floor_fit`) and the Bayes risk."""
    out = {}
    for part, rows in rows_by_part.items():
        ours = [r for r in rows if r["estimator"] == estimator]
        out[part] = {"mmse": ours[0]["mmse"]}
        for column in ("gap", "oos_gap"):
            n, _, table = _table(ours, column)
            out[part][column] = floor_fit(n, table)
    return out


@check(
    "C8", "E1, floor: the gap along h2 = (4 sigma2/e)/log N does not stall at 3% of the Bayes risk, "
    "in-sample and for fresh queries",
    criterion="for the Gaussian N(0,1) and the two clusters (sigma2 = 0.5, h2 = (4 sigma2/e)/log N, T = T*, N = 256 .. "
    "131072): gap(N) = c + b N^-a is fitted to the mean gap over seeds (weights 1/variance over seeds; a profiled over "
    "0.25, 0.30, .., 2.00), and the 95% percentile interval of the floor c comes from 2000 resamples of the seeds "
    "(shared across N, each refitted); floor alternative: 3% of the Bayes risk (MMSE); passes when the upper end of c's "
    "interval lies below half of it, 1.5% of the MMSE, both for the in-sample gap and for the gap on fresh noisy queries "
    f"(new draws from the prior, not in the context). {_E1_NOTE}; the sphere's fit is reported beside",
    replication="subsample",
    alternatives=[
        alternative("gap with a floor of 3% of the Bayes risk",
                    "every two-stage gap (in-sample and fresh queries) plus 0.03 x MMSE",
                    swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _with_floor), kind="data"),
        alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                    swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
        *[alternative(f"{part.split('-')[0]}: floor at its gap at N = 131072 ({100 * fraction:g}% of the Bayes risk)",
                      f"every two-stage gap of {part} (in-sample and fresh queries) plus {fraction:g} x MMSE, about its "
                      "mean in-sample gap at the largest N (fixed from the stored runs); the other priors unchanged",
                      swap("attneb.proofs_check.convergence_checks:recovery_data",
                           lambda real, part=part, fraction=fraction: _with_floor_on(part, fraction)), kind="data")
          for part, fraction in RESOLUTION_FLOORS.items()],
    ],
    note="resolution of the decision: floors of 1.5-3% of the Bayes risk (its power 1.0 against the 3% floor follows "
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
    rows = _schedule(recovery_data(_run(recovery_configs(ctx.quick), ctx)), "log")
    floors = recovery_floors(rows)
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
        summary=f"gap = c + b N^-a, 95% bootstrap intervals over seeds: {text} (passes when, for the Gaussian and the "
        f"clusters, c's upper end lies below {100 * threshold:g}% of the MMSE in-sample and out-of-sample; floor "
        f"alternative {100 * FLOOR_OF_MMSE:g}%). Resolution reached (2 x c's upper end: an added floor shifts c by "
        f"itself, so the half-floor rule rejects floors from there up): {'; '.join(reach(p) for p in decided)}; "
        "floors below these cannot be told apart from no floor by these runs",
        data={"floors": floors, "floor_alternative_of_mmse": FLOOR_OF_MMSE, "threshold_of_mmse": threshold,
              "resolution": resolution, "resolution_floors_of_mmse": dict(RESOLUTION_FLOORS)},
    )


# --------------------------------------------------------------------------------------------
# E2: depth-noise relation (C6)
# --------------------------------------------------------------------------------------------


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
    tables = [_table(by_n[n], column, x="T") for n in ns]
    T = tables[0][0]
    seeds = tables[0][1]
    if any(not np.array_equal(t[0], T) or t[1] != seeds for t in tables):
        raise LookupError("E2 needs the same depths and seeds at every N")
    weights = _resample_weights(len(seeds))
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


@study("E2", "gap to Bayes vs depth T at three N, two tau2, against T* and T_G (C6)")
def draw_depth(store: ResultStore, quick: bool, folder: Path) -> Path:
    rows = _stored(depth_configs(quick), store)
    return figures.plot_depth_sweep(rows, depth_cases(rows), folder)


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
              "gap to Bayes on fresh queries) over the five depths; finite-N model fixed "
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
    rows = depth_data(_run(depth_configs(ctx.quick), ctx))
    figs = _plot("E2", ctx)
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
    "call time, has its 95% interval (Bonferroni over the tau2; the two T_inf independent, their standard errors "
    "added in quadrature, t with S-1 degrees of freedom) containing 1, and both minimisers are bracketed by the grid "
    "at the largest N (its grid minimum is not at an end of the grid)",
    replication="subsample",
    alternatives=_LEADING_ALTERNATIVES,
    note="T_G is not an alternative of this check: T_G = T* + O(1) obeys the leading-order relation; the O(1) offset "
    "is decided by the T_G check, whose registered alternatives include 'minimiser = T*'. Resolution: about +-3% on "
    "the slope, so a 1% error in T* is rejected by the evaluators' check, not here",
)
def depth_leading_order(ctx: Context) -> Evidence:
    rows = depth_data(_run(depth_configs(ctx.quick), ctx))
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
    T, seeds, table = _table(rows, column, x="T")
    best = parabola_minima(T, table.mean(axis=0))[0]
    boots = parabola_minima(T, _resample_weights(len(seeds)) @ table)
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
    cases = _superseded_cases(depth_data(_run(depth_configs(ctx.quick), ctx)))
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
    cases = _superseded_cases(depth_data(_run(depth_configs(ctx.quick), ctx)))
    largest = sorted(cases.values(), key=lambda c: -c["h2"])
    excess = [[c["ci"][0] / c["leading"] - 1, c["ci"][1] / c["leading"] - 1] for c in largest]
    shrinking = all(_farthest_from_zero(smaller) < _closest_to_zero(larger) for larger, smaller in zip(excess, excess[1:]))
    text = "; ".join(f"h2={c['h2']:g}, N={c['n']}: T_min/T* - 1 in [{e[0]:.4f}, {e[1]:.4f}]" for c, e in zip(largest, excess))
    return Evidence(passed=len(largest) >= 2 and shrinking, kind="interval",
                    summary=f"{text} (passes when each interval lies strictly closer to 0 than that of the larger h2)",
                    data={"relative_excess_at_largest_n": {str(c["h2"]): e for c, e in zip(largest, excess)}})


# --------------------------------------------------------------------------------------------
# E4: the estimator table (C9 and the comparison)
# --------------------------------------------------------------------------------------------


def spare_table_configs(quick: bool) -> dict[str, dict]:
    """E4's independent block of Stage-2-alone runs: each table config with Stage 2 alone only, on as many seeds
    from :data:`SPARE_SEED_START`. Simulated only when a data alternative asks for it (not in ``attneb verify``)."""
    return spare_configs(table_configs(quick), quick)


def spare_configs(configs: dict[str, dict], quick: bool) -> dict[str, dict]:
    """The independent Stage-2-alone block of the E4 configs ``configs`` (see :func:`spare_table_configs`)."""
    out = {}
    for part, config in configs.items():
        _, count = _seed_range(config)
        out[part] = {**config, "name": mode_name("E4", f"{part}-spare-l0", quick), "estimators": ["stage-two-only"],
                     "seeds": {"start": SPARE_SEED_START, "count": count}, "options": fast_options(["stage-two-only"])}
    return out


def table_data(rows_by_part: dict[str, list[dict]], spare) -> dict[str, list[dict]]:
    """The E4 rows as the decision sees them: the identity. A data alternative swaps this function; ``spare()``
    returns the rows of the independent Stage-2-alone block (:func:`spare_table_configs`), simulated on demand."""
    return rows_by_part


_RISK_COLUMNS = ("mse", "gap", "excess", "oos_mse", "oos_gap", "oos_excess")
_OOS_COLUMNS = ("oos_mse", "oos_gap", "oos_excess")


def _two_stage_from_independent_l0(rows_by_part: dict[str, list[dict]], spare_by_part: dict[str, list[dict]],
                                   columns=_RISK_COLUMNS) -> dict[str, list[dict]]:
    """The two-stage rows carrying ``columns`` of Stage 2 alone on an independent batch: the i-th seed of the table
    (in order) takes the i-th seed of the spare block, at the same N. The paired differences then have the spread of
    two independent batches and mean 0 (equal risk), instead of being exactly 0."""
    out = {}
    for part, rows in rows_by_part.items():
        block = spare_by_part[part]
        pair = dict(zip(sorted({r["seed"] for r in rows}), sorted({r["seed"] for r in block})))
        alone = {(r["n"], r["seed"]): r for r in block if r["estimator"] == "stage-two-only"}
        out[part] = [{**r, **{k: alone[(r["n"], pair[r["seed"]])][k] for k in columns}}
                     if r["estimator"] == "two-stage" else r for r in rows]
    return out


def _depth_unnecessary_independent(rows_by_part: dict[str, list[dict]], spare) -> dict[str, list[dict]]:
    """E4 data alternative "depth unnecessary": two-stage measures what Stage 2 alone does, on independent batches."""
    return _two_stage_from_independent_l0(rows_by_part, spare())


def _depth_helps_in_sample_only(rows_by_part: dict[str, list[dict]], spare) -> dict[str, list[dict]]:
    """E4 data alternative: on fresh queries two-stage is no better than Stage 2 alone (independent batches); its
    in-sample numbers are the real ones."""
    return _two_stage_from_independent_l0(rows_by_part, spare(), _OOS_COLUMNS)


#: The E4 data alternatives' description of the independent block.
_SPARE_TEXT = (f"Stage-2-alone rows of an independent block of as many seeds (from {SPARE_SEED_START}), paired with "
               "the table's seeds in order: equal risk, the measured spread")


def _stage_two_double_bandwidth(real):
    from attneb.numerics import estimators

    def wrong(self, queries):
        return estimators._kernel_mean(queries, self.particles_, 2 * self.sigma2, self.backend, self.tol)
    return wrong


def risk_table(rows_by_part: dict[str, list[dict]], column: str = "excess") -> list[dict]:
    """Mean of ``column`` over seeds, with its 95% t-interval, per prior, N and estimator."""
    table = []
    for part, rows in rows_by_part.items():
        groups = defaultdict(list)
        for r in rows:
            groups[(r["n"], r["estimator"])].append(r[column])
        for (n, estimator), values in sorted(groups.items()):
            iv = stats.mean_interval(values)
            table.append({"prior": part, "n": n, "estimator": estimator,
                          "mean": iv.estimate, "low": iv.low, "high": iv.high, "seeds": iv.n})
    return table


def depth_benefit(rows: list[dict], n: int, column: str = "mse") -> stats.Interval:
    """``column`` of Stage 2 alone minus that of two-stage at batch size ``n``, paired by seed, with a t-interval."""
    mse = defaultdict(dict)
    for r in rows:
        if r["n"] == n:
            mse[r["seed"]][r["estimator"]] = r[column]
    return stats.mean_interval([m["stage-two-only"] - m["two-stage"] for m in mse.values()])


def markdown_table(table: list[dict], priors: dict) -> str:
    """The E4 table in Markdown: one row per prior and N, one column per estimator."""
    estimators = [e for e in TABLE_ESTIMATORS if any(t["estimator"] == e for t in table)]
    lines = ["| prior | N | " + " | ".join(estimators) + " |", "|---|---|" + "---|" * len(estimators)]
    cells = {(t["prior"], t["n"], t["estimator"]): t for t in table}
    for part in priors:
        for n in sorted({t["n"] for t in table if t["prior"] == part}):
            row = []
            for e in estimators:
                t = cells[(part, n, e)]
                row.append(f"{t['mean']:.4f} ± {(t['high'] - t['low']) / 2:.4f}")
            lines.append(f"| {priors[part][0]} | {n} | " + " | ".join(row) + " |")
    return "\n".join(lines)


@study("E4", "excess risk of every estimator on the six reference priors and two Student-t priors vs N (C9)")
def draw_table(store: ResultStore, quick: bool, folder: Path) -> Path:
    rows = {**_labelled(_stored(table_configs(quick), store), TABLE_PRIORS),
            **_labelled(_stored_if_run(student_table_configs(quick), store), STUDENT_T_PRIORS)}
    return figures.plot_estimator_table(rows, folder)


#: The wrong theories of the E4 checks (the six reference priors and the Student-t priors).
_E4_ALTERNATIVES = [
    alternative("depth unnecessary (no Stage 1)", f"two-stage rows replaced by the {_SPARE_TEXT}",
                swap("attneb.proofs_check.convergence_checks:table_data", lambda real: _depth_unnecessary_independent),
                kind="data"),
    alternative("depth helps only in-sample",
                f"the fresh-query numbers of two-stage replaced by those of the {_SPARE_TEXT}",
                swap("attneb.proofs_check.convergence_checks:table_data", lambda real: _depth_helps_in_sample_only),
                kind="data"),
    alternative("Stage-2 bandwidth 2 sigma2", "TwoStageDenoiser._denoise attends with bandwidth 2 sigma2",
                swap("attneb.numerics.estimators:TwoStageDenoiser._denoise", _stage_two_double_bandwidth),
                kind="implementation"),
]


@check(
    "C9", "E4: two-stage beats Stage 2 alone (L = 0) at the largest N on six priors, paired over seeds, in-sample and "
    "on fresh queries (the baselines tabulated, not decided)",
    criterion="six reference priors, sigma2 = 0.5, h2 = (4 sigma2/e)/log N, T = T*, 10 seeds, at the largest N (1024 "
    "quick, 16384 full): the paired 95% t-interval over seeds of MSE(L = 0) - MSE(two-stage) lies above 0 on every "
    "prior, both in-sample and for fresh noisy queries (new draws from the prior, not in the context)",
    replication="subsample",
    alternatives=_E4_ALTERNATIVES,
    note="registered until now as 'E4: two-stage vs Stage 2 alone (and every baseline) on six priors, paired over "
    "seeds, in-sample and on fresh queries'; renamed, criterion unchanged: the decision compares two-stage with L = 0 "
    "only, the other estimators are in the tables. The data alternatives stand independent Stage-2-alone batches "
    "in for two-stage (simulated only in a power analysis), so that they are rejected by the paired interval, not by "
    "differences that are exactly 0",
)
def estimator_table(ctx: Context) -> Evidence:
    rows = table_data(_run(table_configs(ctx.quick), ctx), lambda: _run(spare_table_configs(ctx.quick), ctx))
    return _depth_benefit_evidence(rows, TABLE_PRIORS, _plot("E4", ctx))


def _depth_benefit_evidence(rows: dict[str, list[dict]], priors: dict, figs: tuple[str, ...]) -> Evidence:
    """An E4 decision: two-stage against L = 0 at the largest N, paired over seeds, in-sample and on fresh queries;
    every estimator's excess risk and gap tabulated."""
    table = risk_table(rows)
    oos_table = risk_table(rows, "oos_excess")
    gaps = risk_table(rows, "gap")
    benefits = {part: depth_benefit(r, max(x["n"] for x in r)) for part, r in rows.items()}
    oos_benefits = {part: depth_benefit(r, max(x["n"] for x in r), "oos_mse") for part, r in rows.items()}
    text = "; ".join(f"{priors[p][0]}: {iv} (fresh queries {oos_benefits[p]})" for p, iv in benefits.items())
    n_max = max(r["n"] for part_rows in rows.values() for r in part_rows)
    return Evidence(
        passed=all(iv.low > 0 for iv in benefits.values()) and all(iv.low > 0 for iv in oos_benefits.values()),
        kind="interval",
        summary=f"MSE(L = 0) - MSE(two-stage at T*) at N = {n_max}, sigma2 = {SIGMA2}: {text} "
        "(passes when every interval, in-sample and on fresh queries, lies above 0)",
        data={"benefit": {p: [iv.estimate, iv.low, iv.high] for p, iv in benefits.items()},
              "oos_benefit": {p: [iv.estimate, iv.low, iv.high] for p, iv in oos_benefits.items()},
              "table": table, "oos_table": oos_table, "gap_table": gaps},
        figures=figs,
        markdown="Excess risk (MSE − MMSE per coordinate; mean ± 95% half-width over seeds), in-sample:\n\n"
        + markdown_table(table, priors)
        + "\n\nExcess risk on fresh noisy queries (new draws from the prior, not in the context):\n\n"
        + markdown_table(oos_table, priors)
        + "\n\nGap to Bayes (‖x̂ − E[x|x̃]‖²/d, in-sample; it does not carry the noise of the clean draws):\n\n"
        + markdown_table(gaps, priors),
    )


@check(
    "C9", "E4 (superseded): two-stage vs Stage 2 alone on six priors, in-sample only",
    criterion="six reference priors, sigma2 = 0.5, h2 = (4 sigma2/e)/log N, T = T*, 10 seeds, at the largest N: the "
    "paired 95% t-interval over seeds of MSE(L = 0) - MSE(two-stage) on the batch itself (in-sample) lies above 0 on "
    "every prior",
    replication="subsample",
    alternatives=[alternative("depth unnecessary (no Stage 1)", f"two-stage rows replaced by the {_SPARE_TEXT}",
                              swap("attneb.proofs_check.convergence_checks:table_data",
                                   lambda real: _depth_unnecessary_independent), kind="data")],
    gating=False,
    note="superseded by 'E4: two-stage beats Stage 2 alone (L = 0) ... in-sample and on fresh queries': the paper's "
    "query is a fresh noisy token, not a token of the context",
)
def estimator_table_in_sample(ctx: Context) -> Evidence:
    rows = table_data(_run(table_configs(ctx.quick), ctx), lambda: _run(spare_table_configs(ctx.quick), ctx))
    benefits = {part: depth_benefit(r, max(x["n"] for x in r)) for part, r in rows.items()}
    return Evidence(passed=all(iv.low > 0 for iv in benefits.values()), kind="interval",
                    summary="MSE(L = 0) - MSE(two-stage at T*), in-sample: "
                    + "; ".join(f"{TABLE_PRIORS[p][0]}: {iv}" for p, iv in benefits.items())
                    + " (passes when every interval lies above 0)",
                    data={"benefit": {p: [iv.estimate, iv.low, iv.high] for p, iv in benefits.items()}})


# --------------------------------------------------------------------------------------------
# Heavy tails: E1 and E4 on Student-t priors (C8, C9)
# --------------------------------------------------------------------------------------------

#: Heavy-tailed priors of E1 and E4: one Student-t coordinate, df 3 (no fourth moment) and df 5, at scale
#: sqrt((df - 2)/df), so variance 1 like the Gaussian N(0, 1) of both experiments: linear shrinkage has the same
#: risk on the three, and what differs is the tails.
STUDENT_T_PRIORS = {
    f"student-t{df}": (f"Student-t, df {df}, variance 1",
                       {"family": "StudentT", "df": float(df), "scale": math.sqrt((df - 2) / df), "dim": 1})
    for df in (3, 5)
}


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


def student_table_configs(quick: bool) -> dict[str, dict]:
    """E4 on the Student-t priors: the table's design (:func:`table_configs`)."""
    return {part: _table_config(part, prior, quick) for part, (_, prior) in STUDENT_T_PRIORS.items()}


def _student_label(part: str) -> str:
    return STUDENT_T_PRIORS[part.removesuffix("-log")][0]


def _horizon_times(factor):
    """Every Stage-1 horizon ``factor`` times the leading-order ``T*``."""
    return lambda real: lambda sigma2, h2: factor * real(sigma2, h2)


_STUDENT_E1_DESIGN = ("two 1-D Student-t priors, df 3 and df 5, scale sqrt((df - 2)/df) (variance 1), sigma2 = 0.5, "
                      "h2 = (4 sigma2/e)/log N, T = T*, N = 256, 1024, 4096, 16384 quick (4 seeds), and 65536, 131072 "
                      "full (6 seeds)")


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
    rows = recovery_data(_run(student_recovery_configs(ctx.quick), ctx))
    figs = _plot("E1", ctx)
    passed, text, data = _per_seed_slope_decision(rows, "two-stage", label=_student_label, fresh_decides=True)
    n_max = {part: max(r["n"] for r in part_rows) for part, part_rows in rows.items()}
    return Evidence(
        passed=passed,
        kind="rate",
        summary=f"gap ~ N^p, slope fitted per seed over N (up to {n_max}), t-interval of the mean over seeds: {text} "
        "(passes when every per-seed interval, in-sample and on fresh queries, lies below 0)",
        data={**data, "n_max": n_max},
        figures=figs,
    )


@check(
    "H1", "E1, heavy tails, floor: the gap on Student-t priors (df 3 and 5) along h2 = (4 sigma2/e)/log N does not "
    "stall at 3% of the Bayes risk, in-sample and for fresh queries",
    criterion=f"{_STUDENT_E1_DESIGN}: gap(N) = c + b N^-a is fitted to the mean gap over seeds (weights 1/variance "
    "over seeds; a profiled over 0.25, 0.30, .., 2.00), and the 95% percentile interval of the floor c comes from 2000 "
    "resamples of the seeds (shared across N, each refitted); floor alternative: 3% of the Bayes risk (MMSE, by "
    "quadrature); passes when the upper end of c's interval lies below half of it, 1.5% of the MMSE, for both priors, "
    "both for the in-sample gap and for the gap on fresh noisy queries (new draws from the prior, not in the context)",
    replication="subsample",
    alternatives=[
        alternative("gap with a floor of 3% of the Bayes risk",
                    "every two-stage gap (in-sample and fresh queries) plus 0.03 x MMSE",
                    swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _with_floor), kind="data"),
        alternative("no Stage 1 (depth unnecessary)", "two-stage rows replaced by the Stage-2-alone rows",
                    swap("attneb.proofs_check.convergence_checks:recovery_data", lambda real: _two_stage_is_l0), kind="data"),
    ],
    note="registered under C8 when first committed (1fcc984); after the full runs it moved, criterion unchanged, "
    "to the question H1: the paper proves recovery for well-behaved priors, and whether it reaches heavy tails is "
    "asked, not claimed. The floor check of the three E1 priors, with its thresholds, on the Student-t priors; criterion fixed "
    "before the first full run. Fails in both modes on df 3's fresh queries: in full mode c's upper end is 6.3% of the "
    "MMSE on seeds 0-5 (3.0% over the 24-seed pool), and the mean gap at N = 131072 is 2.2% of the MMSE over the pool "
    "(sd 3.7% over seeds) against 0.19% in-sample: a decay like N^-1/3 with that spread is not told apart from a floor "
    "of 3% by N <= 131072. Size 0.68 full (200 subsets of 24 seeds), 0.95 quick (40 of 12); power 1.0 against the 3% "
    "floor and against no Stage 1 in both modes. df 5 passes (upper ends 0.05-0.16% of the MMSE)",
)
def recovery_floor_heavy_tails(ctx: Context) -> Evidence:
    rows = recovery_data(_run(student_recovery_configs(ctx.quick), ctx))
    floors = recovery_floors(rows)
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
        summary=f"gap = c + b N^-a, 95% bootstrap intervals over seeds: {text} (passes when every upper end lies below "
        f"{100 * threshold:g}% of the MMSE; floor alternative {100 * FLOOR_OF_MMSE:g}%)",
        data={"floors": floors, "verdicts": verdicts, "threshold_of_mmse": threshold},
    )


@check(
    "C9", "E4, heavy tails: two-stage beats Stage 2 alone (L = 0) at the largest N on Student-t priors, df 3 and 5, "
    "paired over seeds, in-sample and on fresh queries (the baselines tabulated, not decided)",
    criterion="two 1-D Student-t priors, df 3 and df 5, scale sqrt((df - 2)/df) (variance 1), sigma2 = 0.5, h2 = "
    "(4 sigma2/e)/log N, T = T*, 10 seeds, at the largest N (1024 quick, 16384 full): the paired 95% t-interval over "
    "seeds of MSE(L = 0) - MSE(two-stage) lies above 0 on both priors, both in-sample and for fresh noisy queries (new "
    "draws from the prior, not in the context)",
    replication="subsample",
    alternatives=_E4_ALTERNATIVES,
    note="a new check rather than two more priors in 'E4: two-stage beats Stage 2 alone ...', whose decision (six "
    "priors) it leaves as it was; criterion fixed before the first full run. Intervals over seeds: with df 3 the "
    "squared error of linear shrinkage, ~ x^2 / 9 for large x, has no variance, so its column's intervals are "
    "optimistic; the decided difference pairs two estimators that both leave far tokens nearly where they are. Size "
    "0.05 quick (40 subsets of a 30-seed pool), 0 full (200 of 40); power 1.0 against every alternative in both modes. "
    "Added on a referee's report: the pilot ran E4's quick design itself, so the quick decision is the pilot's data; "
    "and like C9 the check does not pin the depth (it passes with T = 0.25 T*, quick, df 3: 0.0060 [0.0054, 0.0066])",
)
def estimator_table_heavy_tails(ctx: Context) -> Evidence:
    configs = student_table_configs(ctx.quick)
    rows = table_data(_run(configs, ctx), lambda: _run(spare_configs(configs, ctx.quick), ctx))
    return _depth_benefit_evidence(rows, STUDENT_T_PRIORS, _plot("E4", ctx))


# --------------------------------------------------------------------------------------------
# E5: clean context (G3)
# --------------------------------------------------------------------------------------------


def clean_data(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The E5 rows as the decisions see them (the identity; a data alternative swaps this function)."""
    return rows_by_part


def _clean_with_floor(rows_by_part: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """E5 data alternative: every gap (in-sample and fresh queries) plus CLEAN_FLOOR_OF_MMSE x the Bayes risk."""
    return {part: [{**r, "gap": r["gap"] + CLEAN_FLOOR_OF_MMSE * r["mmse"],
                    "oos_gap": r["oos_gap"] + CLEAN_FLOOR_OF_MMSE * r["mmse"]} for r in rows]
            for part, rows in rows_by_part.items()}


@study("E5", "one attention step over N clean draws: gap to Bayes vs N (G3)")
def draw_clean(store: ResultStore, quick: bool, folder: Path) -> Path:
    rows = _stored(clean_configs(quick), store)
    return figures.plot_clean_context(_labelled(rows, RECOVERY_PRIORS), folder)


_E5_DESIGN = ("three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
              "4096 quick with 4 seeds; to 16384 full with 8)")
_E5_SLOPE_ALTERNATIVES = [alternative("gap with a floor of 0.4% of the Bayes risk", "every gap plus 0.004 x MMSE",
                                      swap("attneb.proofs_check.convergence_checks:clean_data", lambda real: _clean_with_floor),
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
    rows = clean_data(_run(clean_configs(ctx.quick), ctx))
    figs = _plot("E5", ctx)
    passed, text, data = _per_seed_slope_decision(rows, "clean-context", label=lambda part: RECOVERY_PRIORS[part][0])
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
    rows = clean_data(_run(clean_configs(ctx.quick), ctx))
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


@check(
    "G3", "E5, floor: the clean-context gap does not stall at 0.4% of the Bayes risk, in-sample and for fresh queries",
    criterion="three priors, sigma2 = 0.5, one attention step of bandwidth sigma2 over N clean draws (N = 256, 1024, "
    "4096 quick with 4 seeds; to 16384 full with 8): gap(N) = c + b/N (the 1/N rate of a kernel mean over N draws at a "
    "fixed bandwidth) is fitted to the mean gap over seeds (weights 1/variance over seeds) and c's 95% percentile "
    "interval comes from 2000 resamples of the seeds (shared across N); floor alternative: 0.4% of the Bayes risk "
    "(MMSE); passes when, for every prior and both the in-sample gap and the gap on fresh noisy queries (new draws, not "
    "in the context), the upper end of c's interval lies below half of it, 0.2% of the MMSE",
    replication="subsample",
    alternatives=[alternative("gap with a floor of 0.4% of the Bayes risk", "every gap plus 0.004 x MMSE",
                              swap("attneb.proofs_check.convergence_checks:clean_data", lambda real: _clean_with_floor),
                              kind="data")],
    note="resolution: floors of 0.2-0.4% of the Bayes risk, a few times the gap at the largest N (the gaps of 4 seeds "
    "scatter by up to 100% at N = 4096)",
)
def clean_context_floor(ctx: Context) -> Evidence:
    rows = clean_data(_run(clean_configs(ctx.quick), ctx))
    threshold = CLEAN_FLOOR_OF_MMSE / 2
    verdicts, fits = {}, {}
    for part, part_rows in rows.items():
        mmse = part_rows[0]["mmse"]
        for column in ("gap", "oos_gap"):
            n, _, table = _table(part_rows, column)
            fit = {**floor_fit(n, table, exponents=(1.0,)), "mmse": mmse}
            fits[f"{part}, {column}"] = fit
            verdicts[f"{part}, {column}"] = fit["ci"][1] < threshold * mmse
    text = "; ".join(f"{k}: c = {f['c']:.3g} [{f['ci'][0]:.3g}, {f['ci'][1]:.3g}] (= {f['c'] / f['gap_at_largest_n']:.2f} "
                     f"[{f['ci'][0] / f['gap_at_largest_n']:.2f}, {f['ci'][1] / f['gap_at_largest_n']:.2f}] x the gap "
                     f"at the largest N; upper end {100 * f['ci'][1] / f['mmse']:.2g}% of MMSE)" for k, f in fits.items())
    return Evidence(passed=all(verdicts.values()), kind="interval",
                    summary=f"gap = c + b/N, 95% bootstrap intervals over seeds: {text} (passes when every upper end "
                    f"lies below {100 * threshold:g}% of the MMSE; floor alternative {100 * CLEAN_FLOOR_OF_MMSE:g}%)",
                    data={"fits": fits, "verdicts": verdicts, "threshold_of_mmse": threshold})
