"""Particle simulations against the derived mean-field results G1, G2 and S1.

The predictions come from :mod:`theory` (derived by sympy), the measurements from
:mod:`attneb.numerics.meanfield` (the Stage-1 flow on many tokens). Every prediction is looked up as a
module attribute at call time (``depth_noise.gaussian_horizon(...)``), so that a wrong theory
swapped in by :mod:`attneb.proofs_check.power` reaches the decision; the pass criteria are registered with
the checks and fixed before the run.

* G1 -- the exact Gaussian horizon :math:`T_G = \\sigma^2/(2h_2) + \\tfrac12\\log(1 + \\sigma^2/\\tau^2)`:
  continuous-depth flows (the ODE, no layers, so no step bias) at six ``(sigma2, tau2, h2)``;
  the coefficient of :math:`\\log(1 + \\sigma^2/\\tau^2)` by regression, with its interval over seeds.
* G2 -- the discrete layer map: where it needs three or more layers fewer than :math:`T_G/\\eta`.
* S1 -- the growth rate of one Fourier mode on a token lattice (deterministic).

The checks of the first version (two cases with ``sigma2 = tau2 = 1``, tolerances from an assumed
sampling error) stay registered as superseded, so that their results remain in the report.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from attneb.numerics import meanfield, stats
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Gaussian
from attneb.theory import depth_noise, stability

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Context, Evidence, alternative, check, swap

# --------------------------------------------------------------------------------------------
# G1: the coefficient of log(1 + sigma2/tau2) in the continuous-depth horizon
# --------------------------------------------------------------------------------------------

#: ``(sigma2, tau2, h2)``: sigma2/tau2 from 0.2 to 5 (log(1 + sigma2/tau2) from 0.18 to 1.79), sigma2 != 1
#: in five cases (so that sigma in place of sigma2 shows), h2 from 1/4 to 1 (N_c <= 20 in every case).
HORIZON_CASES = ((0.25, 1.25, 0.25), (0.5, 1.0, 0.5), (1.0, 1.0, 0.25), (2.0, 1.0, 1.0), (2.5, 0.5, 1.0),
                 (4.0, 0.8, 1.0))
#: The measured coefficient's interval must lie within this fraction of theory's coefficient ...
COEFFICIENT_RTOL = 0.10
#: ... and exclude these coefficients (the wrong corrections the check must tell apart).
EXCLUDED_COEFFICIENTS = (0.25, 1.0)
#: Interval of the mean over cases of D / T_G - 1 must lie within +-POOLED_RTOL (a 1% error in T_G fails).
POOLED_RTOL = 0.005
#: Interval of D / T_G - 1 in every case must lie within +-CASE_RTOL.
CASE_RTOL = 0.02
#: Integrator and kernel-sum tolerances of the depth ODE (the depth is converged to < 1e-6 at these).
ODE_RTOL, ODE_ATOL, ODE_KERNEL_TOL = 1e-6, 1e-8, 1e-10

HORIZON_CRITERION = (
    "Six cases (sigma2, tau2, h2) = (0.25, 1.25, 0.25), (0.5, 1, 0.5), (1, 1, 0.25), (2, 1, 1), (2.5, 0.5, 1), "
    "(4, 0.8, 1) (sigma2/tau2 from 0.2 to 5). Per seed and case, N Gaussian tokens standardised to sample "
    "variance tau2 + sigma2 (N = 65536 and 8 seeds; quick: 32768 and 5) flow by the depth ODE (DOP853, rtol "
    "1e-6, binned kernel sums to 1e-10) until their variance is tau2, at depth D. Per seed, the least-squares "
    "slope (with intercept) of D - T* on log(1 + sigma2/tau2) over the cases is the measured coefficient "
    "(T* = depth_noise.leading_horizon); theory's coefficient is the same regression of "
    "depth_noise.gaussian_horizon - T*. Passes when (i) the 95% t-interval over seeds of the measured "
    "coefficient lies within 10% of theory's coefficient and excludes 1/4 and 1; (ii) the 95% t-interval over "
    "seeds of the mean over cases of D / gaussian_horizon - 1 lies within +-0.5%; (iii) in every case the 95% "
    "t-interval over seeds of D / gaussian_horizon - 1 lies within +-2%."
)


def horizon_design(quick: bool) -> dict:
    """Tokens per flow and seeds per case of G1."""
    return {"n": 32768, "seeds": 5} if quick else {"n": 65536, "seeds": 8}


def _log_ratio(sigma2: float, tau2: float) -> float:
    return math.log1p(sigma2 / tau2)


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope (with intercept) of each row of ``y`` on ``x``."""
    xc = x - x.mean()
    return (np.atleast_2d(y) - np.atleast_2d(y).mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)


def measured_horizons(ctx: Context, cases=None) -> dict:
    """Depths D (seeds x cases) at which continuous-depth flows bring the variance to tau2; cached per replicate."""
    cases = HORIZON_CASES if cases is None else cases
    design = horizon_design(ctx.quick)
    key = ("G1", "horizons", ctx.replicate, ctx.quick, design["n"], design["seeds"], tuple(cases))
    if key not in ctx.cache:
        seeds = ctx.fresh_seeds(range(design["seeds"]))
        depths, evaluations = np.empty((len(seeds), len(cases))), 0
        for i, seed in enumerate(seeds):
            for j, (sigma2, tau2, h2) in enumerate(cases):
                x0 = meanfield.standardized_gaussian_tokens(design["n"], tau2 + sigma2, [seed, j])
                result = meanfield.variance_horizon_ode(x0, h2, tau2, rtol=ODE_RTOL, atol=ODE_ATOL,
                                                        backend="auto", tol=ODE_KERNEL_TOL)
                depths[i, j] = result.depth
                evaluations += result.evaluations
        ctx.cache[key] = {"depths": depths, "seeds": seeds, "evaluations": evaluations, "n": design["n"]}
    return ctx.cache[key]


