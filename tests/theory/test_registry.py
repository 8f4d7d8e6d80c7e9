"""Every registered derivation builds, checks, and prints its steps."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sympy as sp

from attneb import numerics
from attneb import proofs_check
from attneb import theory
from attneb.theory.derivation import _escape

NAMES = theory.list_derivations()


def test_registry_names():
    assert NAMES == ["attention", "depth_ode", "energy", "mean_field", "depth_noise", "gaussian", "anisotropic",
                     "stability", "tweedie", "stage2"]
    assert list(theory.DERIVATIONS) == NAMES
    assert len(theory.DERIVATIONS) == len(NAMES)
    assert "gaussian" in theory.DERIVATIONS


def test_unknown_name():
    with pytest.raises(KeyError, match="unknown derivation 'nope'; known: attention"):
        theory.get_derivation("nope")


def test_lazy_and_cached():
    assert theory.get_derivation("depth_noise") is theory.DERIVATIONS["depth_noise"]


@pytest.mark.parametrize("name", NAMES)
def test_derivation_checks(name):
    derivation = theory.get_derivation(name)
    report = derivation.check()
    assert report.passed, str(report)
    assert len(report.entries) == len(derivation.steps) + len(derivation.claims)
    assert [e.index for e in report.entries if e.kind == "step"] == list(range(1, len(derivation.steps) + 1))
    assert derivation.results and derivation.result is derivation.results[0]


@pytest.mark.parametrize("name", NAMES)
def test_derivation_prints(name):
    derivation = theory.get_derivation(name)
    tex = derivation.latex()
    text = derivation.to_text()
    assert derivation._repr_latex_() == f"$\\displaystyle {tex}$"
    assert tex.count(" \\\\\n") == len(derivation.steps) + len(derivation.claims) + len(derivation.results)
    for _, index, item in derivation.items():
        assert _escape(item.reason) in tex
        assert sp.latex(item.eq.lhs) in tex
        assert item.reason in text
        assert sp.sstr(item.eq.rhs) in text


def test_claims_of_theory_are_all_registered():
    refs = {claim.ref for name in NAMES for claim in theory.get_derivation(name).claims}
    assert {f"C{i}" for i in range(1, 11)} <= refs


def test_theory_imports_neither_numerics_nor_proofs_check():
    others = (numerics.__name__, proofs_check.__name__)
    code = (
        f"import sys, importlib, {theory.__name__} as theory\n"
        "for name in theory.list_derivations(): importlib.import_module(f'{theory.__name__}.{name}')\n"
        "importlib.import_module(f'{theory.__name__}.depth_noise'); importlib.import_module(f'{theory.__name__}.stability')\n"
        f"others = {others!r}\n"
        "bad = [m for m in sys.modules if any(m == o or m.startswith(o + '.') for o in others)]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
