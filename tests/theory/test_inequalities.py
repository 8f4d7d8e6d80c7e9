"""Claimed forms that state an inequality: decided by sympy's sign reasoning where it can, else numerically."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb.theory.derivation import NUMERIC_TOLERANCE, ClaimedForm, Derivation, Step, check_equation
from attneb.theory.mutations import EPSILON, MUTATIONS, mutants, negate, parse_label, scale

a, b, y = sp.symbols("a b y", real=True)
w1, w2, sigma2 = sp.symbols("w1 w2 sigma2", positive=True)
x = sp.Symbol("x", real=True)
u = sp.Symbol("u", positive=True)
LINE = (x, -sp.oo, sp.oo)
VARIANCE = sp.Function("Var")(y)


def two_point_posterior_variance():
    """Var[x | y] for the prior w1 delta_a + w2 delta_b and the likelihood N(y; x, sigma2), by sympy's integrate."""
    prior = w1 * sp.DiracDelta(x - a) + w2 * sp.DiracDelta(x - b)
    likelihood = sp.exp(-((y - x) ** 2) / (2 * sigma2))
    moment = [sp.integrate(x**k * prior * likelihood, LINE) for k in range(3)]
    return moment[2] / moment[0] - (moment[1] / moment[0]) ** 2


def variance_derivation(relation=sp.Ge):
    """A toy derivation whose claimed form is ``Var[x | y] relation 0``."""
    variance = two_point_posterior_variance()
    claim = ClaimedForm(relation(variance, 0, evaluate=False),
                        "the posterior variance of a two-point prior is nonnegative", ref="V1", name=VARIANCE)
    return Derivation("two_point", "Posterior variance, two-point prior", [a, b, y, w1, w2, sigma2],
                      [Step(sp.Eq(sp.Integral(x * sp.DiracDelta(x - a), LINE), a, evaluate=False), "sifting",
                            route="sift")],
                      [sp.Eq(VARIANCE, variance, evaluate=False)], [claim])


def test_a_true_inequality_sympy_can_decide_is_symbolic():
    report = variance_derivation().check()
    assert report.passed
    entry = report.entries[-1]
    assert (entry.kind, entry.method, entry.relation) == ("claim", "symbolic", ">=")
    assert entry.detail == "factor, then sympy's assumptions: greater - lesser >= 0"


@pytest.mark.parametrize(("relation", "lhs", "rhs"), [
    (sp.Le, sp.log(1 + u), u),
    (sp.Ge, sp.exp(y), 1 + y),
    (sp.Gt, sp.exp(u), 1 + u),
    (sp.Lt, sp.sin(u), u),
])
def test_a_true_inequality_sympy_cannot_decide_is_numeric(relation, lhs, rhs):
    method, detail, residual, tolerance = check_equation(relation(lhs, rhs, evaluate=False))
    assert method == "numeric" and tolerance == NUMERIC_TOLERANCE
    assert "at each point; mpmath, 40 digits, 6 seeded random points" in detail
    assert residual < 0  # minus the smallest relative margin: every point holds with room


@pytest.mark.parametrize(("relation", "lhs", "rhs"), [
    (sp.Ge, sp.log(1 + u), u),
    (sp.Lt, sp.exp(u), 1 + u),
    (sp.Le, two_point_posterior_variance(), 0),
    (sp.Gt, 0, sp.exp(-(y**2))),
])
def test_a_false_inequality_fails(relation, lhs, rhs):
    method, detail, residual, _ = check_equation(relation(lhs, rhs, evaluate=False))
    assert method == "failed" and detail.startswith("mpmath: greater - lesser") and residual > 0


