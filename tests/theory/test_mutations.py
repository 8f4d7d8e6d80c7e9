"""A deliberately broken step or claim is reported failed: the checks can fail."""

from __future__ import annotations

import dataclasses

import pytest

import theory

from ._mutations import MUTATIONS, bump_exponent, flip_sign

# one step per derivation, chosen so that all three mutations apply and are cheap to refute
SAMPLE_STEPS = {
    "attention": 1,
    "depth_ode": 7,
    "energy": 1,
    "mean_field": 1,
    "depth_noise": 4,
    "gaussian": 8,
    "stability": 1,
    "tweedie": 5,
    "stage2": 6,
}

# mutations that leave a true equation true; each is explained
NEUTRAL = {
    # the exponent hit is that of the KDE's normalising constant, which d/dq log(.) removes
    ("attention", "step", 5, "bump_exponent"),
    # k^3 exp(-h2 k^2 / 2) -> 0 as k -> oo just as k^2 exp(-h2 k^2 / 2) does
    ("stability", "step", 7, "bump_exponent"),
}


def mutated(derivation, kind, index, mutation):
    """Copy of ``derivation`` with item ``(kind, index)`` mutated, or None if the mutation does not apply."""
    items = derivation.steps if kind == "step" else derivation.claims
    eq = mutation(items[index - 1].eq)
    if eq is None:
        return None
    if kind == "step":
        return derivation.with_step(index, eq)
    claims = [dataclasses.replace(c, eq=eq) if i == index else c for i, c in enumerate(derivation.claims, 1)]
    return theory.Derivation(derivation.name, derivation.title, derivation.symbols, derivation.steps,
                             derivation.results, claims)


def test_sample_steps_cover_the_registry():
    assert set(SAMPLE_STEPS) == set(theory.list_derivations())


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("name", list(SAMPLE_STEPS))
def test_mutated_step_is_caught(name, mutation):
    derivation = theory.get_derivation(name)
    broken = mutated(derivation, "step", SAMPLE_STEPS[name], mutation)
    assert broken is not None
    entry = broken.check_item("step", SAMPLE_STEPS[name])
    assert entry.method == "failed" and not entry.passed, entry.summary()


def test_mutated_claim_fails_the_whole_check():
    derivation = theory.get_derivation("depth_noise")
    broken = mutated(derivation, "claim", 2, bump_exponent)  # T* = sigma2 / (2 h2) -> sigma2 / 2
    report = broken.check()
    assert not report.passed
    assert [(e.kind, e.index) for e in report.entries if not e.passed] == [("claim", 2)]
    assert "FAILED" in broken.to_text()


def test_mutation_leaves_the_original_untouched():
    derivation = theory.get_derivation("depth_noise")
    before = derivation.steps[3].eq
    mutated(derivation, "step", 4, flip_sign)
    assert derivation.steps[3].eq == before


@pytest.mark.slow
@pytest.mark.parametrize("name", theory.list_derivations())
def test_every_mutation_of_every_item_is_caught(name):
    derivation = theory.get_derivation(name)
    missed = []
    for kind, index, _ in derivation.items():
        for mutation in MUTATIONS:
            broken = mutated(derivation, kind, index, mutation)
            if broken is None or (name, kind, index, mutation.__name__) in NEUTRAL:
                continue
            if broken.check_item(kind, index).passed:
                missed.append((kind, index, mutation.__name__))
    assert not missed
