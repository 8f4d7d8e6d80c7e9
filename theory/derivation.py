"""Derivations as data: symbols, checked steps, results and typed-in claimed forms.

A :class:`Derivation` holds a list of :class:`Step` objects, each an
unevaluated ``Eq(lhs, rhs, evaluate=False)`` with a one-line reason, the
results that sympy operations produced, and :class:`ClaimedForm` objects
(closed forms typed in from the paper or docs/theory.md, each naming the quantity
it is about) checked against them; a claimed form may also state an
inequality. :meth:`Derivation.check` verifies every step and claimed form,
after the item's ``given`` relations and ``how`` preparation are applied:

0. *numeric first*: ``lhs - rhs`` is evaluated at the seeded random points
   of the numeric check below, after the ``given`` relations are substituted
   plainly (by ``subs``; with the derivatives evaluated between passes only
   where the plain substitution leaves something that cannot be evaluated).
   A counterexample fails the item at once, before any costly reduction;
   otherwise this pass decides nothing, and the checks below run as they
   would without it. Equations with ``O(.)`` terms skip it, and so do two
   sides that are the same expression. The values at the points (and those
   of the mpmath route below) are kept for the next check of the same sides
   with the same seed: a derivation's mutants share all their items but one;
1. *symbolic*: ``lhs - rhs`` reduces to 0 under ``doit``, ``expand`` or
   ``cancel``; failing those, under ``simplify`` (tried only when a numeric
   evaluation has not already refuted the equation). An equation carrying
   ``O(x**n)`` holds when the series of ``lhs - rhs`` in ``x`` is ``O(x**n)``
   and every ``O(.)`` of ``lhs`` lies in ``O(x**n)`` (it is read left to right).
   Where ``lhs - rhs`` is a rational function of ``x`` (other functions of
   the symbols free of ``x`` count as constants) whose denominator sympy's
   assumptions show nonzero at the expansion point, the series is its Taylor
   polynomial, each coefficient a derivative at that point (``diff``,
   ``subs``), which costs a fraction of ``series``;
   Sums with a symbolic size that sympy cannot reduce in general are
   expanded for the sizes ``1..4``, and the detail says so;
2. *numeric*: where sympy cannot decide, ``lhs - rhs`` is evaluated with
   mpmath at ``NUMERIC_DIGITS`` significant digits at ``NUMERIC_POINTS``
   seeded random points (positive where the symbols are positive) and stays
   below ``NUMERIC_TOLERANCE`` relative to the size of the two sides. This is
   evidence, never reported as a proof;
3. *failed*: a numeric counterexample, a series that is not the stated
   ``O(.)``, or undecided and not evaluable (undefined functions).

An inequality (``Ge``, ``Gt``, ``Le``, ``Lt``; the greater side minus the
lesser, ``d``) holds *symbolically* when sympy's assumptions show ``d >= 0``
(``d > 0`` when strict) after ``doit``, ``expand`` or ``factor``, failing
those after ``simplify`` (a square times positive factors, a sum of such
terms); *numerically* when ``d`` relative to the size of the two sides is
``>= -NUMERIC_TOLERANCE`` (strict: ``> NUMERIC_TOLERANCE``) at every seeded
random point, reported as numeric, not a proof.

Each item has a time limit (``time_limit`` of :meth:`Derivation.check`,
default :data:`TIME_LIMIT` seconds of the checking thread's CPU time, so the
same on a loaded machine, for everything its check does). When it
passes before sympy has decided, the symbolic reductions are abandoned and the
numeric evaluation decides: the item is reported numeric, the detail saying
that the symbolic reduction did not finish, or failed where no numeric value
was obtained. The limit is enforced by :mod:`attneb.theory._time_limit` in any
thread (a CPython asynchronous exception), so in ``attneb verify``'s worker
processes and in a notebook's threads alike.

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
above, and the detail names the route. Inequalities take no route.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import random
import shutil
import time
import zlib
from collections.abc import Callable, Mapping, Sequence

import mpmath
import sympy as sp
from sympy.core.function import AppliedUndef

from ._calculus import mpmath_function, series_in, sift
from . import _time_limit
from ._time_limit import TimeLimitExceeded

__all__ = [
    "NUMERIC_DIGITS",
    "NUMERIC_POINTS",
    "NUMERIC_TOLERANCE",
    "QUADRATURE_DIGITS",
    "QUADRATURE_POINTS",
    "QUADRATURE_TOLERANCE",
    "ROUTES",
    "TIME_LIMIT",
    "CheckReport",
    "ClaimedForm",
    "Derivation",
    "Step",
    "StepCheck",
    "check_equation",
    "markdown_text",
]

NUMERIC_DIGITS = 40
NUMERIC_POINTS = 6
NUMERIC_TOLERANCE = 1e-25
QUADRATURE_DIGITS = 20
QUADRATURE_POINTS = 4
QUADRATURE_TOLERANCE = 1e-15
#: CPU seconds an item's check may take before its symbolic reductions are abandoned: several times
#: the slowest item of the toolkit's derivations (anisotropic's claim 9, about 10 s of CPU on a 2-core VM,
#: 36 s of wall time beside four other processes: a wall-clock limit failed it in a loaded verify).
TIME_LIMIT = 60.0
_SUM_SIZES = (1, 2, 3, 4)
_GIVEN_PASSES = 4
_EVALUATIONS_KEPT = 1024

#: relation -> (text, LaTeX); the inequalities a claimed form may state
_RELATIONS: Mapping[type, tuple[str, str]] = {
    sp.Equality: ("=", "="),
    sp.GreaterThan: (">=", r"\geq"),
    sp.StrictGreaterThan: (">", ">"),
    sp.LessThan: ("<=", r"\leq"),
    sp.StrictLessThan: ("<", "<"),
}
_STRICT = (">", "<")
#: header of the Markdown table of :class:`CheckReport` and :class:`StepCheck`
_TABLE_HEAD = ("| item | method | passed | detail | reason |", "|---|---|---|---|---|")
#: characters that Markdown (CommonMark, GitHub's tables and strikethrough, Jupyter's ``$`` math) would read as markup
_MARKDOWN_SPECIALS = frozenset("\\`*_[]<>|$~")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown: every character that Markdown could read as markup backslash-escaped.

    ``T* = sigma2/(2 h2)`` stays what it says instead of opening an emphasis, ``FD5[f](q)`` a link,
    ``$x$`` Jupyter's math and ``|y|`` a table's column. The displays of checks, claims and results
    (``_repr_markdown_``, here and in :mod:`attneb.proofs_check`) pass their prose through it.
    """
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in str(text))


