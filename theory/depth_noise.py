"""Depth-noise relation: reverse diffusion in depth time, T* = sigma2 / (2 h2) (C5, C6).

The variance-exploding diffusion :math:`dx = dW` has densities
:math:`p_s = \\rho_0 * \\varphi_s` (variance grows at rate 1) solving
:math:`\\partial_s p = \\tfrac12 \\partial_x^2 p`; its probability-flow ODE
:math:`dx/ds = -\\tfrac12\\partial_x\\log p_s` transports :math:`p_s` exactly.
Running it backwards on the clock :math:`s = s_0 - c\\,t` gives
:math:`\\partial_t p = -\\tfrac{c}{2}\\partial_x^2 p`; matching the small-``h2``
mean-field equation :math:`\\partial_t\\rho = -h_2\\partial_x^2\\rho` (from
:mod:`attneb.theory.mean_field`) solves to :math:`c = 2 h_2`: variance is removed at
rate ``2 h2`` per unit depth, and the noisy tokens (``s = sigma2``) reach
``s = 0`` at :math:`T^* = \\sigma^2/(2 h_2)`, i.e. :math:`L^* = T^*/\\eta` layers.

Evaluators (numbers in, float out; a sympy symbol in, expression out), all
built from the derived expressions:

- :func:`leading_horizon` and :func:`leading_layers`: ``T*`` and ``L*``;
- :func:`gaussian_horizon`: exact depth for a Gaussian prior at finite ``h2``
  (from :mod:`attneb.theory.gaussian`);
- :func:`gaussian_layers` and :func:`gaussian_layers_fractional`: layers of
  step ``eta`` that the exact one-layer variance map needs;
- :func:`anisotropic_depth`: the best single depth, and its excess risk, for an
  anisotropic Gaussian prior (from :mod:`attneb.theory.anisotropic`).
"""

from __future__ import annotations

import math
from functools import cache

import sympy as sp
from scipy import optimize

from . import anisotropic, gaussian, mean_field
from ._calculus import gaussian_density
from ._evaluate import check_positive, evaluate
from .derivation import ClaimedForm, Derivation, Step

__all__ = [
    "L_STAR",
    "MAX_LAYERS",
    "RATE",
    "T_STAR",
    "anisotropic_depth",
    "derivation",
    "gaussian_horizon",
    "gaussian_layers",
    "gaussian_layers_fractional",
    "gaussian_variance_map",
    "leading_horizon",
    "leading_layers",
]

x = sp.Symbol("x", real=True)
s, s0, c, t, sigma2, h2, eta = sp.symbols("s s0 c t sigma2 h2 eta", positive=True)
p = sp.Function("p")
T_STAR, L_STAR, RATE = sp.symbols("T_star L_star c_star", positive=True)
MAX_LAYERS = 10**7


