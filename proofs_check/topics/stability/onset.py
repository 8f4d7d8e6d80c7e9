r"""E3: finite-N Stage 1 against the exact Gaussian mean field and the linear stability analysis (S1).

Random tokens from a Gaussian prior (tau2 = 1, noise sigma2 = 0.5) flow through Euler layers for
growing ``N``. Two sets of runs are records of the report folder's store, written as each finishes,
so an interrupted ``verify`` resumes:

* **onset runs** (``E3-onset-<mode>``, one per ``h2``, ``N`` and seed; the gating check decides on seeds
  from 1000, its superseded first version on seeds from 100): the structure factor
  :math:`S(k)` on ``k / k* in [0.5, 2]`` every two layers, until the tokens clump. They test
  (a) the law :math:`N_c = e^{2\sigma^2/(e h_2)}`, i.e. that finite-``N`` fluctuations reach a fixed
  size at a depth growing like :math:`\log N / (2\lambda^*)`, :math:`\lambda^* = 2/e` whatever ``h2``,
  measured at three ``sigma2/h2``, to within 10% of the linear theory's coefficient; (b) that the
  clumps form at the scale the linearisation predicts (more of them in the band of modes growing at
  >= 3/4 of the fastest rate than a flat structure factor gives, and their mean wavenumber within
  10% of ``k*``).
* **runs of the first version** (``E3-gaussian-<mode>``, ``h2 = 0.05``): the token variance
  against the exact mean-field layer map, where each ``N`` departs from it, and Stage 2's gap at
  ``T*`` and ``T_G``; their band test is kept as a superseded check.

Decisions and the figure use the records of the seeds they are meant to use (a power analysis
stores a larger pool of seeds and decides on subsets, :meth:`Context.subsample_seeds`).
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy import optimize
from scipy import stats as scipy_stats
from scipy.special import logsumexp

from attneb.numerics import meanfield, stats
from attneb.numerics.estimators import StageTwoOnly
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Gaussian
from attneb.numerics.sweep import ResultStore, canonical_json
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.replication import plot_study
from attneb.proofs_check.engine.studies import computed, mode_name, store_missing
from attneb.theory import depth_noise, stability

SIGMA2, TAU2, H2, ETA = 0.5, 1.0, 0.05, 0.05
EVERY = 5
#: Modes growing at >= this fraction of the fastest rate make up the predicted clump band.
BAND_FRACTION = 0.75
#: A run has clumped once the smoothed structure factor reaches N / CLUMP_DIVISOR.
CLUMP_DIVISOR = 20
#: Relative difference from the mean-field variance map (started at the run's own variance)
#: beyond which a run has departed from mean field.
DEPARTURE = 0.05
K_GRID = np.linspace(0.5, 2.0, 61)
SMOOTH = 5


def sizes(quick: bool) -> tuple[list[int], int]:
    """Token counts and seeds per count (from N = 4096 on, the layers run on the binned path)."""
    if quick:
        return [250, 500, 1000, 2000, 8000, 32000], 2
    return [250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000], 3


def prediction() -> dict:
    """What theory says: the mean-field variance path, T*, T_G, k*, 2 lambda* and the clump band."""
    k_star, lam_star = stability.fastest_mode(H2)
    T_G = depth_noise.gaussian_horizon(SIGMA2, TAU2, H2)
    layers = int(np.ceil(1.2 * T_G / ETA))

    def excess(k):
        return stability.growth_rate(k, H2) - BAND_FRACTION * lam_star

    low, high = 1e-3 * k_star, 10 * k_star
    band = (optimize.brentq(excess, low, k_star) if excess(low) < 0 else low,
            optimize.brentq(excess, k_star, high) if excess(high) < 0 else high)
    return {
        "layers": layers, "depths": list(ETA * np.arange(layers + 1)),
        "variances": depth_noise.gaussian_variance_map(TAU2 + SIGMA2, H2, ETA, layers),
        "tau2": TAU2, "T_star": depth_noise.leading_horizon(SIGMA2, H2), "T_G": T_G,
        "k_star": k_star, "rate": 2 * lam_star, "band": list(band),
        "N_c": stability.token_scaling(SIGMA2, H2),
    }


def _smoothed(values: np.ndarray) -> np.ndarray:
    return np.convolve(values, np.ones(SMOOTH) / SMOOTH, mode="same")


def run_one(n: int, seed: int, pred: dict) -> dict:
    """One finite-N run: variance and fluctuation paths, clump scale, departure depth, Stage 2 gaps."""
    prior = Gaussian([0.0], TAU2)
    _, noisy = draw_batch(prior, SIGMA2, n, seed)
    k = pred["k_star"] * K_GRID
    stops = {"T_star": int(round(pred["T_star"] / ETA)), "T_G": int(round(pred["T_G"] / ETA))}
    traj = meanfield.token_trajectory(noisy, H2, pred["layers"], eta=ETA, every=EVERY, k=k, keep=stops.values(),
                                      backend="auto")
    in_band = (k >= pred["band"][0]) & (k <= pred["band"][1])
    band_structure = traj.structure[:, in_band].mean(axis=1)
    smooth = np.array([_smoothed(s) for s in traj.structure])
    clumped = np.flatnonzero(smooth.max(axis=1) >= n / CLUMP_DIVISOR)
    peak_k = float(k[np.argmax(smooth[clumped[0]])]) if clumped.size else None
    own = depth_noise.gaussian_variance_map(float(traj.variances[0]), H2, ETA, pred["layers"])
    mf = np.array(own)[np.rint(traj.depths / ETA).astype(int)]
    off = np.flatnonzero(np.abs(traj.variances / mf - 1) > DEPARTURE)
    bayes = prior.posterior_mean(noisy, SIGMA2)
    stage_two = {name: StageTwoOnly(SIGMA2, backend="auto").fit(traj.tokens[layer]).denoise(noisy)
                 for name, layer in stops.items()}
    gaps = {f"gap_{name}": float(np.mean((est - bayes) ** 2)) for name, est in stage_two.items()}
    return {
        "n": n, "seed": seed, "depths": traj.depths, "variances": traj.variances,
        "band_structure": band_structure, "peak_k": peak_k,
        "clump_depth": float(traj.depths[clumped[0]]) if clumped.size else None,
        "departure_depth": float(traj.depths[off[0]]) if off.size else None, **gaps,
    }


def first_version_runs(ctx: Context) -> list[dict]:
    """The runs of the first version (h2 = 0.05) of this mode's sizes: computed where the store lacks them."""
    pred = prediction()
    ns, seeds = sizes(ctx.quick)
    experiment = mode_name("E3", "gaussian", ctx.quick)
    with ResultStore(ctx.store_path) as store:
        store_missing(store, experiment, [(n, seed, pred) for n in ns for seed in range(seeds)], run_one,
                      lambda n, seed, _: _key(n, seed), ctx.workers)
        return [r for r in stored_runs(store, ctx.quick) if r["n"] in ns and r["seed"] < seeds]