def _table_cell(text: str) -> str:
    """``text`` on one line, as literal Markdown, for a cell of a Markdown table."""
    return markdown_text(" ".join(str(text).split()))


def _validate(item, relations):
    """Check the fields of a :class:`Step` or :class:`ClaimedForm`; ``relations``: the types ``eq`` may have."""
    if type(item.eq) not in relations:
        kinds = " or ".join(f"{r.__name__}(lhs, rhs, evaluate=False)" for r in relations)
        raise TypeError(f"eq must be an unevaluated sympy {kinds}, got {item.eq!r} of type {type(item.eq).__name__}")
    if not isinstance(item.given, tuple) or not all(isinstance(g, sp.Equality) for g in item.given):
        raise TypeError(f"given must be a tuple of sympy Eq(lhs, rhs), got {item.given!r}")
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
        _validate(self, (sp.Equality,))


@dataclasses.dataclass(frozen=True)
class ClaimedForm:
    """A closed form typed in (from the paper or docs/theory.md) and checked against a derived result.

    Not to be confused with a claim of the paper (the ``Claim`` of :mod:`attneb.proofs_check`,
    an id such as C6 with the checks that bear on it): a claimed form names one through ``ref``.

    Parameters
    ----------
    eq : sympy.Equality or sympy inequality
        ``Eq(derived, typed, evaluate=False)``, ``derived`` produced by sympy
        operations and ``typed`` typed in; or an inequality between them,
        ``Ge(derived, typed, evaluate=False)`` (``derived >= typed``; also
        ``Gt``, ``Le``, ``Lt``), with scalar sides and no ``O(.)``.
    statement : str
        The claimed form in words.
    ref : str
        Claim id (``"C6"``, see docs/theory.md), or ``""`` for the toolkit's own.
    how, given, route
        As in :class:`Step`; an inequality takes no route.
    name : sympy expression, keyword-only
        The quantity the claimed form is about (``c``, ``Symbol("T_star")``,
        ``Function("lambda")(k)``). Printed as ``name = typed`` (or
        ``name >= typed``), with ``name = derived`` beside it. Required: the
        derived side is an expression sympy built, often a long one, which
        says what was computed but not what it is; every claimed form names
        its quantity so that no listing has to print it in its place.
    """

    eq: sp.Rel
    statement: str
    ref: str = ""
    how: str | None = None
    given: tuple[sp.Equality, ...] = ()
    route: str | None = None
    name: sp.Basic = dataclasses.field(kw_only=True)

    def __post_init__(self):
        _validate(self, tuple(_RELATIONS))
        if not isinstance(self.name, sp.Basic):
            raise TypeError(f"name must be a sympy expression (the quantity claimed, e.g. Symbol('T_star')), "
                            f"got {self.name!r} of type {type(self.name).__name__}")
        if self.relation != "=":
            if any(isinstance(side, sp.MatrixBase) for side in self.eq.args):
                raise ValueError(f"an inequality compares scalars, got eq == {self.eq!r}")
            if self.eq.has(sp.Order):
                raise ValueError(f"an inequality cannot carry O(.) terms, got eq == {self.eq!r}")
            if self.route is not None:
                raise ValueError(f"route == {self.route!r}: an inequality is checked without a route, pass None")

    @property
    def reason(self) -> str:
        """The statement (what :class:`Step` calls its reason)."""
        return self.statement

    @property
    def relation(self) -> str:
        """``"="``, ``">="``, ``">"``, ``"<="`` or ``"<"``."""
        return _RELATIONS[type(self.eq)][0]

    @property
    def derived(self):
        """The derived side (``eq.lhs``)."""
        return self.eq.lhs

    @property
    def typed(self):
        """The typed-in side (``eq.rhs``)."""
        return self.eq.rhs


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """How one step or claimed form was checked.

    ``residual`` and ``tolerance`` are ``0.0`` and ``None`` for a symbolic
    check; for a numeric one, the largest relative residual over the points
    and the tolerance it was held to. For an inequality (``relation`` other
    than ``"="``) the residual is the largest relative amount by which the
    lesser side exceeds the greater one over the points: negative, minus the
    smallest margin, where the inequality holds with room to spare.
    """

    index: int
    kind: str
    reason: str
    method: str
    detail: str
    residual: float | None
    tolerance: float | None
    relation: str = "="

    @property
    def passed(self) -> bool:
        return self.method != "failed"

    def _how(self) -> str:
        """The detail, with a numeric check's residual (or margin) and tolerance."""
        if self.method != "numeric":
            return self.detail
        if self.relation == "=":
            return f"{self.detail}; residual {self.residual:.1e} <= {self.tolerance:.0e}"
        bound = f"> {self.tolerance:.0e}" if self.relation in _STRICT else f">= -{self.tolerance:.0e}"
        return f"{self.detail}; smallest margin {-self.residual:.1e} {bound}"

    def summary(self) -> str:
        return f"{self.method} ({self._how()})"

    def _markdown_row(self) -> str:
        cells = (f"{self.kind} {self.index}", self.method, "yes" if self.passed else "**no**",
                 _table_cell(self._how()), _table_cell(self.reason))
        return "| " + " | ".join(cells) + " |"

    def _repr_markdown_(self) -> str:
        """A one-row Markdown table: item, method, passed, detail, reason (as in :class:`CheckReport`)."""
        return "\n".join((*_TABLE_HEAD, self._markdown_row()))


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

    def _repr_markdown_(self) -> str:
        """The verdict and the count per method, then a Markdown table, one row per step and claimed form."""
        counts = ", ".join(f"{n} {method}" for method, n in self.methods().items())
        head = f"Checks of `{self.name}`: {'passed' if self.passed else '**FAILED**'} ({counts})"
        return "\n".join((head, "", *_TABLE_HEAD, *(e._markdown_row() for e in self.entries)))


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
#: forms of the greater side minus the lesser whose sign sympy's assumptions may decide (inequalities)
_CHEAP_SIGNS: tuple[tuple[str, Callable], ...] = (("doit", lambda d: d), ("expand", sp.expand), ("factor", sp.factor))
_COSTLY_SIGNS: tuple[tuple[str, Callable], ...] = _COSTLY_REDUCTIONS
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
    n, point = sp.degree(order.expr, var), order.point[0]
    coefficients = _taylor_coefficients(body, var, n, point)
    if coefficients is None:
        coefficients = [series_in(body, var, n, point).removeO()]
    return all(c == 0 or sp.simplify(c) == 0 for c in coefficients)


