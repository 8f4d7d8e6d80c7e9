"""Anisotropic Gaussian prior :math:`N(m, \\mathrm{diag}(\\tau_k^2))`: one exact horizon per direction, none for all.

Stage 1 in mean field keeps a Gaussian token density Gaussian and acts on each direction alone
(:mod:`attneb.theory.gaussian`): the variance of direction ``k`` obeys
:math:`\\dot s_k = -2h_2 s_k/(s_k + h_2)` from :math:`s_k(0) = \\tau_k^2 + \\sigma^2` and is back to
:math:`\\tau_k^2` at its own horizon :math:`T_G(\\tau_k^2)`. Stage 2 (bandwidth :math:`\\sigma^2`)
over tokens :math:`\\sim N(m, \\mathrm{diag}(s_k))` is, as :math:`N \\to \\infty`, the posterior mean
under that prior: in ``d = 2`` (Gaussian integrals, ``gaussian_integral``; the density of a query is a
product over the directions) the linear map

.. math:: \\hat x_k = m_k + a_k (\\tilde x_k - m_k), \\qquad a_k = \\frac{s_k}{s_k + \\sigma^2},

whose slope in direction ``k`` involves :math:`s_k` only. Its risk per direction under the true
model (``gaussian_expectation`` over :math:`x_k = m_k + \\tau_k u`, :math:`\\tilde x_k = x_k + \\sigma v`) is

.. math:: R_k = (1 - a_k)^2 \\tau_k^2 + a_k^2 \\sigma^2,

minimal at :math:`s_k = \\tau_k^2` (``solve``; the Bayes rule, risk :math:`\\tau_k^2\\sigma^2/(\\tau_k^2 + \\sigma^2)`),
with the excess

.. math:: \\Delta_k(s) = (\\tau_k^2 + \\sigma^2)
          \\Big(\\frac{s}{s + \\sigma^2} - \\frac{\\tau_k^2}{\\tau_k^2 + \\sigma^2}\\Big)^2,
          \\qquad \\Delta_k'(s) = \\frac{2\\sigma^4 (s - \\tau_k^2)}{(s + \\sigma^2)^3}.

At depth ``T`` the total excess is :math:`E(T) = \\sum_k \\Delta_k(s_k(T))` with the exact (Lambert W)
:math:`s_k(T)`; each term falls until :math:`T_G(\\tau_k^2)` and rises after it, so the best depth
lies between the smallest and the largest per-direction horizon, and with equal :math:`\\tau_k^2`
it is :math:`T_G` with excess 0. For :math:`h_2 \\to 0` at depth :math:`T^* + c`,
:math:`s_k = \\tau_k^2 + h_2(\\log(1 + \\sigma^2/\\tau_k^2) - 2c) + O(h_2^2)` (the invariant of the
variance ODE solved order by order), so

.. math:: E(T^* + c) = 4 h_2^2 \\sigma^4 \\sum_k w_k (c_k - c)^2 + O(h_2^3), \\qquad
          w_k = (\\tau_k^2 + \\sigma^2)^{-3},\\; c_k = \\tfrac12 \\log(1 + \\sigma^2/\\tau_k^2),

minimised (``solve``, two directions) at the weighted mean :math:`c^* = \\sum_k w_k c_k / \\sum_k w_k`
with :math:`E = 4 h_2^2 \\sigma^4 w_1 w_2 (c_1 - c_2)^2/(w_1 + w_2) + O(h_2^3)`: the excess at the
best single depth is :math:`O(h_2^2)` and tends to 0 as :math:`h_2 \\to 0`, but no depth is exact at a
finite :math:`h_2` when the :math:`\\tau_k^2` differ.

Evaluators (numbers only; the derived expressions lambdified with mpmath, whose Lambert W and
exponentials hold at any ``h2``): :func:`variances_at_depth`, :func:`excess_at_depth` and
:func:`excess_slope_at_depth`; the best depth itself is :func:`attneb.theory.depth_noise.anisotropic_depth`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import mpmath
import sympy as sp

from . import _calculus, gaussian
from ._calculus import gaussian_density, series_in
from ._evaluate import check_positive, check_real
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["DEXCESS_DT", "DIGITS", "EXCESS", "EXCESS_AT_DEPTH", "EXCESS_TOTAL", "SHRINKAGE", "check_depth",
           "check_tau2s", "derivation", "excess_at_depth", "excess_slope_at_depth", "variances_at_depth"]

x1, x2, xt1, xt2, m1, m2 = sp.symbols("x1 x2 xt1 xt2 m1 m2", real=True)
u, v, a, c = sp.symbols("u v a c", real=True)
s1, s2 = sp.symbols("s1 s2", positive=True)
tau2_1, tau2_2 = sp.symbols("tau2_1 tau2_2", positive=True)
b1, b2 = sp.symbols("b1 b2")
k = sp.Symbol("k", integer=True, positive=True)
d = sp.Symbol("d", integer=True, positive=True)
tau2_k = sp.IndexedBase("tau2", positive=True)
sigma2, tau2, h2, s, t = gaussian.sigma2, gaussian.tau2, gaussian.h2, gaussian.s, gaussian.t
SHRINKAGE, EXCESS, EXCESS_AT_DEPTH, DEXCESS_DT, EXCESS_TOTAL = sp.symbols("a_s Delta Delta_T dDelta_dT E_T")
BEST_VARIANCE, BEST_OFFSET = sp.symbols("s_best c_star")
T_STAR = sp.Symbol("T_star", positive=True)
PLANE = ((x1, -sp.oo, sp.oo), (x2, -sp.oo, sp.oo))


def _stage_two_steps():
    """Mean-field Stage 2 over N(m, diag(s1, s2)) tokens in d = 2: linear, one slope per direction."""
    prior = gaussian_density(x1 - m1, s1) * gaussian_density(x2 - m2, s2)
    likelihood = gaussian_density(xt1 - x1, sigma2) * gaussian_density(xt2 - x2, sigma2)

    def plane_integral(integrand):
        return _calculus.gaussian_integral(_calculus.gaussian_integral(integrand, x2), x1)

    evidence = sp.simplify(plane_integral(prior * likelihood))
    mean = sp.simplify(plane_integral(x1 * prior * likelihood) / evidence)
    slope = sp.diff(mean, xt1)
    steps = [
        Step(sp.Eq(sp.Integral(prior * likelihood, *PLANE), evidence, evaluate=False),
             "d = 2: the density of a query xt seen through noise sigma2 when x ~ N(m, diag(s1, s2))", route="mpmath"),
        Step(sp.Eq(evidence, gaussian_density(xt1 - m1, s1 + sigma2) * gaussian_density(xt2 - m2, s2 + sigma2),
                   evaluate=False),
             "a product over the directions of N(m_k, s_k + sigma2)"),
        Step(sp.Eq(sp.Integral(x1 * prior * likelihood, *PLANE) / sp.Integral(prior * likelihood, *PLANE), mean,
                   evaluate=False),
             "d = 2, N -> oo: Stage 2 (bandwidth sigma2) over tokens ~ N(m, diag(s1, s2)) is the posterior mean "
             "under that prior; its first coordinate", route="mpmath"),
        Step(sp.Eq(mean, m1 + s1 / (s1 + sigma2) * (xt1 - m1), evaluate=False),
             "linear in the query and free of s2, xt2, m2: the directions decouple, slope a_k = s_k/(s_k + sigma2)"),
    ]
    return steps, slope.subs(s1, s)


def _risk_steps(shrinkage):
    """Risk of the linear Stage 2 per direction, its minimiser (Bayes) and the excess over Bayes."""
    # x = m + sqrt(tau2) u, xt = x + sqrt(sigma2) v with u, v ~ N(0, 1); the estimate m + a (xt - m)
    error = a * (sp.sqrt(tau2) * u + sp.sqrt(sigma2) * v) - sp.sqrt(tau2) * u
    mse = sp.expand(_calculus.gaussian_expectation(error**2, [u, v], 1))
    risk = mse.subs(a, shrinkage)
    (best,) = sp.solve(sp.diff(risk, s), s)
    bayes_risk = sp.simplify(risk.subs(s, best))
    excess = sp.factor(risk - bayes_risk)
    excess_slope = sp.factor(sp.diff(excess, s))
    steps = [
        Step(sp.Eq(sp.Integral(error**2 * gaussian_density(u, 1) * gaussian_density(v, 1),
                               (u, -sp.oo, sp.oo), (v, -sp.oo, sp.oo)), mse, evaluate=False),
             "risk per direction of m + a (xt - m) under the true model x ~ N(m, tau2), xt = x + sigma z",
             route="mpmath"),
        Step(sp.Eq(sp.Derivative(sp.factor(risk), s), 0, evaluate=False),
             "with a = s/(s + sigma2): solve dR/ds = 0 for the token variance s", given=(sp.Eq(s, best),),
             route="substitute"),
        Step(sp.Eq(sp.sign(sp.factor(sp.diff(risk, s, 2).subs(s, best)), evaluate=False), 1, evaluate=False),
             "a minimum"),
    ]
    claims = [
        ClaimedForm(sp.Eq(best, tau2, evaluate=False),
                    "the risk of the linear Stage 2 is minimal at token variance s = tau2 (per direction)", ref="G4",
                    name=BEST_VARIANCE),
        ClaimedForm(sp.Eq(bayes_risk, tau2 * sigma2 / (tau2 + sigma2), evaluate=False),
                    "there it is the Bayes risk tau2 sigma2/(tau2 + sigma2) (Stage 2 is the Bayes rule)", ref="G4",
                    name=sp.Function("R")(BEST_VARIANCE)),
        ClaimedForm(sp.Eq(risk - bayes_risk, (s / (s + sigma2) - tau2 / (tau2 + sigma2)) ** 2 * (tau2 + sigma2),
                          evaluate=False),
                    "excess over Bayes per direction (s/(s + sigma2) - tau2/(tau2 + sigma2))^2 (tau2 + sigma2)",
                    ref="G4", name=EXCESS),
        ClaimedForm(sp.Eq(sp.Derivative(excess, s), 2 * sigma2**2 * (s - tau2) / (s + sigma2) ** 3, evaluate=False),
                    "the excess falls as s comes down to tau2 and rises below it: 2 sigma2^2 (s - tau2)/(s + sigma2)^3",
                    ref="G4", name=sp.Derivative(EXCESS, s)),
    ]
    return steps, claims, mse, excess, excess_slope


def _depth_steps(shrinkage, excess, excess_slope):
    """The excess at depth T along the exact variance flow; Stage 2 is Bayes at the direction's own horizon."""
    flow = gaussian.derivation()
    solution = flow.result_of(gaussian.S(t))
    rate = flow.result_of(sp.Symbol("ds/dt"))
    horizon = flow.result_of(gaussian.T_GAUSS)
    at_depth = excess.subs(s, solution)
    slope_at_depth = (excess_slope * rate).subs(s, solution)
    total = sp.Sum(at_depth.subs(tau2, tau2_k[k]), (k, 1, d))
    steps = [
        Step(sp.Eq(sp.Derivative(at_depth, t), slope_at_depth, evaluate=False),
             "chain rule along the variance flow (theory.gaussian, Lambert W): d/dT Delta(s(T)) = Delta'(s) ds/dt",
             route="mpmath"),
    ]
    claims = [
        ClaimedForm(sp.Eq(shrinkage.subs(s, solution).subs(t, horizon), tau2 / (tau2 + sigma2), evaluate=False),
                    "at its own horizon T_G(tau2_k) each direction's Stage 2 has the Bayes slope "
                    "tau2_k/(tau2_k + sigma2) and excess 0; with equal tau2_k all do at one depth: the best depth is "
                    "T_G and the excess 0", ref="G4", name=sp.Function("a")(gaussian.T_GAUSS)),
    ]
    results = [sp.Eq(EXCESS_AT_DEPTH, at_depth, evaluate=False), sp.Eq(DEXCESS_DT, slope_at_depth, evaluate=False),
               sp.Eq(EXCESS_TOTAL, total, evaluate=False)]
    return steps, claims, results