def growth_rate_fit(runs: list[dict]) -> stats.SlopeFit | None:
    """Rate of ``log S`` near k* over depth, in its linear window (``2 <= S <= N/50``), pooled over runs.

    Each run contributes its points after removing its own intercept (a fixed effect), so the
    slope is the within-run growth rate; ``None`` when fewer than three points qualify.
    """
    t_all, y_all = [], []
    for r in runs:
        S = np.asarray(r["band_structure"])
        window = (S >= 2.0) & (S <= r["n"] / 50)
        if window.sum() >= 2:
            t, y = np.asarray(r["depths"])[window], np.log(S[window])
            t_all.append(t - t.mean())
            y_all.append(y - y.mean())
    if sum(len(t) for t in t_all) < 3:
        return None
    return stats.linear_fit(np.concatenate(t_all), np.concatenate(y_all))


def _key(n: int, seed: int) -> str:
    config = {"study": "E3", "n": n, "seed": seed, "backend": "auto", "sigma2": SIGMA2, "tau2": TAU2, "h2": H2, "eta": ETA,
              "every": EVERY, "k": K_GRID, "smooth": SMOOTH, "clump": CLUMP_DIVISOR, "band": BAND_FRACTION,
              "departure": DEPARTURE}
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def stored_runs(store: ResultStore, quick: bool) -> list[dict]:
    runs = list(store.records(mode_name("E3", "gaussian", quick)).values())
    return sorted(runs, key=lambda r: (r["n"], r["seed"]))


#: Bandwidths of the onset runs: sigma2 / h2 = 10, 20, 40 (N_c = 1.6e3, 2.5e6, 6e12).
ONSET_H2 = (0.05, 0.025, 0.0125)
#: Layers between samples of S(k), and the most layers a run takes (depth 9: every run clumps before).
ONSET_EVERY, ONSET_MAX_LAYERS = 2, 180
#: Seeds of the onset runs start here (seeds 0-9 sized the design in a pilot; the check uses fresh ones).
ONSET_SEED_START = 100
#: The fluctuation power near k*: the mean of S over |k/k* - 1| <= ONSET_HALF_BAND (relative to depth 0) ...
ONSET_HALF_BAND = 0.2
#: ... has reached N * ONSET_LEVEL at the departure depth t_c (density fluctuations of about 10%: linear).
ONSET_LEVEL = 1 / 300
#: Level of the one-sided binomial test of "more clumps in the band than a flat structure factor gives".
BINOMIAL_LEVEL = 0.01
#: Decimals of log S kept in a record.
LOG_DECIMALS = 4

ONSET_CRITERION = (
    "Onset runs: Gaussian prior tau2 = 1, sigma2 = 0.5, Euler layers eta = 0.05, h2 in {0.05, 0.025, 0.0125} "
    "(sigma2/h2 = 10, 20, 40), N in {1024, 2048, ..., 65536} (quick: 1024, 4096, 16384), "
    "10 seeds (quick: 5); S(k) on k/k* in [0.5, 2] (61 points) every 2 layers until the 5-point moving average of "
    "S reaches N/20 (clumps) or depth 9. (a) N_c law: t_c = first depth at which the fluctuation power near k* "
    "(mean of S over |k/k* - 1| <= 0.2, divided by its value at depth 0) reaches N/300. Per seed, the "
    "least-squares slope of t_c on log N (one intercept per h2) is the measured coefficient. The linear theory's "
    "prediction is the same slope for the depths t at which mean_band (1 + eta Lambda(k))^(2 t/eta) = N/300, "
    "Lambda(k) = lambda_law growth_rate(k, h2)/growth_rate(k*, h2), lambda_law = log(N_c)/(2 T*) "
    "(stability.token_scaling, depth_noise.leading_horizon, stability.growth_rate, k* from "
    "stability.fastest_mode; the plain value is 1/(2 lambda*) = e/4). (a) passes when the 95% t-interval over "
    "seeds of the coefficient contains the prediction and excludes the prediction with lambda_law halved (fastest "
    "rate 1/e). (b) Clump scale: per run, the wavenumber of the peak of the moving average of S at the first "
    "sample where it reaches N/20. (b) passes when the runs with it in the band where growth_rate >= 3/4 of "
    "growth_rate(k*) are more than a flat structure factor gives (one-sided exact binomial test against the "
    "fraction of grid points in the band, p < 0.01) and the 95% t-interval over runs of the mean clump wavenumber "
    "/ k* lies inside the band. The check passes when (a) and (b) pass."
)


