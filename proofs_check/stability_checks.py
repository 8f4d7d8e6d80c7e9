"""E3: finite-N Stage 1 against the exact Gaussian mean field and the linear stability analysis (S1).

Random tokens from a Gaussian prior flow through Euler layers for growing ``N``. For each run
(one ``N``, one seed) the experiment keeps, every few layers, the token variance (to compare with
the exact mean-field layer map of :mod:`theory.depth_noise`) and the structure factor near the
fastest-growing wavenumber ``k* = sqrt(2/h2)`` (:func:`numerics.meanfield.structure_factor`), and,
at ``T*`` and ``T_G``, Stage 2's gap to the Bayes posterior mean. Runs are records of the report
folder's store, written as each finishes, so an interrupted ``verify`` resumes.

What is checked (fixed before the run): the density fluctuations that grow into clumps do so at
the scale the linearisation predicts, i.e. the measured clump wavenumber (mean over runs, 95%
interval) lies inside the band of modes growing at >= 3/4 of the fastest rate. What is reported
beside it: the measured growth rate of the fluctuations against ``2 lambda*``, where each ``N``
departs from mean field, and what the clumps do to Stage 2's risk.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from scipy import optimize
from tqdm import tqdm

from numerics import meanfield, stats
from numerics.estimators import StageTwoOnly
from numerics.experiments import draw_batch
from numerics.priors import Gaussian
from numerics.sweep import ResultStore, canonical_json
from theory import depth_noise, stability

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from . import figures
from .registry import Context, Evidence, check
from .studies import STUDIES, mode_name, study

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


def _stored_runs(store: ResultStore, quick: bool) -> list[dict]:
    runs = list(store.records(mode_name("E3", "gaussian", quick)).values())
    return sorted(runs, key=lambda r: (r["n"], r["seed"]))


@study("E3", "finite-N token variance and clumping against mean field and linear stability (S1)")
def draw_stability(store: ResultStore, quick: bool, folder: Path) -> Path:
    runs = _stored_runs(store, quick)
    if not runs:
        raise LookupError(f"{store.path} holds no E3 records ({'quick' if quick else 'full'} mode); "
                          "run 'attneb verify' to compute them")
    return figures.plot_stability(runs, prediction(), folder)


@check("S1", "E3: finite-N tokens clump at the predicted scale; departure from mean field and its risk")
def finite_n_stability(ctx: Context) -> Evidence:
    pred = prediction()
    ns, seeds = sizes(ctx.quick)
    experiment = mode_name("E3", "gaussian", ctx.quick)
    with ResultStore(ctx.store_path) as store:
        done = store.records(experiment)
        todo = [(n, seed) for n in ns for seed in range(seeds) if _key(n, seed) not in done]
        for n, seed in tqdm(todo, desc=experiment, unit="run", disable=None, dynamic_ncols=True):
            store.add_record(experiment, _key(n, seed), run_one(n, seed, pred))
        runs = _stored_runs(store, ctx.quick)
    png = STUDIES["E3"].plot(ctx.store_path, ctx.out, quick=ctx.quick)
    peaks = [r["peak_k"] / pred["k_star"] for r in runs if r["peak_k"] is not None]
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
        figures=(png.name,),
    )


def _fmt(values) -> str:
    return "/".join("never" if v is None else f"{v:.3g}" for v in values)
