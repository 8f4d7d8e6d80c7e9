r"""The mean field's second-order term, and what it does to the token variance and fourth cumulant (1-D).

The ``mean_field`` derivation gives the token density's equation to :math:`O(h_2^3)`,

.. math:: \partial_t\rho = h_2 R_1[\rho] + h_2^2 R_2[\rho] + O(h_2^3), \qquad R_1[\rho] = -\rho'', \quad
          R_2[\rho] = -\tfrac12\big(\rho\,(\rho''/\rho)'\big)'.

:func:`terms` reads :math:`R_1` and :math:`R_2` off the derived right side (``coeff`` of ``h2`` and ``h2**2``);
nothing here types them. In the diffusive time :math:`s = h_2 t`,
:math:`\partial_s\rho = R_1[\rho] + h_2 R_2[\rho] + O(h_2^2)`, solved to first order in ``h2``:

* **order zero** (the leading-order PDE, the backward heat equation): from a Gaussian mixture
  :math:`\rho(0) = \sum_c w_c\,\mathcal N(\mu_c, v_c)`, the mixture with variances :math:`v_c - 2s`
  (:func:`leading_solution`; sympy checks that it solves :math:`\partial_s\rho = R_1[\rho]`, in the tests).
  Its cumulants above the second do not move: :math:`\kappa_2` falls by :math:`2s`, :math:`\kappa_4` stays.
* **order one**: :math:`\rho = \rho^{(0)} + h_2\rho^{(1)}` with
  :math:`\partial_s\rho^{(1)} = R_1[\rho^{(1)}] + R_2[\rho^{(0)}]`, so the raw moments
  :math:`\delta m_k = \int x^k\rho^{(1)}` obey, since :math:`\int x^k\rho'' = k(k-1)\,m_{k-2}` (by parts),

  .. math:: \frac{d\,\delta m_k}{ds} = -k(k-1)\,\delta m_{k-2} + I_k(s), \qquad
            I_k(s) = \int x^k R_2[\rho^{(0)}(s)](x)\,dx, \qquad \delta m_0 = \delta m_k(0) = 0.

  :math:`I_k` by the trapezoid rule on a uniform grid (the integrands are smooth and Gaussian-decaying, where
  the rule converges faster than any power of the spacing), the moments' ODE by ``solve_ivp``.

:func:`cumulants` gives :math:`\kappa_2` and :math:`\kappa_4` at depths ``t`` from the moments
:math:`m^{(0)} + h_2\,\delta m`, linearised in ``h2`` (``order=2``), or from :math:`m^{(0)}` (``order=1``); what is
neglected is :math:`O(h_2^2)` in ``s``, i.e. :math:`O(h_2^3\,t)`.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from . import mean_field
from ._calculus import gaussian_density

__all__ = ["MOMENTS", "cumulants", "leading_solution", "moment_corrections", "second_order_term", "terms"]

#: The raw moments the corrections are carried for: 1 .. 4.
MOMENTS = 4
#: Grid of the trapezoid rule: spacing as a fraction of the smallest standard deviation, and the
#: half-width in standard deviations of the widest component beyond the outermost mean.
_SPACING, _REACH = 1.0 / 40.0, 14.0
#: The derivatives of rho that R_2 holds, as symbols r0 (rho) .. r4 (rho'''').
_R = sp.symbols("r0:5", real=True)


@cache
def terms() -> tuple[sp.Expr, sp.Expr]:
    """``(R1, R2)``: the coefficients of ``h2`` and ``h2**2`` in the derived ``d rho/dt`` (``mean_field``'s PDE_RHS).

    Expressions in ``rho(x)`` and its ``x``-derivatives, of :mod:`attneb.theory.mean_field`'s symbols.
    """
    rhs = mean_field.derivation().result_of(mean_field.PDE_RHS).removeO()
    return sp.expand(rhs.coeff(mean_field.h2, 1)), sp.expand(rhs.coeff(mean_field.h2, 2))


def _in_derivatives(expr) -> sp.Expr:
    """``expr`` with ``rho(x)`` and its derivatives replaced by the symbols ``r0 .. r4``."""
    rho, x = mean_field.rho(mean_field.x), mean_field.x
    replaced = expr.xreplace({sp.Derivative(rho, (x, n)): _R[n] for n in range(4, 0, -1)})
    replaced = replaced.xreplace({sp.Derivative(rho, x): _R[1]}).xreplace({rho: _R[0]})
    if replaced.has(mean_field.rho) or replaced.has(x):
        raise ValueError(f"{expr} holds more than rho(x) and its first four derivatives")
    return replaced


@cache
def _r2_function():
    """R_2 as a numpy function of ``(r0, .., r4)``: homogeneous of degree 1, so the r's may share any scale."""
    return sp.lambdify(_R, _in_derivatives(terms()[1]), "numpy")


@cache
def _gaussian_ratios():
    """``phi^(n)/phi`` for ``n = 0..4`` as numpy functions of ``(u, v)``, ``u = x - mu``, by ``sympy.diff``."""
    u = sp.Symbol("u", real=True)
    v = sp.Symbol("v", positive=True)
    phi = gaussian_density(u, v)
    return [sp.lambdify((u, v), sp.simplify(sp.diff(phi, u, n) / phi), "numpy") for n in range(5)]


def leading_solution(weights, means, variances, s) -> sp.Expr:
    r"""The order-zero density at diffusive time ``s``: :math:`\sum_c w_c\,\mathcal N(x; \mu_c, v_c - 2s)` (sympy).

    In :mod:`attneb.theory.mean_field`'s ``x``; the arguments may be numbers or sympy expressions.
    """
    x = mean_field.x
    return sum(w * gaussian_density(x - mu, v - 2 * s) for w, mu, v in zip(weights, means, variances))


def _mixture(weights, means, variances):
    weights, means, variances = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (weights, means, variances))
    if not (weights.size == means.size == variances.size) or weights.size == 0:
        raise ValueError(f"weights, means and variances must be non-empty and of one length, got sizes "
                         f"{weights.size}, {means.size}, {variances.size}")
    for name, values in (("weights", weights), ("means", means), ("variances", variances)):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} == {values.tolist()} must be finite")
    if np.any(weights <= 0) or np.any(variances <= 0):
        raise ValueError(f"weights == {weights.tolist()} and variances == {variances.tolist()} must be > 0")
    return weights / weights.sum(), means, variances


