"""A false item is refuted by its numeric evaluation before any symbolic reduction; a true one is checked as before."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb import theory
from attneb.theory import derivation
from attneb.theory.derivation import NUMERIC_TOLERANCE, check_equation
from attneb.theory.mutations import bump_exponent, change_coefficient, mutate

x = sp.Symbol("x", positive=True)
y = sp.Symbol("y", real=True)
c, h = sp.symbols("c h", positive=True)
t = sp.Symbol("t", real=True)
X = sp.Function("X")(t)


def eq(lhs, rhs):
    return sp.Eq(lhs, rhs, evaluate=False)


@pytest.fixture
def no_reductions(monkeypatch):
    """Every symbolic reduction, ``doit`` included, fails the test if it is called."""
    def refuse(*args, **kwargs):
        pytest.fail("a symbolic reduction ran before the numeric evaluation refuted the item")

    monkeypatch.setattr(derivation, "_doit", refuse)
    monkeypatch.setattr(derivation, "_CHEAP_REDUCTIONS", (("expand", refuse), ("cancel", refuse)))
    monkeypatch.setattr(derivation, "_COSTLY_REDUCTIONS", (("simplify", refuse),))


@pytest.mark.parametrize(("lhs", "rhs"), [
    (sp.exp(-(y**2) / 2) * (1 + y**2), sp.exp(-(y**2) / 4) * (1 + y**2)),  # a coefficient inside exp(...)
    (sp.exp(-(y**2) / 2) * y, sp.exp(-(y**3) / 2) * y),  # an exponent inside exp(...)
    ((x + 1) ** 2, x**2 + 2 * x + 2),
    (sp.ImmutableMatrix([x**2, x]), sp.ImmutableMatrix([x * x, 2 * x])),  # the second entry
])
def test_a_false_equation_is_refuted_before_any_reduction(no_reductions, lhs, rhs):
    method, detail, residual, tolerance = check_equation(eq(lhs, rhs))
    assert method == "failed" and detail.startswith("mpmath residual") and residual > tolerance == NUMERIC_TOLERANCE


def test_sides_too_large_for_a_float_are_compared_relatively(no_reductions):
    """exp(1000 x) overflows a float at every random point: the relative residual is formed at 40 digits."""
    method, _, residual, _ = check_equation(eq(sp.exp(1000 * x), (1 + sp.Rational(1, 1000)) * sp.exp(1000 * x)))
    assert method == "failed" and residual == pytest.approx(1 / 1001, rel=1e-12)


def test_a_true_identity_too_large_for_a_float_holds_numerically():
    grown = eq((sp.atan(x) + sp.atan(1 / x)) * sp.exp(1000 * x), sp.pi / 2 * sp.exp(1000 * x))
    method, _, residual, tolerance = check_equation(grown)
    assert method == "numeric" and 0 <= residual <= tolerance


def test_given_is_substituted_plainly_first(no_reductions):
    """c = 3 h needs no doit: the refutation comes without the given passes that evaluate derivatives."""
    assert check_equation(eq(c * x, 2 * h * x), given=(eq(c, 3 * h),))[0] == "failed"


def test_given_passes_with_doit_only_where_needed(monkeypatch):
    """d/dt (X + t^2) shows X' only once evaluated: the plain substitution cannot be evaluated, the doit passes can."""
    calls = []
    real = derivation._substituted

    def counted(expr, given, *, evaluate):
        calls.append(evaluate)
        return real(expr, given, evaluate=evaluate)

    monkeypatch.setattr(derivation, "_substituted", counted)
    rate = (eq(sp.Derivative(X, t), 3 * t**2),)
    method, detail, _, _ = check_equation(eq(sp.Derivative(X + t**2, t), 3 * t**2 + 2 * t + 1), given=rate)
    assert (method, detail.startswith("mpmath residual")) == ("failed", True)
    assert calls == [False, False, True, True]  # plain, not evaluable; then with doit, refuted there
    assert check_equation(eq(sp.Derivative(X + t**2, t), 3 * t**2 + 2 * t), given=rate) == ("symbolic", "doit", 0.0,
                                                                                               None)
    calls.clear()
    assert check_equation(eq(c * x, 2 * h * x), given=(eq(c, 2 * h),))[0] == "symbolic"
    assert calls[:2] == [False, False] and True in calls  # true: evaluated plainly, then reduced as before


@pytest.mark.parametrize(("lhs", "rhs", "expected"), [
    ((x + 1) ** 2, x**2 + 2 * x + 1, ("symbolic", "expand")),
    (1 / (x + 1) + 1 / (x - 1), 2 * x / (x**2 - 1), ("symbolic", "cancel")),
    (sp.Derivative(x**3, x), 3 * x**2, ("symbolic", "doit")),
    (sp.sin(x) ** 2 + sp.cos(x) ** 2, 1, ("symbolic", "simplify")),
    (sp.atan(x) + sp.atan(1 / x), sp.pi / 2, ("numeric", "mpmath, 40 digits, 6 seeded random points")),
])
def test_a_true_equation_is_decided_as_before(lhs, rhs, expected):
    """The numeric pass refutes only: the first reduction that works still decides, and says which it was."""
    assert check_equation(eq(lhs, rhs))[:2] == expected


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(1, 5))
def test_exponential_mutants_fail_whatever_the_constants(a, b):
    """exp(-y^2/a) (1 + b y) against a changed coefficient or exponent: always refuted, never by a reduction."""
    true = eq(sp.exp(-(y**2) / a) * (1 + b * y), sp.exp(-(y**2) / a) * (1 + b * y))
    for wrong in (change_coefficient(true), bump_exponent(true)):
        assert wrong is not None and wrong != true
        method, detail, _, _ = check_equation(wrong)
        assert method == "failed" and detail.startswith("mpmath residual")


def test_claim_mutants_of_a_derivation_are_refuted_numerically():
    """depth_noise's claims with a changed coefficient: refuted at the random points, the other items as before."""
    real = theory.get_derivation("depth_noise")
    before = real.check()
    for index in range(1, len(real.claims) + 1):
        broken = mutate(real, "claim", index, change_coefficient)
        entry = broken.check_item("claim", index)
        assert not entry.passed and entry.detail.startswith("mpmath residual"), entry.summary()
    def others(report):
        return [(e.kind, e.index, e.method, e.detail) for e in report.entries if (e.kind, e.index) != ("claim", 1)]

    assert others(mutate(real, "claim", 1, change_coefficient).check()) == others(before)
