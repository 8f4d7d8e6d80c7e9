"""S1 in d = 1, 2, 3: N_C_DIM against the fluctuation integral, and the confirmatory threshold runs.

The Laplace check is deterministic and cheap: it runs here with every wrong theory. The threshold
check's decision is exercised on synthetic runs that follow the pilot's ratios to the linear theory;
its runs on the shrunken design of conftest.py (2-D only, no slope test) pass through
``test_verify.py`` and fail here under a broken Stage 1.
"""

import math

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import flow
from proofs_check import dimension_checks as dc
from proofs_check import stability_checks as sc
from proofs_check.registry import CLAIMS, Context
from tests.strategies import log_uniform

#: The pilot's measured / linear theory per d (seeds 2000-2007; d = 3 from seeds 0-3 at N = 32768).
PILOT = {1: 0.92, 2: 0.85, 3: 0.80}
#: Per-run lognormal scatter of N eps^2 on the pilot, per d.
SCATTER = {1: 0.6, 2: 0.2, 3: 0.12}


def registered(func):
    [chk] = [c for c in CLAIMS["S1"].checks if c.func is func]
    return chk


def test_laplace_check_passes_and_rejects_every_wrong_theory(tmp_path):
    chk = registered(dc.laplace_threshold)
    ctx = Context(quick=True, out=tmp_path)
    evidence = chk.func(ctx)
    assert evidence.passed, evidence.summary
    assert chk.replication == "none" and chk.criterion == dc.LAPLACE_CRITERION
    for wrong in chk.wrong_theories():
        with wrong.applied():
            assert not chk.func(ctx).passed, wrong.name


def _laplace_series(d, order):
    """Coefficients of 1/M^j, j <= order, of int f e^(M g) / its leading Laplace term (series in 1/sqrt(M))."""
    u, v, e = sp.symbols("u v epsilon", positive=True)
    g, f, u0 = u**2 * sp.exp(-u**2 / 2), u ** (d - 1) * sp.exp(-u**2), sp.sqrt(2)
    g2 = sp.diff(g, u, 2).subs(u, u0)
    top = 2 * order + 2
    rest = sum(sp.diff(g, u, j).subs(u, u0) * v**j * e ** (j - 2) / sp.factorial(j) for j in range(3, top + 1))
    local = sum(sp.diff(f, u, j).subs(u, u0) * (e * v) ** j / sp.factorial(j) for j in range(top + 1))
    expanded = sp.expand(sp.series(local * sp.exp(rest), e, 0, 2 * order + 1).removeO())
    lead = f.subs(u, u0) * sp.sqrt(2 * sp.pi / -g2)
    return [sp.simplify(sp.integrate(expanded.coeff(e, 2 * j) * sp.exp(g2 * v**2 / 2), (v, -sp.oo, sp.oo)) / lead)
            for j in range(order + 1)]


@pytest.mark.parametrize("d", [1, 2, 3])
def test_first_correction_is_the_series_of_the_laplace_integral(d):
    one, c1 = _laplace_series(d, 1)
    assert sp.simplify(one - 1) == 0
    assert dc.laplace_correction(d) == pytest.approx(float(c1), rel=1e-12)


@pytest.mark.slow  # 15 s of sympy
def test_second_order_coefficients_bound_the_remainder():
    """c2 = 79e^2/288, e^2/4608, -11e^2/288: |c2| <= 2.03 under the criterion's 5/M."""
    expected = {1: 79 * sp.E**2 / 288, 2: sp.E**2 / 4608, 3: -11 * sp.E**2 / 288}
    for d, c2 in expected.items():
        assert sp.simplify(_laplace_series(d, 2)[2] - c2) == 0
    assert max(abs(float(c)) for c in expected.values()) < dc.LAPLACE_REMAINDER / 2


@settings(max_examples=4, deadline=None)
@given(st.integers(1, 3), log_uniform(30.0, 300.0), log_uniform(0.002, 0.5))
def test_fluctuation_integral_agrees_with_adaptive_quadrature(d, t, h2):
    mp.mp.dps = 20
    k_star = mp.sqrt(2 / mp.mpf(h2))
    shell = 2 * mp.pi ** (mp.mpf(d) / 2) / mp.gamma(mp.mpf(d) / 2) / (2 * mp.pi) ** d
    exact = shell * mp.quad(lambda k: k ** (d - 1) * mp.exp(-h2 * k**2 + 2 * t * h2 * k**2 * mp.exp(-h2 * k**2 / 2)),
                            [0, k_star / 2, k_star, 2 * k_star, 10 * k_star, mp.inf])
    # the quadrature covers the shell +- 12 widths: from t = 30 on, the rest is below e^-30 of the integral
    assert dc.continuous_fluctuation_integral(d, t, h2) == pytest.approx(float(exact), rel=1e-10)


@pytest.mark.parametrize("args", [(0, 1.0, 0.1), (1, 0.0, 0.1), (1, 1.0, -0.1), (True, 1.0, 0.1)])
def test_fluctuation_integral_rejects_bad_arguments(args):
    with pytest.raises((ValueError, TypeError)):
        dc.continuous_fluctuation_integral(*args)
    if not isinstance(args[0], bool) and args[0] < 1:
        with pytest.raises(ValueError, match="d == 0"):
            dc.laplace_correction(args[0])


