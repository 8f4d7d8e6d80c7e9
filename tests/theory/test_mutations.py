"""A deliberately broken step or claim is reported failed: the checks can fail.

Three layers: the mutations themselves (each turns a true equation into a false
one); every mutant of every item of every derivation is caught (slow; a sample
of one item per derivation and mutation in the default run); and the toolkit's
own integrators, perturbed while the derivations are built and checked, make
every derivation that uses them fail (no item holds by construction with
respect to them).
"""

from __future__ import annotations

import functools
import importlib
import sys

import pytest
import sympy as sp

from attneb import theory
from attneb.theory import _calculus
from attneb.theory.derivation import check_equation
from attneb.theory.mutations import (
    EPSILON,
    MUTATIONS,
    add_term,
    bump_exponent,
    bump_order,
    change_coefficient,
    drop_factor_two,
    flip_sign,
    mutants,
    mutate,
    negate,
    parse_label,
    sample,
    scale,
)

NAMES = theory.list_derivations()
x, y = sp.symbols("x y", positive=True)
h = sp.Symbol("h", positive=True)


def eq(lhs, rhs):
    return sp.Eq(lhs, rhs, evaluate=False)


# --------------------------------------------------------------------------- the mutations


def test_scale_and_sign_and_half():
    e = eq(x**2 + 1, y**2 / 2 + 1 + sp.O(h**2))
    assert scale(e).rhs == (1 + EPSILON) * (y**2 / 2 + 1) + sp.O(h**2)
    assert flip_sign(e).rhs == -(y**2 / 2 + 1) + sp.O(h**2)
    assert drop_factor_two(e).rhs == (y**2 / 2 + 1) / 2 + sp.O(h**2)
    assert scale(eq(x, 0)) is None and scale(eq(x, sp.O(h))) is None


def test_add_term_only_for_zero_or_order():
    assert add_term(eq(x - y, 0)).rhs == EPSILON * x
    assert add_term(eq(h * x, sp.O(h))).rhs == sp.O(h) + EPSILON * x  # not h, which O(h) would absorb
    assert add_term(eq(h, sp.O(h))).rhs == sp.O(h) + EPSILON
    assert add_term(eq(x, y)) is None


@pytest.mark.parametrize(("rhs", "changed"), [
    (x / 2, x / 4),
    (2 * x + 1, 3 * x + 1),
    (-2 * x, -3 * x),
    (sp.exp(-x**2 / 2), sp.exp(-x**2 / 4)),
    (x**2 + y, None),  # exponents are not coefficients
    (sp.sqrt(2) * x, None),
])
def test_change_coefficient(rhs, changed):
    result = change_coefficient(eq(y, rhs))
    assert (result.rhs if result is not None else None) == changed


def test_bump_exponent_and_order():
    assert bump_exponent(eq(y, x**2 * h + sp.O(h**3))).rhs == x**3 * h + sp.O(h**3)
    assert bump_exponent(eq(y, sp.O(h**2))).rhs == sp.O(h**3)
    assert bump_exponent(eq(x, 0)) is None  # the left side is never bumped: it may be a constant factor
    assert bump_order(eq(y, x + sp.O(h**2))).rhs == x + sp.O(h**3)
    assert bump_order(eq(y, x)) is None


def test_zero_right_side_flips_a_term_of_the_left_side():
    assert flip_sign(eq(x - y, 0)) == eq(-x - y, 0)
    assert flip_sign(eq(x * y, 0)) is None


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_each_mutation_makes_a_true_statement_false(mutation):
    true = {
        scale: eq((x + 1) ** 2, x**2 + 2 * x + 1),
        add_term: eq(sp.Derivative(x**2, x) - 2 * x, 0),
        change_coefficient: eq(sp.Integral(y, (y, 0, x)), x**2 / 2),
        flip_sign: eq(sp.exp(x).series(x, 0, 3), 1 + x + sp.O(x**2)),
        drop_factor_two: eq(x + x, 2 * x),
        bump_exponent: eq(x * x, x**2),
        bump_order: eq(sp.exp(x), 1 + x + sp.O(x**2)),
        negate: sp.Ge(x**2 + y**2, 2 * x * y, evaluate=False),
    }[mutation]
    assert check_equation(true)[0] == "symbolic"
    assert check_equation(mutation(true))[0] == "failed"


# --------------------------------------------------------------------------- mutated derivations


