"""How claims, checks, wrong theories and verify's results display themselves in a notebook (``_repr_markdown_``)."""

from __future__ import annotations

from attneb.proofs_check.engine.registry import (
    CLAIMS,
    QUESTION_NOTE,
    Check,
    Claim,
    Evidence,
    alternative,
    swap,
)
from attneb.proofs_check.engine.runner import NOT_RUN, CheckResult, ClaimResult, status_label
from attneb.theory.derivation import markdown_text


def _evidence(passed: bool) -> Evidence:
    return Evidence(passed, "interval", f"slope -0.51 (-0.6, -0.42) ({'inside' if passed else 'outside'})",
                    figures=("E9_slope.png",), markdown="| N | gap |\n|---|---|\n| 100 | 0.1 |")


KERNEL_MEAN = "attneb.numerics.kernels:kernel_mean"
WRONG = alternative("slope -1", "the gap falls like 1/N", swap(KERNEL_MEAN, lambda real: real))
SLOPE = Check("E9: gap falls like N^(-1/2)", lambda ctx: _evidence(True),
              criterion="the 95% interval of the slope holds -1/2", alternatives=(WRONG,), covers=(KERNEL_MEAN,),
              replication="seeds", source="proofs_check/topics/x.py:12")
OLD = Check("E9 (superseded): pooled slope", lambda ctx: _evidence(True), criterion="pooled", gating=False,
            note="superseded by 'E9: gap falls like N^(-1/2)'")


def _claim(question: bool) -> Claim:
    return Claim("Z9", "the gap falls with N", "The gap to Bayes falls like N^(-1/2).", ("d = 1", "sigma2 = 0.5"),
                 [SLOPE, OLD], question=question, source="proofs_check/topics/x.py:3")


def test_a_claim_displays_its_statement_assumptions_and_each_check_with_its_wrong_theories():
    shown = _claim(question=False)._repr_markdown_()
    assert shown.startswith("**Z9: the gap falls with N** (claim; registered at `proofs_check/topics/x.py:3`)")
    for piece in ("The gap to Bayes falls like N^(-1/2).", "Assumptions: d = 1; sigma2 = 0.5.", "Checks (2):",
                  "- **E9: gap falls like N^(-1/2)** (`proofs_check/topics/x.py:12`)",
                  "  - criterion (fixed before the run): the 95% interval of the slope holds -1/2",
                  r"  - must reject: slope -1; +1% error in attneb.numerics.kernels:kernel\_mean",
                  "- **E9 (superseded): pooled slope** (superseded, not gating;",
                  "  - note: superseded by 'E9: gap falls like N^(-1/2)'"):
        assert piece in shown, piece
    assert QUESTION_NOTE not in shown
    assert QUESTION_NOTE in _claim(question=True)._repr_markdown_()


def test_a_check_and_a_wrong_theory_display_alone():
    assert SLOPE._repr_markdown_().splitlines()[0] == f"- **{SLOPE.name}** (`proofs_check/topics/x.py:12`)"
    shown = WRONG._repr_markdown_()
    assert shown.startswith("**slope -1** (theory alternative; built at `tests/proofs_check/engine/test_display.py:")
    assert shown.endswith(f"the gap falls like 1/N; swaps `{KERNEL_MEAN}`")  # in a code span, as it is


def test_a_registered_claim_names_every_check_and_its_derivation():
    claim = CLAIMS["C3"]
    shown = claim._repr_markdown_()
    assert shown.startswith(f"**C3: {claim.title}** (claim; ") and markdown_text(claim.statement) in shown
    for chk in claim.checks:
        assert f"- **{markdown_text(chk.name)}**" in shown and markdown_text(chk.criterion) in shown
    assert r"- **derivation 'depth\_ode' (sympy)** (`theory/depth_ode.py:" in shown


def test_prose_that_markdown_would_read_as_markup_is_escaped():
    chk = Check("T* = sigma2/(2 h2) and T* + c*", lambda ctx: None, criterion="|a - FD5[f](q)| <= 1e-7, $x$",
                source="x.py:1")
    claim = Claim("Z8", "a <b> title", "N_c_d ~ 2", (), [chk])
    shown = claim._repr_markdown_()
    assert r"**Z8: a \<b\> title**" in shown and r"N\_c\_d \~ 2" in shown
    assert r"- **T\* = sigma2/(2 h2) and T\* + c\*** (`x.py:1`)" in shown
    assert r"\|a - FD5\[f\](q)\| \<= 1e-7, \$x\$" in shown
    result = ClaimResult(claim, (CheckResult(chk, "pass", Evidence(True, "identity", "max |r| = 1e-9"), None, 0.1),))
    assert r"c\*** (pass, identity, 0.10 s): max \|r\| = 1e-9" in result._repr_markdown_()


def _result(question: bool, passed: bool) -> ClaimResult:
    status = "pass" if passed else "fail"
    return ClaimResult(_claim(question), (CheckResult(SLOPE, status, _evidence(passed), None, 1.25),
                                          CheckResult(OLD, NOT_RUN, None, None, 0.0)))


def test_a_result_displays_the_status_and_each_check_with_its_criterion_and_summary():
    shown = _result(question=False, passed=False)._repr_markdown_()
    lines = shown.splitlines()
    assert lines[0] == "**Z9: the gap falls with N** — fail"
    assert "The gap to Bayes falls like N^(-1/2)." in lines
    assert "- **E9: gap falls like N^(-1/2)** (fail, interval, 1.25 s): slope -0.51 (-0.6, -0.42) (outside)" in lines
    assert "  - criterion (fixed before the run): the 95% interval of the slope holds -1/2" in lines
    assert "  - figures, in the report folder: `E9_slope.png`" in lines  # file names in code spans
    assert "| 100 | 0.1 |" in lines  # the evidence's own table
    assert "- **E9 (superseded): pooled slope** (superseded, not gating; not run)" in lines


def test_a_question_reads_answer_yes_or_no():
    no = _result(question=True, passed=False)._repr_markdown_()
    assert no.splitlines()[0] == "**Z9: the gap falls with N** — question, answer no"
    assert QUESTION_NOTE in no
    assert _result(question=True, passed=True)._repr_markdown_().splitlines()[0].endswith("question, answer yes")
    assert _result(question=False, passed=True)._repr_markdown_().splitlines()[0].endswith("— pass")
    assert [status_label(True, s) for s in ("pass", "fail", "error")] == ["answer yes", "answer no", "error"]
    assert status_label(False, "fail") == "fail"


def test_a_check_that_raised_shows_its_traceback():
    error = 'Traceback (most recent call last):\n  File "x.py", line 1\nZeroDivisionError: division by zero\n'
    shown = CheckResult(SLOPE, "error", None, error, 0.5)._repr_markdown_()
    lines = shown.splitlines()
    assert lines[0] == "- **E9: gap falls like N^(-1/2)** (error, 0.50 s)"
    assert lines[lines.index("  - raised:") + 2] == "    ```"
    assert "    ZeroDivisionError: division by zero" in lines and lines[-1] == "    ```"
    claim = ClaimResult(_claim(False), (CheckResult(SLOPE, "error", None, error, 0.5),))
    assert claim._repr_markdown_().splitlines()[0].endswith("— error")