def _taylor_coefficients(body, var, n: int, point):
    r"""The first ``n`` Taylor coefficients of ``body`` in ``var`` at ``point``, or None where this route does not apply.

    It applies where ``body`` is a rational function of ``var`` (functions free of ``var`` are constants), put over
    one denominator :math:`P/Q` (``together``), and sympy's assumptions show :math:`Q(\text{point}) \ne 0`:
    ``body`` is then analytic there, and it is :math:`O((var - point)^n)` exactly when
    :math:`\partial^k (P/Q)/\partial var^k` vanishes at ``point`` for :math:`k < n`. The derivatives are taken of
    :math:`P/Q`, not of ``body``, whose form may hold a removable singularity at the point (``x/x``); a coefficient
    that still comes out undefined sends the item to ``series``.
    """
    if not body.is_rational_function(var):
        return None
    numerator, denominator = sp.fraction(sp.together(body))
    if denominator.subs(var, point).is_zero is not False:
        return None
    coefficients, derivative = [], numerator / denominator  # removable singularities of body's form cancelled
    for k in range(n):
        coefficients.append(derivative.subs(var, point) / sp.factorial(k))
        derivative = sp.diff(derivative, var)
    if any(c.has(sp.nan, sp.zoo, sp.oo, -sp.oo) for c in coefficients):
        return None
    return coefficients


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