def decide_horizons(depths: np.ndarray, cases=None) -> dict:
    """The G1 decision on measured depths (seeds x cases), against the theory as it is at call time."""
    cases = HORIZON_CASES if cases is None else cases
    x = np.array([_log_ratio(s2, t2) for s2, t2, _ in cases])
    leading = np.array([float(depth_noise.leading_horizon(s2, h2)) for s2, _, h2 in cases])
    exact = np.array([float(depth_noise.gaussian_horizon(s2, t2, h2)) for s2, t2, h2 in cases])
    theory_coefficient = float(_slope(x, exact - leading)[0])
    per_seed = _slope(x, depths - leading)
    coefficient = stats.mean_interval(per_seed)
    band = (theory_coefficient - COEFFICIENT_RTOL * abs(theory_coefficient),
            theory_coefficient + COEFFICIENT_RTOL * abs(theory_coefficient))
    relative = depths / exact - 1
    pooled = stats.mean_interval(relative.mean(axis=1))
    per_case = [stats.mean_interval(relative[:, j]) for j in range(len(cases))]
    checks = {
        "coefficient within 10% of theory": band[0] <= coefficient.low and coefficient.high <= band[1],
        "coefficient excludes 1/4 and 1": all(not coefficient.low <= c <= coefficient.high
                                              for c in EXCLUDED_COEFFICIENTS),
        "pooled relative error within 0.5%": -POOLED_RTOL <= pooled.low and pooled.high <= POOLED_RTOL,
        "every case within 2%": all(-CASE_RTOL <= iv.low and iv.high <= CASE_RTOL for iv in per_case),
    }
    return {"coefficient": coefficient, "theory_coefficient": theory_coefficient, "band": band,
            "pooled": pooled, "per_case": per_case, "exact": exact, "leading": leading, "checks": checks,
            "passed": all(checks.values())}


def _iv(interval: stats.Interval) -> list[float]:
    return [interval.estimate, interval.low, interval.high]


def _pct(interval: stats.Interval) -> str:
    return f"{100 * interval.estimate:+.3f}% [{100 * interval.low:+.3f}, {100 * interval.high:+.3f}]"