#: Seeds of the confirmatory onset runs start here: seeds 100-139 (full) and 100-114 (quick) were used to
#: choose the criteria of CONFIRMATORY_CRITERION, which were fixed before any run of these seeds.
ONSET_CONFIRM_SEED_START = 1000
#: (a) of the confirmatory check: the coefficient's interval must lie within this fraction of the prediction.
#: On the stored pools (200 subsets of 10 of 40 seeds, full; of 5 of 15, quick) the coefficient is
#: +2.3% [+1.0, +3.6] (full) above the prediction, interval bounds from -1.4% to +8.0%: at +-10% the
#: truth passes every subset (at +-7.5%: 98.5% full, 97.5% quick; at +-5%: 63%, 29%).
ONSET_LAW_RTOL = 0.10
#: (b) of the confirmatory check: the interval of the mean clump wavenumber / k* must lie in this range.
#: On the stored pools it is 1.020 +- 0.023 (full, 210 runs) and 1.004 +- 0.054 (quick, 45 runs): the
#: truth passes 100% (full) and 97% (quick) of the subsets; measured wavenumbers x 0.9 pass 43% (full).
ONSET_SCALE_BAND = (0.9, 1.1)

CONFIRMATORY_CRITERION = (
    "Onset runs as in 'E3: onset of finite-N fluctuations' (same design, departure depth t_c, coefficient, "
    "linear theory's prediction and clump wavenumbers), on seeds 1000 on (seeds 100-139 chose this criterion). "
    "(a) N_c law: passes when the 95% t-interval over seeds of the coefficient lies within +-10% of the "
    "prediction and excludes the prediction with lambda_law halved (fastest rate 1/e). (b) Clump scale: passes "
    "when the runs with their clump wavenumber in the band where growth_rate >= 3/4 of growth_rate(k*) are more "
    "than a flat structure factor gives (one-sided exact binomial test against the fraction of grid points in "
    "the band, p < 0.01) and the 95% t-interval over runs of the mean clump wavenumber / k* lies within "
    "[0.9, 1.1]. t_c is interpolated linearly in log band power between the samples every 2 layers; a run that never "
    "reaches the departure level has no coefficient, which fails (a); the binomial test counts every run, the "
    "wavenumber interval the runs that clumped. The check passes when (a) and (b) pass."
)


def onset_design(quick: bool) -> dict:
    """Bandwidths, token counts and seeds of the onset runs."""
    if quick:
        return {"h2": list(ONSET_H2), "n": [1024, 4096, 16384], "seeds": 5}
    return {"h2": list(ONSET_H2), "n": [1024, 2048, 4096, 8192, 16384, 32768, 65536], "seeds": 10}


def _clumped(n: int):
    """``stop`` of :func:`attneb.numerics.meanfield.token_trajectory`: the moving average of S has reached N/CLUMP_DIVISOR."""
    return lambda depth, variance, row: bool(row.size) and _smoothed(row).max() >= n / CLUMP_DIVISOR


def run_onset(h2: float, n: int, seed: int) -> dict:
    """One onset run: S(k) on ``k* x K_GRID`` every ONSET_EVERY layers until the tokens clump."""
    _, noisy = draw_batch(Gaussian([0.0], TAU2), SIGMA2, n, seed)
    k = float(stability.fastest_mode(h2)[0]) * K_GRID
    traj = meanfield.token_trajectory(noisy, h2, ONSET_MAX_LAYERS, eta=ETA, every=ONSET_EVERY, k=k,
                                      backend="auto", stop=_clumped(n))
    log_s = np.round(np.log(np.maximum(traj.structure, 1e-300)), LOG_DECIMALS)
    return {"h2": h2, "n": n, "seed": seed, "depths": traj.depths, "variances": traj.variances, "k": k,
            "log_structure": log_s}


def _onset_key(h2: float, n: int, seed: int) -> str:
    config = {"study": "E3-onset", "h2": h2, "n": n, "seed": seed, "backend": "auto", "sigma2": SIGMA2, "tau2": TAU2,
              "eta": ETA, "every": ONSET_EVERY, "max_layers": ONSET_MAX_LAYERS, "k": K_GRID, "smooth": SMOOTH,
              "clump": CLUMP_DIVISOR, "decimals": LOG_DECIMALS}
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def _peak(run: dict) -> float | None:
    """Clump wavenumber of a run: argmax of the moving average of S at its first sample reaching N/CLUMP_DIVISOR."""
    smooth = np.array([_smoothed(row) for row in np.exp(run["log_structure"])])
    clumped = np.flatnonzero(smooth.max(axis=1) >= run["n"] / CLUMP_DIVISOR)
    return float(run["k"][np.argmax(smooth[clumped[0]])]) if clumped.size else None