def _small_bandwidth_steps(excess):
    """Variance and excess at depth T* + c as h2 -> 0; the best offset c for two directions."""
    rate = gaussian.derivation().result_of(sp.Symbol("ds/dt"))
    start = tau2 + sigma2
    invariant = sp.integrate(sp.cancel(1 / rate), s) - t
    depth = sigma2 / (2 * h2) + c
    trial = tau2 + b1 * h2 + b2 * h2**2
    # -2 h2 (invariant) = s + h2 log s + 2 h2 t: an O(1) quantity, expanded to O(h2^3)
    mismatch = -2 * h2 * (invariant.subs(s, trial) - invariant.subs({s: start, t: 0})).subs(t, depth)
    coefficients = sp.solve([series_in(mismatch, h2, 3).removeO().coeff(h2, n) for n in (1, 2)], [b1, b2], dict=True)[0]
    variance = trial.subs(coefficients)
    direction = excess.subs(s, variance)
    leading = series_in(direction, h2, 3).removeO().coeff(h2, 2)
    two = [leading.subs(tau2, tau2_1), leading.subs(tau2, tau2_2)]
    (best,) = sp.solve(sp.diff(sum(two), c), c)
    best = sp.expand_log(best)  # solve folds the logs into one; the positive symbols let them be split again
    at_best = sum(direction.subs(tau2, value) for value in (tau2_1, tau2_2)).subs(c, best)

    def weight(value):
        return (value + sigma2) ** -3

    def offset(value):
        return sp.log(1 + sigma2 / value) / 2

    w1, w2, c1, c2 = weight(tau2_1), weight(tau2_2), offset(tau2_1), offset(tau2_2)
    steps = [
        Step(sp.Eq(mismatch, sp.O(h2**3), evaluate=False),
             "variance at depth T* + c, T* = sigma2/(2 h2): the invariant s + h2 log s + 2 h2 t of the flow solved "
             "order by order, s = tau2 + b1 h2 + b2 h2^2 + O(h2^3)",
             given=tuple(sp.Eq(key, value) for key, value in coefficients.items()), route="substitute"),
        Step(sp.Eq(sp.Derivative(sum(two), c), 0, evaluate=False),
             "two directions: solve d/dc of the h2^2 coefficient of Delta_1 + Delta_2 = 0 for the offset c",
             given=(sp.Eq(c, best),), route="substitute"),
    ]
    claims = [
        ClaimedForm(sp.Eq(variance + sp.O(h2**3), tau2 + h2 * (sp.log(1 + sigma2 / tau2) - 2 * c) + sp.O(h2**2),
                          evaluate=False),
                    "at depth T* + c the variance left is tau2 + h2 (log(1 + sigma2/tau2) - 2 c) + O(h2^2)",
                    ref="G4", name=gaussian.S(T_STAR + c)),
        ClaimedForm(sp.Eq(direction, 4 * sigma2**2 * (offset(tau2) - c) ** 2 / (tau2 + sigma2) ** 3 * h2**2
                          + sp.O(h2**3), evaluate=False),
                    "excess per direction at T* + c: 4 sigma2^2 (c_k - c)^2 h2^2/(tau2_k + sigma2)^3 + O(h2^3), "
                    "c_k = log(1 + sigma2/tau2_k)/2, zero at c = c_k (T_G)", ref="G4",
                    name=sp.Function("Delta")(T_STAR + c)),
        ClaimedForm(sp.Eq(best, (w1 * c1 + w2 * c2) / (w1 + w2), evaluate=False),
                    "leading-order best depth T* + c*, c* the mean of the per-direction corrections c_k weighted by "
                    "(tau2_k + sigma2)^-3", ref="G4", name=BEST_OFFSET),
        ClaimedForm(sp.Eq(at_best, 4 * sigma2**2 * w1 * w2 / (w1 + w2) * (c1 - c2) ** 2 * h2**2 + sp.O(h2**3),
                          evaluate=False),
                    "excess at T* + c*: 4 sigma2^2 w1 w2 (c1 - c2)^2 h2^2/(w1 + w2) + O(h2^3): O(h2^2), -> 0 as "
                    "h2 -> 0, and > 0 at finite h2 unless tau2_1 = tau2_2", ref="G4",
                    name=sp.Function("E")(T_STAR + BEST_OFFSET)),
    ]
    return steps, claims, sp.Eq(BEST_OFFSET, best, evaluate=False)