@cache
def derivation() -> Derivation:
    """Build the ``depth_noise`` derivation (claims C5, C6)."""
    kernel = gaussian_density(x, s)
    reversed_kernel = kernel.subs(s, s0 - c * t)
    flow_velocity = -sp.Derivative(sp.log(p(x)), x) / 2

    # mean field: d rho/dt = h2 * kappa * rho'' + O(h2^2); kappa from theory.mean_field
    pde = mean_field.derivation().result_of(mean_field.PDE_RHS).removeO()
    kappa = sp.simplify(pde.coeff(mean_field.h2, 1) / sp.diff(mean_field.rho(mean_field.x), mean_field.x, 2))
    clock = -sp.simplify(sp.diff(reversed_kernel, t) / sp.diff(reversed_kernel, x, 2))
    (rate,) = sp.solve(sp.Eq(-clock, kappa * h2), c)
    variance = sigma2 - rate * t
    (horizon,) = sp.solve(sp.Eq(variance, 0), t)
    layers = horizon / eta

    steps = [
        Step(sp.Eq(sp.Derivative(kernel, s), sp.Derivative(kernel, x, 2) / 2, evaluate=False),
             "dx = dW from a point has density phi_s, s = elapsed time: dp/ds = (1/2) p''; "
             "by superposition so does p_s = rho0 * phi_s"),
        Step(sp.Eq(sp.Integral(x**2 * kernel, (x, -sp.oo, sp.oo)), s, evaluate=False),
             "its variance is s: the variance-exploding diffusion adds variance at rate 1"),
        Step(sp.Eq(-sp.Derivative(p(x) * flow_velocity, x), sp.Derivative(p(x), x, 2) / 2, evaluate=False),
             "the probability-flow velocity -(1/2) d/dx log p moves p exactly as dp/ds = (1/2) p''"),
        Step(sp.Eq(sp.Derivative(reversed_kernel, t), -c / 2 * sp.Derivative(reversed_kernel, x, 2), evaluate=False),
             "run backwards on the clock s = s0 - c t: dp/dt = -(c/2) p''"),
        Step(sp.Eq(-clock * sp.Derivative(p(x), x, 2), kappa * h2 * sp.Derivative(p(x), x, 2), evaluate=False),
             "match the small-h2 mean-field equation d rho/dt = -h2 rho'' (theory.mean_field): solve for c",
             given=(sp.Eq(c, rate),), route="substitute"),
        Step(sp.Eq(-c * flow_velocity, h2 * sp.Derivative(sp.log(p(x)), x), evaluate=False),
             "in depth time (dt = -ds/c) the probability-flow velocity is h2 d/dx log p: the mean-field "
             "velocity at leading order", given=(sp.Eq(c, rate),)),
        Step(sp.Eq(variance.subs(t, T_STAR), 0, evaluate=False),
             "noisy tokens have s = sigma2 at t = 0; solve s(T*) = 0 for the horizon T*",
             given=(sp.Eq(T_STAR, horizon),), route="substitute"),
    ]
    claims = [
        ClaimedForm(sp.Eq(rate, 2 * h2, evaluate=False), "noise variance is removed at rate 2 h2 per unit depth",
                    ref="C5", name=c),
        ClaimedForm(sp.Eq(horizon, sigma2 / (2 * h2), evaluate=False), "depth-noise relation T* = sigma2 / (2 h2)",
                    ref="C6", name=T_STAR),
        ClaimedForm(sp.Eq(layers, sigma2 / (2 * eta * h2), evaluate=False), "L* = sigma2 / (2 eta h2) layers",
                    ref="C6", name=L_STAR),
    ]
    return Derivation(
        "depth_noise",
        "Stage 1 is reverse diffusion in depth time: c = 2 h2, T* = sigma2 / (2 h2)",
        [x, s, s0, c, t, sigma2, h2, eta],
        steps,
        [sp.Eq(T_STAR, horizon, evaluate=False), sp.Eq(L_STAR, layers, evaluate=False),
         sp.Eq(RATE, rate, evaluate=False)],
        claims,
    )


# --------------------------------------------------------------------------- evaluators


def leading_horizon(sigma2_value, h2_value):
    """Leading-order depth :math:`T^* = \\sigma^2 / (2 h_2)` (derived, ``depth_noise``).

    Parameters
    ----------
    sigma2_value, h2_value : float, array_like or sympy expression
        Noise variance and attention bandwidth, > 0 (arrays broadcast against each other).

    Returns
    -------
    float, ndarray or sympy expression
        A float for numbers, a float64 array of the broadcast shape when an argument is an array.
    """
    arguments = {sigma2: (sigma2_value, "sigma2"), h2: (h2_value, "h2")}
    return evaluate(derivation().result_of(T_STAR), arguments, positive=arguments)


def leading_layers(sigma2_value, h2_value, eta_value):
    """Leading-order layer count :math:`L^* = \\sigma^2 / (2 \\eta h_2)` (not rounded).

    Numbers give a float, arrays (broadcast) a float64 array, sympy expressions an expression.
    """
    arguments = {sigma2: (sigma2_value, "sigma2"), h2: (h2_value, "h2"), eta: (eta_value, "eta")}
    return evaluate(derivation().result_of(L_STAR), arguments, positive=arguments)


def gaussian_horizon(sigma2_value, tau2_value, h2_value):
    """Exact depth at which the mean-field flow brings a Gaussian prior back to its variance.

    .. math:: T_G = \\frac{\\sigma^2}{2 h_2} + \\frac12 \\log\\frac{\\tau^2 + \\sigma^2}{\\tau^2}

    derived in :mod:`attneb.theory.gaussian` (variance ODE ``ds/dt = -2 h2 s / (s + h2)``
    from ``s(0) = tau2 + sigma2`` down to ``tau2``). Numbers give a float, arrays (broadcast) a
    float64 array, sympy expressions an expression.
    """
    arguments = {gaussian.sigma2: (sigma2_value, "sigma2"), gaussian.tau2: (tau2_value, "tau2"),
                 gaussian.h2: (h2_value, "h2")}
    return evaluate(gaussian.derivation().result_of(gaussian.T_GAUSS), arguments, positive=arguments)


