"""H1, depth on Student-t priors: the best depth per seed, the decision on synthetic runs, and the check on the real
implementation (small design) against its wrong theories."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attneb.numerics import flow
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.topics.stage2 import heavy_tails
from tests.strategies import finite_floats, log_uniform


def synthetic_rows(log_best, seeds=range(6), curvature=40.0, spread=0.05, rng_seed=0):
    """Rows of one prior whose log-gap is curvature (log(T/T*) - log_best)^2 plus noise, at h2 = 0.1."""
    rng, x = np.random.default_rng(rng_seed), np.log(heavy_tails.DEPTHS)
    h2 = 0.1
    rows = []
    for s in seeds:
        for k, depth in enumerate(heavy_tails.DEPTHS):
            gap, oos = (1e-3 * math.exp(curvature * (x[k] - log_best) ** 2 + spread * rng.standard_normal())
                        for _ in range(2))
            rows.append({"seed": s, "sigma2": 0.5, "h2": h2, "T": depth * flow.leading_horizon(0.5, h2), "gap": gap,
                         "oos_gap": oos})
    return rows


@given(finite_floats(0.0, 1.0), log_uniform(0.1, 100.0), finite_floats(-5.0, 5.0))
def test_the_best_depth_is_the_vertex_of_a_parabola_in_log_depth(where, curvature, offset):
    x = np.log(heavy_tails.DEPTHS)
    vertex = x[1] + where * (x[-2] - x[1])  # the grid minimum is then an inner depth
    gaps = np.exp(curvature * (x - vertex) ** 2 + offset)[None, :]
    assert heavy_tails.best_depths(gaps)[0] == pytest.approx(vertex, abs=1e-9)


def test_the_best_depth_at_the_end_of_the_grid_is_that_end():
    x = np.log(heavy_tails.DEPTHS)
    assert heavy_tails.best_depths(np.exp(-x)[None, :])[0] == x[-1]
    assert heavy_tails.best_depths(np.exp(x)[None, :])[0] == x[0]


def test_the_decision_passes_within_the_band_and_fails_outside():
    seeds = list(range(6))
    near = heavy_tails.decide({"t": synthetic_rows(math.log(1.1))}, seeds)
    assert all(v["within"] for v in near.values())
    assert math.exp(near[("t", "gap")]["interval"].estimate) == pytest.approx(1.1, rel=0.02)
    assert near[("t", "gap")]["profile"][heavy_tails.DEPTHS.index(1.0)] == 1.0
    for shifted in (1.4, 1 / 1.4):
        assert not any(v["within"] for v in heavy_tails.decide({"t": synthetic_rows(math.log(shifted))}, seeds).values())
    assert [s for s in heavy_tails.decide({"t": synthetic_rows(0.0)}, [1, 3])[("t", "gap")]["seeds"]] == [1, 3]


def test_rows_off_the_grid_are_left_out_and_a_missing_depth_is_named():
    rows = synthetic_rows(0.0, seeds=[0])
    off = [{**r, "T": 1.05 * r["T"], "gap": 1.0} for r in rows]  # runs of another horizon in the same store
    seeds, gaps = heavy_tails.depth_table(rows + off, "gap")
    assert seeds == [0] and np.all(gaps < 1.0)
    with pytest.raises(LookupError, match="some seed lacks some depth"):
        heavy_tails.depth_table(rows[1:] + off, "gap")


def registered():
    [chk] = [c for c in CLAIMS["H1"].checks if c.func is heavy_tails.depth_heavy_tails]
    return chk


def test_the_depth_check_passes_on_the_small_design_and_rejects_a_broken_stage_one(tmp_path):
    chk = registered()
    evidence = chk.func(Context(quick=True, out=tmp_path, power=True))
    assert evidence.passed, evidence.summary
    assert set(evidence.data["cases"]) == {"student-t3, gap", "student-t3, oos_gap"}
    [half] = [w for w in chk.wrong_theories() if w.name == "Stage 1 at half the bandwidth"]
    (tmp_path / "wrong").mkdir()
    with half.applied():
        assert not chk.func(Context(quick=True, out=tmp_path / "wrong", power=True)).passed
