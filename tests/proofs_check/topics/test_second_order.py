"""G5 (the mean field's second-order term): the check passes on the real implementation, rejects every wrong
theory registered beside it, decides as its criterion says on synthetic runs, and its runs resume from the store."""

from __future__ import annotations

import numpy as np
import pytest

from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.engine.studies import mode_name
from attneb.proofs_check.topics import second_order as g5


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick-mode context: the quick design's three runs (about 10 s) once, every theory deciding on them."""
    return Context(quick=True, out=tmp_path_factory.mktemp("g5"), power=True)


def test_the_check_passes_and_rejects_every_wrong_theory(quick, tmp_path):
    """The theories decide again on the stored runs; a wrong implementation (a 1% error in the measured cumulants,
    the alternative its coverage declares) computes the runs again, in a fresh folder: G5's breakage test."""
    [chk] = CLAIMS["G5"].checks
    evidence = chk.func(quick)
    assert evidence.passed, evidence.summary
    assert len(evidence.data["rows"]) == 2 * len(g5.STARTS)
    assert {w.name for w in chk.wrong_theories()} >= {"backward heat equation", "second-order term x 1/2",
                                                      "second-order term x 2", "second-order term with the opposite sign"}
    (tmp_path / "broken").mkdir()
    kinds = {w.kind for w in chk.wrong_theories()}
    assert kinds == {"theory", "implementation"}, kinds
    for wrong in chk.wrong_theories():
        context = quick if wrong.kind == "theory" else Context(quick=True, out=tmp_path / "broken", power=True)
        with wrong.applied():
            assert not chk.func(context).passed, wrong.name


def test_the_runs_are_stored_and_not_computed_again(quick, monkeypatch):
    g5.runs(quick)  # the design's runs, from the test above or now
    with ResultStore(quick.store_path) as store:
        assert len(store.records(mode_name("E8", "runs", True))) == len(g5.STARTS)
    monkeypatch.setattr(g5, "run_trajectory", lambda *args: pytest.fail("a stored run was computed again"))
    fresh = Context(quick=True, out=quick.out, power=True)
    assert [r["kappa2"] for r in g5.runs(fresh)] == [r["kappa2"] for r in g5.runs(quick)]


def _record(start, h2, q2, q4):
    """A run whose changes over depth T put q at q2 (kappa2) and q4 (kappa4)."""
    depths = [0.0, g5.S_END / h2]
    predicted = g5.predictions({"start": start, "h2": h2, "depths": depths})
    changes = {}
    for name, q in (("kappa2", q2), ("kappa4", q4)):
        second, first = predicted[f"{name}-2"][-1], predicted[f"{name}-1"][-1]
        # q = (m - second)/(m - first)  <=>  m = (second - q first)/(1 - q)
        changes[name] = [0.0, (second - q * first) / (1 - q)]
    return {"start": start, "h2": h2, "n": 8, "depths": depths, **changes}


@pytest.mark.parametrize(("q", "passed"), [(0.29, True), (-0.29, True), (0.31, False), (-0.31, False)])
def test_the_decision_is_as_its_criterion_says(q, passed):
    records = [_record(start, 0.05, 0.0, 0.0) for start in g5.STARTS]
    records[1] = _record("atoms", 0.05, 0.0, q)
    rows = g5.decide(records)
    np.testing.assert_allclose([r["q"] for r in rows], [0, 0, 0, q, 0, 0], atol=1e-9)
    assert all(r["passed"] for r in rows) is passed
    assert g5.TOLERANCE == 0.3 and "|q| <= 0.3" in CLAIMS["G5"].checks[0].criterion
