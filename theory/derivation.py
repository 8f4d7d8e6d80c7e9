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
   ``O(x**n)`` holds when the series of ``lhs - rhs`` in ``x`` is ``O(x**n)``.
   Sums with a symbolic size that sympy cannot reduce in general are
   expanded for the sizes ``1..4``, and the detail says so;
2. *numeric*: where sympy cannot decide, ``lhs - rhs`` is evaluated with
   mpmath at ``NUMERIC_DIGITS`` significant digits at ``NUMERIC_POINTS``
   seeded random points (positive where the symbols are positive) and stays
   below ``NUMERIC_TOLERANCE`` relative to the size of the two sides. This is
   evidence, never reported as a proof;
3. *failed*: a numeric counterexample, a series that is not the stated
   ``O(.)``, or undecided and not evaluable (undefined functions).
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Callable, Mapping, Sequence

import sympy as sp
from sympy.core.function import AppliedUndef

from ._calculus import gaussian_integral, series_in

__all__ = [
    "NUMERIC_DIGITS",
    "NUMERIC_POINTS",
    "NUMERIC_TOLERANCE",
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
_SUM_SIZES = (1, 2, 3, 4)
_GIVEN_PASSES = 4


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
        ``PREPARATIONS`` (``"gaussian"``: integrals over the real line by
        :func:`~theory._calculus.gaussian_integral`; ``"sift"``: integrands
        expanded so Dirac deltas are integrated term by term;
        ``"split_logs"``: common positive factors pulled out of logarithms;
        ``"integrals"``: integrals with the same limits in ``lhs - rhs``
        merged by linearity).
    given : tuple of sympy.Equality
        Relations (an ODE, a definition) substituted into both sides, with
        derivatives re-evaluated between passes, before they are reduced.
    """

    eq: sp.Equality
    reason: str
    how: str | None = None
    given: tuple[sp.Equality, ...] = ()


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
    how, given
        As in :class:`Step`.
    """

    eq: sp.Equality
    statement: str
    ref: str = ""
    how: str | None = None
    given: tuple[sp.Equality, ...] = ()

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


def _evaluate_integrals(expr):
    """Evaluate each integral over all of R^n with :func:`gaussian_integral`, one variable at a time."""
    def over_whole_space(e):
        return isinstance(e, sp.Integral) and all(lim[1:] == (-sp.oo, sp.oo) for lim in e.limits)

    def evaluate(e):
        value = e.function
        for lim in e.limits:
            value = gaussian_integral(value, lim[0])
        return value

    return expr.replace(over_whole_space, evaluate)


def _expand_integrands(expr):
    """Expand each integrand, so that integrals of sums of Dirac deltas go term by term."""
    return expr.replace(lambda e: isinstance(e, sp.Integral), lambda e: e.func(sp.expand(e.function), *e.limits))


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
    "gaussian": (_evaluate_integrals, None),
    "sift": (_expand_integrands, None),
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


def _check_component(lhs, rhs, how, given, seed):
    """Check ``lhs = rhs`` (scalars); return ``(method, detail, residual)``.

    Cheap reductions first; then a numeric evaluation, which fails a false
    equation at once; only then ``simplify`` and the explicit-size sums,
    which may promote a numeric pass to a symbolic one.
    """
    lhs, rhs = _prepare(lhs, how, given), _prepare(rhs, how, given)
    residual = lhs - rhs
    if how and PREPARATIONS[how][1]:
        residual = PREPARATIONS[how][1](residual)
    prefix = f"{how} + " if how else ""
    if residual.has(sp.Order):
        if _order_zero(residual):
            return "symbolic", prefix + "series", 0.0
        return "failed", "series of lhs - rhs is not the stated O(.)", None
    residual = _doit(residual)
    name = "doit" if residual == 0 else _reduce(residual, _CHEAP_REDUCTIONS)
    if name:
        return "symbolic", prefix + name, 0.0
    value = _numeric(lhs, rhs, seed)
    if value is not None and value > NUMERIC_TOLERANCE:
        return "failed", f"mpmath residual {value:.3e} > {NUMERIC_TOLERANCE:.0e} at a random point", value
    name = _reduce(residual, _COSTLY_REDUCTIONS) or _symbolic_sums(residual)
    if name:
        return "symbolic", prefix + name, 0.0
    if value is None:
        return "failed", "sympy could not decide; lhs - rhs cannot be evaluated numerically", None
    return "numeric", f"mpmath, {NUMERIC_DIGITS} digits, {NUMERIC_POINTS} seeded random points", value


def check_equation(eq, *, how=None, given=(), seed=0):
    """Check one equation (matrices entry by entry).

    Returns
    -------
    method : {"symbolic", "numeric", "failed"}
    detail : str
        The reduction that decided it, or why it failed.
    residual, tolerance : float or None
        ``0.0, None`` for symbolic; the worst relative mpmath residual and
        ``NUMERIC_TOLERANCE`` for numeric (and for a numeric failure).
    """
    results = [_check_component(lhs, rhs, how, given, seed) for lhs, rhs in _components(eq)]
    for method in ("failed", "numeric"):
        hits = [r for r in results if r[0] == method]
        if hits:
            values = [r[2] for r in hits if r[2] is not None]
            worst = max(values) if values else None
            return method, hits[0][1], worst, NUMERIC_TOLERANCE if worst is not None else None
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
        method, detail, residual, tol = check_equation(item.eq, how=item.how, given=item.given, seed=seed)
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
        lines += [f"result: {sp.sstr(eq.lhs)} = {sp.sstr(eq.rhs)}" for eq in self.results]
        if self.report:
            lines.append(f"check: {'passed' if self.report.passed else 'FAILED'} {self.report.methods()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Derivation {self.name!r}: {len(self.steps)} steps, {len(self.claims)} claims>"