def test_strictness_is_checked():
    """u >= u holds, u > u does not; y^2 >= 0 is symbolic, y^2 > 0 is not provable (0 at y = 0)."""
    assert check_equation(sp.Ge(u, u, evaluate=False))[0] == "symbolic"
    assert check_equation(sp.Gt(u, u, evaluate=False))[0] == "failed"
    assert check_equation(sp.Ge(y**2, 0, evaluate=False))[0] == "symbolic"
    assert check_equation(sp.Gt(y**2 + 1, 0, evaluate=False))[0] == "symbolic"
    assert check_equation(sp.Gt(y**2, 0, evaluate=False))[0] == "numeric"


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.integers(-4, 4), min_size=1, max_size=4).filter(any))
def test_squares_are_nonnegative_and_their_negatives_plus_one_are_not(coefficients):
    p = sp.Poly(coefficients, y).as_expr()
    assert check_equation(sp.Ge(p**2, 0, evaluate=False))[0] == "symbolic"
    assert check_equation(sp.Ge(-(p**2) - 1, 0, evaluate=False))[0] == "failed"


def test_the_mutant_of_an_inequality_is_its_negation_and_is_rejected():
    derivation = variance_derivation()
    found = list(mutants(derivation, kinds=("claim",)))
    assert [(label, name) for label, name, _ in found] == [("claim 1", "negate")]
    _, _, broken = found[0]
    assert isinstance(broken.claims[0].eq, sp.StrictLessThan)
    entry = broken.check_item(*parse_label("claim 1"))
    assert entry.method == "failed" and entry.relation == "<"
    assert not broken.check().passed


@pytest.mark.parametrize(("relation", "opposite"), [(sp.Ge, sp.Lt), (sp.Gt, sp.Le), (sp.Le, sp.Gt), (sp.Lt, sp.Ge)])
def test_negate(relation, opposite):
    assert negate(relation(u, 1, evaluate=False)) == opposite(u, 1, evaluate=False)
    assert negate(sp.Eq(u, 1, evaluate=False)) is None


def test_equation_mutations_leave_inequalities_alone():
    """Moving a bound is not made a mutant: u^2 + 1 >= 1 + 1/1000 fails only for u < 0.03, never at a random point."""
    inequality = sp.Ge(u**2 + 1, 1, evaluate=False)
    assert [m(inequality) for m in MUTATIONS if m is not negate] == [None] * (len(MUTATIONS) - 1)
    moved = sp.Ge(u**2 + 1, scale(sp.Eq(u**2 + 1, 1, evaluate=False)).rhs, evaluate=False)
    assert moved.rhs == 1 + EPSILON and check_equation(moved)[0] == "numeric"  # it holds at every random point


def test_an_inequality_prints_its_relation():
    derivation = variance_derivation()
    derivation.check()
    text, pretty, tex = derivation.to_text(), derivation.to_text(pretty=True), derivation.latex()
    assert "[claim V1] Var(y) >= 0" in text and "    derived: Var(y) = " in text
    assert "smallest margin" not in text and "checked: symbolic (factor" in text
    assert "Var(y) ≥ 0" in pretty
    assert r"\operatorname{Var}{\left(y \right)} &\geq 0 && \text{[claim V1]" in tex


def test_a_numeric_inequality_reports_its_margin():
    derivation = variance_derivation(sp.Gt)  # strict: a = b would make it 0, so sympy cannot decide it
    entry = derivation.check().entries[-1]
    assert entry.method == "numeric" and entry.relation == ">"
    assert entry.summary().endswith(f"smallest margin {-entry.residual:.1e} > {NUMERIC_TOLERANCE:.0e})")


def test_an_inequality_is_validated():
    with pytest.raises(ValueError, match="scalars"):
        ClaimedForm(sp.Ge(sp.ImmutableMatrix([u]), sp.ImmutableMatrix([0]), evaluate=False), "r", name=u)
    with pytest.raises(ValueError, match="O"):
        ClaimedForm(sp.Ge(u + sp.O(u**2), 0, evaluate=False), "r", name=u)
    with pytest.raises(ValueError, match="route"):
        ClaimedForm(sp.Ge(u, 0, evaluate=False), "r", name=u, route="mpmath")
    with pytest.raises(TypeError, match="eq must be"):
        ClaimedForm(sp.Ge(u, 0), "r", name=u)  # evaluates to True
    with pytest.raises(TypeError, match="eq must be"):
        ClaimedForm(sp.Ne(u, 0), "r", name=u)
