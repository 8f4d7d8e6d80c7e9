"""Calculus helpers shared by the derivations and by the step checker.

Each helper is a short, general procedure built from sympy operations; none
contains a result. The derivations compute with ``gaussian_integral`` and
``gaussian_expectation``; the step checker checks with ``sift`` (the sifting
property, no ``integrate``) and ``mpmath_function`` (mpmath's quadrature,
differentiation and limits, no sympy calculus), which use neither of them.
``gaussian_integral`` evaluates integrals of the form
:math:`\\int_{\\mathbb R} P(y)\\, e^{Q(y)}\\,dy` (``P`` polynomial, ``Q``
quadratic with negative leading coefficient) by moving to the vertex of ``Q``
(translation invariance of Lebesgue measure) and integrating the centred
moments with ``sympy.integrate``; sympy's own ``integrate`` gets there too but
through ``erf`` terms that take seconds to simplify.
"""

from __future__ import annotations

from functools import cache

import mpmath
import sympy as sp
from sympy.core.function import AppliedUndef

__all__ = ["gaussian_density", "gaussian_expectation", "gaussian_integral", "mpmath_function", "series_in", "sift"]

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


# --------------------------------------------------------------------------- independent routes of the checker


def sift(expr):
    """Integrate the Dirac deltas of ``expr`` by the sifting property (no ``sympy.integrate``).

    Every ``Integral`` node over the whole real line, one variable at a time
    (innermost first), is expanded into terms; each term must hold exactly one
    factor :math:`\\delta(a y + b)` with ``a`` free of ``y``, and becomes

    .. math:: \\int g(y)\\,\\delta(a y + b)\\,dy = \\frac{g(-b/a)}{|a|}.

    Raises
    ------
    ValueError
        When an integral is not over the real line, or a term does not hold
        exactly one delta linear in its variable.
    """
    def sift_integral(integral):
        value = integral.function
        for limit in integral.limits:
            if len(limit) != 3 or tuple(limit[1:]) != (-sp.oo, sp.oo):
                raise ValueError(f"sifting needs an integral over the real line, got limits {limit}")
            value = _sift_one(value, limit[0])
        return value

    return expr.replace(lambda e: isinstance(e, sp.Integral), sift_integral)


def _sift_one(integrand, y):
    total = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(integrand)):
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.DiracDelta) and f.has(y)]
        if len(deltas) != 1 or len(deltas[0].args) != 1:
            raise ValueError(f"term {term} does not hold exactly one Dirac delta in {y}")
        argument = deltas[0].args[0]
        slope = sp.diff(argument, y)
        if slope.has(y) or slope == 0:
            raise ValueError(f"the argument {argument} of the delta is not linear in {y}")
        root = -argument.subs(y, 0) / slope
        total += (term / deltas[0]).subs(y, root) / sp.Abs(slope)
    return total


_NUMERIC_NODES = (sp.Integral, sp.Derivative, sp.Limit, sp.Subs)


def _outermost(expr):
    """The ``Integral``, ``Derivative``, ``Limit`` and ``Subs`` nodes of ``expr`` not inside another one."""
    if isinstance(expr, _NUMERIC_NODES):
        return [expr]
    found = []
    for arg in expr.args:
        found += [node for node in _outermost(arg) if node not in found]
    return found


def mpmath_function(expr, args):
    """Compile ``expr`` into a function of ``args`` computed by mpmath alone.

    ``Integral`` nodes are evaluated by ``mpmath.quad`` (tanh-sinh), ``Derivative``
    nodes by ``mpmath.diff`` (finite differences at raised precision), ``Limit``
    nodes by ``mpmath.limit`` (Richardson extrapolation of ``f(a + 1/n)``, or of
    ``f(n)`` at infinity), ``Subs`` nodes by evaluating at the point; the rest by
    ``lambdify(..., "mpmath")``. None of sympy's calculus (``integrate``,
    ``diff``, ``limit``, ``series``) is used, so the values are independent of
    it. A multiple integral whose expanded integrand splits term by term into
    one-variable factors is computed as a sum of products of one-dimensional
    quadratures (Fubini); otherwise the quadratures are nested.

    .. math:: \\int\\!\\!\\int \\sum_t c_t f_t(y_1) g_t(y_2)\\,dy_1\\,dy_2
              = \\sum_t c_t \\int f_t \\int g_t

    Parameters
    ----------
    expr : sympy.Expr
        Free of undefined functions; its free symbols among ``args``.
    args : sequence of sympy.Symbol

    Returns
    -------
    callable
        ``f(*values)`` -> ``mpmath.mpf`` or ``mpmath.mpc`` at the current ``mpmath.mp`` precision.

    Raises
    ------
    ValueError
        For an indefinite integral or an undefined function.
    """
    args = list(args)
    if expr.has(AppliedUndef):
        raise ValueError(f"{expr} holds an undefined function")
    nodes = _outermost(expr)
    if not nodes:
        return sp.lambdify(args, expr, "mpmath")
    dummies = [sp.Dummy() for _ in nodes]
    outer = sp.lambdify(args + dummies, expr.xreplace(dict(zip(nodes, dummies))), "mpmath")
    inner = [_compile_node(node, args) for node in nodes]
    return lambda *values: outer(*values, *[f(*values) for f in inner])


def _compile_node(node, args):
    if isinstance(node, sp.Integral):
        return _compile_integral(node, args)
    if isinstance(node, sp.Derivative):
        return _compile_derivative(node, args)
    if isinstance(node, sp.Limit):
        return _compile_limit(node, args)
    return _compile_subs(node, args)