@check("G1", "continuous-depth flows at six (sigma2, tau2, h2): coefficient of log(1 + sigma2/tau2) in the horizon "
             "by regression, interval over seeds",
       criterion=HORIZON_CRITERION,
       replication="seeds",
       alternatives=[
           alternative("horizon correction 1/4", "T_G replaced by T* + (1/4) log(1 + sigma2/tau2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real: lambda s2, t2, h2: s2 / (2 * h2) + 0.25 * math.log1p(s2 / t2))),
           alternative("horizon correction 1", "T_G replaced by T* + log(1 + sigma2/tau2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real: lambda s2, t2, h2: s2 / (2 * h2) + math.log1p(s2 / t2))),
           alternative("leading order T* alone", "T_G replaced by T* = sigma2/(2 h2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real: lambda s2, t2, h2: s2 / (2 * h2))),
           alternative("sigma for sigma2 in the log", "T_G replaced by T* + (1/2) log(1 + sigma/tau2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real: lambda s2, t2, h2: s2 / (2 * h2) + 0.5 * math.log1p(math.sqrt(s2) / t2))),
       ],
       covers=("attneb.theory.depth_noise:gaussian_horizon",))
def horizon_coefficient_by_regression(ctx: Context) -> Evidence:
    measured = measured_horizons(ctx)
    d = decide_horizons(measured["depths"])
    failed = [name for name, ok in d["checks"].items() if not ok]
    cases = "; ".join(
        f"({s2:g}, {t2:g}, {h2:g}): D = {measured['depths'][:, j].mean():.4f} vs T_G {d['exact'][j]:.4f}, "
        f"{_pct(d['per_case'][j])}" for j, (s2, t2, h2) in enumerate(HORIZON_CASES)
    )
    summary = (
        f"coefficient of log(1 + sigma2/tau2) in the depth where the variance returns to tau2 (depth ODE, "
        f"N={measured['n']}, {len(measured['seeds'])} seeds x {len(HORIZON_CASES)} cases): {d['coefficient']} vs "
        f"theory {d['theory_coefficient']:.4f} (passes within [{d['band'][0]:.4f}, {d['band'][1]:.4f}], excluding "
        f"1/4 and 1); D/T_G - 1 pooled over cases {_pct(d['pooled'])} (passes within +-{100 * POOLED_RTOL:g}%); "
        f"per case (95% over seeds, passes within +-{100 * CASE_RTOL:g}%): {cases}"
        + (f". FAILED: {', '.join(failed)}" if failed else "")
    )
    return Evidence(
        passed=d["passed"], kind="interval", summary=summary,
        data={"cases": [list(c) for c in HORIZON_CASES], "n": measured["n"], "seeds": measured["seeds"],
              "depths": measured["depths"].tolist(), "ode_evaluations": measured["evaluations"],
              "coefficient": _iv(d["coefficient"]), "theory_coefficient": d["theory_coefficient"],
              "band": list(d["band"]), "pooled_relative_error": _iv(d["pooled"]),
              "case_relative_error": [_iv(iv) for iv in d["per_case"]], "T_G": d["exact"].tolist(),
              "T_star": d["leading"].tolist(), "checks": d["checks"]},
    )


# --------------------------------------------------------------------------------------------
# G2: the discrete layer map where it differs from T_G / eta by three or more layers
# --------------------------------------------------------------------------------------------

#: Layer step of G2. With eta = 1/2 the map s -> (1 - eta h2/(s + h2))^2 s shrinks s by nearly 4 per
#: layer once s << h2, where the ODE shrinks it by e per unit eta: the counts part only where the
#: variance falls far below h2 (for s >> h2 they differ by at most (1/4) log(1 + sigma2/tau2) layers).
LAYER_ETA = 0.5
#: ``(sigma2, tau2, h2)``: the map needs 8.73 and 9.23 layers, T_G / eta is 11.76 and 12.46.
LAYER_CASES = ((1.0, 1e-5, 4.0), (2.0, 1e-5, 8.0))
#: Interval of (measured fractional count) / (map's fractional count) - 1 must lie within +-LAYER_RTOL.
LAYER_RTOL = 0.005

LAYER_CRITERION = (
    "Two cases (sigma2, tau2, h2) = (1, 1e-5, 4) and (2, 1e-5, 8) at eta = 1/2, where the exact layer map "
    "needs 3 or more layers fewer than T_G/eta. Per seed and case, N = 65536 tokens drawn from the prior plus "
    "noise (not standardised; 10 seeds, quick: 5) run Euler layers of step eta until their variance is <= tau2. "
    "Passes when, in every case, (i) every seed's layer count equals depth_noise.gaussian_layers and differs "
    "from ceil(gaussian_horizon/eta); (ii) the 95% t-interval over seeds of the fractional count (crossing "
    "interpolated in log variance) divided by depth_noise.gaussian_layers_fractional, minus 1, lies within "
    "+-0.5%; (iii) the 95% t-interval of the fractional count excludes depth_noise.gaussian_horizon/eta."
)


def layer_design(quick: bool) -> dict:
    """Tokens per run and seeds per case of G2."""
    return {"n": 65536, "seeds": 5 if quick else 10}


def _layer_runs(ctx: Context, j: int, case: tuple) -> list[dict]:
    """Euler layers of step LAYER_ETA for case ``j`` of a case list, one run per seed; cached per replicate and case.

    Seed ``seed`` of case ``j`` draws its tokens with ``[seed, j]``, so the checks whose case lists
    begin alike share their runs.
    """
    design = layer_design(ctx.quick)
    seeds = ctx.fresh_seeds(range(design["seeds"]))
    key = ("G2", "layer runs", ctx.replicate, ctx.quick, design["n"], tuple(seeds), j, tuple(case))
    if key not in ctx.cache:
        sigma2, tau2, h2 = case
        runs = []
        for seed in seeds:
            _, noisy = draw_batch(Gaussian([0.0], tau2), sigma2, design["n"], [seed, j])
            result = meanfield.variance_horizon(noisy, h2, tau2, eta=LAYER_ETA, backend="auto")
            runs.append({"seed": seed, "layers": result.layers, "fractional": result.fractional_layers,
                         "variances": result.variances})
        ctx.cache[key] = runs
    return ctx.cache[key]


def measured_layers(ctx: Context, cases=None) -> dict:
    """Integer and fractional layer counts (seeds x cases) and variance paths of Euler layers of step LAYER_ETA."""
    cases = LAYER_CASES if cases is None else cases
    per_case = [_layer_runs(ctx, j, case) for j, case in enumerate(cases)]
    return {"layers": np.array([[r["layers"] for r in runs] for runs in per_case], dtype=int).T,
            "fractional": np.array([[r["fractional"] for r in runs] for runs in per_case]).T,
            "variances": [[r["variances"] for r in runs] for runs in per_case],
            "seeds": [r["seed"] for r in per_case[0]], "n": layer_design(ctx.quick)["n"]}


def decide_layers(layers: np.ndarray, fractional: np.ndarray, cases=None) -> dict:
    """The G2 decision on measured counts (seeds x cases), against the theory as it is at call time."""
    cases = LAYER_CASES if cases is None else cases
    rows = []
    for j, (s2, t2, h2) in enumerate(cases):
        predicted = depth_noise.gaussian_layers(s2, t2, h2, LAYER_ETA)  # an int (a wrong one may not be)
        predicted_fractional = float(depth_noise.gaussian_layers_fractional(s2, t2, h2, LAYER_ETA))
        continuous = float(depth_noise.gaussian_horizon(s2, t2, h2)) / LAYER_ETA
        count = stats.mean_interval(fractional[:, j])
        relative = stats.mean_interval(fractional[:, j] / predicted_fractional - 1)
        checks = {
            "layer count = map's": bool(np.all(layers[:, j] == predicted)),  # exact equality of counts
            "layer count != ceil(T_G/eta)": bool(np.all(layers[:, j] != math.ceil(continuous))),
            "fractional count within 0.5% of map's": -LAYER_RTOL <= relative.low and relative.high <= LAYER_RTOL,
            "fractional count excludes T_G/eta": not count.low <= continuous <= count.high,
        }
        rows.append({"case": (s2, t2, h2), "predicted": predicted, "predicted_fractional": predicted_fractional,
                     "continuous": continuous, "count": count, "relative": relative, "checks": checks,
                     "layers": sorted(set(int(v) for v in layers[:, j]))})
    return {"rows": rows, "passed": all(all(r["checks"].values()) for r in rows)}


# --------------------------------------------------------------------------------------------
# G2 (second version): every layer's variance ratio against the map, and a non-linear case
# --------------------------------------------------------------------------------------------

#: The cases of G2's second version: LAYER_CASES (where the map needs 3+ layers fewer than T_G/eta;
#: s << h2 from the second layer on, so the map is nearly linear there) and (2, 2, 1/2), where s/h2 runs
#: from 8 to 4 (5 layers; the map needs 4.80, T_G/eta is 4.69) and the eta^2 Var(a) term is 26-29% of
#: every layer's ratio. No case with tau2 not tiny
#: has the 3-layer separation: the counts part by (1 - 1/log 4) log(s0/tau2) layers where s << h2
#: (the map shrinks s by 4 per layer, the ODE by e per depth eta), and by at most
#: (1/4) log(1 + sigma2/tau2) layers where s >> h2, so 3 layers need s0/tau2 ~ 5e4.
LAYER_MAP_CASES = LAYER_CASES + ((2.0, 2.0, 0.5),)
#: How many of LAYER_MAP_CASES (the first ones) have the 3-layer separation.
SEPARATED_CASES = len(LAYER_CASES)
#: Interval of every layer's ratio error must lie within +-RATIO_RTOL. Measured (10 seeds per case):
#: mean errors <= 4e-4 (the last layer of (2, 2, 1/2): the error grows by about 1.5 per layer there, a
#: finite-N effect) and per-seed spread <= 3.6e-4, 5-seed intervals within +-0.1%, so three times that.
#: The first-order map is off by +2.9% at the first layer of LAYER_CASES and +26-29% at every layer
#: of (2, 2, 1/2); the frozen-context map by -6% or more from the second layer on; a 1% error by 1%.
#: (Cases reaching s ~ h2, e.g. (3, 1, 1), have 5-seed intervals out to +-0.45% at their last layer.)
RATIO_RTOL = 0.003
#: Interval of (fractional count) / (map's from the run's own starting variance) - 1 must lie within
#: +-COUNT_RTOL in the separated cases. Measured (12 replicates of 5 seeds): per-seed spread <= 0.008%,
#: interval bounds within +-0.014%, so about three times that. (Against the map from tau2 + sigma2, as
#: the superseded check compares, the sampling error of the starting variance, sqrt(2/N), puts the 5-seed
#: intervals out to +-0.16%.) The first-order map is at +0.33%, a 1% error at 1%.
COUNT_RTOL = 0.0005

LAYER_MAP_CRITERION = (
    "Three cases (sigma2, tau2, h2) at eta = 1/2: (1, 1e-5, 4) and (2, 1e-5, 8), where the exact layer map "
    "needs 3 or more layers fewer than T_G/eta (nearly linear: s << h2 from the second layer on), and "
    "(2, 2, 1/2), where s/h2 runs from 8 to 4. Per seed and case, N = 65536 tokens drawn from the prior plus noise "
    "(not standardised; 10 seeds, quick: 5) run Euler layers of step eta until their variance is <= tau2. The "
    "ratio error of layer l is the measured ratio s_{l+1}/s_l divided by theory's ratio at the measured s_l "
    "(proofs_check.meanfield_checks.layer_ratio: depth_noise.gaussian_variance_map(s_l, h2, eta, 1)[1] / s_l), "
    "minus 1. Passes when (i) in every case and every layer that every seed runs, the 95% t-interval over seeds "
    "of the ratio error lies within +-0.3%; (ii) in every case every seed's layer count equals "
    "depth_noise.gaussian_layers; (iii) in the first two cases every seed's layer count differs from "
    "ceil(gaussian_horizon/eta), the 95% t-interval over seeds of the fractional count (crossing interpolated in "
    "log variance) divided by the map's from the run's own starting variance s_0 "
    "(depth_noise.gaussian_layers_fractional(s_0 - tau2, tau2, h2, eta)), minus 1, lies within +-0.05%, and the "
    "95% t-interval of the fractional count excludes gaussian_horizon/eta."
)


def layer_ratio(s: float, s0: float, h2: float, eta: float) -> float:
    """Theory's ratio s_{l+1}/s_l of one Euler layer at variance ``s`` (``s0``: the variance at depth 0).

    The exact map (:func:`attneb.theory.depth_noise.gaussian_variance_map`, one layer) does not use ``s0``;
    the frozen-context alternative does.
    """
    return float(depth_noise.gaussian_variance_map(float(s), h2, eta, 1)[1]) / float(s)


def ratio_errors(variances: list, h2: float) -> np.ndarray:
    """Ratio errors (seeds x layers) of the variance paths of one case, over the layers every seed runs."""
    common = min(len(v) for v in variances) - 1
    errors = np.empty((len(variances), common))
    for i, v in enumerate(variances):
        for l in range(common):
            errors[i, l] = v[l + 1] / v[l] / layer_ratio(v[l], v[0], h2, LAYER_ETA) - 1
    return errors


def decide_layer_map(measured: dict, cases=None) -> dict:
    """The decision of G2's second version on measured runs, against the theory as it is at call time."""
    cases = LAYER_MAP_CASES if cases is None else cases
    layers, fractional = measured["layers"], measured["fractional"]
    rows = []
    for j, (s2, t2, h2) in enumerate(cases):
        errors = ratio_errors(measured["variances"][j], h2)
        per_layer = [stats.mean_interval(errors[:, l]) for l in range(errors.shape[1])]
        worst = max(max(abs(iv.low), abs(iv.high)) for iv in per_layer)
        predicted = depth_noise.gaussian_layers(s2, t2, h2, LAYER_ETA)
        checks = {
            "every layer's ratio within 0.3% of the map's": worst <= RATIO_RTOL,
            "layer count = map's": bool(np.all(layers[:, j] == predicted)),
        }
        row = {"case": (s2, t2, h2), "predicted": predicted, "errors": errors, "per_layer": per_layer,
               "worst": worst, "layers": sorted(set(int(v) for v in layers[:, j]))}
        if j < SEPARATED_CASES:
            predicted_fractional = float(depth_noise.gaussian_layers_fractional(s2, t2, h2, LAYER_ETA))
            own = np.array([float(depth_noise.gaussian_layers_fractional(float(v[0]) - t2, t2, h2, LAYER_ETA))
                            for v in measured["variances"][j]])
            continuous = float(depth_noise.gaussian_horizon(s2, t2, h2)) / LAYER_ETA
            count = stats.mean_interval(fractional[:, j])
            relative = stats.mean_interval(fractional[:, j] / own - 1)
            checks.update({
                "layer count != ceil(T_G/eta)": bool(np.all(layers[:, j] != math.ceil(continuous))),
                "fractional count within 0.05% of map's from s_0": -COUNT_RTOL <= relative.low
                and relative.high <= COUNT_RTOL,
                "fractional count excludes T_G/eta": not count.low <= continuous <= count.high,
            })
            row.update({"predicted_fractional": predicted_fractional, "continuous": continuous, "count": count,
                        "relative": relative})
        row["checks"] = checks
        rows.append(row)
    return {"rows": rows, "passed": all(all(r["checks"].values()) for r in rows)}


def _first_order_map(real):
    """s -> (1 - eta)^2 s + 2 eta (1 - eta) s^2/(s + h2): the map to first order in eta (no eta^2 Var(a) term)."""
    return lambda: (lambda s, h2, eta: (1 - eta) ** 2 * s + 2 * eta * (1 - eta) * s * s / (s + h2))


def _ode_over_one_layer(real):
    """The continuous-depth flow over depth eta per layer: s1 + h2 log s1 = s + h2 log s - 2 h2 eta."""
    def step(s, h2, eta):
        target = s + h2 * math.log(s) - 2 * h2 * eta
        return optimize.brentq(lambda x: x + h2 * math.log(x) - target, 1e-300, s, xtol=1e-300, rtol=1e-15)
    return lambda: step


def _step_scaled(factor):
    def make(real):
        step = real()
        return lambda: (lambda s, h2, eta: step(s, h2, factor * eta))
    return make


def _frozen_ratio(real):
    """The context frozen at depth 0: every layer contracts by the first layer's factor."""
    return lambda s, s0, h2, eta: (1 - eta * h2 / (s0 + h2)) ** 2


def _frozen_fractional(real):
    def fractional(s2, t2, h2, eta):
        s0 = t2 + s2
        return math.log(s0 / t2) / -math.log((1 - eta * h2 / (s0 + h2)) ** 2)
    return fractional


def _frozen_layers(real):
    return lambda s2, t2, h2, eta: math.ceil(_frozen_fractional(None)(s2, t2, h2, eta) - 1e-12)


@check("G2", "Euler layers of step 1/2 at three cases (one non-linear): every layer's variance ratio follows the "
             "exact map",
       criterion=LAYER_MAP_CRITERION,
       replication="seeds",
       alternatives=[
           alternative("map to first order in eta",
                       "s -> (1 - eta)^2 s + 2 eta (1 - eta) s^2/(s + h2): the exact map without its eta^2 Var(a) "
                       "term (swapped into theory.depth_noise._layer_map, so counts and ratios both follow it)",
                       swap("attneb.theory.depth_noise:_layer_map", _first_order_map)),
           alternative("frozen-context map",
                       "the context frozen at depth 0: every layer multiplies s by (1 - eta h2/(s0 + h2))^2 "
                       "(ratios, layer counts and fractional counts)",
                       swap("attneb.proofs_check.meanfield_checks:layer_ratio", _frozen_ratio),
                       swap("attneb.theory.depth_noise:gaussian_layers_fractional", _frozen_fractional),
                       swap("attneb.theory.depth_noise:gaussian_layers", _frozen_layers)),
           alternative("continuous depth per layer",
                       "each layer is the depth ODE over depth eta (counts T_G/eta)",
                       swap("attneb.theory.depth_noise:_layer_map", _ode_over_one_layer)),
           alternative("map with eta/2", "the exact map with half the step",
                       swap("attneb.theory.depth_noise:_layer_map", _step_scaled(0.5))),
           alternative("map with 2 eta", "the exact map with twice the step",
                       swap("attneb.theory.depth_noise:_layer_map", _step_scaled(2.0))),
       ],
       covers=("attneb.theory.depth_noise:gaussian_variance_map", "attneb.theory.depth_noise:gaussian_layers_fractional",
               "attneb.theory.depth_noise:gaussian_layers"))
def layer_ratios_follow_the_map(ctx: Context) -> Evidence:
    measured = measured_layers(ctx, LAYER_MAP_CASES)
    d = decide_layer_map(measured)
    parts = []
    for r in d["rows"]:
        failed = [name for name, ok in r["checks"].items() if not ok]
        first = r["per_layer"][0]
        text = (f"({r['case'][0]:g}, {r['case'][1]:g}, {r['case'][2]:g}): ratio error over "
                f"{len(r['per_layer'])} layers, worst interval bound {100 * r['worst']:.3f}% (passes within "
                f"+-{100 * RATIO_RTOL:g}%), first layer {_pct(first)}; layers {r['layers']} vs map {r['predicted']:g}")
        if "relative" in r:
            text += (f" (ceil(T_G/eta) = {math.ceil(r['continuous'])}); fractional {r['count']} vs map "
                     f"{r['predicted_fractional']:.4f} from tau2 + sigma2, vs map from each run's s_0 "
                     f"{_pct(r['relative'])} (passes within +-{100 * COUNT_RTOL:g}%), T_G/eta {r['continuous']:.3f}")
        parts.append(text + (f" FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(
        passed=d["passed"], kind="interval",
        summary=f"Euler layers of step {LAYER_ETA} until the variance reaches tau2 (N={measured['n']}, "
                f"{len(measured['seeds'])} seeds): " + "; ".join(parts),
        data={"eta": LAYER_ETA, "n": measured["n"], "seeds": measured["seeds"],
              "layers": measured["layers"].tolist(), "fractional": measured["fractional"].tolist(),
              "cases": [{"case": list(r["case"]), "predicted": float(r["predicted"]),
                         "ratio_errors": [_iv(iv) for iv in r["per_layer"]], "worst": r["worst"],
                         **({"predicted_fractional": r["predicted_fractional"], "continuous": r["continuous"],
                             "fractional": _iv(r["count"]), "relative": _iv(r["relative"])} if "relative" in r else {}),
                         "checks": r["checks"]} for r in d["rows"]]},
    )


@check("G2", "Euler layers of step 1/2 where the exact layer map needs 3+ layers fewer than T_G/eta: particles "
             "follow the map",
       criterion=LAYER_CRITERION,
       replication="seeds",
       alternatives=[
           alternative("continuous count T_G/eta", "the layer count is T_G/eta (fractional) and ceil(T_G/eta)",
                       swap("attneb.theory.depth_noise:gaussian_layers_fractional",
                            lambda real: lambda s2, t2, h2, eta: depth_noise.gaussian_horizon(s2, t2, h2) / eta),
                       swap("attneb.theory.depth_noise:gaussian_layers",
                            lambda real: lambda s2, t2, h2, eta: math.ceil(depth_noise.gaussian_horizon(s2, t2, h2)
                                                                           / eta))),
           alternative("map with eta/2", "the exact map iterated with half the step",
                       swap("attneb.theory.depth_noise:gaussian_layers_fractional",
                            lambda real: lambda s2, t2, h2, eta: real(s2, t2, h2, eta / 2)),
                       swap("attneb.theory.depth_noise:gaussian_layers",
                            lambda real: lambda s2, t2, h2, eta: real(s2, t2, h2, eta / 2))),
           alternative("map with 2 eta", "the exact map iterated with twice the step",
                       swap("attneb.theory.depth_noise:gaussian_layers_fractional",
                            lambda real: lambda s2, t2, h2, eta: real(s2, t2, h2, 2 * eta)),
                       swap("attneb.theory.depth_noise:gaussian_layers",
                            lambda real: lambda s2, t2, h2, eta: real(s2, t2, h2, 2 * eta))),
           alternative("map to first order in eta",
                       "s -> (1 - eta)^2 s + 2 eta (1 - eta) s^2/(s + h2) (added with its successor: this check "
                       "passes it)",
                       swap("attneb.theory.depth_noise:_layer_map", _first_order_map)),
       ],
       covers=("attneb.theory.depth_noise:gaussian_layers_fractional", "attneb.theory.depth_noise:gaussian_layers"),
       gating=False,
       note="superseded by 'Euler layers of step 1/2 at three cases (one non-linear)': its tolerance (+-0.5% on the "
            "fractional count) is about 7 times the measured spread (+-0.07%) and both cases are nearly linear "
            "(tau2 = 1e-5, h2 >> s): the map to first order in eta (without its eta^2 Var(a) term) predicts 8.703 "
            "and 9.203 layers against 8.732 and 9.232 (+0.36%) with the same integer counts, and passes it")
def layers_follow_the_discrete_map(ctx: Context) -> Evidence:
    measured = measured_layers(ctx)
    d = decide_layers(measured["layers"], measured["fractional"])
    parts = []
    for r in d["rows"]:
        failed = [name for name, ok in r["checks"].items() if not ok]
        parts.append(
            f"({r['case'][0]:g}, {r['case'][1]:g}, {r['case'][2]:g}): layers {r['layers']} vs map {r['predicted']:g} "
            f"(ceil(T_G/eta) = {math.ceil(r['continuous'])}); fractional {r['count']} vs map "
            f"{r['predicted_fractional']:.4f} ({_pct(r['relative'])}, passes within +-{100 * LAYER_RTOL:g}%) and "
            f"T_G/eta {r['continuous']:.3f}" + (f" FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(
        passed=d["passed"], kind="interval",
        summary=f"Euler layers of step {LAYER_ETA} until the variance reaches tau2 (N={measured['n']}, "
                f"{len(measured['seeds'])} seeds): " + "; ".join(parts),
        data={"eta": LAYER_ETA, "n": measured["n"], "seeds": measured["seeds"],
              "layers": measured["layers"].tolist(), "fractional": measured["fractional"].tolist(),
              "cases": [{"case": list(r["case"]), "predicted": float(r["predicted"]),
                         "predicted_fractional": r["predicted_fractional"], "continuous": r["continuous"],
                         "fractional": _iv(r["count"]), "relative": _iv(r["relative"]), "checks": r["checks"]}
                        for r in d["rows"]]},
    )


# --------------------------------------------------------------------------------------------
# S1: growth rate of one Fourier mode on a token lattice
# --------------------------------------------------------------------------------------------

#: Relative tolerance of a measured growth rate: linearisation error O(amplitude k) ~ 1e-4,
#: lattice sums exact to exp(-(2 pi)^2 h2 / (2 spacing^2)), ODE tolerance 1e-10.
GROWTH_RTOL = 1e-3


def _rate_peaking_at_one_over_e(real):
    return lambda k, h2: h2 * k**2 * math.exp(-h2 * k**2)


@check("S1", "growth of a sinusoidal perturbation of a token lattice (N = 2000) = lambda(k)",
       criterion="Tokens on the lattice 0.1 Z in [0, 200) displaced by 1e-4 sin(k x), h2 = 1, depth ODE to T = 2 "
                 "(rtol 1e-10); the log amplitude of the displacement in [40, 160] fitted linearly in depth. Passes "
                 "when at k* (quick) or at k*/2, k*, 2 k* (full), k* from stability.fastest_mode, the fitted rate is "
                 "within 1e-3 (relative) of stability.growth_rate(k, h2).",
       replication="none",
       alternatives=[
           alternative("rate peaking at 1/e", "lambda(k) = h2 k^2 exp(-h2 k^2), fastest mode (1/sqrt(h2), 1/e)",
                       swap("attneb.theory.stability:growth_rate", _rate_peaking_at_one_over_e),
                       swap("attneb.theory.stability:fastest_mode", lambda real: lambda h2: (1 / math.sqrt(h2), 1 / math.e))),
           alternative("no kernel damping", "lambda(k) = h2 k^2 (the backward heat equation)",
                       swap("attneb.theory.stability:growth_rate", lambda real: lambda k, h2: h2 * k**2)),
           alternative("rate 2 lambda", "every rate doubled (the rate of the structure factor, not of the amplitude)",
                       swap("attneb.theory.stability:growth_rate", lambda real: lambda k, h2: 2 * real(k, h2))),
       ],
       covers=("attneb.theory.stability:growth_rate",))
def mode_growth_matches_linear_stability(ctx: Context) -> Evidence:
    h2 = 1.0
    k_star, rate_star = stability.fastest_mode(h2)
    ks = [k_star] if ctx.quick else [0.5 * k_star, k_star, 2.0 * k_star]
    key = ("S1", "lattice", ctx.quick, tuple(float(k) for k in ks))
    if key not in ctx.cache:  # the measurement, reused when a theory alternative decides again
        ctx.cache[key] = [meanfield.mode_growth_rate(h2, k, spacing=0.1, length=200.0) for k in ks]
    rows = []
    for k, fit in zip(ks, ctx.cache[key]):
        predicted = stability.growth_rate(k, h2)
        rel = abs(fit.slope.estimate - predicted) / predicted
        rows.append({
            "k": k, "measured": fit.slope.estimate, "ci": [fit.slope.low, fit.slope.high],
            "predicted": predicted, "relative_error": rel, "passed": rel <= GROWTH_RTOL,
        })
    text = "; ".join(f"k={r['k']:.3f}: {r['measured']:.5f} vs {r['predicted']:.5f}" for r in rows)
    return Evidence(
        passed=all(r["passed"] for r in rows),
        kind="rate",
        summary=f"h2={h2}, fastest mode k*={k_star:.4f} (rate {rate_star:.4f}); measured vs lambda(k): {text} "
        f"(relative tolerance {GROWTH_RTOL:g})",
        data={"h2": h2, "modes": rows, "tolerance": GROWTH_RTOL},
    )


# --------------------------------------------------------------------------------------------
# Superseded: the first G1 and G2 checks (kept in the report, not gating)
# --------------------------------------------------------------------------------------------

N_TOKENS = 2000
#: (sigma2, tau2, h2) where N_TOKENS is far above the stability bound exp(2 sigma2 / (e h2)) (S1).
GAUSSIAN_CASES = ((1.0, 1.0, 0.5), (1.0, 1.0, 0.25))
#: Standard errors of the horizon allowed between simulation and prediction.
N_STANDARD_ERRORS = 3.0


def standardized_gaussian_tokens(n: int, variance: float, seed: int) -> np.ndarray:
    """``n`` 1-D Gaussian tokens rescaled to sample mean 0 and sample variance ``variance`` exactly."""
    return meanfield.standardized_gaussian_tokens(n, variance, seed)


def horizon_standard_error(n: int, tau2: float, h2: float) -> float:
    r"""Depth error implied by the sampling error of the variance at the end of the flow.

    The sample variance of ``n`` Gaussian tokens has relative standard error :math:`\sqrt{2/n}`;
    where the variance crosses :math:`\tau^2` it falls at rate :math:`2 h_2 \tau^2 / (\tau^2 + h_2)`,
    so a variance error :math:`\tau^2 \sqrt{2/n}` is a depth error :math:`\sqrt{2/n}\,(\tau^2 + h_2)/(2 h_2)`.
    (The tokens are standardised, which removes this error: the tolerance is too wide, hence superseded.)
    """
    return float(np.sqrt(2.0 / n) * (tau2 + h2) / (2.0 * h2))


@check("G1", "particle flow (N = 2000) returns to the prior variance at the exact Gaussian horizon",
       criterion="|D - T_G| <= 3 sqrt(2/N) (tau2 + h2)/(2 h2) + eta in both cases (sigma2 = tau2 = 1, h2 = 1/2, 1/4)",
       gating=False,
       alternatives=[
           alternative(f"horizon correction {c:g}", f"T_G replaced by T* + {c:g} log(1 + sigma2/tau2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real, c=c: lambda s2, t2, h2: s2 / (2 * h2) + c * math.log1p(s2 / t2)))
           for c in (0.25, 0.3, 0.7, 1.0)
       ] + [alternative("sigma for sigma2 in the log", "T_G replaced by T* + (1/2) log(1 + sigma/tau2)",
                        swap("attneb.theory.depth_noise:gaussian_horizon",
                             lambda real: lambda s2, t2, h2: s2 / (2 * h2) + 0.5 * math.log1p(math.sqrt(s2) / t2)))],
       note="superseded by 'continuous-depth flows at six (sigma2, tau2, h2)': its tolerance assumes a sampling "
            "error of the variance that standardising the tokens removes (it accepts coefficients from about 0.28 "
            "to 0.72), and sigma2 = 1 hides sigma in place of sigma2")
def gaussian_horizon_matches_particles(ctx: Context) -> Evidence:
    eta = 0.02 if ctx.quick else 0.01
    rows = []
    for sigma2, tau2, h2 in GAUSSIAN_CASES:
        x0 = standardized_gaussian_tokens(N_TOKENS, tau2 + sigma2, seed=0)
        measured = meanfield.variance_horizon(x0, h2, tau2, eta=eta).depth
        exact = depth_noise.gaussian_horizon(sigma2, tau2, h2)
        tol = N_STANDARD_ERRORS * horizon_standard_error(N_TOKENS, tau2, h2) + eta
        rows.append({
            "sigma2": sigma2, "tau2": tau2, "h2": h2, "measured": measured, "exact": exact,
            "leading": depth_noise.leading_horizon(sigma2, h2), "tolerance": tol,
            "passed": abs(measured - exact) <= tol,
        })
    text = "; ".join(
        f"(s2={r['sigma2']:g}, t2={r['tau2']:g}, h2={r['h2']:g}): simulated {r['measured']:.4f} vs exact "
        f"{r['exact']:.4f} (+-{r['tolerance']:.3f}), leading {r['leading']:.4f}" for r in rows
    )
    return Evidence(
        passed=all(r["passed"] for r in rows),
        kind="identity",
        summary=f"depth where the token variance returns to tau2, N={N_TOKENS}, eta={eta}: {text}",
        data={"cases": rows, "n": N_TOKENS, "eta": eta},
    )


@check("G2", "particle layers (N = 2000) match the layer count of the exact variance map",
       criterion="|layers - gaussian_layers| <= 3 sqrt(2/N) (tau2 + h2)/(2 h2 eta) + 1 in both cases (eta = 0.05)",
       gating=False,
       alternatives=[alternative("continuous count ceil(T_G/eta)", "the layer count is ceil(T_G/eta)",
                                 swap("attneb.theory.depth_noise:gaussian_layers",
                                      lambda real: lambda s2, t2, h2, eta: math.ceil(
                                          depth_noise.gaussian_horizon(s2, t2, h2) / eta)))],
       note="superseded by 'Euler layers of step 1/2 where the exact layer map needs 3+ layers fewer': its "
            "tolerance (+-4 to 6 layers) cannot tell the map from T_G/eta (0.1 layer apart at its cases)")
def gaussian_layers_match_particles(ctx: Context) -> Evidence:
    eta = 0.05
    rows = []
    for sigma2, tau2, h2 in GAUSSIAN_CASES:
        x0 = standardized_gaussian_tokens(N_TOKENS, tau2 + sigma2, seed=1)
        measured = meanfield.variance_horizon(x0, h2, tau2, eta=eta).layers
        predicted = depth_noise.gaussian_layers(sigma2, tau2, h2, eta)
        tol = N_STANDARD_ERRORS * horizon_standard_error(N_TOKENS, tau2, h2) / eta + 1
        rows.append({
            "sigma2": sigma2, "tau2": tau2, "h2": h2, "measured": measured, "predicted": predicted,
            "continuous": depth_noise.gaussian_horizon(sigma2, tau2, h2) / eta, "tolerance": tol,
            "passed": abs(measured - predicted) <= tol,
        })
    text = "; ".join(
        f"(s2={r['sigma2']:g}, t2={r['tau2']:g}, h2={r['h2']:g}): {r['measured']} layers vs map {r['predicted']} "
        f"(+-{r['tolerance']:.1f}), T_G/eta {r['continuous']:.1f}" for r in rows
    )
    return Evidence(
        passed=all(r["passed"] for r in rows),
        kind="identity",
        summary=f"Euler layers of step {eta} until the variance reaches tau2: {text}",
        data={"cases": rows, "n": N_TOKENS, "eta": eta},
    )
