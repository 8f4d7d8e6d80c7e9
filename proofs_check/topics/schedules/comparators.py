"""A1's comparators are what they say: the oracle reverse flow and the annealed flow, checked against definitions."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from attneb.numerics import kernels, schedules, stats
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import GaussianMixture
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.topics.schedules.comparison import PRIORS, SIGMA2, STREAM, annealed_is_fixed

#: Priors of the oracle's check as mixtures ``(means, var)`` of equal weights: their CDFs give the transport map.
TRANSPORT_PRIORS = {"gaussian": ((0.0,), 1.0), "two-cluster": ((-2.0, 2.0), 0.25)}


ORACLE_LAYERS = (8, 16, 32, 64, 128, 256)


ORACLE_POINTS = np.linspace(-4.0, 4.0, 41)


#: First order: the fitted slope of log error on log L within -1 +- this.
ORDER_TOL = 0.1


#: The error at the largest L must be below this (measured 2.5e-3 and 2.3e-3).
ORACLE_ERROR = 5e-3


def _mixture_cdf(y, means, var: float):
    return np.mean([0.5 * special.erfc(-(np.asarray(y) - m) / math.sqrt(2 * var)) for m in means], axis=0)


def transport_map(points: np.ndarray, means, var: float, sigma2: float) -> np.ndarray:
    """The 1-D flow map of the reverse ODE, the monotone map ``F_0^{-1}(F_sigma2(x))`` (by root finding)."""
    targets = _mixture_cdf(points, means, var + sigma2)
    lo, hi = min(means) - 40 * math.sqrt(var), max(means) + 40 * math.sqrt(var)
    return np.array([optimize.brentq(lambda y, u=u: _mixture_cdf(y, means, var) - u, lo, hi, xtol=1e-14, rtol=1e-14)
                     for u in targets])


def oracle_errors() -> dict:
    """Per transport prior, the largest error of the oracle flow against the transport map at each L."""
    errors = {}
    for name, (means, var) in TRANSPORT_PRIORS.items():
        prior = GaussianMixture([[m] for m in means], var=var)
        exact = transport_map(ORACLE_POINTS, means, var, SIGMA2)
        flows = [schedules.oracle_reverse_flow(ORACLE_POINTS[:, None], prior, SIGMA2, L)[:, 0] for L in ORACLE_LAYERS]
        errors[name] = [float(np.max(np.abs(out - exact))) for out in flows]
    return errors


def _wrong_oracle(factor: float = 1.0, level=lambda s, sigma2: s):
    """The oracle's layers with the step times ``factor`` and the posterior mean taken at ``level(s, sigma2)``."""
    def make(real):
        def flow_(noisy, prior, sigma2, n_layers):
            x = np.asarray(noisy, dtype=float)
            for layer, s in enumerate(schedules.noise_levels(sigma2, n_layers)[:-1]):
                x = x + factor * (prior.posterior_mean(x, level(float(s), sigma2)) - x) / (n_layers - layer)
            return x
        return flow_
    return make


@check("A1", "oracle reverse flow converges at first order to the transport map of the prior",
       criterion=f"Gaussian N(0, 1) and two clusters at +-2 (var 0.25), sigma2 = {SIGMA2:g}: at {len(ORACLE_POINTS)} "
                 "points "
                 f"in [-4, 4] the largest |oracle_reverse_flow - F_0^-1(F_sigma2(x))| (the monotone transport map from "
                 f"the CDFs, by root finding) at L in {ORACLE_LAYERS}; passes when for both priors the least-squares "
                 f"slope of log error on log L lies in [-{1 + ORDER_TOL:g}, -{1 - ORDER_TOL:g}] and the error at "
                 f"L = {ORACLE_LAYERS[-1]} is at most {ORACLE_ERROR:g}",
       covers=("attneb.numerics.schedules:oracle_reverse_flow", "attneb.numerics.schedules:noise_levels"),
       alternatives=[
           alternative("score without the factor 1/2", "every step twice as long (dx/d(-s) = score instead of score/2)",
                       swap("attneb.numerics.schedules:oracle_reverse_flow", _wrong_oracle(factor=2.0)),
                       kind="implementation"),
           alternative("level read as the noise sd", "the posterior mean at sqrt(s_l) instead of s_l",
                       swap("attneb.numerics.schedules:oracle_reverse_flow", _wrong_oracle(level=lambda s, s2: math.sqrt(s))),
                       kind="implementation"),
           alternative("level frozen at sigma2", "the posterior mean at the initial noise level in every layer",
                       swap("attneb.numerics.schedules:oracle_reverse_flow", _wrong_oracle(level=lambda s, s2: s2)),
                       kind="implementation"),
       ])