@cache
def derivation() -> Derivation:
    """Build the ``anisotropic`` derivation (claim G4)."""
    stage_two, shrinkage = _stage_two_steps()
    risk_steps, risk_claims, mse, excess, excess_slope = _risk_steps(shrinkage)
    depth_steps, depth_claims, depth_results = _depth_steps(shrinkage, excess, excess_slope)
    small_steps, small_claims, best_offset = _small_bandwidth_steps(excess)
    return Derivation(
        "anisotropic",
        "Anisotropic Gaussian prior: per-direction horizons, the excess risk at depth T and the best single depth",
        [x1, x2, xt1, xt2, m1, m2, u, v, a, c, s, s1, s2, sigma2, tau2, tau2_1, tau2_2, h2, t, d],
        stage_two + risk_steps + depth_steps + small_steps,
        [sp.Eq(EXCESS, excess, evaluate=False), *depth_results, sp.Eq(SHRINKAGE, shrinkage, evaluate=False),
         sp.Eq(sp.Symbol("R"), mse, evaluate=False), best_offset],
        risk_claims + depth_claims + small_claims,
    )


# --------------------------------------------------------------------------- evaluators

#: Working precision (decimal digits) of the mpmath evaluations.
DIGITS = 20


def check_tau2s(tau2s) -> tuple[float, ...]:
    """Return the prior variances ``tau2s`` (one per direction) as floats, or raise naming the bad entry.

    Raises
    ------
    TypeError
        If ``tau2s`` is not an iterable of real numbers.
    ValueError
        If it is empty, or an entry is not finite and > 0 (``"tau2s[1] == -1.0, must be > 0"``).
    """
    if isinstance(tau2s, (str, bytes)):
        raise TypeError(f"tau2s must be a sequence of prior variances, got {tau2s!r}")
    try:
        values = list(tau2s)
    except TypeError:
        raise TypeError(f"tau2s must be a sequence of prior variances (one per direction), got {tau2s!r} of type "
                        f"{type(tau2s).__name__}") from None
    if not values:
        raise ValueError("tau2s is empty; give one prior variance per direction, e.g. tau2s=(0.25, 2.0)")
    return tuple(check_positive(value, f"tau2s[{i}]") for i, value in enumerate(values))