@functools.lru_cache(maxsize=_EVALUATIONS_KEPT)
def _point_values(lhs, rhs, seed: int) -> tuple[complex, ...] | None:
    """``(lhs - rhs) / max(1, |lhs|, |rhs|)`` at each of the seeded random points, or None where a side is not a number.

    Sums with a symbolic size take a random size in ``1..4`` at each point;
    both sides are evaluated by ``doit`` once per size. The ratio is formed
    at ``NUMERIC_DIGITS`` digits, so sides too large for a float still count.
    Kept for the next call with the same sides and seed: a derivation's copies
    (mutants) share all but one item, and each copy's check evaluates the
    others again.
    """
    if lhs.has(AppliedUndef) or rhs.has(AppliedUndef):
        return None
    rng = random.Random(seed)
    limits = _sum_limits(lhs) | _sum_limits(rhs)
    evaluated = {}
    values = []
    for _ in range(NUMERIC_POINTS):
        sizes = {s: sp.Integer(rng.randint(1, 4)) for s in limits}
        key = frozenset(sizes.items())
        if key not in evaluated:
            left, right = lhs.xreplace(sizes).doit(), rhs.xreplace(sizes).doit()
            evaluated[key] = left, right, sorted(_numeric_atoms(left) | _numeric_atoms(right), key=sp.default_sort_key)
        left, right, atoms = evaluated[key]
        point = {a: _random_value(a, rng) for a in atoms}
        a = sp.N(left.xreplace(point), NUMERIC_DIGITS)
        b = sp.N(right.xreplace(point), NUMERIC_DIGITS)
        if not (a.is_number and b.is_number) or any(v.has(sp.nan, sp.zoo, sp.oo, -sp.oo) for v in (a, b)):
            return None
        values.append(complex((a - b) / max(1, abs(a), abs(b))))
    return tuple(values)


def _residual(values) -> float | None:
    """Largest relative ``|lhs - rhs|`` over the points of :func:`_point_values`, or None."""
    return None if values is None else max(abs(value) for value in values)


def _violation(values) -> float | None:
    """Largest relative ``rhs - lhs`` over the points (``lhs`` the greater side), or None.

    None too where ``lhs - rhs`` is not real at a point (beyond the numeric tolerance).
    """
    if values is None or any(abs(value.imag) > NUMERIC_TOLERANCE for value in values):
        return None
    return max(-value.real for value in values)


def _components(eq):
    lhs, rhs = eq.lhs, eq.rhs
    if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
        return list(zip(sp.Matrix(lhs), sp.Matrix(rhs)))
    return [(lhs, rhs)]


def _substituted(expr, given, *, evaluate: bool):
    """Substitute the relations ``given`` into ``expr``, repeatedly; with ``evaluate``, ``doit`` before each pass."""
    pairs = [(relation.lhs, relation.rhs) for relation in given]
    for _ in range(_GIVEN_PASSES if pairs else 0):
        new = (_doit(expr) if evaluate else expr).subs(pairs)
        if new == expr:
            break
        expr = new
    return expr


def _prepared(expr, how):
    side = PREPARATIONS[how][0] if how else None
    return side(expr) if side else expr


# --------------------------------------------------------------------------- one component of an item

_UNSET = object()
_NUMERIC_DETAIL = f"mpmath, {NUMERIC_DIGITS} digits, {NUMERIC_POINTS} seeded random points"