def oracle_transport(ctx: Context) -> Evidence:
    errors = oracle_errors()
    fits = {name: stats.loglog_slope(ORACLE_LAYERS, errs).slope for name, errs in errors.items()}
    passed = all(abs(fits[name].estimate + 1) <= ORDER_TOL and errs[-1] <= ORACLE_ERROR
                 for name, errs in errors.items())
    text = "; ".join(f"{name}: slope {fits[name].estimate:.3f}, error at L = {ORACLE_LAYERS[-1]} {errs[-1]:.2e}"
                     for name, errs in errors.items())
    return Evidence(passed=passed, kind="rate", summary=f"oracle against the transport map: {text} (passes with slopes "
                    f"within -1 +- {ORDER_TOL:g} and errors <= {ORACLE_ERROR:g})",
                    data={"layers": list(ORACLE_LAYERS), "errors": errors,
                          "slopes": {k: v.__dict__ for k, v in fits.items()}})


ANNEALED_CASES = tuple((dim, L, c) for dim in (1, 2) for L in (1, 4, 16) for c in (0.25, 1.0))


IDENTITY_RTOL = 1e-12


#: The binned path (tol 1e-9) against the written-out flow on exact sums, relative to the tokens' range.
BINNED_RTOL = 1e-7


def _written_out(noisy: np.ndarray, sigma2: float, n_layers: int, c: float) -> np.ndarray:
    """The annealed layers from their formulas: s_l = sigma2 (1 - l/L)^2, h_l = c s_l, eta_l = 1/(c (L - l))."""
    x = noisy
    for layer in range(n_layers):
        h = c * sigma2 * (1 - layer / n_layers) ** 2
        x = x + (kernels.kernel_mean(x, x, h) - x) / (c * (n_layers - layer))
    return x


def annealed_differences() -> dict:
    """Largest relative difference of annealed_flow from the written-out layers: exact sums (64 tokens, every case of
    :data:`ANNEALED_CASES`) and binned sums (1024 tokens from two clusters, L = 4, c = 1/4)."""
    rng = np.random.default_rng(11)
    exact = 0.0
    for dim, L, c in ANNEALED_CASES:
        noisy = rng.normal(0.0, 1.2, (64, dim)) + 0.7 * np.sign(rng.standard_normal((64, 1)))
        expected = _written_out(noisy, SIGMA2, L, c)
        got = schedules.annealed_flow(noisy, SIGMA2, L, c, backend="exact")
        exact = max(exact, float(np.max(np.abs(got - expected)) / np.max(np.abs(expected))))
    _, noisy = draw_batch(PRIORS["two-cluster"], SIGMA2, 1024, [STREAM, 2])
    expected = _written_out(noisy, SIGMA2, 4, 0.25)
    got = schedules.annealed_flow(noisy, SIGMA2, 4, 0.25, backend="binned", tol=1e-9)
    return {"exact": exact, "binned": float(np.max(np.abs(got - expected)) / np.ptp(noisy))}


def _euler_in_s(real):
    """Steps of explicit Euler in the variance, eta_l = (s_l - s_l+1) / (2 h_l), instead of in the noise sd."""
    def schedule(sigma2, n_layers, ratio):
        bandwidths, _ = real(sigma2, n_layers, ratio)
        levels = schedules.noise_levels(sigma2, n_layers)
        return bandwidths, -np.diff(levels) / (2 * bandwidths)
    return schedule


@check("A1", "annealed flow = its layers written out (h_l = c s_l, eta_l = 1/(c (L - l)))",
       criterion=f"d in {{1, 2}}, L in {{1, 4, 16}}, c in {{1/4, 1}}, 64 tokens: max |annealed_flow - the layers "
                 f"written out with kernels.kernel_mean| <= {IDENTITY_RTOL:g} x max |output|; and on 1024 tokens of "
                 f"two clusters (L = 4, c = 1/4) the binned path (tol 1e-9) within {BINNED_RTOL:g} x the tokens' range",
       covers=("attneb.numerics.schedules:annealed_flow", "attneb.numerics.schedules:annealed_schedule"),
       alternatives=[
           alternative("schedule secretly fixed", "the annealed flow keeps the bandwidth c sigma2 in every layer",
                       swap("attneb.numerics.schedules:annealed_schedule", annealed_is_fixed), kind="implementation"),
           alternative("Euler in the variance", "steps (s_l - s_l+1)/(2 h_l) of explicit Euler in s",
                       swap("attneb.numerics.schedules:annealed_schedule", _euler_in_s), kind="implementation"),
       ])
def annealed_written_out(ctx: Context) -> Evidence:
    diff = annealed_differences()
    passed = diff["exact"] <= IDENTITY_RTOL and diff["binned"] <= BINNED_RTOL
    return Evidence(passed=passed, kind="identity",
                    summary=f"largest relative difference over {len(ANNEALED_CASES)} cases (exact sums): "
                            f"{diff['exact']:.1e} (passes at <= {IDENTITY_RTOL:g}); binned path: {diff['binned']:.1e} "
                            f"(passes at <= {BINNED_RTOL:g})", data=diff)
