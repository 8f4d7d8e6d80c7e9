"""Gaussian prior, exactly: linear velocity, variance ODE, horizon and the discrete layer map.

For :math:`\\rho = N(m, s)` (per coordinate), :math:`\\rho * \\varphi_{h_2} = N(m, s + h_2)`
(``gaussian_integral``), the mean-field velocity is linear,
:math:`v = h_2\\partial_x\\log(\\rho*\\varphi_{h_2}) = -\\frac{h_2}{s + h_2}(x - m)`, the
flow keeps the density Gaussian with fixed mean and variance

.. math:: \\frac{ds}{dt} = -\\frac{2 h_2 s}{s + h_2}, \\qquad s(0) = \\tau^2 + \\sigma^2

(``dsolve``: a Lambert-W solution), and the variance is back to ``tau2`` at

.. math:: T_G = \\frac{\\sigma^2}{2 h_2} + \\frac12\\log\\frac{\\tau^2 + \\sigma^2}{\\tau^2}
          = T^* + O(1)

(separation of variables, ``integrate``; checked by ``mpmath.quad`` and by the
``dsolve`` solution). At :math:`T^*` the variance left is
:math:`\\tau^2 + h_2 \\log(1 + \\sigma^2/\\tau^2) + O(h_2^2)` (the invariant solved
order by order in ``h2``), and the exact solution there tends to :math:`\\tau^2` as
:math:`h_2 \\to 0` (``mpmath.limit``: sympy's ``limit`` cannot do it). One residual
layer of step ``eta`` maps the variance exactly by
:math:`s \\mapsto (1 - \\eta h_2/(s + h_2))^2 s`, an Euler step of the ODE; at :math:`\\eta = 1`
(Gaussian blurring mean shift) the standard deviation maps cubically,
:math:`\\varsigma \\mapsto \\varsigma^3/(\\varsigma^2 + h_2)`.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import _calculus
from ._calculus import gaussian_density, series_in
from ._evaluate import evaluate
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["LAYER_MAP", "T_GAUSS", "VARIANCE_AT_T_STAR", "derivation", "stage2_bandwidth_family"]

x, y, m = sp.symbols("x y m", real=True)
s, h2, sigma2, tau2, eta = sp.symbols("s h2 sigma2 tau2 eta", positive=True)
SD = sp.Symbol("sd", positive=True)
t = sp.Symbol("t", nonnegative=True)
a1, a2 = sp.symbols("a1 a2")
S = sp.Function("s")
X = sp.Function("X")
T_GAUSS, LAYER_MAP, VARIANCE_AT_T_STAR = sp.symbols("T_G s_next s_Tstar")


def _velocity_steps():
    """Smoothed Gaussian, linear velocity, and the variance ODE."""
    smoothed_integral = sp.Integral(gaussian_density(y - m, s) * gaussian_density(x - y, h2), (y, -sp.oo, sp.oo))
    smoothed = sp.simplify(_calculus.gaussian_integral(smoothed_integral.function, y))
    velocity = sp.simplify(h2 * sp.diff(sp.log(smoothed), x))
    slope = sp.diff(velocity, x)
    rate = 2 * slope * s
    density = gaussian_density(x - m, S(t))
    on_variance_ode = (sp.Eq(sp.Derivative(S(t), t), rate.subs(s, S(t))),)
    steps = [
        Step(sp.Eq(smoothed_integral, smoothed, evaluate=False), "rho * phi_h2 for rho = N(m, s)", route="mpmath"),
        Step(sp.Eq(smoothed, gaussian_density(x - m, s + h2), evaluate=False), "a Gaussian N(m, s + h2)"),
        Step(sp.Eq(h2 * sp.Derivative(sp.log(smoothed), x), -h2 / (s + h2) * (x - m), evaluate=False),
             "the mean-field velocity is linear in x and vanishes at the mean: -h2 / (s + h2) (x - m)"),
        Step(sp.Eq(sp.Derivative((X(t) - m) ** 2, t), 2 * slope * (X(t) - m) ** 2, evaluate=False),
             "along dX/dt = slope (X - m): d/dt (X - m)^2 = 2 slope (X - m)^2; average: ds/dt = 2 slope s",
             given=(sp.Eq(sp.Derivative(X(t), t), slope * (X(t) - m)),)),
        Step(sp.Eq(sp.Derivative(density, t),
                   -sp.Derivative(density * velocity.subs(s, S(t)), x), evaluate=False),
             "N(m, s(t)) with this ODE solves the mean-field PDE exactly: Gaussians stay Gaussian",
             given=on_variance_ode),
    ]
    return steps, rate


def _horizon_steps(rate):
    """dsolve for s(t); separation for the horizon; invariant; expansions."""
    start = tau2 + sigma2
    solution = sp.dsolve(sp.Eq(S(t).diff(t), rate.subs(s, S(t))), S(t), ics={S(0): start}).rhs
    horizon = sp.expand(sp.integrate(sp.cancel(-1 / rate), (s, tau2, start)))
    invariant = sp.integrate(sp.cancel(1 / rate), s) - t
    leading = sp.limit(h2 * horizon, h2, 0) / h2
    t_star = sigma2 / (2 * h2)
    trial = tau2 + a1 * h2 + a2 * h2**2
    # -2 h2 (invariant) = s + h2 log s + 2 h2 t: an O(1) quantity, expanded to O(h2^3)
    mismatch = -2 * h2 * (invariant.subs(s, trial) - invariant.subs({s: start, t: 0})).subs(t, t_star)
    coefficients = sp.solve([series_in(mismatch, h2, 3).removeO().coeff(h2, k) for k in (1, 2)], [a1, a2], dict=True)[0]
    left_at_t_star = trial.subs(coefficients) + sp.O(h2**3)
    steps = [
        Step(sp.Eq(sp.ImmutableMatrix([sp.Derivative(S(t), t), S(0)]), sp.ImmutableMatrix([rate.subs(s, S(t)), start]),
                   evaluate=False),
             "dsolve from s(0) = tau2 + sigma2 (Lambert W)", given=(sp.Eq(S(t), solution),), route="substitute"),
        Step(sp.Eq(sp.Derivative(invariant.subs(s, S(t)), t), 0, evaluate=False),
             "separation of variables: this quantity is conserved along the ODE",
             given=(sp.Eq(sp.Derivative(S(t), t), rate.subs(s, S(t))),)),
        Step(sp.Eq(sp.Integral(sp.cancel(-1 / rate), (s, tau2, start)), horizon, evaluate=False),
             "depth to go from tau2 + sigma2 down to tau2: integrate dt = ds / (ds/dt)", route="mpmath"),
        Step(sp.Eq(solution.subs(t, horizon), tau2, evaluate=False),
             "the dsolve solution is back at tau2 at that depth: s(T_G) = tau2"),
        Step(sp.Eq(horizon - leading, sp.log(1 + sigma2 / tau2) / 2, evaluate=False),
             "the correction to the leading term lim(h2 T_G) / h2 is exact and h2-free"),
        Step(sp.Eq(mismatch, sp.O(h2**3), evaluate=False),
             "variance left at T* = sigma2/(2 h2): the invariant solved order by order in h2, "
             "s = tau2 + a1 h2 + a2 h2^2 + O(h2^3)", given=tuple(sp.Eq(k, v) for k, v in coefficients.items()),
             route="substitute"),
    ]
    results = [sp.Eq(T_GAUSS, horizon, evaluate=False), sp.Eq(S(t), solution, evaluate=False),
               sp.Eq(VARIANCE_AT_T_STAR, left_at_t_star, evaluate=False)]
    claims = [
        ClaimedForm(sp.Eq(horizon, sigma2 / (2 * h2) + sp.O(1, (h2, 0)), evaluate=False),
                    "the exact Gaussian horizon is T* = sigma2 / (2 h2) at leading order", ref="C6", name=T_GAUSS),
        ClaimedForm(sp.Eq(left_at_t_star, tau2 + h2 * sp.log(1 + sigma2 / tau2) + sp.O(h2**2), evaluate=False),
                    "at T* = sigma2 / (2 h2) the variance left is tau2 + h2 log(1 + sigma2/tau2) + O(h2^2)",
                    ref="C8", name=VARIANCE_AT_T_STAR),
        ClaimedForm(sp.Eq(sp.Limit(solution.subs(t, t_star), h2, 0), tau2, evaluate=False),
                    "the exact (Lambert W) variance at T* returns to the prior's tau2 as h2 -> 0 (Gaussian case of C8)",
                    ref="C8", route="mpmath", name=sp.Limit(S(sp.Symbol("T_star")), h2, 0)),
    ]
    return steps, results, claims


def _layer_steps(rate):
    """The exact one-layer variance map and its eta -> 0 limit."""
    slope = rate / (2 * s)
    layer = x + eta * slope * (x - m)
    factor = sp.cancel((layer - m) / (x - m))
    variance_map = factor**2 * s
    steps = [
        Step(sp.Eq((layer - m) / (x - m), 1 - eta * h2 / (s + h2), evaluate=False),
             "one residual layer x + eta v(x) scales the deviation from m by a factor free of x"),
        Step(sp.Eq(sp.Limit((variance_map - s) / eta, eta, 0), -2 * h2 * s / (s + h2), evaluate=False),
             "s -> factor^2 s is an Euler step of ds/dt = -2 h2 s / (s + h2): eta * (layers) -> T_G as eta -> 0"),
        Step(sp.Eq(sp.sqrt(variance_map.subs({eta: 1, s: SD**2})), SD**3 / (SD**2 + h2), evaluate=False),
             "at eta = 1 (Gaussian blurring mean shift) the standard deviation sd = sqrt(s) maps cubically, "
             "sd -> sd^3/(sd^2 + h2): times sd^2/(sd^2 + h2), about 1 - h2/sd^2 while sd^2 >> h2 and sd^2/h2 "
             "once sd^2 << h2"),
    ]
    return steps, variance_map


@cache
def derivation() -> Derivation:
    """Build the ``gaussian`` derivation (Gaussian prior at finite h2 and finite eta)."""
    velocity_steps, rate = _velocity_steps()
    horizon_steps, results, claims = _horizon_steps(rate)
    layer_steps, variance_map = _layer_steps(rate)
    return Derivation(
        "gaussian",
        "Gaussian prior: exact variance flow, horizon T_G and the discrete layer map",
        [x, y, m, s, h2, sigma2, tau2, eta, t],
        velocity_steps + horizon_steps + layer_steps,
        results + [sp.Eq(sp.Symbol("ds/dt"), rate, evaluate=False), sp.Eq(LAYER_MAP, variance_map, evaluate=False)],
        claims,
    )


@cache
def _stage2_family():
    """The Stage-2 bandwidth that makes attention over ``N(m, s)`` tokens the Bayes rule, as a sympy expression."""
    q, bandwidth = sp.symbols("q bandwidth", positive=True)
    log_posterior = -(x - m) ** 2 / (2 * s) - (q - x) ** 2 / (2 * bandwidth)
    (posterior_mean,) = sp.solve(sp.diff(log_posterior, x), x)
    slope = sp.diff(posterior_mean, q)
    (family,) = sp.solve(sp.Eq(slope, tau2 / (tau2 + sigma2)), bandwidth)
    return family


def stage2_bandwidth_family(s_value, sigma2_value, tau2_value):
    r"""Stage-2 bandwidth :math:`h` for which one attention step over tokens :math:`\sim N(m, s)` is Bayes.

    With infinitely many keys distributed as :math:`N(m, s)`, the attention step of bandwidth
    :math:`h` is the posterior mean under the prior :math:`N(m, s)` and the likelihood
    :math:`N(q; x, h)` (Gaussian posterior: its mean solves :math:`\partial_x \log` posterior
    :math:`= 0`), :math:`m + \frac{s}{s + h}(q - m)`; it equals the Bayes rule
    :math:`m + \frac{\tau^2}{\tau^2 + \sigma^2}(q - m)` of the prior :math:`N(m, \tau^2)` at noise
    :math:`\sigma^2` on the family :math:`h = s\,\sigma^2/\tau^2` (both solved by sympy). The
    construction is its point :math:`s = \tau^2`, :math:`h = \sigma^2`; a Stage 1 that leaves the
    tokens at any other variance :math:`s` is equally good with the bandwidth :math:`h(s)`.
    Numbers give a float, arrays (broadcast) a float64 array, sympy expressions an expression.
    """
    arguments = {s: (s_value, "s"), sigma2: (sigma2_value, "sigma2"), tau2: (tau2_value, "tau2")}
    return evaluate(_stage2_family(), arguments, positive=arguments)
