"""The Derivation framework: checking (symbolic, numeric, failed), printing, copying."""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.derivation import (
    NUMERIC_TOLERANCE,
    CheckReport,
    Claim,
    Derivation,
    Step,
    StepCheck,
    check_equation,
)
from theory._calculus import gaussian_density, gaussian_integral, series_in

x = sp.Symbol("x", positive=True)
y = sp.Symbol("y", real=True)
f = sp.Function("f")


def eq(lhs, rhs):
    return sp.Eq(lhs, rhs, evaluate=False)


def toy(*steps, claims=()):
    return Derivation("toy", "A toy derivation & its_checks", [x, y], list(steps), [eq(sp.Symbol("r"), x)], claims)


def test_expanded_identity_is_symbolic():
    method, detail, residual, tolerance = check_equation(eq((x + 1) ** 2, x**2 + 2 * x + 1))
    assert (method, detail, residual, tolerance) == ("symbolic", "expand", 0.0, None)


def test_identity_sympy_cannot_decide_is_numeric_not_symbolic():
    method, detail, residual, tolerance = check_equation(eq(sp.atan(x) + sp.atan(1 / x), sp.pi / 2))
    assert method == "numeric"
    assert "mpmath" in detail
    assert residual <= tolerance == NUMERIC_TOLERANCE


def test_numeric_tolerance_is_tight():
    method, _, residual, tolerance = check_equation(eq(sp.atan(x) + sp.atan(1 / x), sp.pi / 2 + x / 10**20))
    assert method == "failed"
    assert residual > tolerance


def test_false_equation_fails():
    assert check_equation(eq(x, x + 1))[0] == "failed"


def test_undecidable_and_not_evaluable_fails():
    method, detail, _, _ = check_equation(eq(f(x), f(x + 1)))
    assert method == "failed"
    assert "cannot be evaluated" in detail


def test_series_equations():
    taylor = sp.exp(x).series(x, 0, 4)
    assert check_equation(eq(sp.exp(x), taylor))[0:2] == ("symbolic", "series")
    assert check_equation(eq(taylor, 1 + x + sp.O(x**2)))[0] == "symbolic"
    assert check_equation(eq(taylor, 1 + 2 * x + sp.O(x**2)))[0] == "failed"
    assert check_equation(eq(sp.exp(x), 1 + x + sp.O(x**3)))[0] == "failed"


def test_sums_decided_for_explicit_sizes_say_so():
    n = sp.Symbol("N", integer=True, positive=True)
    j, k = sp.symbols("j k", integer=True)
    a = sp.IndexedBase("a", real=True)
    square = eq(sp.Sum(a[j], (j, 1, n)) ** 2, sp.Sum(sp.Sum(a[j] * a[k], (k, 1, n)), (j, 1, n)))
    method, detail, _, _ = check_equation(square)
    assert method == "symbolic"
    assert "sizes 1..4 only" in detail


def test_general_sum_identity_is_symbolic_without_caveat():
    n = sp.Symbol("N", integer=True, positive=True)
    j = sp.Symbol("j", integer=True)
    a = sp.IndexedBase("a", real=True)
    method, detail, _, _ = check_equation(eq(sp.Sum(3 * a[j], (j, 1, n)), 3 * sp.Sum(a[j], (j, 1, n))))
    assert method == "symbolic"
    assert "only" not in detail


def test_matrix_equation_entrywise():
    m = sp.ImmutableMatrix([x**2 - 1, 2 * x])
    assert check_equation(eq(m, sp.ImmutableMatrix([(x - 1) * (x + 1), x + x])))[0] == "symbolic"
    assert check_equation(eq(m, sp.ImmutableMatrix([(x - 1) * (x + 1), x])))[0] == "failed"


def test_given_relations_are_substituted():
    t = sp.Symbol("t", real=True)
    X = sp.Function("X")(t)
    ode = (eq(sp.Derivative(X, t), -X),)
    assert check_equation(eq(sp.Derivative(X**2, t), -2 * X**2), given=ode)[0] == "symbolic"
    assert check_equation(eq(sp.Derivative(X**2, t), 2 * X**2), given=ode)[0] == "failed"