def second_order_term(weights, means, variances, x) -> np.ndarray:
    r""":math:`R_2[\rho](x)` of the mixture :math:`\rho = \sum_c w_c\,\mathcal N(\mu_c, v_c)` at the points ``x``.

    Each derivative :math:`\rho^{(n)}` is a sum of :math:`w_c\varphi_c\,(\varphi_c^{(n)}/\varphi_c)` (the ratios by
    ``sympy.diff``), every term divided by the largest :math:`w_c\varphi_c` at that ``x`` (so no ratio of
    :math:`R_2` underflows; :math:`R_2` is homogeneous of degree 1) and the result multiplied back.
    """
    weights, means, variances = _mixture(weights, means, variances)
    x = np.asarray(x, dtype=np.float64)
    u = x[None, :] - means[:, None]
    log_parts = np.log(weights)[:, None] - 0.5 * u**2 / variances[:, None] - 0.5 * np.log(2 * np.pi * variances)[:, None]
    top = log_parts.max(axis=0)
    scaled = np.exp(log_parts - top)
    ratios = _gaussian_ratios()
    derivatives = [np.sum(scaled * ratios[n](u, variances[:, None]), axis=0) for n in range(5)]
    return np.exp(top) * _r2_function()(*derivatives)


def _r2_moments(weights, means, variances, s) -> np.ndarray:
    r""":math:`I_k(s) = \int x^k R_2[\rho^{(0)}(s)]`, ``k = 0..MOMENTS``, by the trapezoid rule."""
    v = variances - 2.0 * s
    sd = np.sqrt(v)
    reach = _REACH * sd.max()
    x = np.arange(means.min() - reach, means.max() + reach + _SPACING * sd.min(), _SPACING * sd.min())
    integrand = second_order_term(weights, means, v, x)
    powers = x[None, :] ** np.arange(MOMENTS + 1)[:, None]
    return np.trapezoid(powers * integrand, x, axis=1)


def moment_corrections(weights, means, variances, s_values) -> np.ndarray:
    r"""First-order moment corrections :math:`\delta m_k(s)`, ``k = 1..MOMENTS``, at each diffusive time.

    Parameters
    ----------
    weights, means, variances : array_like, shape (C,)
        The Gaussian mixture at ``s = 0`` (weights > 0, normalised here; variances > 0).
    s_values : array_like, shape (S,)
        Diffusive times :math:`s = h_2 t`, >= 0 and below ``min(variances) / 2``.

    Returns
    -------
    ndarray, shape (S, MOMENTS)
        :math:`\delta m_1 .. \delta m_4`: the moments of the second-order solution are
        :math:`m^{(0)}_k(s) + h_2\,\delta m_k(s) + O(h_2^2)`.
    """
    weights, means, variances = _mixture(weights, means, variances)
    s_values = np.asarray(s_values, dtype=np.float64).reshape(-1)
    if s_values.size == 0 or not np.all(np.isfinite(s_values)) or np.any(s_values < 0) or \
            np.any(s_values >= variances.min() / 2):
        raise ValueError(f"s_values == {s_values.tolist()} must be finite, >= 0 and below min(variances)/2 == "
                         f"{variances.min() / 2:g}")
    k = np.arange(1, MOMENTS + 1)

    def rate(s, dm):
        below = np.concatenate([[0.0, 0.0], dm])[k - 1]  # delta m_{k-2}, with delta m_{-1} = delta m_0 = 0
        return -k * (k - 1) * below + _r2_moments(weights, means, variances, s)[1:]

    end = float(s_values.max())
    if end == 0.0:
        return np.zeros((s_values.size, MOMENTS))
    solution = solve_ivp(rate, (0.0, end), np.zeros(MOMENTS), t_eval=np.unique(s_values), rtol=1e-10, atol=1e-13,
                         method="DOP853")
    if not solution.success:
        raise RuntimeError(f"the moment corrections' ODE failed: {solution.message}")
    at = {float(s): row for s, row in zip(solution.t, solution.y.T)}
    return np.array([at[float(s)] for s in s_values])