def _bandwidth_and_step(h2_value, eta_value):
    """``h2 > 0`` and the layer step ``eta`` in (0, 1], checked, as floats."""
    eta_value = check_positive(eta_value, "eta")
    if eta_value > 1:
        raise ValueError(f"eta == {eta_value}, must lie in (0, 1]")
    return check_positive(h2_value, "h2"), eta_value


def _variance_trajectory(sigma2_value, tau2_value, h2_value, eta_value):
    """Yield the variances s_0 = tau2 + sigma2, s_1, ... of the exact layer map until s_l <= tau2."""
    sigma2_value = check_positive(sigma2_value, "sigma2")
    tau2_value = check_positive(tau2_value, "tau2")
    h2_value, eta_value = _bandwidth_and_step(h2_value, eta_value)
    estimate = gaussian_horizon(sigma2_value, tau2_value, h2_value) / eta_value
    if estimate > MAX_LAYERS:
        raise ValueError(f"about {estimate:.3g} layers needed (eta == {eta_value}, h2 == {h2_value}), "
                         f"more than {MAX_LAYERS}; use a larger eta or h2")
    step = _layer_map()
    variance = tau2_value + sigma2_value
    yield variance
    while variance > tau2_value:  # each layer contracts s by at least (1 - eta h2 / (s_0 + h2))^2 < 1
        variance = step(variance, h2_value, eta_value)
        yield variance


@cache
def _layer_map():
    return sp.lambdify((gaussian.s, gaussian.h2, gaussian.eta),
                       gaussian.derivation().result_of(gaussian.LAYER_MAP), "math")


def gaussian_layers(sigma2_value, tau2_value, h2_value, eta_value):
    """Number of residual layers of step ``eta`` that bring a Gaussian prior back to variance ``tau2``.

    Mean-field (``N -> oo``) layers: a layer ``x -> x + eta (a(x) - x)`` maps
    a Gaussian token density to a Gaussian with the same mean, and its variance
    by the exact one-layer map derived in :mod:`attneb.theory.gaussian`,

    .. math:: s \\mapsto \\Big(1 - \\frac{\\eta h_2}{s + h_2}\\Big)^2 s, \\qquad s_0 = \\tau^2 + \\sigma^2,

    and returns the **smallest integer** ``L`` with ``s_L <= tau2``. Numbers
    only; ``eta`` must lie in ``(0, 1]``; at most ``MAX_LAYERS`` layers.

    Returns
    -------
    int
    """
    return len(list(_variance_trajectory(sigma2_value, tau2_value, h2_value, eta_value))) - 1


def gaussian_layers_fractional(sigma2_value, tau2_value, h2_value, eta_value):
    """Fractional layer count: :func:`gaussian_layers` interpolated in ``log s``.

    With ``L`` the smallest integer with ``s_L <= tau2``, returns
    ``L - 1 + (log s_{L-1} - log tau2) / (log s_{L-1} - log s_L)``, the
    (continuous) layer index at which ``log s`` crosses ``log tau2`` when it
    is interpolated linearly between layers. Multiplied by ``eta`` it tends to
    :func:`gaussian_horizon` as ``eta -> 0``.

    Returns
    -------
    float
    """
    trajectory = list(_variance_trajectory(sigma2_value, tau2_value, h2_value, eta_value))
    before, after = math.log(trajectory[-2]), math.log(trajectory[-1])
    return len(trajectory) - 2 + (before - math.log(float(tau2_value))) / (before - after)


def gaussian_variance_map(s0_value, h2_value, eta_value, layers):
    """Mean-field token variance after each of ``layers`` Euler layers, for a Gaussian token density.

    Iterates the exact one-layer map of :mod:`attneb.theory.gaussian`,
    :math:`s_{l+1} = (1 - \\eta h_2/(s_l + h_2))^2 s_l`, from the variance ``s0`` (from a prior
    ``N(m, tau2)`` and noise ``sigma2``, :math:`s_0 = \\tau^2 + \\sigma^2`), through and beyond any
    target: a finite-``N`` particle system is compared with it layer by layer.

    Returns
    -------
    list of float
        ``[s_0, s_1, ..., s_layers]``.
    """
    s0_value = check_positive(s0_value, "s0")
    h2_value, eta_value = _bandwidth_and_step(h2_value, eta_value)
    if isinstance(layers, bool) or not isinstance(layers, int) or not 0 <= layers <= MAX_LAYERS:
        raise ValueError(f"layers == {layers!r}, must be an int in [0, {MAX_LAYERS}]")
    step = _layer_map()
    variances = [s0_value]
    for _ in range(layers):
        variances.append(step(variances[-1], h2_value, eta_value))
    return variances


