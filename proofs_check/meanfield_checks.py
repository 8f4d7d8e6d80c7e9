"""Particle simulations against the derived mean-field results G1, G2 and S1.

The predictions come from :mod:`theory` (derived by sympy), the measurements from
:mod:`numerics.meanfield` (the Stage-1 flow on ``N >= 2000`` tokens); each tolerance
is fixed before the run from the size of the simulation, never tuned to the result.
"""

from __future__ import annotations

import numpy as np

from numerics import meanfield
from theory import depth_noise, stability

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Context, Evidence, check

N_TOKENS = 2000
#: (sigma2, tau2, h2) where N_TOKENS is far above the stability bound exp(2 sigma2 / (e h2)) (S1).
GAUSSIAN_CASES = ((1.0, 1.0, 0.5), (1.0, 1.0, 0.25))
#: Standard errors of the horizon allowed between simulation and prediction.
N_STANDARD_ERRORS = 3.0
#: Relative tolerance of a measured growth rate: linearisation error O(amplitude k) ~ 1e-4,
#: lattice sums exact to exp(-(2 pi)^2 h2 / (2 spacing^2)), ODE tolerance 1e-10.
GROWTH_RTOL = 1e-3


def standardized_gaussian_tokens(n: int, variance: float, seed: int) -> np.ndarray:
    """``n`` 1-D Gaussian tokens rescaled to sample mean 0 and sample variance ``variance`` exactly."""
    x = np.random.default_rng(seed).standard_normal((n, 1))
    x -= x.mean()
    return x * np.sqrt(variance / x.var(ddof=1))


def horizon_standard_error(n: int, tau2: float, h2: float) -> float:
    r"""Depth error implied by the sampling error of the variance at the end of the flow.

    The sample variance of ``n`` Gaussian tokens has relative standard error :math:`\sqrt{2/n}`;
    where the variance crosses :math:`\tau^2` it falls at rate :math:`2 h_2 \tau^2 / (\tau^2 + h_2)`,
    so a variance error :math:`\tau^2 \sqrt{2/n}` is a depth error :math:`\sqrt{2/n}\,(\tau^2 + h_2)/(2 h_2)`.
    """
    return float(np.sqrt(2.0 / n) * (tau2 + h2) / (2.0 * h2))


@check("G1", "particle flow (N = 2000) returns to the prior variance at the exact Gaussian horizon")
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


@check("G2", "particle layers (N = 2000) match the layer count of the exact variance map")
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


@check("S1", "growth of a sinusoidal perturbation of a token lattice (N = 2000) = lambda(k)")
def mode_growth_matches_linear_stability(ctx: Context) -> Evidence:
    h2 = 1.0
    k_star, rate_star = stability.fastest_mode(h2)
    ks = [k_star] if ctx.quick else [0.5 * k_star, k_star, 2.0 * k_star]
    rows = []
    for k in ks:
        fit = meanfield.mode_growth_rate(h2, k, spacing=0.1, length=200.0)
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