def _bound(limit_value, args):
    if limit_value in (sp.oo, -sp.oo):
        sign = 1 if limit_value is sp.oo else -1
        return lambda *values: sign * mpmath.inf
    return mpmath_function(limit_value, args)


def _compile_integral(node, args):
    function, limits = node.function, list(node.limits)
    while isinstance(function, sp.Integral):  # Integral(Integral(f, inner), outer) = Integral(f, inner, outer)
        function, limits = function.function, list(function.limits) + limits
    if any(len(limit) != 3 for limit in limits):
        raise ValueError(f"{node} is indefinite: no numeric value")
    renamed = {limit[0]: sp.Dummy(real=True) for limit in limits}
    function = function.xreplace(renamed)
    limits = [(renamed[v], lo.xreplace(renamed), hi.xreplace(renamed)) for v, lo, hi in limits]
    variables = [v for v, _, _ in limits]
    if len(limits) > 1 and not any(side.has(*variables) for _, lo, hi in limits for side in (lo, hi)):
        terms = _separated_terms(function, variables)
        if terms is not None:
            return _compile_fubini(terms, limits, args)
    return _compile_nested(function, limits, args)


def _separated_terms(function, variables):
    """``{(f_1(y_1), ..., f_k(y_k)): c}`` with ``function = sum c prod_i f_i(y_i)``, or None."""
    terms = {}
    for term in sp.Add.make_args(sp.expand(function)):
        factors, rest = {v: sp.S.One for v in variables}, sp.S.One
        for factor in sp.Mul.make_args(term):
            used = factor.free_symbols & set(variables)
            if len(used) > 1:
                return None
            if used:
                factors[used.pop()] *= factor
            else:
                rest *= factor
        key = tuple(factors[v] for v in variables)
        terms[key] = terms.get(key, sp.S.Zero) + rest
    return terms


def _compile_fubini(terms, limits, args):
    """``sum_key c_key prod_i Integral(f_i, limit_i)``, each distinct one-dimensional integral computed once."""
    integrals = {}
    for key in terms:
        for factor, limit in zip(key, limits):
            if (factor, limit) not in integrals:
                integrals[factor, limit] = _compile_nested(factor, [limit], args)
    pieces = [(mpmath_function(coefficient, args), [(f, lim) for f, lim in zip(key, limits)])
              for key, coefficient in terms.items()]

    def value(*values):
        computed = {key: integral(*values) for key, integral in integrals.items()}
        return mpmath.fsum(c(*values) * mpmath.fprod(computed[k] for k in keys) for c, keys in pieces)

    return value


def _compile_nested(function, limits, args):
    """``Integral(function, *limits)`` as nested one-dimensional quadratures, innermost limit first."""
    variable, lo, hi = limits[-1]
    lower, upper = _bound(lo, args), _bound(hi, args)
    if len(limits) == 1 and not _outermost(function):
        return lambda *values: mpmath.quad(_at(function, args, values, variable), [lower(*values), upper(*values)])
    if len(limits) == 1:
        inner = mpmath_function(function, args + [variable])
    else:
        inner = _compile_nested(function, limits[:-1], args + [variable])
    return lambda *values: mpmath.quad(lambda y: inner(*values, y), [lower(*values), upper(*values)])


def _at(expr, args, values, variable):
    """``expr`` with ``args`` set to ``values`` (sympy folds the constant parts), as a function of ``variable``.

    An integrand is evaluated at about a thousand nodes; folding its
    parameter-only parts once (``sqrt(2 pi tau2)``, ...) makes each node a few
    times cheaper than evaluating the general compiled expression.
    """
    digits = mpmath.mp.dps + 10
    fixed = expr.xreplace({a: sp.Float(v, digits) if mpmath.im(v) == 0 else sp.Float(mpmath.re(v), digits)
                           + sp.I * sp.Float(mpmath.im(v), digits) for a, v in zip(args, values)})
    return sp.lambdify([variable], fixed.evalf(digits), "mpmath")


def _compile_derivative(node, args):
    orders = {}
    for variable, count in node.variable_count:
        orders[variable] = orders.get(variable, 0) + count
    variables = list(orders)
    if not set(variables) <= set(args):
        raise ValueError(f"{node}: a differentiation variable is not among the arguments")
    inner = mpmath_function(node.expr, args)
    positions = [args.index(v) for v in variables]

    def value(*values):
        def at(*point):
            moved = list(values)
            for i, coordinate in zip(positions, point):
                moved[i] = coordinate
            return inner(*moved)

        point = [values[i] for i in positions]
        if len(point) == 1:
            return mpmath.diff(at, point[0], orders[variables[0]])
        return mpmath.diff(at, point, [orders[v] for v in variables])

    return value


def _compile_limit(node, args):
    expr, variable, point, direction = node.args
    if str(direction) not in "+-":
        raise ValueError(f"{node}: only one-sided limits")
    dummy = sp.Dummy(real=True)
    inner = mpmath_function(expr.xreplace({variable: dummy}), args + [dummy])
    target = _bound(point, args)
    sign = 1 if str(direction) == "+" else -1
    return lambda *values: mpmath.limit(lambda h: inner(*values, h), target(*values), direction=sign)


def _compile_subs(node, args):
    dummies = [sp.Dummy() for _ in node.variables]
    inner = mpmath_function(node.expr.xreplace(dict(zip(node.variables, dummies))), args + dummies)
    points = [mpmath_function(p, args) for p in node.point]
    return lambda *values: inner(*values, *[p(*values) for p in points])