def parsed_onset(store: ResultStore, quick: bool) -> list[dict]:
    """Every stored onset run as arrays, with its clump wavenumber (``peak_k``)."""
    runs = []
    for record in store.records(mode_name("E3", "onset", quick)).values():
        run = {**record, "depths": np.asarray(record["depths"]), "variances": np.asarray(record["variances"]),
               "k": np.asarray(record["k"]), "log_structure": np.asarray(record["log_structure"])}
        run["peak_k"] = _peak(run)
        runs.append(run)
    return sorted(runs, key=lambda r: (r["h2"], r["n"], r["seed"]))


def filtered_onset(runs: list[dict], design: dict, seeds) -> list[dict]:
    """The runs of the design's bandwidths and counts, of ``seeds`` (default: the design's first seeds)."""
    seeds = set(range(ONSET_SEED_START, ONSET_SEED_START + design["seeds"]) if seeds is None else seeds)
    return [r for r in runs if r["h2"] in design["h2"] and r["n"] in design["n"] and r["seed"] in seeds]


def clump_wavenumbers(runs: list[dict]) -> list[float | None]:
    """The clump wavenumber of each run, as measured (a data alternative replaces this function)."""
    return [r["peak_k"] for r in runs]


def flat_wavenumbers(runs: list[dict]) -> list[float]:
    """What a flat structure factor (no preferred scale) gives: each run's peak drawn uniformly from its k grid."""
    rng = np.random.default_rng([len(runs), *sorted({int(r["seed"]) for r in runs})])
    return [float(rng.choice(r["k"])) for r in runs]


def clump_band(h2: float) -> tuple[float, float, float]:
    """``(k*, low, high)``: the fastest mode and the band where growth_rate >= BAND_FRACTION growth_rate(k*) (theory at call time)."""
    k_star = float(stability.fastest_mode(h2)[0])
    peak = float(stability.growth_rate(k_star, h2))

    def excess(k):
        return float(stability.growth_rate(k, h2)) - BAND_FRACTION * peak

    low, high = 1e-3 * k_star, 10 * k_star
    return (k_star, optimize.brentq(excess, low, k_star) if excess(low) < 0 else low,
            optimize.brentq(excess, k_star, high) if excess(high) < 0 else high)


def law_rate(h2: float) -> float:
    """The rate lambda_law = log(N_c) / (2 T*) of the N_c law (stability.token_scaling, depth_noise.leading_horizon)."""
    return float(np.log(float(stability.token_scaling(SIGMA2, h2))) / (2 * float(depth_noise.leading_horizon(SIGMA2, h2))))


def _departure_slope(h2: float, ks: np.ndarray, ns, rate_factor: float = 1.0) -> float:
    """Linear theory's slope of t_c on log N for the fluctuation power averaged over the wavenumbers ``ks``."""
    k_star = float(stability.fastest_mode(h2)[0])
    shape = np.array([float(stability.growth_rate(k, h2)) for k in ks]) / float(stability.growth_rate(k_star, h2))
    rates = np.log1p(ETA * rate_factor * law_rate(h2) * shape) / ETA

    def depth(n):
        # log of the band mean of exp(2 rate t), by logsumexp
        return optimize.brentq(lambda t: logsumexp(2 * rates * t) - np.log(rates.size) - np.log(ONSET_LEVEL * n),
                               0.0, 1e3)

    x = np.log(np.asarray(ns, dtype=float))
    t = np.array([depth(n) for n in ns])
    return float(np.polyfit(x, t, 1)[0])


def band_columns(run: dict, k_star: float) -> np.ndarray:
    return np.abs(run["k"] / k_star - 1) <= ONSET_HALF_BAND + 1e-12


def departure_depth(run: dict, k_star: float) -> float | None:
    """t_c of a run: the fluctuation power near ``k_star``, relative to depth 0, reaches N * ONSET_LEVEL."""
    columns = band_columns(run, k_star)
    if not columns.any():
        return None
    power = np.exp(run["log_structure"][:, columns]).mean(axis=1)
    return meanfield.threshold_depth(run["depths"], power / power[0], ONSET_LEVEL * run["n"])


