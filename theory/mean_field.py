"""Mean-field PDE and its small-bandwidth limit: the heat equation run backwards (C5).

The token density obeys :math:`\\partial_t\\rho = -\\nabla\\cdot(\\rho\\, h_2 \\nabla\\log(\\rho * \\varphi_{h_2}))`.
Gaussian smoothing is derived as a series in ``h2``: in ``d = 1`` by Taylor
expanding :math:`\\rho(x - y)` under the integral and integrating the Gaussian
moments, in ``d = 2`` from the Fourier symbol :math:`e^{-h_2 |k|^2 / 2}`
(``integrate``) of a plane wave,

.. math:: \\rho * \\varphi_{h_2} = \\rho + \\tfrac{h_2}{2}\\Delta\\rho + \\tfrac{h_2^2}{8}\\Delta^2\\rho + O(h_2^3),

whence :math:`\\nabla\\log(\\rho * \\varphi_{h_2}) = \\nabla\\log\\rho + O(h_2)` and
:math:`\\partial_t \\rho = -h_2 \\Delta\\rho
- \\tfrac{h_2^2}{2}\\nabla\\cdot\\big(\\rho\\nabla(\\Delta\\rho/\\rho)\\big) + O(h_2^3)`.
The ``series``, ``integrate`` and ``diff`` results are checked against these
typed formulas (Taylor's formula, :math:`\\mathbb E y^{2m} = (2m-1)!!\\,h_2^m`),
and the Gaussian integrals by ``mpmath.quad``.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import _calculus
from ._calculus import gaussian_density, series_in
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["PDE_RHS", "derivation"]

x, y = sp.symbols("x y", real=True)
h2 = sp.Symbol("h2", positive=True)
rho = sp.Function("rho")
xs = sp.symbols("x1 x2", real=True)
ys = sp.symbols("y1 y2", real=True)
ks = sp.symbols("k1 k2", real=True)
TAYLOR_ORDER = 6
PDE_RHS = sp.Symbol("rhodot")
PDE_RHS_2D = sp.Symbol("rhodot_2")
SCORE_SMOOTH = sp.Symbol("score_smooth")


def _moment(p):
    """The Gaussian moment formula typed in: E y^p = 0 for odd p, (p - 1)!! h2^(p/2) for even p."""
    return sp.S.Zero if p % 2 else sp.factorial2(p - 1) * h2 ** (p // 2)


def _smoothing_1d():
    """rho * phi_h2 in d = 1 from the Taylor series of rho(x - y) and Gaussian moments."""
    taylor = rho(x - y).series(y, 0, TAYLOR_ORDER)
    polynomial = taylor.removeO().doit()
    smoothed = _calculus.gaussian_expectation(polynomial, [y], h2)
    taylor_formula = sum((-y) ** p / sp.factorial(p) * sp.Derivative(rho(x), (x, p)) for p in range(TAYLOR_ORDER))
    powers = [y**p for p in range(TAYLOR_ORDER + 1)]
    steps = [
        Step(sp.Eq(rho(x - y), taylor_formula + sp.O(y**TAYLOR_ORDER), evaluate=False),
             f"Taylor's formula: rho(x - y) = sum_p (-y)^p / p! rho^(p)(x) + O(y^{TAYLOR_ORDER})"),
        Step(sp.Eq(sp.ImmutableMatrix([sp.Integral(m * gaussian_density(y, h2), (y, -sp.oo, sp.oo)) for m in powers]),
                   sp.ImmutableMatrix([_moment(p) for p in range(TAYLOR_ORDER + 1)]), evaluate=False),
             "Gaussian moments: odd ones vanish, E y^(2m) = (2m - 1)!! h2^m"),
        Step(sp.Eq(sp.Integral(polynomial * gaussian_density(y, h2), (y, -sp.oo, sp.oo)), smoothed, evaluate=False),
             f"integrate the Taylor polynomial against phi_h2 (the moments above); the O(y^{TAYLOR_ORDER}) "
             f"remainder gives O(h2^{TAYLOR_ORDER // 2})", route="mpmath"),
    ]
    return steps, smoothed + sp.O(h2 ** (TAYLOR_ORDER // 2))


def _smoothing_2d():
    """rho * phi_h2 in d = 2 for a plane wave (hence any Fourier integral)."""
    wave = sp.exp(sp.I * (ks[0] * xs[0] + ks[1] * xs[1]))
    shifted = wave.subs({xs[0]: xs[0] - ys[0], xs[1]: xs[1] - ys[1]})
    kernel = gaussian_density(ys[0], h2) * gaussian_density(ys[1], h2)
    smoothed = sp.simplify(_calculus.gaussian_integral(_calculus.gaussian_integral(shifted * kernel, ys[0]), ys[1]))
    laplacian = sum(sp.Derivative(wave, xc, 2) for xc in xs)
    steps = [
        Step(sp.Eq(sp.Integral(shifted * kernel, (ys[0], -sp.oo, sp.oo), (ys[1], -sp.oo, sp.oo)), smoothed,
                   evaluate=False),
             "d = 2: Gaussian smoothing multiplies a plane wave by exp(-h2 |k|^2 / 2)", route="mpmath"),
        Step(sp.Eq(smoothed, wave + h2 / 2 * laplacian + sp.O(h2**2), evaluate=False),
             "series in h2, with -|k|^2 e^(ik.x) = Laplacian e^(ik.x): rho*phi = rho + (h2/2) Lap rho + O(h2^2) "
             "for every Fourier integral rho"),
    ]
    return steps


def _pde_1d(smoothed):
    """grad log(rho * phi) and -d/dx(rho v) as series in h2 (d = 1)."""
    log_smoothed = sp.log(smoothed.removeO())
    grad_log = series_in(sp.diff(log_smoothed, x), h2, 2)
    divergence = -sp.Derivative(rho(x) * h2 * sp.Derivative(log_smoothed, x), x)
    rhs = series_in(divergence.doit(), h2, 3)
    correction = sp.Derivative(sp.Derivative(rho(x), (x, 2)) / rho(x), x)
    steps = [
        Step(sp.Eq(sp.Derivative(log_smoothed, x),
                   sp.Derivative(rho(x), x) / rho(x) + h2 / 2 * correction + sp.O(h2**2), evaluate=False),
             "d/dx log(rho + (h2/2) rho'' + O(h2^2)) = rho'/rho + (h2/2) (rho''/rho)' + O(h2^2)"),
        Step(sp.Eq(divergence, -h2 * sp.Derivative(rho(x), (x, 2))
                   - h2**2 / 2 * sp.Derivative(rho(x) * correction, x) + sp.O(h2**3), evaluate=False),
             "continuity equation: d rho/dt = -d/dx (rho v), v = h2 d/dx log(rho * phi_h2) "
             "= -h2 rho'' - (h2^2/2) (rho (rho''/rho)')' + O(h2^3)"),
    ]
    return steps, grad_log, rhs


def _pde_2d():
    """-div(rho h2 grad log(rho + h2/2 Lap rho)) in d = 2 to O(h2^2)."""
    density = rho(*xs)
    laplacian = sum(sp.diff(density, xc, 2) for xc in xs)
    smoothed = density + h2 / 2 * laplacian
    divergence = -sum(sp.Derivative(density * h2 * sp.Derivative(sp.log(smoothed), xc), xc) for xc in xs)
    rhs = series_in(divergence.doit(), h2, 2)
    correction = sum(sp.Derivative(density * sp.Derivative(laplacian / density, xc), xc) for xc in xs)
    return Step(sp.Eq(divergence, -h2 * laplacian - h2**2 / 2 * correction + sp.O(h2**3), evaluate=False),
                "d = 2: d rho/dt = -div(rho h2 grad log(rho * phi_h2)) "
                "= -h2 Lap rho - (h2^2/2) div(rho grad(Lap rho / rho)) + O(h2^3)"), rhs


@cache
def derivation() -> Derivation:
    """Build the ``mean_field`` derivation (claim C5)."""
    steps_1d, smoothed = _smoothing_1d()
    pde_steps, grad_log, rhs = _pde_1d(smoothed)
    pde_2d_step, rhs_2d = _pde_2d()
    claims = [
        ClaimedForm(sp.Eq(grad_log, sp.diff(sp.log(rho(x)), x) + sp.O(h2), evaluate=False),
                    "grad log(rho * phi_h2) = grad log rho + O(h2)", ref="C5", name=SCORE_SMOOTH),
        ClaimedForm(sp.Eq(rhs, -h2 * sp.diff(rho(x), x, 2) + sp.O(h2**2), evaluate=False),
                    "d rho/dt = -h2 Laplacian(rho) + O(h2^2): the heat equation run backwards", ref="C5",
                    name=PDE_RHS),
        ClaimedForm(sp.Eq(rhs_2d, -h2 * sum(sp.diff(rho(*xs), xc, 2) for xc in xs) + sp.O(h2**2), evaluate=False),
                    "the same in d = 2", ref="C5", name=PDE_RHS_2D),
    ]
    return Derivation(
        "mean_field",
        "Mean-field PDE and its small-h2 limit: d rho/dt = -h2 Laplacian(rho) + O(h2^2)",
        [x, y, h2, *xs, *ys, *ks],
        steps_1d + _smoothing_2d() + pde_steps + [pde_2d_step],
        [
            sp.Eq(PDE_RHS, rhs, evaluate=False),
            sp.Eq(sp.Symbol("rho_smooth"), smoothed, evaluate=False),
            sp.Eq(SCORE_SMOOTH, grad_log, evaluate=False),
        ],
        claims,
    )