def check_depth(value, name: str = "T") -> float:
    """Return the depth ``value`` as a float, or raise if it is not a finite number >= 0."""
    value = check_real(value, name)
    if value < 0:
        raise ValueError(f"{name} == {value}, must be >= 0")
    return value


@cache
def _compiled(lhs):
    """The result ``lhs`` of the derivation as an mpmath function of ``(tau2, sigma2, h2, t)``."""
    return sp.lambdify((tau2, sigma2, h2, t), derivation().result_of(lhs), "mpmath")


@cache
def _variance():
    return sp.lambdify((tau2, sigma2, h2, t), gaussian.derivation().result_of(gaussian.S(t)), "mpmath")


def _per_direction(function, tau2s, sigma2_value, h2_value, depth) -> list[float]:
    tau2s = check_tau2s(tau2s)
    sigma2_value, h2_value = check_positive(sigma2_value, "sigma2"), check_positive(h2_value, "h2")
    depth = check_depth(depth)
    with mpmath.workdps(DIGITS):
        return [float(function(value, sigma2_value, h2_value, depth)) for value in tau2s]


def variances_at_depth(tau2s: Sequence[float], sigma2_value, h2_value, depth) -> tuple[float, ...]:
    r"""Mean-field token variance of each direction at depth ``T`` (the exact Lambert-W solution).

    .. math:: s_k(T):\quad \dot s_k = -\frac{2 h_2 s_k}{s_k + h_2},\quad s_k(0) = \tau_k^2 + \sigma^2

    (``dsolve`` in :mod:`attneb.theory.gaussian`; the flow acts on each direction alone).

    Parameters
    ----------
    tau2s : sequence of float
        Prior variance of each direction, > 0.
    sigma2_value, h2_value : float
        Noise variance and Stage-1 bandwidth, > 0.
    depth : float
        Depth ``T``, >= 0.

    Returns
    -------
    tuple of float
        :math:`(s_1(T), \ldots, s_d(T))`.
    """
    return tuple(_per_direction(_variance(), tau2s, sigma2_value, h2_value, depth))