def test_check_report_and_text():
    d = toy(Step(eq((x + 1) ** 2, x**2 + 2 * x + 1), "square"),
            Step(eq(sp.atan(x) + sp.atan(1 / x), sp.pi / 2), "arctangent"),
            claims=[Claim(eq(x + x, 2 * x), "doubling", ref="C0")])
    assert d.report is None
    report = d.check()
    assert isinstance(report, CheckReport) and report is d.report
    assert report.passed
    assert report.methods() == {"symbolic": 2, "numeric": 1, "failed": 0}
    entry = report.entries[1]
    assert isinstance(entry, StepCheck)
    assert (entry.index, entry.kind, entry.reason) == (2, "step", "arctangent")
    assert entry.method == "numeric" and entry.passed
    assert entry.residual <= entry.tolerance
    assert report.entries[2].kind == "claim"
    text = d.to_text()
    for piece in ("(1) (x + 1)**2 = x**2 + 2*x + 1", "square", "checked: symbolic (expand)", "checked: numeric",
                  "[claim C0] 2*x = 2*x", "result: r = x", "x > 0", "y real"):
        assert piece in text
    assert "FAILED" in str(toy(Step(eq(x, 2 * x), "wrong")).check())


def test_latex_lists_every_step_with_escaped_reasons():
    d = toy(Step(eq(x**2, x * x), "50% & more_of #it"), claims=[Claim(eq(x, x), "trivial", ref="C0")])
    tex = d.latex()
    assert tex.startswith("\\begin{aligned}") and tex.endswith("\\end{aligned}")
    assert "x^{2} &= x^{2}" in tex
    assert r"\text{(1) 50\% \& more\_of \#it}" in tex
    assert r"\textbf{A toy derivation \& its\_checks}" in tex
    assert "[claim C0] trivial" in tex
    notebook = d._repr_latex_()
    assert notebook.startswith("$\\displaystyle \\begin{aligned}") and notebook.endswith("\\end{aligned}$")


def test_with_step_copies():
    d = toy(Step(eq(x + x, 2 * x), "double"))
    d.check()
    mutated = d.with_step(1, eq(x + x, 3 * x))
    assert mutated.report is None and d.report.passed
    assert not mutated.check().passed
    assert d.steps[0].eq.rhs == 2 * x
    assert mutated.steps[0].reason == "double"


def test_result_of():
    d = toy()
    assert d.result_of(sp.Symbol("r")) == x
    assert d.result == eq(sp.Symbol("r"), x)
    with pytest.raises(KeyError, match="no result"):
        d.result_of(sp.Symbol("missing"))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=4), st.lists(st.integers(-5, 5), min_size=1, max_size=4))
def test_polynomial_products(p, q):
    """expand(p q) = p q is symbolic; adding 1 to one side fails."""
    pp, qq = sp.Poly(p, y).as_expr(), sp.Poly(q, y).as_expr()
    assert check_equation(eq(pp * qq, sp.expand(pp * qq)))[0] == "symbolic"
    assert check_equation(eq(pp * qq, sp.expand(pp * qq) + 1))[0] == "failed"


# --------------------------------------------------------------------------- calculus helpers

a = sp.Symbol("a", positive=True)
b, k = sp.symbols("b k", real=True)


@pytest.mark.parametrize(
    ("integrand", "expected"),
    [
        (sp.exp(-a * (y - b) ** 2), sp.sqrt(sp.pi / a)),
        ((y**2 + 1) * sp.exp(-((y - b) ** 2)), sp.sqrt(sp.pi) * (b**2 + sp.Rational(3, 2))),
        (sp.exp(sp.I * k * y) * gaussian_density(y, a), sp.exp(-a * k**2 / 2)),
        (y**4 * gaussian_density(y, a), 3 * a**2),
    ],
)
def test_gaussian_integral(integrand, expected):
    assert sp.simplify(gaussian_integral(integrand, y) - expected) == 0


def test_gaussian_integral_rejects_non_gaussian():
    with pytest.raises(ValueError, match="concave quadratic"):
        gaussian_integral(sp.exp(y**2), y)
    with pytest.raises(ValueError, match="not polynomial"):
        gaussian_integral(sp.sin(y) * sp.exp(-(y**2)), y)


def test_series_in_handles_mixed_partials():
    x1, x2, h = sp.symbols("x1 x2 h", real=True)
    rho = sp.Function("rho")(x1, x2)
    expr = sp.log(rho + h * sp.diff(rho, x1, x2))
    series = series_in(sp.diff(expr, x1), h, 2)
    assert sp.simplify(series.removeO().coeff(h, 0) - sp.diff(rho, x1) / rho) == 0


def test_step_is_frozen():
    step = Step(eq(x, x), "r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.reason = "other"