#: Points of the grid on which :func:`anisotropic_depth` looks for sign changes of E'(T).
ANISOTROPIC_GRID = 64


def anisotropic_depth(tau2s, sigma2_value, h2_value):
    r"""Best single Stage-1 depth for the Gaussian prior :math:`N(m, \mathrm{diag}(\tau_k^2))`, and its excess risk.

    In mean field the token variance of direction ``k`` follows
    :math:`\dot s_k = -2 h_2 s_k/(s_k + h_2)` from :math:`\tau_k^2 + \sigma^2` and Stage 2 is the
    linear map :math:`m_k + a_k(\tilde x_k - m_k)`, :math:`a_k = s_k/(s_k + \sigma^2)`
    (:mod:`attneb.theory.anisotropic`). The total excess risk over Bayes at depth ``T`` is

    .. math:: E(T) = \sum_k (\tau_k^2 + \sigma^2)\Big(\frac{s_k(T)}{s_k(T) + \sigma^2}
              - \frac{\tau_k^2}{\tau_k^2 + \sigma^2}\Big)^2 ,

    each term zero at the direction's own horizon
    :math:`T_G(\tau_k^2) = \sigma^2/(2h_2) + \tfrac12\log(1 + \sigma^2/\tau_k^2)` and monotone on
    either side of it, so the minimiser lies in :math:`[\min_k T_G(\tau_k^2), \max_k T_G(\tau_k^2)]`.
    It is found there as the smallest :math:`E` among the two ends and the roots of :math:`E'(T)`
    (bracketed by its sign changes on a grid of ``ANISOTROPIC_GRID`` points, then
    :func:`scipy.optimize.brentq`); with equal :math:`\tau_k^2` it is :math:`T_G` and :math:`E = 0`.
    As :math:`h_2 \to 0` the best depth is :math:`T^* + \sum_k w_k c_k / \sum_k w_k + o(1)`,
    :math:`w_k = (\tau_k^2 + \sigma^2)^{-3}`, :math:`c_k = \tfrac12\log(1 + \sigma^2/\tau_k^2)`, and
    :math:`E = O(h_2^2)`.

    Parameters
    ----------
    tau2s : sequence of float
        Prior variance of each direction, > 0 (at least one).
    sigma2_value, h2_value : float
        Noise variance and Stage-1 bandwidth, > 0. Numbers only.

    Returns
    -------
    best_depth : float
        The depth :math:`T` minimising :math:`E(T)`.
    excess_risk : float
        :math:`E` at that depth: the **total** over directions, :math:`E\lVert\hat x - x\rVert^2 - \mathrm{MMSE}`
        (divide by ``d`` for the per-coordinate convention of the reports).
    """
    tau2_values = anisotropic.check_tau2s(tau2s)
    sigma2_value, h2_value = check_positive(sigma2_value, "sigma2"), check_positive(h2_value, "h2")
    horizons = [gaussian_horizon(sigma2_value, value, h2_value) for value in tau2_values]
    low, high = min(horizons), max(horizons)

    def excess(depth):
        return anisotropic.excess_at_depth(tau2_values, sigma2_value, h2_value, depth)

    def slope(depth):
        return anisotropic.excess_slope_at_depth(tau2_values, sigma2_value, h2_value, depth)

    candidates = [low, high]
    if high > low:
        grid = [low + (high - low) * i / ANISOTROPIC_GRID for i in range(ANISOTROPIC_GRID + 1)]
        slopes = [slope(depth) for depth in grid]
        candidates += [optimize.brentq(slope, left, right, xtol=1e-13 * high)
                       for left, right, before, after in zip(grid, grid[1:], slopes, slopes[1:])
                       if before < 0 <= after]
    best = min(candidates, key=excess)
    return best, excess(best)