def _leading_moments(weights, means, variances, s_values) -> np.ndarray:
    """Raw moments 1..4 of the order-zero mixture (variances ``v_c - 2 s``) at each ``s``: shape (S, 4)."""
    v = variances[None, :] - 2.0 * s_values[:, None]
    mu = means[None, :]
    component = [mu, mu**2 + v, mu**3 + 3 * mu * v, mu**4 + 6 * mu**2 * v + 3 * v**2]
    return np.stack([(weights[None, :] * np.broadcast_to(c, v.shape)).sum(axis=1) for c in component], axis=1)


#: Raw moments m1 .. m4 and the cumulants of a distribution in them (the definitions).
_M = sp.symbols("m1:5", real=True)
_KAPPA = (_M[1] - _M[0] ** 2,
          _M[3] - 4 * _M[2] * _M[0] - 3 * _M[1] ** 2 + 12 * _M[1] * _M[0] ** 2 - 6 * _M[0] ** 4)


@cache
def _cumulant_functions():
    """``kappa_2``, ``kappa_4`` and their gradients in ``(m1 .. m4)`` (``sympy.diff``), as numpy functions."""
    def stacked(exprs):
        functions = [sp.lambdify(_M, e, "numpy") for e in exprs]
        return lambda *m: np.stack([np.broadcast_to(f(*m), np.shape(m[0])) for f in functions])

    return stacked(_KAPPA), stacked([sp.diff(kappa, m) for kappa in _KAPPA for m in _M])


def cumulants(weights, means, variances, h2, depths, *, order=2) -> tuple[np.ndarray, np.ndarray]:
    r"""Predicted :math:`\kappa_2` and :math:`\kappa_4` of the token density at each depth ``t``.

    With :math:`\kappa_2 = m_2 - m_1^2`, :math:`\kappa_4 = m_4 - 4 m_3 m_1 - 3 m_2^2 + 12 m_2 m_1^2 - 6 m_1^4`:
    at ``order=1`` (the backward heat equation) those of the order-zero moments :math:`m^{(0)}(h_2 t)`; at
    ``order=2`` (the PDE with its second-order term) to first order in ``h2`` (in ``s``),
    :math:`\kappa(m^{(0)}) + h_2\,\nabla\kappa(m^{(0)})\cdot\delta m`, linearised so that nothing of order
    :math:`h_2^2` enters (a Gaussian start keeps :math:`\kappa_4 = 0` exactly).

    Parameters
    ----------
    weights, means, variances : array_like, shape (C,)
        The Gaussian mixture the tokens start from (for tokens ``x + sigma z``: the prior's components with
        ``sigma2`` added to each variance).
    h2 : float
        Kernel bandwidth, > 0.
    depths : array_like, shape (S,)
        Depths ``t >= 0`` with ``h2 t < min(variances) / 2``.
    order : {1, 2}
        The PDE's order in ``h2``.

    Returns
    -------
    kappa2, kappa4 : ndarray, shape (S,)
    """
    if order not in (1, 2):
        raise ValueError(f"order == {order!r}, must be 1 or 2")
    h2 = float(h2)
    if not np.isfinite(h2) or h2 <= 0:
        raise ValueError(f"h2 == {h2!r} must be finite and > 0")
    weights, means, variances = _mixture(weights, means, variances)
    depths = np.asarray(depths, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(depths)) or np.any(depths < 0):
        raise ValueError(f"depths == {depths.tolist()} must be finite and >= 0")
    s_values = h2 * depths
    moments = _leading_moments(weights, means, variances, s_values).T
    values, gradients = _cumulant_functions()
    kappa = values(*moments)
    if order == 2:
        delta = moment_corrections(weights, means, variances, s_values).T
        gradient = gradients(*moments).reshape(2, MOMENTS, -1)
        kappa = kappa + h2 * np.einsum("ckn,kn->cn", gradient, delta)
    return kappa[0], kappa[1]