def decide_onset(runs: list[dict], ns) -> dict:
    """(a) the N_c law and (b) the clump scale, on ``runs``, against the theory as it is at call time."""
    h2s = sorted({r["h2"] for r in runs})
    stars = {h2: clump_band(h2) for h2 in h2s}
    depths = {id(r): departure_depth(r, stars[r["h2"]][0]) for r in runs}
    missing = sum(v is None for v in depths.values())
    seeds = sorted({r["seed"] for r in runs})
    per_seed, per_h2 = [], {}
    if not missing:
        for seed in seeds:
            x, y = [], []
            for h2 in h2s:
                mine = [r for r in runs if r["seed"] == seed and r["h2"] == h2]
                xs = np.log([r["n"] for r in mine])
                ys = np.array([depths[id(r)] for r in mine])
                x.append(xs - xs.mean())
                y.append(ys - ys.mean())
            x, y = np.concatenate(x), np.concatenate(y)
            per_seed.append(float(x @ y / (x @ x)))
        for h2 in h2s:
            mine = [r for r in runs if r["h2"] == h2]
            per_h2[h2] = stats.linear_fit(np.log([r["n"] for r in mine]), [depths[id(r)] for r in mine])
    columns = {h2: band_columns(next(r for r in runs if r["h2"] == h2), stars[h2][0]) for h2 in h2s}
    predicted = float(np.mean([_departure_slope(h2, next(r for r in runs if r["h2"] == h2)["k"][columns[h2]], ns)
                               for h2 in h2s]))
    excluded = float(np.mean([_departure_slope(h2, next(r for r in runs if r["h2"] == h2)["k"][columns[h2]], ns, 0.5)
                              for h2 in h2s]))
    coefficient = stats.mean_interval(per_seed) if len(per_seed) >= 2 else None
    law = {
        "coefficient contains the prediction": coefficient is not None and coefficient.low <= predicted <= coefficient.high,
        "coefficient excludes rate 1/e": coefficient is not None and not coefficient.low <= excluded <= coefficient.high,
    }
    # (b) the clump scale
    peaks = clump_wavenumbers(runs)
    scaled, inside, expected = [], 0, []
    for r, k in zip(runs, peaks):
        k_star, low, high = stars[r["h2"]]
        expected.append(float(np.mean((r["k"] >= low) & (r["k"] <= high))))
        if k is not None:
            scaled.append(k / k_star)
            inside += low <= k <= high
    flat_fraction = float(np.mean(expected))
    band = [stars[h2][1] / stars[h2][0] for h2 in h2s[:1]] + [stars[h2][2] / stars[h2][0] for h2 in h2s[:1]]
    p_value = float(scipy_stats.binomtest(inside, len(runs), flat_fraction, alternative="greater").pvalue)
    scale = stats.mean_interval(scaled) if len(scaled) >= 2 else None
    clump = {
        "more clumps in the band than a flat S gives": p_value < BINOMIAL_LEVEL,
        "mean clump wavenumber inside the band": scale is not None and band[0] <= scale.low and scale.high <= band[1],
    }
    law_band = ((1 - ONSET_LAW_RTOL) * predicted, (1 + ONSET_LAW_RTOL) * predicted)
    equivalence = {
        "coefficient within 10% of the prediction": coefficient is not None and law_band[0] <= coefficient.low
        and coefficient.high <= law_band[1],
        "coefficient excludes rate 1/e": law["coefficient excludes rate 1/e"],
    }
    resolved = {
        "more clumps in the band than a flat S gives": clump["more clumps in the band than a flat S gives"],
        "mean clump wavenumber within [0.9, 1.1] k*": scale is not None and ONSET_SCALE_BAND[0] <= scale.low
        and scale.high <= ONSET_SCALE_BAND[1],
    }
    return {"h2": h2s, "depths": {(r["h2"], r["n"], r["seed"]): depths[id(r)] for r in runs}, "missing": missing,
            "per_seed": per_seed, "coefficient": coefficient, "predicted": predicted, "excluded": excluded,
            "plain": 1 / (2 * float(stability.fastest_mode(h2s[0])[1])), "per_h2": per_h2,
            "law": law, "inside": inside, "runs": len(runs), "clumped": len(scaled), "flat_fraction": flat_fraction,
            "p_value": p_value, "scale": scale, "band": band, "clump": clump,
            "passed": all(law.values()) and all(clump.values()),
            "law_band": law_band, "equivalence": equivalence, "resolved": resolved,
            "confirmed": all(equivalence.values()) and all(resolved.values())}


def one_over_e_rate(real):
    return lambda k, h2: h2 * k**2 * np.exp(-h2 * k**2)


def _law_rate_times(factor):
    """N_c = exp(factor x 2 sigma2/(e h2)): the N_c law's rate lambda* multiplied by ``factor``."""
    return lambda real: lambda s2, h2: real(s2, h2) ** factor


def _wavenumbers_times(factor):
    """The measured clump wavenumbers moved to ``factor`` times their value (clumps at another scale)."""
    return lambda real: lambda runs: [None if k is None else factor * k for k in real(runs)]


def _onset_runs(ctx: Context, start: int, seeds: int | None = None) -> tuple[list[dict], dict]:
    """The onset runs this replicate decides on, of seeds from ``start`` (``seeds`` of them, default the design's):
    computed where the store lacks them."""
    design = onset_design(ctx.quick)
    design = design if seeds is None else {**design, "seeds": seeds}
    experiment = mode_name("E3", "onset", ctx.quick)
    pool = ctx.pool_seeds(design["seeds"], start=start)
    with ResultStore(ctx.store_path) as store:
        done = store.record_keys(experiment)
        todo = [(h2, n, seed) for seed in pool for h2 in design["h2"] for n in design["n"]
                if _onset_key(h2, n, seed) not in done]
        for (h2, n, seed), record in computed(todo, run_onset, ctx.workers, experiment):
            store.add_record(experiment, _onset_key(h2, n, seed), record)
        cache_key = ("E3-onset", str(ctx.store_path), ctx.quick, len(done) + len(todo))
        if cache_key not in ctx.cache:
            ctx.cache[cache_key] = parsed_onset(store, ctx.quick)
    return filtered_onset(ctx.cache[cache_key], design, ctx.subsample_seeds(design["seeds"], start=start)), design


def _onset_data(d: dict) -> dict:
    return {"coefficient": None if d["coefficient"] is None else [d["coefficient"].estimate, d["coefficient"].low,
                                                                   d["coefficient"].high],
            "per_seed_coefficients": d["per_seed"], "predicted": d["predicted"], "plain": d["plain"],
            "excluded_rate_one_over_e": d["excluded"],
            "per_h2": {str(h2): [f.slope.estimate, f.slope.low, f.slope.high] for h2, f in d["per_h2"].items()},
            "departure_depths": [[h2, n, seed, t] for (h2, n, seed), t in d["depths"].items()],
            "clump_in_band": d["inside"], "runs": d["runs"], "flat_fraction": d["flat_fraction"],
            "binomial_p": d["p_value"], "band": d["band"],
            "clump_scale": None if d["scale"] is None else [d["scale"].estimate, d["scale"].low, d["scale"].high]}