class _Component:
    """One scalar equation of an item (one entry of a matrix equation), checked in two passes.

    :meth:`refute` is the numeric-first pass; :meth:`decide` the symbolic
    reductions in their order, then the numeric verdict. Both record what
    they found, so that :meth:`timed_out` can decide from it when the time
    limit interrupts them. Results are ``(method, detail, residual, tolerance)``.
    """

    def __init__(self, lhs, rhs, how, given, route, seed):
        self.lhs, self.rhs, self.how, self.given, self.route, self.seed = lhs, rhs, how, given, route, seed
        self.prefix = ""
        self.result = None
        self.value = _UNSET  # the numeric value for timed_out: the latest float, else None (not evaluable) or unset
        self._evaluated, self._measured = None, None  # the sides last evaluated, and their value
        self._given_applied = None  # the sides after the given passes with doit, once computed

    # what is measured at the points, and when it refutes: _Inequality changes these
    def _measure(self, values):
        return _residual(values)

    def _refutable(self, lhs, rhs) -> bool:
        return lhs != rhs

    def _refutes(self, value) -> bool:
        return value is not None and value > NUMERIC_TOLERANCE

    def _refutation(self, value):
        return ("failed", self.prefix + f"mpmath residual {value:.3e} > {NUMERIC_TOLERANCE:.0e} at a random point",
                value, NUMERIC_TOLERANCE)

    def _evaluate(self, lhs, rhs):
        """The numeric value at ``lhs, rhs`` (reused when these are the sides already evaluated)."""
        if self._evaluated != (lhs, rhs):
            self._evaluated, self._measured = (lhs, rhs), self._measure(_point_values(lhs, rhs, self.seed))
            if self._measured is not None or self.value is _UNSET:
                self.value = self._measured
        return self._measured

    def _after_given(self):
        if self._given_applied is None:
            self._given_applied = tuple(_substituted(side, self.given, evaluate=True) for side in (self.lhs, self.rhs))
        return self._given_applied

    def _apply_route(self):
        """Substitute ``given`` and transform the sides as the route says; the mpmath route checks here."""
        if self.route is None:
            return
        self.lhs, self.rhs = _substitute(self.lhs, self.given), _substitute(self.rhs, self.given)
        self.given = ()
        if self.route == "mpmath":
            self.result = _check_mpmath(self.lhs, self.rhs, self.seed)
            return
        label, transform = ROUTES[self.route]
        if transform:
            try:
                self.lhs, self.rhs = transform(self.lhs, self.rhs)
            except ValueError as error:
                self.result = "failed", f"{label} does not apply: {error}", None, None
                return
        self.prefix = f"{label} + "

    def refute(self):
        """Evaluate at the seeded random points first, ``given`` substituted plainly; the failure if it refutes.

        The route is applied first (on the mpmath route, that is the whole
        check). Where the plain substitution leaves undefined functions and
        ``given`` is not empty, the given passes with ``doit`` are made (and
        kept for :meth:`decide`). Sides carrying ``O(.)`` are not evaluated,
        nor an equation whose two sides are the same expression.
        """
        self._apply_route()
        if self.result is not None:
            return self.result if self.result[0] == "failed" else None
        if any(side.has(sp.Order) for side in (self.lhs, self.rhs)):
            self.value = None  # no value at a point says anything about an O(.)
            return None
        lhs, rhs = (_substituted(side, self.given, evaluate=False) for side in (self.lhs, self.rhs))
        if not self._refutable(lhs, rhs):
            return None
        value = self._evaluate(lhs, rhs)
        if value is None and self.given:
            value = self._evaluate(*self._after_given())
        if self._refutes(value):
            self.result = self._refutation(value)
        return self.result

    def decide(self):
        """The symbolic reductions, cheap ones first, then the numeric verdict (as documented in the module)."""
        if self.result is not None:
            return self.result
        lhs, rhs = (_prepared(side, self.how) for side in self._after_given())
        residual = lhs - rhs
        if self.how and PREPARATIONS[self.how][1]:
            residual = PREPARATIONS[self.how][1](residual)
        prefix = self.prefix + (f"{self.how} + " if self.how else "")
        if residual.has(sp.Order):
            if not _orders_contained(lhs, rhs):
                self.result = ("failed", prefix + "the left side is known only to an O(.) weaker than the stated one",
                               None, None)
            elif _order_zero(residual):
                self.result = "symbolic", prefix + "series", 0.0, None
            else:
                self.result = "failed", prefix + "series of lhs - rhs is not the stated O(.)", None, None
            return self.result
        residual = _doit(residual)
        name = "doit" if residual == 0 else _reduce(residual, _CHEAP_REDUCTIONS)
        if name:
            self.result = "symbolic", prefix + name, 0.0, None
            return self.result
        value = self._evaluate(lhs, rhs)
        if self._refutes(value):
            self.result = self._refutation(value)
            return self.result
        name = _reduce(residual, _COSTLY_REDUCTIONS) or _symbolic_sums(residual)
        if name:
            self.result = "symbolic", prefix + name, 0.0, None
        elif value is None:
            self.result = ("failed", prefix + "sympy could not decide; lhs - rhs cannot be evaluated numerically",
                           None, None)
        else:
            self.result = self._numeric(prefix, value)
        return self.result

    def _numeric(self, prefix, value):
        return "numeric", prefix + _NUMERIC_DETAIL, value, NUMERIC_TOLERANCE

    def timed_out(self, limit: float):
        """The result when the time limit ended the check: the one found, else the numeric value's verdict."""
        if self.result is not None:
            return self.result
        if self.route == "mpmath":
            return "failed", f"mpmath quadrature/differentiation did not finish within {limit:g} s of CPU time", None, None
        late = f"the symbolic reduction did not finish within {limit:g} s of CPU time"
        if self.value is _UNSET:
            return "failed", self.prefix + f"{late}, nor the numeric evaluation", None, None
        if self.value is None:
            return "failed", self.prefix + f"{late}; lhs - rhs cannot be evaluated numerically", None, None
        return self._numeric(self.prefix + f"{late}; ", self.value)


class _Inequality(_Component):
    """``lhs >= rhs`` (``strict``: ``>``), the greater side first; the same passes, with signs for zeros."""

    def __init__(self, greater, lesser, strict, how, given, seed):
        super().__init__(greater, lesser, how, given, None, seed)
        self.strict = strict

    def _measure(self, values):
        return _violation(values)

    def _refutable(self, lhs, rhs) -> bool:
        return True  # a strict inequality between the same sides is false

    def _refutes(self, value) -> bool:
        return value is not None and (value >= -NUMERIC_TOLERANCE if self.strict else value > NUMERIC_TOLERANCE)

    def _refutation(self, value):
        bound = f"> {NUMERIC_TOLERANCE:.0e}" if self.strict else f">= -{NUMERIC_TOLERANCE:.0e}"
        return ("failed", f"mpmath: greater - lesser (relative) is {-value:.3e} at a random point, must be {bound}",
                value, NUMERIC_TOLERANCE)

    def decide(self):
        """Sign reductions, cheap ones first, then the numeric verdict (as documented in the module)."""
        if self.result is not None:
            return self.result
        greater, lesser = (_prepared(side, self.how) for side in self._after_given())
        difference = greater - lesser
        if self.how and PREPARATIONS[self.how][1]:
            difference = PREPARATIONS[self.how][1](difference)
        prefix = f"{self.how} + " if self.how else ""
        sign = "> 0" if self.strict else ">= 0"
        difference = _doit(difference)
        name = _signed(difference, _CHEAP_SIGNS, self.strict)
        if name:
            self.result = "symbolic", prefix + f"{name}, then sympy's assumptions: greater - lesser {sign}", 0.0, None
            return self.result
        value = self._evaluate(greater, lesser)
        if self._refutes(value):
            self.result = self._refutation(value)
            return self.result
        name = _signed(difference, _COSTLY_SIGNS, self.strict)
        if name:
            self.result = "symbolic", prefix + f"{name}, then sympy's assumptions: greater - lesser {sign}", 0.0, None
        elif value is None:
            self.result = ("failed", prefix + "sympy could not decide the sign; greater - lesser cannot be evaluated "
                           "numerically as a real number", None, None)
        else:
            self.result = self._numeric(prefix, value)
        return self.result

    def _numeric(self, prefix, value):
        sign = "> 0" if self.strict else ">= 0"
        return "numeric", prefix + f"greater - lesser {sign} at each point; {_NUMERIC_DETAIL}", value, NUMERIC_TOLERANCE


