"""S1 / E3 in d = 1, 2, 3: the finite-N threshold against the dimension.

The decision is exercised on synthetic runs whose fluctuations are what the linear theory says
(cheap); the runs themselves on a small one; the theory's asymptotic against the numeric
fluctuation integral. The check on the shrunken design of ``_small_stability.py`` runs in
``test_verify.py`` (every S1 check passes there and fails under a broken growth rate).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb.proofs_check.engine.registry import CLAIMS
from attneb.proofs_check.topics.stability import dimension, onset
from attneb.theory import stability
from tests.strategies import log_uniform

DESIGN = {"n": {1: [4096, 16384], 2: [8192, 32768], 3: [16384]}, "seeds": 6}


def registered():
    return next(c for c in CLAIMS["S1"].checks if c.func is dimension.threshold_in_dimension)


def synthetic_runs(design, factor=1.0, spread=0.1, seed=0):
    """Runs whose N eps^2(T*) is ``factor`` times the linear theory's, with lognormal scatter ``spread``."""
    rng = np.random.default_rng(seed)
    horizon = dimension._dimension_layers() * onset.ETA
    runs = []
    for d, ns in design["n"].items():
        for n in ns:
            value = dimension.predicted_fluctuation(d, n, horizon)
            for s in range(design["seeds"]):
                scatter = factor * math.exp(spread * rng.standard_normal())
                runs.append({"d": d, "n": n, "seed": dimension.DIM_SEED_START + s, "fluctuation": [value * scatter]})
    return runs


def test_decision_passes_the_linear_theory_and_fails_data_off_by_more_than_the_factor():
    assert dimension.decide_dimension(synthetic_runs(DESIGN), DESIGN)["passed"]
    assert dimension.decide_dimension(synthetic_runs(DESIGN, factor=0.75), DESIGN)["passed"]  # the pilot's offset
    for factor in (0.4, 2.5):
        decided = dimension.decide_dimension(synthetic_runs(DESIGN, factor=factor), DESIGN)
        assert not decided["passed"]
        assert not any(ok for name, ok in decided["checks"].items() if name.startswith("d ="))
    noisy = dimension.decide_dimension(synthetic_runs(DESIGN, spread=1.5), DESIGN)  # intervals too wide to decide
    assert not noisy["passed"]


def test_every_registered_alternative_is_rejected_on_data_that_follow_the_theory():
    runs = synthetic_runs(DESIGN, factor=0.75)
    chk = registered()
    assert chk.replication == "subsample" and chk.criterion == dimension.DIMENSION_CRITERION
    near_misses = {"rate x 0.85"}  # registered with power about 0 on the real runs (the check's note)
    assert {"N_c independent of d", "every mode at the fastest rate", "no growth", "rate peaking at 1/e",
            "rate x 0.5", "rate x 1.5", *near_misses} == {a.name for a in chk.wrong_theories()}
    for alt in chk.wrong_theories():
        if alt.name in near_misses:
            continue
        with alt.applied():
            decided = dimension.decide_dimension(runs, DESIGN)
        assert not decided["passed"], alt.name


def test_table_reports_every_dimension_and_the_per_mode_law():
    decided = dimension.decide_dimension(synthetic_runs(DESIGN), DESIGN)
    table = dimension._dimension_table(decided["rows"])
    assert table.count("\n") == 4 and "| 3 |" in table
    for row in decided["rows"].values():
        assert row["per_mode"] == pytest.approx(math.exp(2 * onset.SIGMA2 / (math.e * dimension.DIM_H2)))
    assert decided["rows"][1]["predicted"] < decided["rows"][2]["predicted"] < decided["rows"][3]["predicted"]


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 3), st.sampled_from([0.02, 0.1, 1.0]))
def test_fluctuation_integral_at_depth_zero_is_the_kde_variance(d, h2):
    """I_d(0) = int phi_h2^2 = (4 pi h2)^(-d/2), to the accuracy of the quadrature (201 points: < 1e-6)."""
    assert dimension.fluctuation_integral(d, 0.0, h2) == pytest.approx((4 * math.pi * h2) ** (-d / 2), rel=1e-6)


def test_fluctuation_integral_grows_with_depth_and_reads_the_rate_at_call_time(monkeypatch):
    values = [dimension.fluctuation_integral(3, t, 0.1) for t in (0.0, 1.0, 2.5)]
    assert values[0] < values[1] < values[2]
    real = stability.growth_rate
    monkeypatch.setattr(stability, "growth_rate", lambda k, h2: 1.5 * real(k, h2))
    assert dimension.fluctuation_integral(3, 2.5, 0.1) > values[2]


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), log_uniform(0.1, 2.0), log_uniform(0.01, 0.5), log_uniform(0.01, 10.0),
       log_uniform(0.05, 0.5))
def test_fluctuation_threshold_scaling(d, sigma2, h2, rho0, level):
    """log N_c(d) - 2 sigma2/(e h2) - ((d-1)/2) log(1/h2) depends on neither h2 nor sigma2/h2; N_c ~ 1/(rho0 level^2)."""
    n_c = stability.fluctuation_threshold(d, sigma2, h2, rho0, level)
    rest = math.log(n_c) - 2 * sigma2 / (math.e * h2) - (d - 1) / 2 * math.log(1 / h2)
    other = stability.fluctuation_threshold(d, sigma2, h2 / 3, rho0, level)
    assert math.log(other) - 2 * sigma2 / (math.e * h2 / 3) - (d - 1) / 2 * math.log(3 / h2) == pytest.approx(rest)
    assert stability.fluctuation_threshold(d, sigma2, h2, 2 * rho0, 2 * level) == pytest.approx(n_c / 8)


def test_fluctuation_threshold_is_laplace_of_the_integral_at_small_bandwidth(monkeypatch):
    """The asymptotic against the numeric integral (continuous depth: a tiny step), uniform density: ratio -> 1."""
    monkeypatch.setattr(dimension, "ETA", 1e-6)
    ratios = []
    for h2 in (0.05, 0.0125):
        horizon = 0.5 / (2 * h2)
        integral = dimension.fluctuation_integral(2, horizon, h2)
        ratios.append(stability.fluctuation_threshold(2, 0.5, h2, 1.0, 1.0) / integral)
    assert abs(ratios[1] - 1) < abs(ratios[0] - 1) < 0.1


@pytest.mark.parametrize("bad", [0, 1.5, True, -2])
def test_fluctuation_threshold_rejects_a_bad_dimension(bad):
    with pytest.raises(ValueError, match="d == "):
        stability.fluctuation_threshold(bad, 0.5, 0.1, 1.0, 0.2)


def test_a_run_records_the_fluctuation_every_few_layers_from_its_sampling_noise():
    run = dimension.run_dimension(2, 512, 7)
    layers = dimension._dimension_layers()
    assert run["depths"] == pytest.approx([onset.ETA * l for l in range(0, layers + 1, dimension.DIM_EVERY)])
    assert len(run["fluctuation"]) == len(run["depths"]) and all(v > 0 for v in run["fluctuation"])
    assert run["fluctuation"][-1] > run["fluctuation"][0]  # the fluctuations grow
    assert dimension.dimension_probes(2).shape == (dimension.DIM_PROBES, 2)
    assert np.linalg.norm(dimension.dimension_probes(3), axis=1).max() <= dimension.DIM_PROBE_RADIUS