def _law_text(d: dict, runs: list[dict], design: dict) -> str:
    coefficient = d["coefficient"] if d["coefficient"] is not None else f"undefined ({d['missing']} runs never reach N/300)"
    by_h2 = ", ".join(f"h2={h2:g}: {fit.slope}" + ("" if fit.slope.low <= d["predicted"] <= fit.slope.high
                                                    else " (excludes the prediction)")
                      for h2, fit in d["per_h2"].items())
    return (f"(a) N_c law: depth t_c where the fluctuation power near k* has grown by N/300, against log N "
            f"(h2 = {', '.join(f'{h:g}' for h in d['h2'])}; N = {design['n'][0]}..{design['n'][-1]}; "
            f"{len(set(r['seed'] for r in runs))} seeds from {min(r['seed'] for r in runs)}): coefficient "
            f"{coefficient} vs linear theory {d['predicted']:.4f} (plain 1/(2 lambda*) = {d['plain']:.4f}; with rate "
            f"1/e {d['excluded']:.4f})", by_h2)


_ONSET_ALTERNATIVES = [
    alternative("flat structure factor", "each run's clump wavenumber drawn uniformly from its k grid",
                swap(f"{__name__}:clump_wavenumbers", lambda real: flat_wavenumbers),
                kind="data"),
    alternative("rate peaking at 1/e", "lambda(k) = h2 k^2 exp(-h2 k^2): k* = 1/sqrt(h2), lambda* = 1/e, "
                "N_c = exp(sigma2/(e h2)) (band and law from the swapped rate)",
                swap("attneb.theory.stability:growth_rate", one_over_e_rate),
                swap("attneb.theory.stability:fastest_mode", lambda real: lambda h2: (1 / np.sqrt(h2), 1 / np.e)),
                swap("attneb.theory.stability:token_scaling", lambda real: lambda s2, h2: np.exp(s2 / (np.e * h2)))),
    alternative("N_c law with 1/e", "N_c = exp(sigma2/(e h2)) instead of exp(2 sigma2/(e h2))",
                swap("attneb.theory.stability:token_scaling", lambda real: lambda s2, h2: np.exp(s2 / (np.e * h2)))),
]


_CONFIRMATORY_ALTERNATIVES = _ONSET_ALTERNATIVES + [
    alternative("rate lambda* x 0.75", "N_c = exp(0.75 x 2 sigma2/(e h2)): the law's rate 0.75 x 2/e",
                swap("attneb.theory.stability:token_scaling", _law_rate_times(0.75))),
    alternative("rate lambda* x 1.25", "N_c = exp(1.25 x 2 sigma2/(e h2)): the law's rate 1.25 x 2/e",
                swap("attneb.theory.stability:token_scaling", _law_rate_times(1.25))),
    alternative("clumps at k*/sqrt 2", "every measured clump wavenumber x 1/sqrt 2 (the fastest mode of the "
                "rate peaking at 1/e)",
                swap(f"{__name__}:clump_wavenumbers", _wavenumbers_times(2 ** -0.5)),
                kind="data"),
    alternative("clumps at 1.3 k*", "every measured clump wavenumber x 1.3",
                swap(f"{__name__}:clump_wavenumbers", _wavenumbers_times(1.3)),
                kind="data"),
]


@check("S1", "E3 (confirmatory, seeds from 1000): N_c law within 10% of linear theory and clumps at k* within 10%",
       criterion=CONFIRMATORY_CRITERION,
       replication="subsample",
       alternatives=_CONFIRMATORY_ALTERNATIVES,
       note="superseded by 'E3 (confirmatory, seeds from 1000, 10 quick seeds)' (issue 24), for its quick size (below). "
            "What the data support: on the stored pools (seeds 100-139 full, 100-114 quick) the coefficient sits "
            "+2.3% above the prediction (+0.7, +2.1, +4.4% at h2 = 0.0125, 0.025, 0.05, close to the background's "
            "contraction rate h2/(s + h2) over lambda*: 1.1, 2.2, 4.2%; not modelled); (a) passes the law's rate "
            "lambda* x 0.93 to x 1.03 in nearly every subset (x 0.90: 62%, x 1.05: 55%, x 1.07: 10%, full mode) and "
            "rejects x 0.85 and x 1.1 and beyond: it states lambda* = 2/e to within about 10%, not 2/e against "
            "0.96 x 2/e. (b) resolves the scale to about +-10% (measured wavenumbers x 0.9: 43% pass, x 0.85 and "
            "x 1.1: none). Size 0.12 in quick mode (40 subsets of a 15-seed pool: 5 seeds give t-intervals near the "
            "+-10%), 0 in full mode (200 subsets of a 40-seed pool); power 1 against each wrong theory registered here, "
            "in both",
       gating=False)
def onset_confirmatory(ctx: Context) -> Evidence:
    return _confirmatory_evidence(ctx, seeds=None, draw=False)


#: Seeds of the 10-seed confirmatory check in quick mode (full mode: the design's 10).
CONFIRM_QUICK_SEEDS = 10


def confirmatory_seeds(quick: bool) -> int:
    """Seeds of the gating confirmatory onset check: :data:`CONFIRM_QUICK_SEEDS` quick, the design's in full mode."""
    return CONFIRM_QUICK_SEEDS if quick else onset_design(quick)["seeds"]


