"""G6 (the gap predicted term by term): the decision is as its criterion says, each wrong theory registered beside it
moves the band off a gap that the real theory predicts, and a broken theory (a Stage-2 variance without its 1/N)
fails the check: G6's breakage test. Synthetic measurements at E1's points; the check's own run on E1 is slow."""

from __future__ import annotations

import math

import pytest

from attneb.proofs_check.engine.registry import CLAIMS, Context, alternative, swap
from attneb.proofs_check.topics import predicted_gap as g6
from attneb.proofs_check.topics.designs import SIGMA2

#: E1's points where each term leads: the Gaussian's fluctuations at small N, the clusters' bias, the sphere's both.
POINTS = [("gaussian-log", 256, 0.1327), ("gaussian-log", 65536, 0.0663), ("clusters-log", 4096, 0.0885),
          ("sphere-power", 1024, 0.0884)]


def _points():
    """E1's points of POINTS, without measurements (:func:`_with_measured` adds them)."""
    return [{"part": part, "prior": g6.prior_of(part), "n": n, "h2": h2, "T": SIGMA2 / (2 * h2), "eta": 0.05,
             "decided": True, "gap": [], "oos_gap": []} for part, n, h2 in POINTS]


def _with_measured(points, values, spread=1e-3):
    """The points with four seeds' gaps (in-sample and fresh) at each value times (1 -+ spread)."""
    for p, v in zip(points, values):
        p["gap"] = p["oos_gap"] = [v * (1 - spread), v * (1 + spread), v * (1 - spread), v * (1 + spread)]
    return points


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return Context(quick=True, out=tmp_path_factory.mktemp("g6"))


@pytest.fixture(scope="module")
def predicted(context):
    """The real theory's gap at every point of POINTS (the mixtures' and the sphere's mean fields: about 10 s)."""
    return [p["gap"] for p in g6.predictions(context, _with_measured(_points(), [1.0] * len(POINTS)))]


#: The Gaussian's points of POINTS (its bias exact, no mean field to compute): the default run's cheap cases.
GAUSSIAN = slice(0, 2)


def test_the_points_decide_as_the_criterion_says(context):
    points = _points()[GAUSSIAN]
    result = g6.predictions(context, _with_measured(points, [1.0] * len(points)))
    for k, p in enumerate(result):
        low, high = p["low"], p["high"]
        assert low < p["gap"] < high
        for value, inside in ((p["gap"], True), (low * 0.99, True), (high * 1.01, True), (low * 0.9, False),
                              (high * 1.1, False)):
            [q] = g6.predictions(context, _with_measured(_points()[k:k + 1], [value], spread=0.01))
            assert q["passed"] is inside, (p["part"], p["n"], value, low, high)


def test_the_band_is_built_from_the_neglected_orders(context):
    [p] = g6.predictions(context, _with_measured(_points()[2:3], [1.0]))
    factor = (p["fluctuation_factor"])
    assert p["low"] == pytest.approx(p["bias"] * (1 - p["bias_error"]) + p["variance"] * (1 - p["variance_error"])
                                     + p["fluctuation"] / factor)
    assert p["high"] == pytest.approx(p["bias"] * (1 + p["bias_error"]) + p["variance"] * (1 + p["variance_error"])
                                      + p["fluctuation"] * factor)
    n_c = math.exp(2 * SIGMA2 / (math.e * p["h2"]))
    assert factor > 1 + math.sqrt(n_c / p["n"])


@pytest.mark.slow  # about 20 s: every wrong theory's mean fields and variances at four points
def test_every_wrong_theory_moves_the_band_off_the_predicted_gap(context, predicted):
    [chk] = CLAIMS["G6"].checks
    names = {w.name for w in chk.wrong_theories()}
    assert names >= {"bias term alone", "variance terms alone", "fluctuations at rate 1/e: N_c = exp(sigma2/(e h2))",
                     "risk quartic in the blur", "T_G in place of T"}
    assert all(p["passed"] for p in g6.predictions(context, _with_measured(_points(), predicted)))
    for wrong in chk.wrong_theories():
        with wrong.applied():
            fresh = Context(quick=True, out=context.out)
            result = g6.predictions(fresh, _with_measured(_points(), predicted))
        assert not all(p["passed"] for p in result), wrong.name


def test_a_stage_two_variance_without_its_one_over_n_fails(context):
    """G6's breakage test: theory.gap.variance as if over one token in every N (its 1/N dropped for N)."""
    points = _points()[GAUSSIAN]
    real = [p["gap"] for p in g6.predictions(context, _with_measured(points, [1.0] * len(points)))]
    assert all(p["passed"] for p in g6.predictions(context, _with_measured(_points()[GAUSSIAN], real)))
    broken = alternative("variance x N", "1/N dropped", swap("attneb.theory.gap:variance",
                         lambda real: lambda *args: tuple(v * args[-1] for v in real(*args))))
    with broken.applied():
        result = g6.predictions(context, _with_measured(_points()[GAUSSIAN], real))
    assert not any(p["passed"] for p in result)


@pytest.mark.slow
def test_verify_answers_on_e1_and_draws_e9(tmp_path, capsys):
    """On the shrunken E1 of the tests: verify G6 decides every point with N >= 10 N_c, draws E9, and plot redraws it."""
    from attneb.proofs_check import cli

    cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path), "--only", "G6"])
    import json

    [entry] = [e for c in json.loads((tmp_path / "report.json").read_text())["claims"] if c["id"] == "G6"
               for e in c["evidence"]]
    assert entry["status"] in ("pass", "fail") and entry["figures"] == ["E9_predicted_gap.png"], entry.get("error")
    points = entry["data"]["points"]
    assert points and all((p["passed"] is None) is (not p["decided"]) for p in points)
    assert (tmp_path / "E9_predicted_gap.png").is_file()
    assert cli.main(["plot", "E9", "--store", str(tmp_path / "results.sqlite"), "--quick", "--out",
                     str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "E9_predicted_gap.png").is_file()
