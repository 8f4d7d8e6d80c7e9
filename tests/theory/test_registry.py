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


def test_each_name_finds_its_module_and_its_derivation():
    for name in NAMES:
        module = theory.derivation_module(name)
        assert module.__name__ == f"{theory.__name__}.{name}"
        assert theory.get_derivation(name).name == name


def test_lazy_and_cached():
    assert theory.get_derivation("depth_noise") is theory.DERIVATIONS["depth_noise"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "anisotropic" else [])
                                  for n in NAMES])  # anisotropic: about 27 s; verify's G4 check runs it too
def test_derivation_checks(name):
    derivation = theory.get_derivation(name)
    report = derivation.check()
    assert report.passed, str(report)
    assert not [e for e in report.entries if "did not finish" in e.detail]  # no item near the default time limit
    assert len(report.entries) == len(derivation.steps) + len(derivation.claims)
    assert [e.index for e in report.entries if e.kind == "step"] == list(range(1, len(derivation.steps) + 1))
    assert derivation.results and derivation.result is derivation.results[0]


@pytest.mark.parametrize("name", NAMES)
def test_derivation_prints(name):
    derivation = theory.get_derivation(name)
    tex = derivation.latex()
    text = derivation.to_text()
    assert derivation._repr_latex_() == f"$\\displaystyle {tex}$"
    rows = len(derivation.steps) + 2 * len(derivation.claims) + len(derivation.results)  # a claim: claimed, derived
    assert tex.count(" \\\\\n") == rows
    for _, index, item in derivation.items():
        assert _escape(item.reason) in tex
        assert sp.latex(item.eq.lhs) in tex
        assert item.reason in text
        assert sp.sstr(item.eq.rhs) in text


@pytest.mark.parametrize("name", NAMES)
def test_each_claim_line_names_its_quantity(name):
    """``[claim C6] T_star = sigma2/(2*h2)``: the name and the typed form, not the derived expression."""
    derivation = theory.get_derivation(name)
    text = derivation.to_text()
    assert text.count("\n[claim ") == len(derivation.claims)
    for index, claim in enumerate(derivation.claims, 1):
        assert f"\n[claim {claim.ref or index}] {sp.sstr(claim.name)} {claim.relation} {sp.sstr(claim.typed)}\n" in text
    pretty = derivation.to_text(pretty=True)
    for claim in derivation.claims:
        assert sp.pretty(claim.name, use_unicode=True).splitlines()[0] in pretty


def test_depth_noise_pretty_reads_as_math():
    derivation = theory.get_derivation("depth_noise")
    derivation.check()
    pretty = derivation.to_text(pretty=True)
    for raw in ("Derivative(", "Integral(", "sqrt(", "exp(", "**"):
        assert raw not in pretty
    assert "c = 2⋅h₂" in pretty and "∂" in pretty and "⌠" in pretty
    assert pretty.count("checked: symbolic") == len(derivation.steps) + len(derivation.claims)


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


# --------------------------------------------------------------------------- attneb derive


def test_derive_prints_progress_then_the_listing(capsys):
    from attneb.proofs_check import cli

    assert cli.main(["derive", "depth_noise", "--plain"]) == 0
    out, err = capsys.readouterr()
    assert "[claim C5] c = 2*h2" in out and "Derivative(" in out
    progress = err.splitlines()
    assert progress[0].startswith("checking depth_noise: 7 steps and 3 claims")
    assert progress[1].startswith("  [1/10] step 1: symbolic (") and progress[-1].startswith("  [10/10] claim 3: ")
    assert cli.main(["derive", "depth_noise"]) == 0  # captured, not a terminal: plain
    assert capsys.readouterr().out == out
    assert cli.main(["derive", "depth_noise", "--pretty"]) == 0
    pretty = capsys.readouterr().out
    assert "Derivative(" not in pretty and "c = 2⋅h₂" in pretty


def test_derive_rejects_a_bad_time_limit(capsys):
    from attneb.proofs_check import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["derive", "depth_noise", "--time-limit", "0"])
    assert stop.value.code == 2
    assert "argument --time-limit: expected a number of seconds > 0, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["derive", "depth_noise", "--plain", "--latex"])