@check("S1", "E3 (confirmatory, seeds from 1000, 10 quick seeds): N_c law within 10% of linear theory and clumps at "
       "k* within 10%",
       criterion=CONFIRMATORY_CRITERION + " Seeds: 10 in quick mode (the 5 of 'E3 (confirmatory, seeds from 1000)' "
       "and 5 more), the design's 10 in full mode.",
       replication="subsample",
       alternatives=_CONFIRMATORY_ALTERNATIVES,
       note="replaces 'E3 (confirmatory, seeds from 1000)' (issue 24), whose quick size was 0.12 on 5 seeds; criterion "
            "fixed before its first run: the same runs, decision and wrong theories, 10 quick seeds; full mode unchanged. "
            "Seeds 1005-1009 were in the pool of the quick power run that measured that size (seeds 1000-1014), where a "
            "referee's scratch run finds this check passing: not a fresh confirmation. (a) is an equivalence test at "
            "+-10%: on 21 subsets of 10 of those 15 seeds (a referee's scratch runs) the law's rate x 0.93 and x 0.95 "
            "pass in every subset, x 1.05 in 62%, x 0.90 and x 1.07 in 24%, clumps at 0.93 x the measured wavenumbers "
            "in 24%: it states lambda* = 2/e to within about 10%, not better. Quick power (attneb verify --quick --power "
            "--only C8 S1 --reuse-other-code at f3e8964; 40 subsets of a pool of 3 seed sets): size 0.00, power 1.00 "
            "against each of its 7 wrong theories")
def onset_confirmatory_ten_seeds(ctx: Context) -> Evidence:
    return _confirmatory_evidence(ctx, seeds=confirmatory_seeds(ctx.quick), draw=True)


def _confirmatory_evidence(ctx: Context, seeds: int | None, draw: bool) -> Evidence:
    """The confirmatory onset decision on ``seeds`` seeds from 1000 (default: the design's); ``draw``: E3's figure."""
    runs, design = _onset_runs(ctx, ONSET_CONFIRM_SEED_START, seeds)
    d = decide_onset(runs, design["n"])
    if draw and not ctx.power:
        first_version_runs(ctx)  # the figure shows them beside the onset runs
    figures = plot_study("E3", ctx) if draw else ()  # the seeds of replicate 0
    law, by_h2 = _law_text(d, runs, design)
    relative = ("" if d["coefficient"] is None else
                f" = prediction x [{d['coefficient'].low / d['predicted']:.4f}, {d['coefficient'].high / d['predicted']:.4f}]")
    failed = [name for name, ok in {**d["equivalence"], **d["resolved"]}.items() if not ok]
    summary = (
        f"{law}{relative} (passes within [{d['law_band'][0]:.4f}, {d['law_band'][1]:.4f}] = +-"
        f"{100 * ONSET_LAW_RTOL:g}%, excluding {d['excluded']:.4f}); per h2 (pooled over seeds, reported, not decided "
        f"on) {by_h2}. (b) clump scale: mean clump wavenumber / k* {d['scale']} (passes within "
        f"[{ONSET_SCALE_BAND[0]:g}, {ONSET_SCALE_BAND[1]:g}]); {d['inside']} of {d['runs']} runs clump in the band "
        f"[{d['band'][0]:.3f}, {d['band'][1]:.3f}] k* (a flat S gives {100 * d['flat_fraction']:.0f}%: binomial p = "
        f"{d['p_value']:.2g}, passes below {BINOMIAL_LEVEL:g})"
        + (f". FAILED: {', '.join(failed)}" if failed else "")
    )
    return Evidence(
        passed=d["confirmed"], kind="interval", summary=summary,
        data={**_onset_data(d), "law_band": list(d["law_band"]), "scale_band": list(ONSET_SCALE_BAND),
              "checks": {**d["equivalence"], **d["resolved"]}},
        figures=figures,
    )


@check("S1", "E3: onset of finite-N fluctuations (N_c law at three sigma2/h2) and the scale of the clumps",
       criterion=ONSET_CRITERION,
       replication="subsample",
       alternatives=_ONSET_ALTERNATIVES + [  # the last three added with its successor: this check passes them
           alternative("rate lambda* x 0.97", "N_c = exp(0.97 x 2 sigma2/(e h2)): the law's rate 0.97 x 2/e",
                       swap("attneb.theory.stability:token_scaling", _law_rate_times(0.97))),
           alternative("clumps at k*/sqrt 2", "every measured clump wavenumber x 1/sqrt 2",
                       swap(f"{__name__}:clump_wavenumbers", _wavenumbers_times(2 ** -0.5)),
                       kind="data"),
           alternative("clumps at 1.3 k*", "every measured clump wavenumber x 1.3",
                       swap(f"{__name__}:clump_wavenumbers", _wavenumbers_times(1.3)),
                       kind="data"),
       ],
       gating=False,
       note="superseded by 'E3 (confirmatory, seeds from 1000)': (a) is a strict containment of a prediction the "
            "data sit +2.4% above (pooled over 40 seeds: 0.728 [0.721, 0.735] against 0.711; +0.7, +2.1, +4.4% at "
            "h2 = 0.0125, 0.025, 0.05; lambda* = 2/e is the rate about a uniform, static density, the Gaussian "
            "background here contracts at rate h2/(s + h2)): its size is 0.64 in full mode (0.15 quick), and "
            "nearby wrong rates pass it more often than the truth (lambda* x 0.97: 90%, x 0.96: 65%, 1/sqrt 2: 68%; "
            "truth 42%, referee, 40 subsets of the full pool). (b)'s band [0.648, 1.40] k* does not resolve the "
            "scale (measured 1.007 [0.983, 1.03]): clumps moved to 0.707, 0.75 or 1.3 x the measured wavenumbers "
            "pass it in every subset")