def _signed(difference, reductions, strict: bool) -> str | None:
    """Name of the first reduction after which sympy's assumptions show ``difference >= 0`` (``> 0``), or None."""
    for name, reduce in reductions:
        try:
            form = reduce(difference)
        except (NotImplementedError, ValueError, TypeError):
            continue
        if (form.is_positive if strict else form.is_nonnegative) is True:
            return name
    return None


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


@functools.lru_cache(maxsize=_EVALUATIONS_KEPT)
def _mpmath_residual(lhs, rhs, seed: int) -> tuple[float | None, int]:
    """Largest relative ``|lhs - rhs|`` over random points, both sides by mpmath alone, and the number of points.

    The residual is None when a side cannot be evaluated. Without free
    symbols there is one point. Kept, as :func:`_point_values` is.
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



def _combined(results):
    """One result for the components of an item: the first failure, else numeric (worst residual), else symbolic."""
    for method in ("failed", "numeric"):
        hits = [r for r in results if r[0] == method]
        if hits:
            worst = max(hits, key=lambda r: -1.0 if r[2] is None else r[2])
            return method, hits[0][1], worst[2], worst[3]
    return "symbolic", ", ".join(dict.fromkeys(r[1] for r in results)), 0.0, None


def _checked_time_limit(value) -> float | None:
    """``value`` as a float of seconds > 0, or None (no limit); raises for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"time_limit must be a number of seconds or None, got {value!r} of type {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"time_limit == {value!r}, must be > 0 seconds (or None: no limit)")
    return float(value)


def _parts(eq, how, given, route, seed) -> list[_Component]:
    """The components of ``eq``: the entries of a matrix equation, or the one scalar equation or inequality."""
    if type(eq) is sp.Equality:
        return [_Component(lhs, rhs, how, given, route, seed) for lhs, rhs in _components(eq)]
    if route is not None:
        raise ValueError(f"route == {route!r}: an inequality is checked without a route, pass None")
    relation = _RELATIONS[type(eq)][0]
    greater, lesser = (eq.lhs, eq.rhs) if relation.startswith(">") else (eq.rhs, eq.lhs)
    return [_Inequality(greater, lesser, relation in _STRICT, how, given, seed)]


def check_equation(eq, *, how=None, given=(), route=None, seed=0, time_limit=TIME_LIMIT):
    """Check one equation (matrices entry by entry) or inequality.

    Every component is first evaluated at the seeded random points, and a
    counterexample fails the item at once; then each is reduced (module
    docstring). Past ``time_limit`` the reductions are abandoned and the
    numeric value found so far decides.

    Parameters
    ----------
    eq : sympy.Equality or sympy inequality
        ``Eq(lhs, rhs, evaluate=False)``, or ``Ge``/``Gt``/``Le``/``Lt`` with scalar sides.
    how, given, route
        As in :class:`Step` (an inequality takes no route).
    seed : int
        Seed of the random points of the numeric checks.
    time_limit : float or None
        CPU seconds of the checking thread for the whole check, > 0 (default :data:`TIME_LIMIT`);
        None: no limit.

    Returns
    -------
    method : {"symbolic", "numeric", "failed"}
    detail : str
        The route and reduction that decided it, or why it failed.
    residual, tolerance : float or None
        ``0.0, None`` for symbolic; the worst relative mpmath residual and
        the tolerance it was held to (``NUMERIC_TOLERANCE``, or
        ``QUADRATURE_TOLERANCE`` on the mpmath route) for numeric, and
        for a numeric failure. For an inequality, the residual is the
        largest relative amount by which the lesser side exceeds the
        greater one (see :class:`StepCheck`).
    """
    if type(eq) not in _RELATIONS:
        raise TypeError(f"eq must be an unevaluated sympy Eq, Ge, Gt, Le or Lt, got {eq!r} of type {type(eq).__name__}")
    limit = _checked_time_limit(time_limit)
    parts = _parts(eq, how, given, route, seed)
    outcome = []
    try:
        with _time_limit.time_limit(limit):
            refuted = next((part.result for part in parts if part.refute() is not None), None)
            outcome.append(refuted or _combined([part.decide() for part in parts]))
    except TimeLimitExceeded:
        if not outcome:  # else the limit passed as the check finished: its result stands
            outcome.append(_combined([part.timed_out(limit) for part in parts]))
    return outcome[0]