def test_every_design_has_every_n_above_twice_the_linear_threshold():
    horizon = sc._dimension_layers() * sc.ETA
    for quick in (True, False):
        design = REAL_DESIGN(quick)
        assert sorted(design["n"]) == ([1, 2] if quick else [1, 2, 3]) and design["seeds"] == 8
        for d, ns in design["n"].items():
            n_c = 1000 * sc.predicted_fluctuation(d, 1000, horizon) / sc.DIM_LEVEL**2
            assert min(ns) >= 2 * n_c, (d, min(ns), n_c)


def synthetic_runs(design, ratio=PILOT, slope=0.0, seed=0):
    """Runs whose N eps^2(T*) is ``ratio[d]`` x the linear theory x (N / N_0)^slope, lognormal scatter SCATTER[d]."""
    rng = np.random.default_rng(seed)
    horizon = sc._dimension_layers() * sc.ETA
    runs = []
    for d, ns in design["n"].items():
        for n in ns:
            value = sc.predicted_fluctuation(d, n, horizon)
            for s in range(design["seeds"]):
                scatter = math.exp(SCATTER[d] * rng.standard_normal() - SCATTER[d] ** 2 / 2)
                runs.append({"d": d, "n": n, "seed": dc.THRESHOLD_SEED_START + s,
                             "fluctuation": [0.0, value * ratio[d] * scatter * (n / ns[0]) ** slope]})
    return runs


#: The module's designs (conftest.py shrinks ``threshold_design`` inside every test).
REAL_DESIGN = dc.threshold_design
FULL = REAL_DESIGN(False)
#: Full design with 24 seeds: synthetic intervals narrow enough that the decision's bands show.
WIDE = {**FULL, "seeds": 24}


@pytest.fixture
def slope_decided(monkeypatch):
    """The module's slope test (conftest.py switches it off for the shrunken runs)."""
    monkeypatch.setattr(dc, "SLOPE_DIMENSION", 2)


def test_decision_passes_the_pilot_and_fails_off_band_ratios_and_slopes(slope_decided):
    assert dc.decide_threshold(synthetic_runs(WIDE), WIDE)["passed"]
    for ratio in ({**PILOT, 2: 1.3}, {**PILOT, 3: 0.5}, {**PILOT, 1: 2.0}):
        assert not dc.decide_threshold(synthetic_runs(WIDE, ratio=ratio), WIDE)["passed"], ratio
    tilted = dc.decide_threshold(synthetic_runs(WIDE, slope=0.4), WIDE)
    assert not tilted["checks"]["d = 2: slope of log(N eps^2) on log N within +-0.25"]
    flat = dc.decide_threshold(synthetic_runs(WIDE), WIDE)
    assert abs(flat["rows"][2]["slope"][0]) < 0.1 and flat["rows"][3]["slope"] is None
    swapped = dc.decide_threshold(synthetic_runs(WIDE, ratio={1: 1.0, 2: 0.85, 3: 0.2}), WIDE)
    assert not swapped["checks"]["N_c increases with d"]


def test_every_theory_and_data_alternative_is_rejected_on_runs_that_follow_the_pilot(slope_decided):
    chk = registered(dc.threshold_confirmatory)
    assert chk.replication == "subsample" and chk.criterion == dc.THRESHOLD_CRITERION
    runs = synthetic_runs(FULL, seed=1)
    assert dc.decide_threshold(runs, FULL)["passed"]
    names = {a.name for a in chk.wrong_theories()}
    assert {"rate x 0.85", "prediction x 0.7", "N_c independent of d", "Stage 1 to T*/2"} <= names
    for wrong in chk.wrong_theories():
        if wrong.kind == "implementation":
            continue
        with wrong.applied():
            assert not dc.decide_threshold(runs, FULL)["passed"], wrong.name


def test_a_run_measures_what_the_first_check_measures():
    """One particle_flow call to T* (binned tolerance 1e-6) against the first check's ten calls (1e-9)."""
    new, old = dc.run_threshold(2, 512, 7), sc.run_dimension(2, 512, 7)
    assert new["fluctuation"][0] == pytest.approx(old["fluctuation"][0], rel=1e-12)
    assert new["fluctuation"][-1] == pytest.approx(old["fluctuation"][-1], rel=1e-6)
    assert new["depths"] == pytest.approx([0.0, old["depths"][-1]])


def test_a_broken_stage_one_fails_the_threshold_check(tmp_path, monkeypatch, slope_decided):
    """Stage 1 to T*/2: the tokens' spread misses the mean field's at T*, a bias eps^2 ~ 0.015 whatever N, so
    N eps^2 grows like N (slope 1; the truth's per-seed slopes scatter about 0 by about 0.6 on these two N)."""
    real = flow.particle_flow
    monkeypatch.setattr(flow, "particle_flow", lambda x0, h2, T, **kw: real(x0, h2, T / 2, **kw))
    monkeypatch.setattr(dc, "threshold_design", lambda quick: {"n": {2: [4096, 8192]}, "seeds": 3})
    evidence = dc.threshold_confirmatory(Context(quick=True, out=tmp_path))
    assert not evidence.passed and "slope of log(N eps^2) on log N" in evidence.summary.split("FAILED")[1]
    assert min(evidence.data["rows"]["2"]["slopes"]) > 0.5