def onset_of_fluctuations(ctx: Context) -> Evidence:
    runs, design = _onset_runs(ctx, ONSET_SEED_START)
    d = decide_onset(runs, design["n"])
    law, by_h2 = _law_text(d, runs, design)
    failed = [name for name, ok in {**d["law"], **d["clump"]}.items() if not ok]
    summary = (
        f"{law}; per h2 (pooled over seeds, reported, not decided on) "
        f"{by_h2}. (b) clump scale: {d['inside']} of {d['runs']} runs clump in the band [{d['band'][0]:.3f}, "
        f"{d['band'][1]:.3f}] k* (a flat S gives {100 * d['flat_fraction']:.0f}%: binomial p = {d['p_value']:.2g}, "
        f"passes below {BINOMIAL_LEVEL:g}); mean clump wavenumber / k* {d['scale']}"
        + (f". FAILED: {', '.join(failed)}" if failed else "")
    )
    return Evidence(passed=d["passed"], kind="interval", summary=summary,
                    data={**_onset_data(d), "checks": {**d["law"], **d["clump"]}})


def first_version_peaks(runs: list[dict], k_star: float, replicate: int) -> list[float]:
    """Clump wavenumbers / k* of the clumped runs of the superseded E3 check, as measured."""
    return [r["peak_k"] / k_star for r in runs if r["peak_k"] is not None]


def _flat_first_version_peaks(real):
    def flat(runs, k_star, replicate):
        rng = np.random.default_rng([replicate, 3])
        return [float(rng.choice(K_GRID)) for r in runs if r["peak_k"] is not None]
    return flat


@check("S1", "E3: finite-N tokens clump at the predicted scale; departure from mean field and its risk",
       criterion="The 95% t-interval over runs (h2 = 0.05; N from 250 to 128000, quick to 32000) of the mean clump "
                 "wavenumber / k* (peak of the smoothed S at the first sample where it reaches N/20) lies inside the "
                 "band where lambda >= 3/4 lambda*.",
       gating=False,
       replication="seeds",
       alternatives=[alternative("flat structure factor", "each clumped run's peak drawn uniformly from the k grid "
                                 "(fresh draws in every replicate; the measured runs are the same)",
                                 swap(f"{__name__}:first_version_peaks", _flat_first_version_peaks),
                                 kind="data")],
       note="superseded by 'E3: onset of finite-N fluctuations': this band test passes a flat structure factor "
            "(no preferred scale) 18% of the time with 12 clumped runs and 46% with 30; the N_c law was not tested. "
            "Its runs have fixed seeds: replicates redraw only the flat alternative")
def finite_n_stability(ctx: Context) -> Evidence:
    pred = prediction()
    ns, seeds = sizes(ctx.quick)
    runs = first_version_runs(ctx)
    peaks = first_version_peaks(runs, pred["k_star"], ctx.replicate)
    band = [b / pred["k_star"] for b in pred["band"]]
    scale = stats.mean_interval(peaks) if len(peaks) >= 2 else None
    rate = growth_rate_fit(runs)
    per_n = {}
    for n in ns:
        mine = [r for r in runs if r["n"] == n]
        departures = [r["departure_depth"] for r in mine]
        per_n[n] = {
            "departure_depth": departures,
            "clump_depth": [r["clump_depth"] for r in mine],
            "variance_at_T_G": [float(np.interp(pred["T_G"], r["depths"], r["variances"])) for r in mine],
            "gap_T_star": float(np.mean([r["gap_T_star"] for r in mine])),
            "gap_T_G": float(np.mean([r["gap_T_G"] for r in mine])),
        }
    passed = scale is not None and band[0] <= scale.low and scale.high <= band[1]
    rate_text = "too few points" if rate is None else str(rate.slope)
    by_n = "; ".join(
        f"N={n}: departs at t={_fmt(v['departure_depth'])}, clumps at t={_fmt(v['clump_depth'])}, "
        f"var(T_G)={_fmt(v['variance_at_T_G'])}, gap(T*)={v['gap_T_star']:.4f}" for n, v in per_n.items()
    )
    return Evidence(
        passed=passed,
        kind="interval",
        summary=f"Gaussian prior tau2={TAU2}, sigma2={SIGMA2}, h2={H2} (N_c = {pred['N_c']:.0f}): clump wavenumber / k* = "
        f"{scale if scale else 'no clumps'} (passes inside the band [{band[0]:.3f}, {band[1]:.3f}] where "
        f"lambda >= {BAND_FRACTION} lambda*); fluctuation growth rate {rate_text} vs linear theory "
        f"2 lambda* = {pred['rate']:.4f}; mean-field variance at T_G = {TAU2}. {by_n}",
        data={"clump_scale": None if scale is None else [scale.estimate, scale.low, scale.high], "band": band,
              "growth_rate": None if rate is None else [rate.slope.estimate, rate.slope.low, rate.slope.high],
              "linear_rate": pred["rate"], "N_c": pred["N_c"], "per_n": {str(n): v for n, v in per_n.items()}},
    )


def _fmt(values) -> str:
    return "/".join("never" if v is None else f"{v:.3g}" for v in values)
