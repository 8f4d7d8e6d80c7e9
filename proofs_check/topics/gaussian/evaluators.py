"""The theory's evaluators against independent numerics (S1, G2).

The evaluators of :mod:`attneb.theory.stability` and :mod:`attneb.theory.depth_noise` turn derived closed
forms into numbers that the experiments compare with. Here each is recomputed numerically: the
Gaussian variance map and the horizons from the mean-field attention by quadrature against the
Gaussian density (a route that shares nothing with the derivation); the fastest mode and the token
scaling by maximising the evaluator ``growth_rate`` numerically (a consistency check of the three
evaluators with one another: ``growth_rate`` itself is checked against particles by the lattice check).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate

from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.theory import depth_noise

#: Relative tolerance of the comparisons: the maximisation (xatol 1e-12 on k h2^(1/2)) and the
#: quadratures (rtol 1e-12) are exact to ~1e-10 relative.
RTOL = 1e-8


def _mean_field_slope(s: float, h2: float) -> float:
    """Slope of the mean-field attention ``a(x) = E[y K(x - y)] / E[K(x - y)]``, ``y ~ N(0, s)``, by quadrature at x = 1."""
    sd = math.sqrt(s)

    def weight(u):  # y = sd * u
        return math.exp(-u * u / 2 - (1.0 - sd * u) ** 2 / (2 * h2))

    num = integrate.quad(lambda u: u * weight(u), -12.0, 12.0, epsabs=0, epsrel=1e-12, limit=200)[0]
    den = integrate.quad(weight, -12.0, 12.0, epsabs=0, epsrel=1e-12, limit=200)[0]
    return sd * num / den


#: The layers compared: (s0, h2, eta, layers).
MAP_CASES = ((1.5, 0.05, 0.05, 4), (3.0, 0.7, 0.5, 4), (4.0, 0.5, 1.0, 3))


@check("G2", "Gaussian variance map = one layer of the mean-field attention, by quadrature",
       criterion=f"for (s0, h2, eta, layers) in {MAP_CASES}: every variance of gaussian_variance_map equals the "
       "iteration s -> (1 + eta (A(s) - 1))^2 s, A(s) the slope of the mean-field attention over N(0, s) computed "
       f"by quadrature, within {RTOL:g} relative",
       alternatives=[
           alternative("map with eta/2", "the variance map iterated with half the step",
                       swap("attneb.theory.depth_noise:gaussian_variance_map",
                            lambda real: lambda s0, h2, eta, layers: real(s0, h2, eta / 2, layers))),
           alternative("continuous flow in place of the layers", "s -> s exp(-2 eta h2/(s + h2)) per layer",
                       swap("attneb.theory.depth_noise:gaussian_variance_map", lambda real: _continuous_map)),
       ],
       covers=("attneb.theory.depth_noise:gaussian_variance_map",))
def variance_map_by_quadrature(ctx: Context) -> Evidence:
    residuals = {}
    for s0, h2, eta, layers in MAP_CASES:
        mapped = np.asarray(depth_noise.gaussian_variance_map(s0, h2, eta, layers))
        expected = [s0]
        for _ in range(layers):
            s = expected[-1]
            expected.append((1 + eta * (_mean_field_slope(s, h2) - 1)) ** 2 * s)
        residuals[f"s0={s0} h2={h2} eta={eta}"] = float(np.max(np.abs(mapped / np.array(expected) - 1)))
    worst = max(residuals.values())
    return Evidence(passed=worst <= RTOL, kind="numeric",
                    summary=f"gaussian_variance_map vs layers of the mean-field attention by quadrature: worst "
                    f"relative residual {worst:.1e} (tolerance {RTOL:g})",
                    data={"residuals": residuals, "tolerance": RTOL})


def _numeric_horizon(sigma2: float, tau2: float, h2: float) -> float:
    """Depth at which the mean-field variance ODE ``ds/dt = 2 s (A(s) - 1)`` brings ``tau2 + sigma2`` to ``tau2``.

    ``A(s)`` is the slope of the mean-field attention by quadrature; the ODE is integrated by
    DOP853 (rtol 1e-12) to the event ``s = tau2``.
    """
    def reached(t, s):
        return s[0] - tau2

    reached.terminal = True
    sol = integrate.solve_ivp(lambda t, s: [2 * s[0] * (_mean_field_slope(s[0], h2) - 1)], (0.0, 1e3),
                              [tau2 + sigma2], method="DOP853", rtol=1e-12, atol=1e-14, events=reached)
    return float(sol.t_events[0][0])


#: (sigma2, tau2, h2) at which the horizons are recomputed; and the small bandwidths of the leading-order limit.
HORIZON_CASES = ((0.5, 1.0, 0.3), (2.0, 0.25, 0.7), (3.0, 1.5, 2.0))


SMALL_H2 = (0.02, 0.01)


@check("G1", "exact Gaussian and leading-order horizons = the mean-field variance ODE integrated numerically",
       criterion=f"at (sigma2, tau2, h2) in {HORIZON_CASES}: gaussian_horizon equals the depth at which ds/dt = 2 s "
       "(A(s) - 1), A(s) the slope of the mean-field attention over N(0, s) by quadrature, integrated by DOP853 to s = "
       f"tau2, within {RTOL:g} relative; and h2 leading_horizon(sigma2, h2) equals the h2 -> 0 limit of h2 times that "
       f"depth, extrapolated linearly from h2 in {SMALL_H2}, within {RTOL:g} relative",
       alternatives=[
           alternative("horizon correction 1/4", "T_G = T* + (1/4) log(1 + sigma2/tau2)",
                       swap("attneb.theory.depth_noise:gaussian_horizon",
                            lambda real: lambda s2, t2, h2: s2 / (2 * h2) + 0.25 * math.log1p(s2 / t2))),
           alternative("leading order sigma2/h2", "T* = sigma2/h2 (variance removed at rate h2)",
                       swap("attneb.theory.depth_noise:leading_horizon", lambda real: lambda s2, h2: s2 / h2)),
       ],
       covers=("attneb.theory.depth_noise:gaussian_horizon", "attneb.theory.depth_noise:leading_horizon"))
def horizons_by_the_numeric_variance_flow(ctx: Context) -> Evidence:
    residuals = {}
    for sigma2, tau2, h2 in HORIZON_CASES:
        numeric = _numeric_horizon(sigma2, tau2, h2)
        residuals[f"T_G sigma2={sigma2} tau2={tau2} h2={h2}"] = abs(depth_noise.gaussian_horizon(sigma2, tau2, h2)
                                                                    / numeric - 1)
        (a, b), (ta, tb) = SMALL_H2, (_numeric_horizon(sigma2, tau2, h2_) for h2_ in SMALL_H2)
        limit = (b * (a * ta) - a * (b * tb)) / (b - a)  # h2 T(h2) is linear in h2 for the Gaussian prior
        residuals[f"T* sigma2={sigma2} h2={h2}"] = abs(h2 * depth_noise.leading_horizon(sigma2, h2) / limit - 1)
    worst = max(residuals.values())
    return Evidence(passed=worst <= RTOL, kind="numeric",
                    summary=f"gaussian_horizon and leading_horizon vs the mean-field variance ODE by quadrature and "
                    f"DOP853: worst relative residual {worst:.1e} (tolerance {RTOL:g})",
                    data={"residuals": residuals, "tolerance": RTOL})


def _continuous_map(s0, h2, eta, layers):
    variances = [s0]
    for _ in range(layers):
        s = variances[-1]
        variances.append(s * math.exp(-2 * eta * h2 / (s + h2)))
    return variances
