"""Simulating a pool of seeds and deciding on a subset: the helpers every experiment's checks share.

An experiment is a set of declarative sweeps (:mod:`attneb.numerics.sweep`) whose rows land in the
report folder's SQLite store as they finish, so an interrupted ``attneb verify`` resumes where it
stopped. Its checks are subsampled (``replication="subsample"``): :func:`run_pooled` simulates the
pool of seeds :meth:`~attneb.proofs_check.engine.registry.Context.pool_seeds` and returns, like every
figure, only the rows of this replicate's own seeds
(:meth:`~attneb.proofs_check.engine.registry.Context.subsample_seeds`), so that a power analysis can
decide again and again on subsets of one stored pool. The statistics the decisions share live here
too: per-seed log-log slopes with their Student-t interval (:func:`seed_slopes`), and the floor of
``gap = c + b N^-a`` with a bootstrap interval over seeds (:func:`floor_fit`; :func:`floor_fit_t`, its calibrated
successor for a new check, refits every resample's weights and takes a Student-t interval of the bootstrap standard
error, ``benchmarks/calibration.py``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy import stats as sstats

from attneb.numerics import stats
from attneb.numerics.sweep import ResultStore

from .registry import Context
from .studies import STUDIES, run_configs, stored_rows

BOOTSTRAP = 2000


#: E1: exponents tried for the power-law part of gap = c + b N^-a.
FLOOR_EXPONENTS = tuple(round(0.25 + 0.05 * i, 2) for i in range(36))


def seed_range(config: dict) -> tuple[int, int]:
    seeds = config["seeds"]
    return int(seeds.get("start", 0)), int(seeds["count"])


def with_seed_count(configs: dict[str, dict], count: int, parts=None) -> dict[str, dict]:
    """``configs`` with seeds ``0 .. count - 1`` for the configs of ``parts`` (default: every one) that it holds."""
    return {part: {**config, "seeds": {"start": 0, "count": count}} if parts is None or part in parts else config
            for part, config in configs.items()}


def intended_seeds(config: dict) -> set[int]:
    """The seeds a figure (and ``attneb verify``'s decision) uses: the config's own, not a power pool's."""
    start, count = seed_range(config)
    return set(range(start, start + count))


def keep_seeds(rows: list[dict], seeds: set[int]) -> list[dict]:
    return [r for r in rows if r["seed"] in seeds]


def run_pooled(configs: dict[str, dict], ctx: Context) -> dict[str, list[dict]]:
    """Simulate the pool of seeds of every config (resuming the store); rows of this replicate's seeds, by part.

    The rows of the pool are cached in ``ctx.cache`` so that decisions repeated under other
    theories (and replicates) do not read the store again; the key holds each config's name and
    seed range, so that two designs of one experiment with different seeds (a floor check's 8
    seeds beside a slope check's 4) each get their own pool.
    """
    key = ("convergence-rows", tuple((c["name"], seed_range(c)) for c in configs.values()), ctx.pool,
           str(ctx.store_path))
    if key not in ctx.cache:
        pooled = []
        for config in configs.values():
            start, count = seed_range(config)
            pooled.append({**config, "seeds": ctx.pool_seeds(count, start)})
        rows = run_configs(pooled, ctx.store_path, workers=ctx.workers)
        ctx.cache[key] = {part: rows[config["name"]] for part, config in configs.items()}
    out = {}
    for part, config in configs.items():
        start, count = seed_range(config)
        out[part] = keep_seeds(ctx.cache[key][part], set(ctx.subsample_seeds(count, start)))
    return out


def stored(configs: dict[str, dict], store: ResultStore) -> dict[str, list[dict]]:
    """Rows of the configs' own seeds (a power analysis may have stored more)."""
    rows = stored_rows(store, [c["name"] for c in configs.values()])
    return {part: keep_seeds(rows[config["name"]], intended_seeds(config)) for part, config in configs.items()}


def stored_if_run(configs: dict[str, dict], store: ResultStore) -> dict[str, list[dict]]:
    """Rows of the configs' own seeds, for the configs the store holds (a figure drawn before their check ran
    leaves them out)."""
    rows = {part: keep_seeds(store.rows(config["name"]), intended_seeds(config)) for part, config in configs.items()}
    return {part: part_rows for part, part_rows in rows.items() if part_rows}


def plot_study(name: str, ctx: Context) -> tuple[str, ...]:
    """Draw and save study ``name``'s figures into the report folder, except inside a power analysis.

    Returns the PNGs' file names (:attr:`attneb.proofs_check.engine.registry.Evidence.figures`), empty in a power
    analysis.
    """
    if ctx.power:
        return ()
    return tuple(png.name for png in STUDIES[name].plot(ctx.store_path, ctx.out, quick=ctx.quick))


def resample_weights(seeds: int, seed: int = 0) -> np.ndarray:
    """``(BOOTSTRAP, seeds)`` weights of bootstrap resamples of the seeds (each row sums to 1)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, seeds, (BOOTSTRAP, seeds))
    weights = np.zeros((BOOTSTRAP, seeds))
    np.add.at(weights, (np.repeat(np.arange(BOOTSTRAP), seeds), picks.ravel()), 1.0)
    return weights / seeds


def seed_table(rows: list[dict], column: str, x: str = "n") -> tuple[np.ndarray, list[int], np.ndarray]:
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
    means = np.vstack([table.mean(axis=0), resample_weights(seeds) @ table])  # (1 + B, K)
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


def _positive_variances(var: np.ndarray) -> np.ndarray:
    """Each row's zero variances replaced by its smallest positive one (1 where none is), as :func:`floor_fit` does."""
    var = np.array(var, dtype=float)
    positive = var > 0
    fill = np.where(positive, var, np.inf).min(axis=1)
    fill = np.where(np.isfinite(fill), fill, 1.0)
    return np.where(positive, var, fill[:, None])


def floor_resamples(n: np.ndarray, table: np.ndarray, exponents=FLOOR_EXPONENTS, *, reweight: bool = True
                    ) -> tuple[np.ndarray, np.ndarray]:
    r"""The floor ``c`` and exponent ``a`` of :func:`floor_fit`'s model, on the data and on every bootstrap resample.

    Each fit minimises, over ``a`` in ``exponents`` and ``(c, b)``,

    .. math::

        \sum_i w_i\,\bigl(\bar g_i - c - b N_i^{-a}\bigr)^2, \qquad w_i = 1 / s_i^2,

    :math:`\bar g_i` the mean gap over seeds at :math:`N_i` and :math:`s_i^2` its variance over seeds (ddof 1; a
    zero variance replaced by the smallest positive one), for each ``a`` in closed form (weighted least squares of
    a line in :math:`x = N^{-a}`). The resamples are :func:`resample_weights`' :data:`BOOTSTRAP` resamples of the
    seeds, shared across ``N``. With ``reweight`` (the default) every resample's weights are its own variances,
    :math:`s^{*2}_i = \tfrac{S}{S-1}\bigl(\sum_s W_s g_{si}^2 - (\sum_s W_s g_{si})^2\bigr)` for resample
    weights :math:`W_s`; without, the data's weights serve every resample, as in :func:`floor_fit` (whose interval
    is the percentiles of ``c[1:]`` computed that way).

    Parameters
    ----------
    n : array_like, shape (K,)
        Batch sizes.
    table : ndarray, shape (S, K)
        ``table[s, i]``: the gap of seed ``s`` at ``n[i]``.
    exponents : sequence of float
        Exponents ``a`` profiled over.
    reweight : bool
        Re-estimate the weights on every resample.

    Returns
    -------
    c, a : ndarray, shape (1 + BOOTSTRAP,)
        Entry 0 on the data, entries ``1..`` on the resamples.
    """
    n = np.asarray(n, dtype=float)
    table = np.asarray(table, dtype=float)
    seeds = table.shape[0]
    resample = resample_weights(seeds)
    means = np.vstack([table.mean(axis=0), resample @ table])  # (1 + B, K)
    own = _positive_variances(table.var(axis=0, ddof=1)[None, :])
    if reweight:
        var = np.maximum(resample @ table**2 - means[1:] ** 2, 0.0) * seeds / (seeds - 1)
        w = 1.0 / np.vstack([own, _positive_variances(var)])
    else:
        w = np.broadcast_to(1.0 / own, means.shape)
    best = np.full(len(means), np.inf)
    c = np.zeros(len(means))
    a_best = np.zeros(len(means))
    sw, sy = w.sum(axis=1), (w * means).sum(axis=1)
    for a in exponents:
        x = n ** -a
        sx, sxx, sxy = w @ x, w @ (x * x), (w * means) @ x
        slope = (sw * sxy - sx * sy) / (sw * sxx - sx**2)
        cc = (sy - slope * sx) / sw
        sse = (w * (means - cc[:, None] - slope[:, None] * x) ** 2).sum(axis=1)
        better = sse < best
        best[better], c[better], a_best[better] = sse[better], cc[better], a
    return c, a_best


#: How a floor decision names the intervals of :func:`floor_fit` and of :func:`floor_fit_t`.
FLOOR_FIT_INTERVAL = "95% bootstrap percentile intervals over seeds"
FLOOR_FIT_T_INTERVAL = "95% Student-t intervals from bootstrap standard errors over seeds"


def floor_fit_t(n: np.ndarray, table: np.ndarray, exponents=FLOOR_EXPONENTS, level: float = 0.95) -> dict:
    r"""The floor ``c`` of ``gap(N) = c + b N^-a`` with a Student-t interval from a bootstrap standard error.

    .. math::

        c \pm t_{S-1,\,(1+\ell)/2}\,\sqrt{S/(S-1)}\;\mathrm{sd}_B(c^*)

    ``c`` is :func:`floor_fit`'s estimate (the fit of the mean gap over the ``S`` seeds, weights 1/variance over
    seeds, ``a`` profiled over ``exponents``), :math:`\mathrm{sd}_B(c^*)` the standard deviation of ``c`` over the
    :data:`BOOTSTRAP` resamples of the seeds, each refitted with its own weights and exponent
    (:func:`floor_resamples`), :math:`\sqrt{S/(S-1)}` undoes the bootstrap's :math:`(S-1)/S` shrinkage of a
    mean's variance, and :math:`S - 1` degrees of freedom: for the mean of i.i.d. normal values it is the Student-t
    interval (as :math:`B \to \infty`). It replaces :func:`floor_fit`'s percentile interval, which over 4-8 seeds
    is too narrow (``benchmarks/calibration.py``: 0.68-0.80 coverage at a nominal 0.95 on data shaped like E1's, E5's
    and H1's), partly as a percentile interval of so few seeds is (about 0.80 for a mean of 4 normal values), partly
    as its weights, estimated from the same seeds, are held fixed across the resamples. ``E2``'s extrapolated
    minimiser uses the same construction (:func:`attneb.proofs_check.topics.depth_noise.depth_minimisers`).

    Parameters
    ----------
    n : array_like, shape (K,)
        Batch sizes.
    table : ndarray, shape (S, K)
        ``table[s, i]``: the gap of seed ``s`` at ``n[i]``; at least two seeds.
    exponents : sequence of float
        Exponents ``a`` profiled over.
    level : float
        Two-sided level of the interval.

    Returns
    -------
    dict
        ``c``, ``ci`` (``[low, high]``), ``a``, ``gap_at_largest_n`` as :func:`floor_fit`, and ``se``, the standard
        error :math:`\sqrt{S/(S-1)}\,\mathrm{sd}_B(c^*)`.
    """
    table = np.asarray(table, dtype=float)
    seeds = table.shape[0]
    if seeds < 2:
        raise ValueError(f"table has {seeds} seed(s); a t interval needs at least 2")
    c, a = floor_resamples(n, table, exponents, reweight=True)
    se = float(c[1:].std(ddof=1) * np.sqrt(seeds / (seeds - 1)))
    half = float(sstats.t.ppf(0.5 + level / 2, seeds - 1)) * se
    return {"c": float(c[0]), "ci": [float(c[0]) - half, float(c[0]) + half], "a": float(a[0]),
            "gap_at_largest_n": float(table[:, -1].mean()), "se": se}


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


def interval_list(iv) -> list | None:
    return None if iv is None else [iv.estimate, iv.low, iv.high]


def interval_text(iv) -> str:
    return "no interval (fewer than two seeds with two N)" if iv is None else str(iv)


def per_seed_slope_decision(rows: dict[str, list[dict]], estimator: str, label=lambda part: part,
                             fresh_decides: bool = False):
    """``(passed, text, data)`` of a per-seed slope check (E1, E5): every decided interval below 0.

    The t-interval over seeds of the per-seed log-log slopes of the in-sample gap decides; those of
    the gap on fresh queries (which decide too when ``fresh_decides``) and the slope pooled over
    (N, seed) points are reported beside it.
    """
    fits = seed_slopes(rows, estimator)
    oos = seed_slopes(rows, estimator, column="oos_gap")
    pooled = gap_slopes(rows, estimator)
    text = "; ".join(f"{label(part)}: {interval_text(fit['interval'])} (fresh queries "
                     f"{interval_text(oos[part]['interval'])}; pooled over (N, seed) points {pooled[part].slope})"
                     for part, fit in fits.items())
    decided = [*fits.values(), *(oos.values() if fresh_decides else ())]
    passed = bool(fits) and all(f["interval"] is not None and f["interval"].high < 0 for f in decided)
    data = {"slopes": {p: interval_list(f["interval"]) for p, f in fits.items()},
            "oos_slopes": {p: interval_list(f["interval"]) for p, f in oos.items()},
            "per_seed": {p: {str(k): v for k, v in f["slopes"].items()} for p, f in fits.items()},
            "pooled_slopes": {p: [f.slope.estimate, f.slope.low, f.slope.high] for p, f in pooled.items()}}
    return passed, text, data