def test_mutants_are_unchecked_copies_with_labels():
    derivation = theory.get_derivation("depth_noise")
    found = list(mutants(derivation))
    assert {m for _, m, _ in found} <= {m.__name__ for m in MUTATIONS}
    for label, _, broken in found:
        kind, index = parse_label(label)
        original = (derivation.steps if kind == "step" else derivation.claims)[index - 1]
        changed = (broken.steps if kind == "step" else broken.claims)[index - 1]
        assert broken.report is None and changed.eq != original.eq and changed.reason == original.reason
        assert broken.results is derivation.results
    claims = list(mutants(derivation, kinds=("claim",)))
    assert claims and all(label.startswith("claim ") for label, _, _ in claims)


def test_matrix_entries_are_mutated_one_at_a_time():
    derivation = theory.get_derivation("attention")
    labels = {label for label, name, _ in mutants(derivation, kinds=("claim",)) if name == "scale"}
    assert labels == {"claim 1[0]", "claim 1[1]", "claim 2[0]", "claim 2[1]"}
    broken = mutate(derivation, "claim", 2, scale, entry=1)
    assert broken.claims[1].eq.rhs[0] == derivation.claims[1].eq.rhs[0]
    assert broken.claims[1].eq.rhs[1] != derivation.claims[1].eq.rhs[1]
    with pytest.raises(ValueError, match="entries"):
        mutate(derivation, "claim", 2, scale)


def test_mutated_claim_fails_the_whole_check():
    derivation = theory.get_derivation("depth_noise")
    broken = mutate(derivation, "claim", 2, bump_exponent)  # T* = sigma2 / (2 h2) -> sigma2 / 2
    report = broken.check()
    assert not report.passed
    assert [(e.kind, e.index) for e in report.entries if not e.passed] == [("claim", 2)]
    assert "FAILED" in broken.to_text()


def test_mutation_leaves_the_original_untouched():
    derivation = theory.get_derivation("depth_noise")
    before = derivation.steps[3].eq
    mutate(derivation, "step", 4, flip_sign)
    assert derivation.steps[3].eq == before


@pytest.mark.parametrize("name", NAMES)
def test_sampled_mutants_are_caught(name):
    """For each mutation, one item of the derivation (chosen by a hash of the names) where it applies."""
    missed = []
    for mutation in MUTATIONS:
        found = sample(theory.get_derivation(name), mutation)
        if found is None:
            continue
        label, _, broken = found
        entry = broken.check_item(*parse_label(label))
        if entry.passed:
            missed.append((label, mutation.__name__, entry.summary()))
    assert not missed


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_mutant_of_every_item_is_caught(name):
    missed = []
    for label, mutation, broken in mutants(theory.get_derivation(name)):
        entry = broken.check_item(*parse_label(label))
        if entry.passed:
            missed.append((label, mutation, entry.summary()))
    assert not missed


# --------------------------------------------------------------------------- the toolkit's integrators


@pytest.fixture
def fresh_derivations(monkeypatch):
    """Each topic module's ``derivation()`` with an empty cache of its own; the cached originals come back after."""
    for name in NAMES:
        module = importlib.import_module(f"attneb.theory.{name}")
        monkeypatch.setattr(module, "derivation", functools.cache(module.derivation.__wrapped__))


@pytest.mark.slow  # 20-25 s each: every derivation built again
@pytest.mark.parametrize("engine", ["gaussian_integral", "gaussian_expectation"])
def test_a_perturbed_integrator_fails_every_derivation_that_uses_it(engine, monkeypatch, fresh_derivations):
    """``engine`` returns its value times 1 + 1/1000 while the derivations are built and checked."""
    real = getattr(_calculus, engine)
    callers = set()

    def perturbed(*args, **kwargs):
        callers.add(sys._getframe(1).f_globals["__name__"])
        return real(*args, **kwargs) * (1 + EPSILON)

    monkeypatch.setattr(_calculus, engine, perturbed)
    built = {name: theory.get_derivation(name) for name in NAMES}
    users = sorted(name for name in NAMES if f"attneb.theory.{name}" in callers)
    assert users and callers <= {f"attneb.theory.{name}" for name in NAMES}, callers
    held = [name for name in users
            if all(built[name].check_item(kind, index).passed for kind, index, _ in built[name].items())]
    assert not held, f"{engine} x (1 + 1/1000) leaves {held} passing"