@functools.lru_cache(maxsize=_EVALUATIONS_KEPT)
def _checked_item(eq, how, given, route, seed: int, time_limit: float | None):
    """:func:`check_equation` of an item, kept for the next item with the same content and seed.

    A derivation's mutants share all but one item with it (same name and index, so the same seed),
    and the check of each mutant would otherwise check every unchanged item again: a true item that
    sympy cannot reduce would wait out its time limit once per mutant.
    """
    return check_equation(eq, how=how, given=given, route=route, seed=seed, time_limit=time_limit)


# --------------------------------------------------------------------------- printing

_TEXT_ESCAPES = {"\\": r"\backslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "^": r"\^{}", "~": r"\~{}"}
_INDENT = "    "


def _escape(s: str) -> str:
    return "".join(_TEXT_ESCAPES.get(c, c) for c in s)


def _label(kind: str, index: int, item) -> str:
    return f"({index})" if kind == "step" else f"[claim {item.ref or index}]"


def _describe(symbol, show) -> str:
    if symbol.is_integer and symbol.is_positive:
        return f"{show(symbol)} integer >= 1"
    for flag, text in (("positive", "> 0"), ("nonnegative", ">= 0"), ("real", "real")):
        if getattr(symbol, f"is_{flag}"):
            return f"{show(symbol)} {text}"
    return show(symbol)


def _shown(kind: str, item) -> tuple:
    """``(lhs, relation type, rhs)`` as printed: a step's equation; a claimed form's ``name relation typed``."""
    if kind == "step":
        return item.eq.lhs, sp.Equality, item.eq.rhs
    return item.name, type(item.eq), item.typed


class _Plain:
    """Text in sympy's ``sstr`` form, one line per relation."""

    @staticmethod
    def symbol(symbol) -> str:
        return sp.sstr(symbol)

    @staticmethod
    def lines(head: str, lhs, relation: type, rhs) -> list[str]:
        return [f"{head}{sp.sstr(lhs)} {_RELATIONS[relation][0]} {sp.sstr(rhs)}"]


class _Pretty:
    """sympy's 2-D unicode pretty printer, each relation a block below its heading, wrapped to the terminal."""

    def __init__(self):
        self.columns = shutil.get_terminal_size().columns

    @staticmethod
    def symbol(symbol) -> str:
        return sp.pretty(symbol, use_unicode=True)

    def lines(self, head: str, lhs, relation: type, rhs) -> list[str]:
        indent = head[:len(head) - len(head.lstrip())] + _INDENT
        block = sp.pretty(relation(lhs, rhs, evaluate=False), use_unicode=True, num_columns=self.columns - len(indent))
        return [head.rstrip()] + [(indent + line).rstrip() for line in block.splitlines()]


class Derivation:
    """A derivation: symbols, steps, results and claimed forms, checkable and printable.

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
    claims : sequence of ClaimedForm

    Attributes
    ----------
    report : CheckReport or None
        The report of the last :meth:`check`.
    """

    def __init__(self, name: str, title: str, symbols: Sequence, steps: Sequence[Step],
                 results: Sequence[sp.Equality], claims: Sequence[ClaimedForm] = ()):
        for argument, items, kind in (("steps", steps, Step), ("claims", claims, ClaimedForm)):
            wrong = [item for item in items if not isinstance(item, kind)]
            if wrong:
                raise TypeError(f"{argument} must hold {kind.__name__} objects, got {wrong[0]!r}")
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

    def item(self, kind: str, index: int) -> Step | ClaimedForm:
        """Step (``kind="step"``) or claimed form (``kind="claim"``) number ``index`` (1-based)."""
        if kind not in ("step", "claim"):
            raise ValueError(f"kind == {kind!r}, must be 'step' or 'claim'")
        items = self.steps if kind == "step" else self.claims
        if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= len(items):
            raise ValueError(f"index == {index!r}, must be an int in 1..{len(items)} ({kind}s of {self.name!r})")
        return items[index - 1]

    def with_step(self, index: int, eq: sp.Equality) -> Derivation:
        """Return an unchecked copy whose step ``index`` (1-based) has equation ``eq``."""
        steps = list(self.steps)
        steps[index - 1] = dataclasses.replace(self.item("step", index), eq=eq)
        return Derivation(self.name, self.title, self.symbols, steps, self.results, self.claims)

    def with_claim(self, index: int, eq) -> Derivation:
        """Return an unchecked copy whose claimed form ``index`` (1-based) has equation (or inequality) ``eq``."""
        claims = list(self.claims)
        claims[index - 1] = dataclasses.replace(self.item("claim", index), eq=eq)
        return Derivation(self.name, self.title, self.symbols, self.steps, self.results, claims)

    def items(self):
        """Yield ``(kind, index, item)`` for the steps, then the claimed forms (1-based)."""
        for i, step in enumerate(self.steps, 1):
            yield "step", i, step
        for i, claim in enumerate(self.claims, 1):
            yield "claim", i, claim

    def check_item(self, kind: str, index: int, *, time_limit: float | None = TIME_LIMIT,
                   progress: Callable[[str, int, str, float], None] | None = None) -> StepCheck:
        """Check step (``kind="step"``) or claimed form (``kind="claim"``) number ``index``.

        Parameters
        ----------
        kind : {"step", "claim"}
        index : int
            1-based.
        time_limit : float or None
            CPU seconds the item's check may take (default :data:`TIME_LIMIT`); past it the symbolic
            reductions are abandoned and the numeric evaluation decides (module docstring). None: no limit.
        progress : callable, optional
            Called as ``progress(kind, index, method, seconds)`` when the item is checked.
        """
        item = self.item(kind, index)
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable or None, got {progress!r}")
        seed = zlib.crc32(f"{self.name}:{kind}:{index}".encode())
        start = time.perf_counter()
        method, detail, residual, tol = _checked_item(item.eq, item.how, item.given, item.route, seed,
                                                      _checked_time_limit(time_limit))
        if progress is not None:
            progress(kind, index, method, time.perf_counter() - start)
        relation = item.relation if kind == "claim" else "="
        return StepCheck(index, kind, item.reason, method, detail, residual, tol, relation)

    def check(self, *, time_limit: float | None = TIME_LIMIT,
              progress: Callable[[str, int, str, float], None] | None = None) -> CheckReport:
        """Check every step and claimed form; store the :class:`CheckReport` in ``report`` and return it.

        ``time_limit`` is per item and ``progress`` is called as each item is checked, as in
        :meth:`check_item`.
        """
        entries = tuple(self.check_item(kind, i, time_limit=time_limit, progress=progress)
                        for kind, i, _ in self.items())
        self.report = CheckReport(self.name, entries)
        return self.report

    def latex(self) -> str:
        """The derivation as a LaTeX ``aligned`` block, one relation per row, reasons in ``\\text{}``.

        A claimed form takes two rows: ``name relation typed`` with its label and statement, then
        ``name = derived``.
        """
        rows = [r"&\textbf{" + _escape(self.title) + "} &&"]
        for kind, i, item in self.items():
            lhs, relation, rhs = _shown(kind, item)
            text = _escape(f"{_label(kind, i, item)} {item.reason}")
            rows.append(rf"{sp.latex(lhs)} &{_RELATIONS[relation][1]} {sp.latex(rhs)} && \text{{{text}}}")
            if kind == "claim":
                rows.append(rf"{sp.latex(item.name)} &= {sp.latex(item.derived)} && \text{{derived}}")
        rows += [rf"{sp.latex(eq.lhs)} &= {sp.latex(eq.rhs)} && \text{{result}}" for eq in self.results]
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        """Jupyter's display: :meth:`latex` in display style (``$\\displaystyle ...$``, as sympy's own).

        The checks display through the :class:`CheckReport` that :meth:`check` returns.
        """
        return "$\\displaystyle " + self.latex() + "$"

    def to_text(self, *, pretty: bool = False) -> str:
        """Listing: symbols, steps with reasons, claimed forms, results, and the checks of the last :meth:`check`.

        A claimed form is shown as ``name = typed`` (``name >= typed`` for an inequality) and,
        below it, ``derived: name = derived``.

        Parameters
        ----------
        pretty : bool
            False: one line per relation in sympy's ``sstr`` form (``Derivative(f(x), x)``). True:
            sympy's unicode pretty printer (fractions, integral and derivative signs), each relation
            a block below its label, wrapped to the terminal's width (80 columns off a terminal).
        """
        if not isinstance(pretty, bool):
            raise TypeError(f"pretty must be True or False, got {pretty!r}")
        show = _Pretty() if pretty else _Plain()
        checks = {(e.kind, e.index): e for e in self.report.entries} if self.report else {}
        lines = [f"{self.name}: {self.title}", "symbols: " + ", ".join(_describe(s, show.symbol) for s in self.symbols)]
        for kind, i, item in self.items():
            label = _label(kind, i, item)
            if pretty:
                lines += show.lines(f"{label} {item.reason}", *_shown(kind, item))
            else:
                lines += show.lines(f"{label} ", *_shown(kind, item)) + [f"{_INDENT}{item.reason}"]
            if kind == "claim":
                lines += show.lines(f"{_INDENT}derived: ", item.name, sp.Equality, item.derived)
            for relation in item.given:
                lines += show.lines(f"{_INDENT}given: ", relation.lhs, sp.Equality, relation.rhs)
            if (kind, i) in checks:
                lines.append(f"{_INDENT}checked: {checks[kind, i].summary()}")
            elif item.route:
                lines.append(f"{_INDENT}route: {ROUTES[item.route][0]}")
        for eq in self.results:
            lines += show.lines("result: ", eq.lhs, sp.Equality, eq.rhs)
        if self.report:
            lines.append(f"check: {'passed' if self.report.passed else 'FAILED'} {self.report.methods()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Derivation {self.name!r}: {len(self.steps)} steps, {len(self.claims)} claims>"