def excess_at_depth(tau2s: Sequence[float], sigma2_value, h2_value, depth) -> float:
    r"""Total excess risk over Bayes of the two-stage estimator with Stage 1 run to depth ``T`` (mean field).

    .. math:: E(T) = \sum_k (\tau_k^2 + \sigma^2)\Big(\frac{s_k(T)}{s_k(T) + \sigma^2}
              - \frac{\tau_k^2}{\tau_k^2 + \sigma^2}\Big)^2

    with :math:`s_k(T)` from :func:`variances_at_depth`: the **sum** over directions of
    :math:`E\,(\hat x_k - x_k)^2 - \mathrm{MMSE}_k` (divide by ``d`` for the per-coordinate risk).

    Parameters
    ----------
    tau2s, sigma2_value, h2_value, depth
        As in :func:`variances_at_depth`.

    Returns
    -------
    float
    """
    return math.fsum(_per_direction(_compiled(EXCESS_AT_DEPTH), tau2s, sigma2_value, h2_value, depth))


def excess_slope_at_depth(tau2s: Sequence[float], sigma2_value, h2_value, depth) -> float:
    r"""Derivative in ``T`` of :func:`excess_at_depth`.

    .. math:: E'(T) = \sum_k \frac{2\sigma^4 (s_k - \tau_k^2)}{(s_k + \sigma^2)^3}
              \cdot \Big(-\frac{2 h_2 s_k}{s_k + h_2}\Big), \qquad s_k = s_k(T),

    negative for ``T`` below every direction's horizon :math:`T_G(\tau_k^2)`, positive above all.
    """
    return math.fsum(_per_direction(_compiled(DEXCESS_DT), tau2s, sigma2_value, h2_value, depth))
