"""Linear stability of the mean-field PDE around a uniform density, and what it asks of N.

Linearising :math:`\\partial_t\\rho = -\\nabla\\cdot(\\rho\\,h_2\\nabla\\log(\\rho*\\varphi_{h_2}))`
at :math:`\\rho = \\rho_0 + \\epsilon e^{i k\\cdot x}`, with the Fourier symbol
:math:`e^{-h_2|k|^2/2}` of the Gaussian smoothing derived by integration, gives
the growth rate

.. math:: \\lambda(k) = h_2 |k|^2 e^{-h_2 |k|^2 / 2}.

Every mode ``k != 0`` grows (the heat equation run backwards), but the kernel
caps the growth: :math:`\\lambda \\to 0` as :math:`|k| \\to \\infty`. The fastest
mode is :math:`|k^*| = \\sqrt{2/h_2}` with :math:`\\lambda^* = 2/e`, independent
of ``h2``. Finite-``N`` fluctuations (relative size :math:`N^{-1/2}`) grow by
:math:`e^{\\lambda^* T^*}` up to :math:`T^* = \\sigma^2/(2h_2)`; keeping them small
asks :math:`N \\gg N_c = e^{2\\lambda^* T^*} = e^{2\\sigma^2/(e\\,h_2)}`, i.e.
:math:`\\log N` linear in :math:`\\sigma^2/h_2` with slope :math:`2/e`.
This is a derived *scaling* from a linearisation about a uniform density: a
heuristic for where finite-``N`` effects set in, not a bound.

That threshold is per Fourier mode, the same in every dimension. What a token
sees is the density at the kernel's scale, which sums the modes: with Poisson
fluctuations (structure factor 1) grown by :math:`e^{\\lambda(k) t}`, the kernel
density estimate at density :math:`\\rho_0` has relative variance
:math:`I_d(t)/(N\\rho_0)`, :math:`I_d(t) = \\int e^{-h_2|k|^2 + 2\\lambda(k)t}\\,d^dk/(2\\pi)^d`
(at ``t = 0`` the :math:`\\int\\varphi_{h_2}^2 = (4\\pi h_2)^{-d/2}` of a kernel density estimate).
Laplace's method about the shell :math:`|k| = k^*` (width :math:`(t|\\lambda''(k^*)|)^{-1/2}`,
:math:`\\lambda''(k^*) = -4h_2/e`, so at :math:`T^*` a width independent of ``h2``) gives
:math:`I_d(T^*) \\propto k^{*\\,d-1} e^{2\\lambda^* T^*}`, and the ``N`` at which the relative
fluctuation reaches :math:`\\epsilon_c` at :math:`T^*` is

.. math:: N_c(d) = \\frac{(\\sqrt2/2)^d\\,(\\pi h_2)^{(1-d)/2}\\,e^{-3/2}}{\\epsilon_c^2\\rho_0\\sqrt{\\sigma^2}\\,\\Gamma(d/2)}
          \\,e^{2\\sigma^2/(e h_2)},
          \\qquad \\log N_c(d) = \\frac{2\\sigma^2}{e h_2} + \\frac{d-1}{2}\\log\\frac1{h_2} + O(1).

The :math:`h_2^{-d/2}` modes inside :math:`|k| < k^*` enter the prefactor only through the
shell, as :math:`h_2^{-(d-1)/2}`: the leading order of :math:`\\log N_c` is the same in every
dimension.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import _calculus, depth_noise
from ._calculus import gaussian_density, series_in
from ._evaluate import evaluate
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["K_STAR", "LAMBDA", "LAMBDA_STAR", "N_C", "N_C_DIM", "derivation", "fastest_mode", "fluctuation_threshold",
           "growth_rate", "token_scaling"]

x, y = sp.symbols("x y", real=True)
k = sp.Symbol("k", real=True)
k_nonzero = sp.Symbol("k", real=True, nonzero=True)
k_positive = sp.Symbol("k", positive=True)
xs, ys, ks = sp.symbols("x1 x2", real=True), sp.symbols("y1 y2", real=True), sp.symbols("k1 k2", real=True)
h2, rho0, sigma2 = sp.symbols("h2 rho0 sigma2", positive=True)
eps, N = sp.symbols("epsilon N", positive=True)
LAMBDA, K_STAR, LAMBDA_STAR, N_C = sp.symbols("lambda k_star lambda_star N_c", positive=True)
N_C_DIM = sp.Symbol("N_c_d", positive=True)
w = sp.Symbol("w", real=True)
t = sp.Symbol("t", positive=True)
dim = sp.Symbol("d", positive=True, integer=True)
level = sp.Symbol("epsilon_c", positive=True)


def _shell(d):
    """Area of the unit sphere in R^d over (2 pi)^d: d^dk / (2 pi)^d = _shell(d) |k|^(d-1) d|k|."""
    return 2 * sp.pi ** (d / sp.Integer(2)) / sp.gamma(d / sp.Integer(2)) / (2 * sp.pi) ** d


def _threshold_in_dimension(rate, k_star, rate_star, horizon):
    """Steps, result and claims of N_c(d): the kernel-scale fluctuation reaching epsilon_c at T*, any d."""
    curvature = sp.simplify(sp.diff(rate, k, 2).subs(k, k_star))
    width = sp.sqrt(sp.pi / (t * -curvature))
    laplace = _shell(dim) * k_star ** (dim - 1) * sp.exp(-h2 * k_star**2) * sp.exp(2 * t * rate_star) * width
    threshold = sp.simplify(laplace.subs(t, horizon) / (rho0 * level**2))
    log_threshold = sp.expand_log(sp.log(threshold), force=True)
    exponent = sp.limit(sp.expand((log_threshold - 2 * sp.exp(-1) * sigma2 / h2) / sp.log(1 / h2)), h2, 0)
    leading = sp.limit(sp.expand(h2 * log_threshold), h2, 0)
    steps = [
        Step(sp.Eq(sp.Integral(_shell(d) * k_positive ** (d - 1) * sp.exp(-h2 * k_positive**2), (k_positive, 0, sp.oo)),
                   (4 * sp.pi * h2) ** sp.Rational(-d, 2), evaluate=False),
             f"d = {d}: the static fluctuation integral is int phi_h2^2 = (4 pi h2)^(-d/2) (Parseval)", route="mpmath")
        for d in (1, 2, 3)
    ] + [
        Step(sp.Eq(2 * t * rate.subs(k, k_star + w), 2 * t * rate_star + t * curvature * w**2 + sp.O(w**3),
                   evaluate=False),
             "around the shell |k| = k*: 2 t lambda = 2 t lambda* - t (4 h2/e) w^2 + O(w^3)"),
        Step(sp.Eq(sp.Integral(sp.exp(t * curvature * w**2), (w, -sp.oo, sp.oo)), width, evaluate=False),
             "Laplace's method: the growth peak across the shell has width (t |lambda''(k*)|)^(-1/2)",
             route="mpmath"),
        Step(sp.Eq(laplace.subs(t, horizon) / (N * rho0), level**2, evaluate=False),
             "the relative fluctuation I_d(T*) / (N rho0) of the kernel density estimate reaches epsilon_c^2 "
             "at N = N_c(d)", given=(sp.Eq(N, threshold),), route="substitute"),
    ]
    claims = [
        ClaimedForm(sp.Eq(leading, 2 * sp.exp(-1) * sigma2, evaluate=False),
                    "h2 log N_c(d) -> 2 sigma2 / e: the leading order is the per-mode law, whatever d",
                    name=sp.Limit(h2 * sp.log(N_C_DIM), h2, 0)),
        ClaimedForm(sp.Eq(exponent, (dim - 1) / sp.Integer(2), evaluate=False),
                    "log N_c(d) = 2 sigma2/(e h2) + ((d - 1)/2) log(1/h2) + O(1): the h2^(-d/2) modes enter as "
                    "h2^(-(d-1)/2)",
                    name=sp.Limit((sp.log(N_C_DIM) - 2 * sp.exp(-1) * sigma2 / h2) / sp.log(1 / h2), h2, 0)),
    ]
    return steps, threshold, claims


def _linearised_rate(position, wavenumbers, offsets):
    """Growth rate of the plane wave exp(i k.x) from the linearised PDE; steps on the way."""
    wave = sp.exp(sp.I * sum(kc * xc for kc, xc in zip(wavenumbers, position)))
    shifted = wave.subs({xc: xc - yc for xc, yc in zip(position, offsets)})
    kernel = sp.Mul(*(gaussian_density(yc, h2) for yc in offsets))
    smoothed_wave = shifted * kernel
    for yc in offsets:
        smoothed_wave = _calculus.gaussian_integral(smoothed_wave, yc)
    smoothed_wave = sp.expand(sp.simplify(smoothed_wave))
    density = rho0 + eps * wave
    smoothed = rho0 + eps * smoothed_wave
    rhs = -sum(sp.Derivative(density * h2 * sp.Derivative(sp.log(smoothed), xc), xc) for xc in position)
    first_order = series_in(rhs.doit(), eps, 2).removeO().coeff(eps, 1)
    rate = sp.simplify(first_order / wave)
    limits = [(yc, -sp.oo, sp.oo) for yc in offsets]
    steps = [
        Step(sp.Eq(sp.Integral(shifted * kernel, *limits), smoothed_wave, evaluate=False),
             f"d = {len(position)}: Gaussian smoothing multiplies exp(i k.x) by exp(-h2 |k|^2 / 2)",
             route="mpmath"),
        Step(sp.Eq(sp.Subs(sp.Derivative(rhs, eps), eps, 0), rate * wave, evaluate=False),
             f"d = {len(position)}: linearise -div(rho h2 grad log(rho * phi_h2)) at rho0 + eps exp(i k.x) "
             "(rho0 * phi_h2 = rho0): the O(eps) term is lambda(k) eps exp(i k.x), lambda free of x",
             route="mpmath"),
    ]
    return steps, rate


@cache
def derivation() -> Derivation:
    """Build the ``stability`` derivation."""
    steps_1d, rate = _linearised_rate([x], [k], [y])
    steps_2d, rate_2d = _linearised_rate(list(xs), list(ks), list(ys))
    slope = sp.diff(rate, k)
    (k_star,) = sp.solve(slope.subs(k, k_positive), k_positive)
    rate_star = sp.simplify(rate.subs(k, k_star))
    horizon = depth_noise.derivation().result_of(depth_noise.T_STAR)
    (tokens,) = sp.solve(sp.Eq(N ** sp.Rational(-1, 2) * sp.exp(rate_star * horizon), 1), N)
    steps_dim, threshold, claims_dim = _threshold_in_dimension(rate, k_star, rate_star, horizon)
    steps = steps_1d + steps_2d + [
        Step(sp.Eq(rate_2d, rate.subs(k, sp.sqrt(ks[0] ** 2 + ks[1] ** 2)), evaluate=False),
             "the rate depends on |k| only (isotropy)"),
        Step(sp.Eq(sp.sign(rate.subs(k, k_nonzero), evaluate=False), 1, evaluate=False), "every mode k != 0 grows"),
        Step(sp.Eq(sp.Limit(rate, k, sp.oo), 0, evaluate=False),
             "short waves are damped by the kernel: the growth is bounded, unlike the backward heat equation"),
        Step(sp.Eq(sp.Derivative(rate, k), 0, evaluate=False), "solve d lambda/dk = 0 for k > 0",
             given=(sp.Eq(k, k_star),), route="substitute"),
        Step(sp.Eq(sp.sign(sp.diff(rate, k, 2).subs(k, k_star), evaluate=False), -1, evaluate=False), "a maximum"),
        Step(sp.Eq(N ** sp.Rational(-1, 2) * sp.exp(rate_star * horizon), 1, evaluate=False),
             "finite-N fluctuations N^(-1/2) amplified by exp(lambda* T*) reach O(1) at N = N_c",
             given=(sp.Eq(N, tokens),), route="substitute"),
    ] + steps_dim
    claims = [
        ClaimedForm(sp.Eq(rate, h2 * k**2 * sp.exp(-h2 * k**2 / 2), evaluate=False),
                    "growth rate lambda(k) = h2 k^2 exp(-h2 k^2 / 2)", name=sp.Function("lambda")(k)),
        ClaimedForm(sp.Eq(rate_star, 2 / sp.E, evaluate=False), "fastest rate lambda* = 2/e, whatever h2",
                    name=LAMBDA_STAR),
        ClaimedForm(sp.Eq(sp.log(tokens), 2 * sp.exp(-1) * sigma2 / h2, evaluate=False),
                    "log N_c = (2/e) sigma2 / h2: log N must grow linearly in sigma2/h2", name=sp.log(N_C)),
    ] + claims_dim
    return Derivation(
        "stability",
        "Linear stability of the mean-field PDE: lambda(k) = h2 k^2 exp(-h2 k^2/2), N >> exp(2 sigma2/(e h2))",
        [x, y, k, h2, rho0, sigma2, eps, N, w, t, dim, level],
        steps,
        [sp.Eq(LAMBDA, rate, evaluate=False), sp.Eq(K_STAR, k_star, evaluate=False),
         sp.Eq(LAMBDA_STAR, rate_star, evaluate=False), sp.Eq(N_C, tokens, evaluate=False),
         sp.Eq(N_C_DIM, threshold, evaluate=False)],
        claims,
    )


def growth_rate(k_value, h2_value):
    """Growth rate :math:`\\lambda(k) = h_2 k^2 e^{-h_2 k^2/2}` of the Fourier mode ``k``.

    Parameters
    ----------
    k_value : float, array_like or sympy expression
        Wavenumber (any real; the rate depends on ``k**2``).
    h2_value : float, array_like or sympy expression
        Bandwidth, > 0.

    Returns
    -------
    float, ndarray or sympy expression
        A float for numbers, a float64 array of the broadcast shape when an argument is an array.
    """
    arguments = {k: (k_value, "k"), h2: (h2_value, "h2")}
    return evaluate(derivation().result_of(LAMBDA), arguments, positive=(h2,))


def fastest_mode(h2_value):
    """Fastest-growing mode: ``(k*, lambda*) = (sqrt(2 / h2), 2 / e)``.

    ``h2`` a number gives two floats, an array two float64 arrays of its shape, an expression two expressions.
    """
    d = derivation()
    arguments = {h2: (h2_value, "h2")}
    return (evaluate(d.result_of(K_STAR), arguments, positive=(h2,)),
            evaluate(d.result_of(LAMBDA_STAR), arguments, positive=(h2,)))


def token_scaling(sigma2_value, h2_value):
    """Token count :math:`N_c = e^{2\\lambda^* T^*} = e^{2\\sigma^2/(e h_2)}` that finite-N fluctuations ask for.

    Fluctuations of relative size :math:`N^{-1/2}` stay small up to
    :math:`T^* = \\sigma^2/(2h_2)` when :math:`N \\gg N_c`. A derived scaling, not a bound. Numbers give a
    float, arrays (broadcast) a float64 array, sympy expressions an expression.
    """
    arguments = {sigma2: (sigma2_value, "sigma2"), h2: (h2_value, "h2")}
    return evaluate(derivation().result_of(N_C), arguments, positive=(sigma2, h2))


def fluctuation_threshold(d_value, sigma2_value, h2_value, rho0_value, level_value):
    """Token count :math:`N_c(d)` at which the kernel-scale density fluctuation reaches ``level`` at :math:`T^*`.

    Laplace's method for the fluctuation integral about a uniform density ``rho0`` (module
    docstring): :math:`\\log N_c(d) = 2\\sigma^2/(e h_2) + \\tfrac{d-1}{2}\\log(1/h_2) + O(1)`.
    A derived asymptotic scaling, not a bound.

    Parameters
    ----------
    d_value : int
        Dimension, >= 1.
    sigma2_value, h2_value : float or array_like
        Noise variance and bandwidth, > 0.
    rho0_value : float or array_like
        Token density (per unit volume of R^d), > 0.
    level_value : float or array_like
        Relative fluctuation of the kernel density estimate that counts as departed, > 0.

    Returns
    -------
    float or ndarray
        A float for numbers, a float64 array of the broadcast shape when an argument is an array.
    """
    if isinstance(d_value, bool) or not isinstance(d_value, (int, sp.Integer)) or d_value < 1:
        raise ValueError(f"d == {d_value!r}, must be an int >= 1")
    arguments = {sigma2: (sigma2_value, "sigma2"), h2: (h2_value, "h2"), rho0: (rho0_value, "rho0"),
                 level: (level_value, "level")}
    return evaluate(_threshold_in(int(d_value)), arguments, positive=(sigma2, h2, rho0, level))


@cache
def _threshold_in(d_value: int):
    return derivation().result_of(N_C_DIM).subs(dim, d_value)
