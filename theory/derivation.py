"""Derivations as data: symbols, checked steps, results and typed-in claims.

A :class:`Derivation` holds a list of :class:`Step` objects, each an
unevaluated ``Eq(lhs, rhs, evaluate=False)`` with a one-line reason, the
results that sympy operations produced, and :class:`Claim` objects (closed
forms typed in from the paper or THEORY.md) checked against them.
:meth:`Derivation.check` verifies every step and claim, after the step's
``given`` relations and ``how`` preparation are applied:

1. *symbolic*: ``lhs - rhs`` reduces to 0 under ``doit``, ``expand`` or
   ``cancel``; failing those, under ``simplify`` (tried only when a numeric
   evaluation has not already refuted the equation). An equation carrying
   ``O(x**n)`` holds when the series of ``lhs - rhs`` in ``x`` is ``O(x**n)``
   and every ``O(.)`` of ``lhs`` lies in ``O(x**n)`` (it is read left to right).
   Sums with a symbolic size that sympy cannot reduce in general are
   expanded for the sizes ``1..4``, and the detail says so;
2. *numeric*: where sympy cannot decide, ``lhs - rhs`` is evaluated with
   mpmath at ``NUMERIC_DIGITS`` significant digits at ``NUMERIC_POINTS``
   seeded random points (positive where the symbols are positive) and stays
   below ``NUMERIC_TOLERANCE`` relative to the size of the two sides. This is
   evidence, never reported as a proof;
3. *failed*: a numeric counterexample, a series that is not the stated
   ``O(.)``, or undecided and not evaluable (undefined functions).

``doit`` evaluates integrals, derivatives and limits with sympy's own
``integrate``, ``diff`` and ``limit``; where the right-hand side was produced
by that same engine, the check would hold by construction. Such an item names
a ``route`` (:data:`ROUTES`) that checks it without the engine:

- ``"mpmath"``: every ``Integral`` node by ``mpmath.quad``, every
  ``Derivative`` by ``mpmath.diff``, every ``Limit`` by ``mpmath.limit``
  (undefined functions that do not depend on an integration or
  differentiation variable masked by random constants), at
  ``QUADRATURE_POINTS`` seeded random points with ``QUADRATURE_DIGITS`` digits,
  compared with the right-hand side there; reported *numeric*, held to
  ``QUADRATURE_TOLERANCE``;
- ``"antiderivative"``: ``Integral(f, x) = F`` (indefinite) by ``dF/dx = f``;
- ``"sift"``: integrals against Dirac deltas by the sifting property
  (:func:`~attneb.theory._calculus.sift`), not by ``integrate``;
- ``"substitute"``: a solution (``dsolve``, ``rsolve``, ``solve``) given as
  ``f(t) = F(t)`` or ``c = C`` is put back into the equation it solves
  (``f`` replaced everywhere, ``f(0)`` included) and the equation reduced.

The last three hand the transformed sides to the symbolic/numeric checks
above, and the detail names the route.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Callable, Mapping, Sequence

import mpmath
import sympy as sp
from sympy.core.function import AppliedUndef

from ._calculus import mpmath_function, series_in, sift

__all__ = [
    "NUMERIC_DIGITS",
    "NUMERIC_POINTS",
    "NUMERIC_TOLERANCE",
    "QUADRATURE_DIGITS",
    "QUADRATURE_POINTS",
    "QUADRATURE_TOLERANCE",
    "ROUTES",
    "CheckReport",
    "Claim",
    "Derivation",
    "Step",
    "StepCheck",
    "check_equation",
]

NUMERIC_DIGITS = 40
NUMERIC_POINTS = 6
NUMERIC_TOLERANCE = 1e-25
QUADRATURE_DIGITS = 20
QUADRATURE_POINTS = 4
QUADRATURE_TOLERANCE = 1e-15
_SUM_SIZES = (1, 2, 3, 4)
_GIVEN_PASSES = 4


def _validate(item):
    if item.how is not None and item.how not in PREPARATIONS:
        raise ValueError(f"how == {item.how!r}, must be one of {sorted(PREPARATIONS)} or None")
    if item.route is not None and item.route not in ROUTES:
        raise ValueError(f"route == {item.route!r}, must be one of {sorted(ROUTES)} or None")
    if item.route == "mpmath" and item.how is not None:
        raise ValueError("the mpmath route evaluates both sides numerically; drop how")


@dataclasses.dataclass(frozen=True)
class Step:
    """One line of a derivation.

    Parameters
    ----------
    eq : sympy.Equality
        ``Eq(lhs, rhs, evaluate=False)``.
    reason : str
        Why the line holds, in one line.
    how : str, optional
        Preparation applied to both sides before they are reduced: a key of
        ``PREPARATIONS`` (``"split_logs"``: common positive factors pulled out
        of logarithms; ``"integrals"``: integrals with the same limits in
        ``lhs - rhs`` merged by linearity).
    given : tuple of sympy.Equality
        Relations (an ODE, a definition, a solution) substituted into both
        sides before they are reduced; without a route, with derivatives
        re-evaluated between passes.
    route : str, optional
        A key of :data:`ROUTES`: how to check the step without the engine
        that produced its right-hand side. None: the symbolic/numeric checks.
    """

    eq: sp.Equality
    reason: str
    how: str | None = None
    given: tuple[sp.Equality, ...] = ()
    route: str | None = None

    def __post_init__(self):
        _validate(self)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A typed-in statement checked against a derived result.

    Parameters
    ----------
    eq : sympy.Equality
        ``Eq(derived, typed, evaluate=False)``.
    statement : str
        The claim in words.
    ref : str
        Claim id in THEORY.md (``"C6"``), or ``""`` for the toolkit's own.
    how, given, route
        As in :class:`Step`.
    """

    eq: sp.Equality
    statement: str
    ref: str = ""
    how: str | None = None
    given: tuple[sp.Equality, ...] = ()
    route: str | None = None

    def __post_init__(self):
        _validate(self)

    @property
    def reason(self) -> str:
        return self.statement


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """How one step or claim was checked.

    ``residual`` and ``tolerance`` are ``0.0`` and ``None`` for a symbolic
    check; for a numeric one, the largest relative residual over the points
    and the tolerance it was held to.
    """

    index: int
    kind: str
    reason: str
    method: str
    detail: str
    residual: float | None
    tolerance: float | None

    @property
    def passed(self) -> bool:
        return self.method != "failed"

    def summary(self) -> str:
        if self.method == "numeric":
            return f"numeric ({self.detail}; residual {self.residual:.1e} <= {self.tolerance:.0e})"
        return f"{self.method} ({self.detail})"


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The checks of one derivation; ``passed`` is true when all passed."""

    name: str
    entries: tuple[StepCheck, ...]

    @property
    def passed(self) -> bool:
        return all(entry.passed for entry in self.entries)

    def methods(self) -> dict[str, int]:
        """Count the entries per method (``symbolic``, ``numeric``, ``failed``)."""
        counts = {"symbolic": 0, "numeric": 0, "failed": 0}
        for entry in self.entries:
            counts[entry.method] += 1
        return counts

    def __str__(self) -> str:
        lines = [f"{self.name}: {'passed' if self.passed else 'FAILED'} {self.methods()}"]
        lines += [f"  {e.kind} {e.index}: {e.summary()}  -- {e.reason}" for e in self.entries]
        return "\n".join(lines)


# --------------------------------------------------------------------------- checking


def _split_logs(expr):
    """Pull common factors out of each log: ``log(c S) = log(c) + log(S)`` where sympy proves c, S > 0."""
    return expr.replace(
        lambda e: isinstance(e, sp.log),
        lambda e: sp.expand_log(sp.log(sp.factor_terms(sp.expand(e.args[0])))),
    )


def _merge_integrals(residual):
    """Linearity of the integral: ``sum_i c_i Integral(f_i, L)`` becomes ``Integral(sum_i c_i f_i, L)``.

    Works on the numerator of ``together(residual)``; a coefficient may not
    depend on the integration variable.
    """
    numerator, denominator = sp.fraction(sp.together(_doit(residual)))
    groups, rest = {}, sp.S.Zero
    for term in sp.Add.make_args(sp.expand(numerator)):
        integrals = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.Integral)]
        if len(integrals) != 1 or (term / integrals[0]).has(*integrals[0].variables):
            rest += term
            continue
        integral = integrals[0]
        groups.setdefault(integral.limits, []).append(term / integral * integral.function)
    merged = sum((sp.Integral(sp.simplify(sp.Add(*parts)), *limits) for limits, parts in groups.items()), rest)
    return merged / denominator


# name -> (applied to each side, applied to lhs - rhs)
PREPARATIONS: Mapping[str, tuple[Callable | None, Callable | None]] = {
    "split_logs": (_split_logs, None),
    "integrals": (None, _merge_integrals),
}
_CHEAP_REDUCTIONS: tuple[tuple[str, Callable], ...] = (
    ("expand", sp.expand),
    ("cancel", lambda r: sp.cancel(sp.expand(r))),
)
_COSTLY_REDUCTIONS: tuple[tuple[str, Callable], ...] = (("simplify", lambda r: sp.simplify(r, doit=False)),)
_EVALUATED = (sp.Derivative, sp.Subs, sp.Integral, sp.Limit, sp.Sum)


def _doit(expr):
    """``doit`` on derivatives, integrals, limits and explicit sums only.

    Sums with a symbolic size are kept as they are: ``Sum.doit`` would search
    for a closed form (Gosper, hypergeometric), which costs seconds and never
    helps the identities checked here. Integrals over an undefined function of
    the integration variable are kept too (sympy spends seconds failing on them).
    """
    def evaluate(node):
        if isinstance(node, sp.Sum) and _sum_limits(node):
            return node
        if isinstance(node, sp.Integral) and any(f.has(*node.variables) for f in node.atoms(AppliedUndef)):
            return node
        return node.doit(deep=False)

    return expr.replace(lambda e: isinstance(e, _EVALUATED), evaluate)


def _sum_limits(expr):
    """Symbols in the limits of the sums in ``expr`` (the sizes, e.g. ``N``)."""
    return {s for ssum in expr.atoms(sp.Sum) for lim in ssum.limits for s in lim[2].free_symbols}


def _order_zero(residual) -> bool:
    """True when a residual carrying ``O(var**n)`` terms is ``O(var**n)`` (n of the weakest)."""
    orders = residual.atoms(sp.Order)
    order = sp.Add(*orders)
    body = _doit(residual.xreplace({o: sp.S.Zero for o in orders}))
    if body == 0:
        return True
    (var,) = order.variables
    series = series_in(body, var, sp.degree(order.expr, var), order.point[0]).removeO()
    return series == 0 or sp.simplify(series) == 0


def _orders_contained(lhs, rhs) -> bool:
    """True when every ``O(.)`` of ``lhs`` lies in the ``O(.)`` of ``rhs``.

    ``A + O(x**m) = B + O(x**n)`` reads left to right: it can hold only when
    ``O(x**m)`` is contained in ``O(x**n)`` (``m >= n``).
    """
    left = lhs.atoms(sp.Order)
    if not left:
        return True
    right = sp.Add(*rhs.atoms(sp.Order))
    return right != 0 and all(right.contains(order) is True for order in left)


def _reduce(residual, reductions) -> str | None:
    """Name of the first reduction that takes ``residual`` to 0, or None."""
    for name, reduce in reductions:
        try:
            if reduce(residual) == 0:
                return name
        except (NotImplementedError, ValueError, TypeError):
            continue
    return None


def _symbolic(residual) -> str | None:
    """Name of the reduction (cheap ones first) that takes ``residual`` to 0, or None."""
    residual = _doit(residual)
    if residual == 0:
        return "doit"
    return _reduce(residual, _CHEAP_REDUCTIONS + _COSTLY_REDUCTIONS)


def _symbolic_sums(residual) -> str | None:
    """Reduce ``residual`` for each explicit size in ``_SUM_SIZES``; None if any fails."""
    limits = _sum_limits(residual)
    if not limits:
        return None
    for size in _SUM_SIZES:
        if _symbolic(residual.xreplace({s: size for s in limits}).doit()) is None:
            return None
    return f"sums expanded for sizes {_SUM_SIZES[0]}..{_SUM_SIZES[-1]} only (general size undecided)"


def _random_value(atom, rng: random.Random):
    value = sp.Float(rng.uniform(0.3, 2.0), NUMERIC_DIGITS)
    if atom.is_positive or atom.is_nonnegative:
        return value
    if atom.is_negative:
        return -value
    return value if rng.random() < 0.5 else -value


def _numeric_atoms(expr):
    """Free symbols and indexed elements, without the labels of the indexed bases."""
    indexed = expr.atoms(sp.Indexed)
    masked = expr.xreplace({a: sp.Dummy() for a in indexed})
    return indexed | {s for s in masked.free_symbols if not isinstance(s, sp.Dummy)}


def _numeric(lhs, rhs, seed: int) -> float | None:
    """Largest relative ``|lhs - rhs|`` over random points, or None if not evaluable."""
    if (lhs - rhs).has(AppliedUndef):
        return None
    rng = random.Random(seed)
    worst = 0.0
    for _ in range(NUMERIC_POINTS):
        sizes = {s: sp.Integer(rng.randint(1, 4)) for s in _sum_limits(lhs - rhs)}
        left, right = lhs.xreplace(sizes).doit(), rhs.xreplace(sizes).doit()
        atoms = sorted(_numeric_atoms(left) | _numeric_atoms(right), key=sp.default_sort_key)
        values = {a: _random_value(a, rng) for a in atoms}
        a = sp.N(left.xreplace(values), NUMERIC_DIGITS)
        b = sp.N(right.xreplace(values), NUMERIC_DIGITS)
        if not (a.is_number and b.is_number) or a.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
            return None
        scale = max(1.0, abs(complex(a)), abs(complex(b)))
        worst = max(worst, abs(complex(a - b)) / scale)
    return worst


def _components(eq):
    lhs, rhs = eq.lhs, eq.rhs
    if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
        return list(zip(sp.Matrix(lhs), sp.Matrix(rhs)))
    return [(lhs, rhs)]


def _prepare(expr, how, given):
    """Substitute ``given`` (repeatedly, evaluating between passes), then apply ``how`` to the side."""
    pairs = [(relation.lhs, relation.rhs) for relation in given]
    for _ in range(_GIVEN_PASSES if pairs else 0):
        new = _doit(expr).subs(pairs)
        if new == expr:
            break
        expr = new
    side = PREPARATIONS[how][0] if how else None
    return side(expr) if side else expr


def _reduce_sides(lhs, rhs, how, given, seed, prefix=""):
    """The symbolic/numeric checks of ``lhs = rhs``; return ``(method, detail, residual, tolerance)``.

    Cheap reductions first; then a numeric evaluation, which fails a false
    equation at once; only then ``simplify`` and the explicit-size sums,
    which may promote a numeric pass to a symbolic one.
    """
    lhs, rhs = _prepare(lhs, how, given), _prepare(rhs, how, given)
    residual = lhs - rhs
    if how and PREPARATIONS[how][1]:
        residual = PREPARATIONS[how][1](residual)
    prefix += f"{how} + " if how else ""
    if residual.has(sp.Order):
        if not _orders_contained(lhs, rhs):
            return "failed", prefix + "the left side is known only to an O(.) weaker than the stated one", None, None
        if _order_zero(residual):
            return "symbolic", prefix + "series", 0.0, None
        return "failed", prefix + "series of lhs - rhs is not the stated O(.)", None, None
    residual = _doit(residual)
    name = "doit" if residual == 0 else _reduce(residual, _CHEAP_REDUCTIONS)
    if name:
        return "symbolic", prefix + name, 0.0, None
    value = _numeric(lhs, rhs, seed)
    if value is not None and value > NUMERIC_TOLERANCE:
        return ("failed", prefix + f"mpmath residual {value:.3e} > {NUMERIC_TOLERANCE:.0e} at a random point",
                value, NUMERIC_TOLERANCE)
    name = _reduce(residual, _COSTLY_REDUCTIONS) or _symbolic_sums(residual)
    if name:
        return "symbolic", prefix + name, 0.0, None
    if value is None:
        return "failed", prefix + "sympy could not decide; lhs - rhs cannot be evaluated numerically", None, None
    return ("numeric", prefix + f"mpmath, {NUMERIC_DIGITS} digits, {NUMERIC_POINTS} seeded random points",
            value, NUMERIC_TOLERANCE)


# --------------------------------------------------------------------------- routes


def _substitute(expr, given):
    """Put the relations ``given`` into ``expr``.

    A relation ``f(t, ...) = F`` (an undefined function of distinct symbols)
    replaces the function ``f`` everywhere by ``Lambda((t, ...), F)``, so that
    ``f(0)`` and ``f(n + 1)`` become ``F`` at those arguments; any other
    relation is substituted by ``subs``.
    """
    for relation in given:
        lhs = relation.lhs
        arguments = lhs.args if isinstance(lhs, AppliedUndef) else ()
        if arguments and all(isinstance(a, sp.Symbol) for a in arguments) and len(set(arguments)) == len(arguments):
            expr = expr.replace(lhs.func, sp.Lambda(arguments, relation.rhs))
        else:
            expr = expr.subs(lhs, relation.rhs)
    return expr


def _sifted(lhs, rhs):
    return sift(lhs), sift(rhs)


def _differentiated(lhs, rhs):
    """``d/dx`` of both sides, ``x`` the variable of their indefinite integrals (the fundamental theorem)."""
    integrals = (lhs - rhs).atoms(sp.Integral)
    variables = {limit[0] for integral in integrals for limit in integral.limits}
    if not integrals or len(variables) != 1 or any(len(lim) != 1 for i in integrals for lim in i.limits):
        raise ValueError("needs indefinite integrals in one variable")
    (variable,) = variables
    lhs, rhs = sp.diff(lhs, variable), sp.diff(rhs, variable)
    if (lhs - rhs).has(sp.Integral):
        raise ValueError("an integral is left after differentiation")
    return lhs, rhs


def _stand_in(atom):
    """A Dummy with the sign assumptions of ``atom`` (an indexed element or an undefined function)."""
    for flag in ("positive", "negative", "real"):
        if getattr(atom, f"is_{flag}"):
            return sp.Dummy(str(atom), **{flag: True})
    return sp.Dummy(str(atom), real=True)


def _is_undefined(node) -> bool:
    """True for an undefined function, a derivative of one, or such a derivative at a point (``Subs``)."""
    if isinstance(node, (sp.Derivative, sp.Subs)):
        return _is_undefined(node.expr)
    return isinstance(node, AppliedUndef)


def _bound_variables(node) -> set:
    """Variables an ``Integral``, ``Derivative``, ``Subs`` or ``Limit`` node binds (empty for other nodes)."""
    if isinstance(node, sp.Limit):
        return {node.args[1]}
    if isinstance(node, (sp.Integral, sp.Derivative, sp.Subs)) and not _is_undefined(node):
        return set(node.variables)
    return set()


def _masked(pair):
    """``pair`` with indexed elements and undefined functions replaced by Dummies.

    Undefined functions (and their derivatives) are masked only where they do
    not depend on a variable that an integral, a derivative, a limit or a
    ``Subs`` binds: there they are constants, and a random value stands for each.
    """
    nodes = list(sp.preorder_traversal(pair))
    bound = set().union(*(_bound_variables(node) for node in nodes))
    constants = {node for node in nodes if _is_undefined(node) and not node.free_symbols & bound}
    constants = sorted(constants | pair.atoms(sp.Indexed), key=sp.default_sort_key)
    return pair.xreplace({a: _stand_in(a) for a in constants})


def _mpmath_residual(lhs, rhs, seed: int) -> tuple[float | None, int]:
    """Largest relative ``|lhs - rhs|`` over random points, both sides by mpmath alone, and the number of points.

    The residual is None when a side cannot be evaluated. Without free
    symbols there is one point.
    """
    pair = _masked(sp.Tuple(lhs, rhs))
    args = sorted(pair.free_symbols, key=sp.default_sort_key)
    points = QUADRATURE_POINTS if args else 1
    rng = random.Random(seed)
    worst = 0.0
    with mpmath.workdps(QUADRATURE_DIGITS):
        try:
            sides = [mpmath_function(side, args) for side in pair]
        except ValueError:
            return None, points
        for _ in range(points):
            values = [mpmath.mpf(_random_value(a, rng)) for a in args]
            try:
                a, b = (side(*values) for side in sides)
            except (ArithmeticError, ValueError, TypeError):
                return None, points
            if not all(mpmath.isfinite(v) for v in (a, b)):
                return None, points
            worst = max(worst, float(abs(a - b) / max(1, abs(a), abs(b))))
    return worst, points


def _check_mpmath(lhs, rhs, seed):
    value, points = _mpmath_residual(lhs, rhs, seed)
    if value is None:
        return ("failed", "mpmath cannot evaluate a side (an undefined function of an integration or "
                "differentiation variable, an indefinite integral, or a non-finite value)", None, None)
    if value > QUADRATURE_TOLERANCE:
        return ("failed", f"mpmath quadrature/differentiation residual {value:.3e} > {QUADRATURE_TOLERANCE:.0e}",
                value, QUADRATURE_TOLERANCE)
    where = f"{points} seeded random points" if points > 1 else "the stated point"
    used = ", ".join(f"mpmath.{name}" for node, name in _MPMATH_NODES if (lhs - rhs).has(node))
    return ("numeric", f"mpmath quadrature/differentiation, independent of sympy ({used}); "
            f"{QUADRATURE_DIGITS} digits, {where}", value, QUADRATURE_TOLERANCE)


_MPMATH_NODES = ((sp.Integral, "quad"), (sp.Derivative, "diff"), (sp.Limit, "limit"))


#: route name -> (label in the detail, transform of the two sides); "mpmath" is numeric only
ROUTES: Mapping[str, tuple[str, Callable | None]] = {
    "mpmath": ("mpmath quadrature/differentiation", None),
    "antiderivative": ("antiderivative: both sides differentiated in the integration variable", _differentiated),
    "sift": ("sifting of Dirac deltas", _sifted),
    "substitute": ("substitute-back", None),
}


def _check_component(lhs, rhs, how, given, route, seed):
    """Check ``lhs = rhs`` (scalars) by ``route``; return ``(method, detail, residual, tolerance)``."""
    if route is None:
        return _reduce_sides(lhs, rhs, how, given, seed)
    lhs, rhs = _substitute(lhs, given), _substitute(rhs, given)
    if route == "mpmath":
        return _check_mpmath(lhs, rhs, seed)
    label, transform = ROUTES[route]
    if transform:
        try:
            lhs, rhs = transform(lhs, rhs)
        except ValueError as error:
            return "failed", f"{label} does not apply: {error}", None, None
    return _reduce_sides(lhs, rhs, how, (), seed, prefix=f"{label} + ")


def check_equation(eq, *, how=None, given=(), route=None, seed=0):
    """Check one equation (matrices entry by entry).

    Parameters
    ----------
    eq : sympy.Equality
    how, given, route
        As in :class:`Step`.
    seed : int
        Seed of the random points of the numeric checks.

    Returns
    -------
    method : {"symbolic", "numeric", "failed"}
    detail : str
        The route and reduction that decided it, or why it failed.
    residual, tolerance : float or None
        ``0.0, None`` for symbolic; the worst relative mpmath residual and
        the tolerance it was held to (``NUMERIC_TOLERANCE``, or
        ``QUADRATURE_TOLERANCE`` on the mpmath route) for numeric, and
        for a numeric failure.
    """
    results = [_check_component(lhs, rhs, how, given, route, seed) for lhs, rhs in _components(eq)]
    for method in ("failed", "numeric"):
        hits = [r for r in results if r[0] == method]
        if hits:
            worst = max(hits, key=lambda r: -1.0 if r[2] is None else r[2])
            return method, hits[0][1], worst[2], worst[3]
    return "symbolic", ", ".join(dict.fromkeys(r[1] for r in results)), 0.0, None


# --------------------------------------------------------------------------- printing

_TEXT_ESCAPES = {"\\": r"\backslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "^": r"\^{}", "~": r"\~{}"}


def _escape(s: str) -> str:
    return "".join(_TEXT_ESCAPES.get(c, c) for c in s)


def _label(kind: str, index: int, item) -> str:
    return f"({index})" if kind == "step" else f"[claim {item.ref or index}]"


def _describe(symbol) -> str:
    if symbol.is_integer and symbol.is_positive:
        return f"{symbol} integer >= 1"
    for flag, text in (("positive", "> 0"), ("nonnegative", ">= 0"), ("real", "real")):
        if getattr(symbol, f"is_{flag}"):
            return f"{symbol} {text}"
    return str(symbol)


class Derivation:
    """A derivation: symbols, steps, results and claims, checkable and printable.

    Parameters
    ----------
    name : str
        Registry key (``"depth_noise"``).
    title : str
        One-line title.
    symbols : sequence of sympy.Symbol
        The symbols, with their assumptions.
    steps : sequence of Step
    results : sequence of sympy.Equality
        ``Eq(name, value)`` with ``value`` produced by sympy operations; the
        first is the principal result.
    claims : sequence of Claim

    Attributes
    ----------
    report : CheckReport or None
        The report of the last :meth:`check`.
    """

    def __init__(self, name: str, title: str, symbols: Sequence, steps: Sequence[Step],
                 results: Sequence[sp.Equality], claims: Sequence[Claim] = ()):
        self.name = name
        self.title = title
        self.symbols = tuple(symbols)
        self.steps = tuple(steps)
        self.results = tuple(results)
        self.claims = tuple(claims)
        self.report: CheckReport | None = None

    @property
    def result(self) -> sp.Equality:
        """The principal result (the first of ``results``)."""
        return self.results[0]

    def result_of(self, lhs):
        """Return the derived value whose left-hand side is ``lhs``."""
        for eq in self.results:
            if eq.lhs == lhs:
                return eq.rhs
        raise KeyError(f"derivation {self.name!r} has no result for {lhs}")

    def with_step(self, index: int, eq: sp.Equality) -> Derivation:
        """Return an unchecked copy whose step ``index`` (1-based) has equation ``eq``."""
        steps = list(self.steps)
        steps[index - 1] = dataclasses.replace(steps[index - 1], eq=eq)
        return Derivation(self.name, self.title, self.symbols, steps, self.results, self.claims)

    def with_claim(self, index: int, eq: sp.Equality) -> Derivation:
        """Return an unchecked copy whose claim ``index`` (1-based) has equation ``eq``."""
        claims = list(self.claims)
        claims[index - 1] = dataclasses.replace(claims[index - 1], eq=eq)
        return Derivation(self.name, self.title, self.symbols, self.steps, self.results, claims)

    def items(self):
        """Yield ``(kind, index, item)`` for the steps, then the claims (1-based)."""
        for i, step in enumerate(self.steps, 1):
            yield "step", i, step
        for i, claim in enumerate(self.claims, 1):
            yield "claim", i, claim

    def check_item(self, kind: str, index: int) -> StepCheck:
        """Check step (``kind="step"``) or claim (``kind="claim"``) number ``index``."""
        item = (self.steps if kind == "step" else self.claims)[index - 1]
        seed = zlib.crc32(f"{self.name}:{kind}:{index}".encode())
        method, detail, residual, tol = check_equation(item.eq, how=item.how, given=item.given, route=item.route,
                                                       seed=seed)
        return StepCheck(index, kind, item.reason, method, detail, residual, tol)

    def check(self) -> CheckReport:
        """Check every step and claim; store the :class:`CheckReport` in ``report`` and return it."""
        entries = tuple(self.check_item(kind, i) for kind, i, _ in self.items())
        self.report = CheckReport(self.name, entries)
        return self.report

    def latex(self) -> str:
        """The derivation as a LaTeX ``aligned`` block, one equation per row, reasons in ``\\text{}``."""
        rows = [r"&\textbf{" + _escape(self.title) + "} &&"]
        for kind, i, item in self.items():
            text = _escape(f"{_label(kind, i, item)} {item.reason}")
            rows.append(rf"{sp.latex(item.eq.lhs)} &= {sp.latex(item.eq.rhs)} && \text{{{text}}}")
        rows += [rf"{sp.latex(eq.lhs)} &= {sp.latex(eq.rhs)} && \text{{result}}" for eq in self.results]
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        return "$\\displaystyle " + self.latex() + "$"

    def to_text(self) -> str:
        """Plain listing: symbols, steps with reasons, results, and the checks of the last :meth:`check`."""
        checks = {(e.kind, e.index): e for e in self.report.entries} if self.report else {}
        lines = [f"{self.name}: {self.title}", "symbols: " + ", ".join(_describe(s) for s in self.symbols)]
        for kind, i, item in self.items():
            lines.append(f"{_label(kind, i, item)} {sp.sstr(item.eq.lhs)} = {sp.sstr(item.eq.rhs)}")
            lines.append(f"    {item.reason}")
            if item.given:
                lines.append("    given " + "; ".join(f"{sp.sstr(g.lhs)} = {sp.sstr(g.rhs)}" for g in item.given))
            if (kind, i) in checks:
                lines.append(f"    checked: {checks[kind, i].summary()}")
            elif item.route:
                lines.append(f"    route: {ROUTES[item.route][0]}")
        lines += [f"result: {sp.sstr(eq.lhs)} = {sp.sstr(eq.rhs)}" for eq in self.results]
        if self.report:
            lines.append(f"check: {'passed' if self.report.passed else 'FAILED'} {self.report.methods()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Derivation {self.name!r}: {len(self.steps)} steps, {len(self.claims)} claims>"
