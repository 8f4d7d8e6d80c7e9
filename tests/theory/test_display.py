"""How derivations and their check reports display themselves in a notebook (``_repr_latex_``, ``_repr_markdown_``)."""

from __future__ import annotations

import re

import sympy as sp

from attneb import theory
from attneb.theory.derivation import CheckReport, ClaimedForm, Derivation, Step, StepCheck, markdown_text

x = sp.Symbol("x", positive=True)
t = sp.Symbol("t", positive=True)
f = sp.Function("f")


def eq(lhs, rhs):
    return sp.Eq(lhs, rhs, evaluate=False)


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row, split at the ``|`` that are not escaped."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _toy() -> tuple[Derivation, list[tuple]]:
    """A derivation with a fraction, an integral, a derivative and a claimed inequality, and its relations as built."""
    relations = [
        (sp.Integral(sp.exp(-t), (t, 0, x)), 1 - sp.exp(-x)),
        (sp.Derivative(x**3 / 3, x), x**2),
        ((x**2 - 1) / (x - 1), x + 1),
    ]
    steps = [Step(eq(lhs, rhs), reason) for (lhs, rhs), reason in
             zip(relations, ("integrate", "differentiate | power rule", "cancel"))]
    claim = ClaimedForm(sp.Ge(x**2 + 1, 2 * x, evaluate=False), "AM-GM", ref="C0", name=sp.Symbol("q"))
    derivation = Derivation("toy", "Three steps", [x, t], steps, [eq(f(x), x + 1)], [claim])
    return derivation, relations


def test_the_latex_display_holds_every_step_as_sympy_prints_it():
    derivation, relations = _toy()
    shown = derivation._repr_latex_()
    assert shown.startswith(r"$\displaystyle \begin{aligned}") and shown.endswith(r"\end{aligned}$")
    for lhs, rhs in relations:
        assert f"{sp.latex(lhs)} &= {sp.latex(rhs)}" in shown
    assert rf"q &\geq {sp.latex(2 * x)}" in shown  # the claimed form: its name, relation and typed side
    assert rf"{sp.latex(f(x))} &= {sp.latex(x + 1)} && \text{{result}}" in shown
    assert r"\textbf{Three steps}" in shown and r"\text{(2) differentiate | power rule}" in shown


def test_a_registered_derivation_displays_each_step():
    derivation = theory.get_derivation("depth_ode")
    shown = derivation._repr_latex_()
    for step in derivation.steps:
        assert f"{sp.latex(step.eq.lhs)} &= {sp.latex(step.eq.rhs)}" in shown


def test_a_check_report_displays_as_a_table_with_a_row_per_item():
    derivation, _ = _toy()
    report = derivation.check()
    shown = report._repr_markdown_()
    lines = shown.splitlines()
    assert lines[0] == "Checks of `toy`: passed (4 symbolic, 0 numeric, 0 failed)"
    assert _cells(lines[2]) == ["item", "method", "passed", "detail", "reason"]
    rows = [_cells(line) for line in lines[4:]]
    assert [row[0] for row in rows] == ["step 1", "step 2", "step 3", "claim 1"]
    for row, entry in zip(rows, report.entries):
        assert len(row) == 5
        assert row[1:3] == [entry.method, "yes"]
        assert row[4] == markdown_text(entry.reason)
    assert rows[1][4] == r"differentiate \| power rule"


def test_a_failed_item_reads_no_and_the_report_failed():
    derivation = Derivation("wrong", "A wrong step", [x], [Step(eq(x**2, 2 * x), "not an identity")], [eq(f(x), x)])
    report = derivation.check()
    shown = report._repr_markdown_()
    assert "**FAILED**" in shown.splitlines()[0]
    assert _cells(shown.splitlines()[-1])[:3] == ["step 1", "failed", "**no**"]


def test_one_step_check_displays_as_a_one_row_table():
    entry = StepCheck(2, "step", "a numeric one", "numeric", "mpmath at 6 points", 3e-30, 1e-25)
    lines = entry._repr_markdown_().splitlines()
    assert len(lines) == 3
    assert _cells(lines[2]) == ["step 2", "numeric", "yes", r"mpmath at 6 points; residual 3.0e-30 \<= 1e-25",
                                "a numeric one"]
    assert entry.summary() == "numeric (mpmath at 6 points; residual 3.0e-30 <= 1e-25)"
    report = CheckReport("one", (entry,))
    assert report._repr_markdown_().splitlines()[-1] == lines[2]


def test_markdown_text_escapes_every_markup_character_and_nothing_else():
    text = r"T* = a_b, FD5[f](q) <b> $x$ |y| ~ 2 \ `c` & #1 -> ok"
    escaped = markdown_text(text)
    assert escaped == r"T\* = a\_b, FD5\[f\](q) \<b\> \$x\$ \|y\| \~ 2 \\ \`c\` & #1 -\> ok"
    assert re.sub(r"\\(.)", r"\1", escaped) == text
