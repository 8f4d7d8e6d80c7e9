"""Calculus helpers shared by the derivations and by the step checker.

Each helper is a short, general procedure built from sympy operations; none
contains a result. ``gaussian_integral`` evaluates integrals of the form
:math:`\\int_{\\mathbb R} P(y)\\, e^{Q(y)}\\,dy` (``P`` polynomial, ``Q``
quadratic with negative leading coefficient) by moving to the vertex of ``Q``
(translation invariance of Lebesgue measure) and integrating the centred
moments with ``sympy.integrate``; sympy's own ``integrate`` gets there too but
through ``erf`` terms that take seconds to simplify.
"""

from __future__ import annotations

from functools import cache

import sympy as sp
from sympy.core.function import AppliedUndef

__all__ = ["gaussian_density", "gaussian_expectation", "gaussian_integral", "series_in"]

_Z = sp.Dummy("z", real=True)
_A = sp.Dummy("a", positive=True)


def gaussian_density(u, var):
    """Return the density of :math:`N(0, \\mathrm{var})` at ``u``.

    .. math:: \\varphi_{v}(u) = (2\\pi v)^{-1/2} \\exp(-u^2 / (2v))
    """
    return sp.exp(-(u**2) / (2 * var)) / sp.sqrt(2 * sp.pi * var)


def _split_term(term, y):
    """Split one product term into (polynomial part, exponent) in ``y``."""
    poly, exponent = sp.S.One, sp.S.Zero
    for factor in sp.Mul.make_args(term):
        base, power = factor.as_base_exp()
        if isinstance(base, sp.exp) or base is sp.E:
            arg = base.args[0] if isinstance(base, sp.exp) else sp.S.One
            exponent += arg * power
        else:
            poly *= factor
    if not poly.is_polynomial(y):
        raise ValueError(f"factor {poly} of {term} is not polynomial in {y}")
    return poly, sp.expand(exponent)


@cache
def _centred_moment(k: int):
    """:math:`\\int z^k e^{-a z^2} dz` over the real line, as a function of a Dummy ``a > 0``."""
    return sp.integrate(_Z**k * sp.exp(-_A * _Z**2), (_Z, -sp.oo, sp.oo))


def gaussian_integral(expr, y):
    """Integrate ``expr`` over the real line in ``y``, term by term.

    Every additive term of ``expr`` must be ``P(y) * exp(Q(y))`` with ``P`` a
    polynomial and ``Q(y) = -a y**2 + b y + c`` with ``a > 0`` under the
    symbols' assumptions (``b`` may be complex). With the vertex
    ``y0 = b / (2 a)``,

    .. math:: \\int P(y) e^{Q(y)} dy = e^{Q(y_0)} \\sum_k p_k \\int z^k e^{-a z^2} dz ,
              \\qquad P(y_0 + z) = \\sum_k p_k z^k,

    a translation for real ``y0`` and, for complex ``y0``, a shift of the
    contour, allowed because the integrand is entire and decays like
    :math:`e^{-a\\,\\mathrm{Re}(y)^2}` in the strip between the two lines. The
    centred moments come from ``sympy.integrate``.
    """
    total = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(expr, power_exp=False)):
        poly, q = _split_term(term, y)
        lead = q.coeff(y, 2)
        if sp.degree(q, y) != 2 or not (-lead).is_positive:
            raise ValueError(f"exponent {q} is not a concave quadratic in {y}")
        y0 = -q.coeff(y, 1) / (2 * lead)
        shifted = sp.Poly(sp.expand(poly.subs(y, y0 + _Z)), _Z)
        a = sp.factor(-lead)
        moments = sum(sp.factor(coeff * _centred_moment(k).subs(_A, a)) for (k,), coeff in shifted.terms())
        total += sp.exp(sp.cancel(q.subs(y, y0))) * moments
    return total


def gaussian_expectation(poly, us, var):
    """Average a polynomial in ``us`` over ``us ~ N(0, var I)``.

    Coefficients may be any expressions free of ``us`` (derivatives of an
    undefined function included). Each monomial averages to the product of
    the one-dimensional moments :math:`\\int u^k \\varphi_{var}(u)\\,du`,
    computed by ``sympy.integrate``.
    """
    u = sp.Dummy("u", real=True)
    moment = {}
    total = sp.S.Zero
    for powers, coeff in sp.Poly(sp.expand(poly), *us).terms():
        value = coeff
        for k in powers:
            if k not in moment:
                moment[k] = sp.integrate(u**k * gaussian_density(u, var), (u, -sp.oo, sp.oo))
            value *= moment[k]
        total += value
    return total


def series_in(expr, var, n, point=0):
    """``sympy.series(expr, var, point, n)`` with undefined functions held fixed.

    Undefined functions and their derivatives that do not depend on ``var``
    are constants for the series; they are masked by symbols during the
    expansion because sympy 1.14's ``series`` cannot ``collect`` mixed partial
    derivatives of a function of several variables.
    """
    atoms = [a for a in expr.atoms(sp.Derivative, AppliedUndef) if not a.has(var)]
    atoms.sort(key=lambda a: -sp.count_ops(a))
    masks = {a: sp.Dummy() for a in atoms}
    masked = expr
    for atom, mask in masks.items():
        masked = masked.xreplace({atom: mask})
    return sp.series(masked, var, point, n).xreplace({m: a for a, m in masks.items()})
