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
from scipy import optimize
from scipy import stats as scipy_stats

from attneb.proofs_check.engine.registry import CLAIMS, Context
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


# --------------------------------------------------------------------------------------------
# S1 / E3 onset, the confirmatory check: its decision at the edges of the numbers its criterion states
# --------------------------------------------------------------------------------------------

#: The onset design as registered (taken before the autouse fixture of conftest.py shrinks it).
REAL_ONSET_DESIGN = onset.onset_design
#: Seven seeds from 1000: 63 runs, a count at which the binomial test's one- and two-sided p straddle 0.01.
CONFIRM_SEEDS = list(range(onset.ONSET_CONFIRM_SEED_START, onset.ONSET_CONFIRM_SEED_START + 7))
ONSET_NS = [1024, 4096, 16384]


def _with_interval(low: float, high: float, count: int) -> np.ndarray:
    """``count`` values whose 95% t-interval of the mean (stats.mean_interval) is exactly [low, high]."""
    z = np.linspace(-1.0, 1.0, count)
    z = (z - z.mean()) / z.std(ddof=1)
    sd = (high - low) / 2 * math.sqrt(count) / scipy_stats.t.ppf(0.975, count - 1)
    return (low + high) / 2 + sd * z


def _onset_runs():
    return [{"h2": h2, "n": n, "seed": seed, "k": float(stability.fastest_mode(h2)[0]) * onset.K_GRID}
            for h2 in onset.ONSET_H2 for n in ONSET_NS for seed in CONFIRM_SEEDS]


def _confirmatory(monkeypatch, tmp_path, coefficients, scales, in_band=None, missing=False):
    """The confirmatory check on stand-in runs: per seed t_c = a_h2 + coefficient x log N exactly; the first
    ``in_band`` runs (default: all) clump at ``k* x scales`` (in the band), the others never clump."""
    runs = _onset_runs()
    in_band = len(runs) if in_band is None else in_band
    by_seed = dict(zip(CONFIRM_SEEDS, coefficients))

    def depth(run, k_star):
        if missing and run is runs[-1]:
            return None
        return 1.0 + 10 * run["h2"] + by_seed[run["seed"]] * math.log(run["n"])

    values = list(scales) + [None] * (len(runs) - in_band)
    peaks = [None if v is None else v * float(stability.fastest_mode(r["h2"])[0]) for r, v in zip(runs, values)]

    def onset_runs(ctx, start, seeds=None):
        assert start == 1000
        return runs, {"h2": list(onset.ONSET_H2), "n": ONSET_NS, "seeds": len(CONFIRM_SEEDS)}

    monkeypatch.setattr(onset, "departure_depth", depth)
    monkeypatch.setattr(onset, "clump_wavenumbers", lambda rs: peaks)
    monkeypatch.setattr(onset, "_onset_runs", onset_runs)
    return onset.onset_confirmatory_ten_seeds(Context(quick=True, out=tmp_path, power=True))


class _Asked(Exception):
    """Raised by a stand-in once the check has asked for its runs."""


@pytest.mark.parametrize("quick", [True, False])
def test_the_ten_seed_confirmatory_check_asks_for_its_quick_seeds_and_the_design_s_in_full(quick, monkeypatch, tmp_path):
    asked = []

    def onset_runs(ctx, start, seeds=None):
        asked.append((start, seeds))
        raise _Asked

    monkeypatch.setattr(onset, "_onset_runs", onset_runs)
    with pytest.raises(_Asked):
        onset.onset_confirmatory_ten_seeds(Context(quick=quick, out=tmp_path, power=True))
    assert asked == [(onset.ONSET_CONFIRM_SEED_START, onset.CONFIRM_QUICK_SEEDS if quick else onset.onset_design(False)["seeds"])]
    checks = {c.func: c for c in CLAIMS["S1"].checks}
    old, new = checks[onset.onset_confirmatory], checks[onset.onset_confirmatory_ten_seeds]
    assert "Seeds: 10 in quick mode" in new.criterion  # CONFIRM_QUICK_SEEDS, which the tests shrink to 5
    assert new.gating and not old.gating and [a.name for a in old.wrong_theories()] == [a.name for a in new.wrong_theories()]


def _registered_onset():
    return next(c for c in CLAIMS["S1"].checks if c.func is onset.onset_confirmatory_ten_seeds)


def _predicted(monkeypatch, tmp_path) -> float:
    with monkeypatch.context() as m:
        return _confirmatory(m, tmp_path, [0.7] * 7, [1.0] * 63).data["predicted"]


def test_the_prediction_is_the_linear_theorys_slope_of_t_c_on_log_n_as_its_criterion_says(monkeypatch, tmp_path):
    """The prediction: per h2, the least-squares slope on log N of the depth t at which the band mean of
    (1 + eta Lambda(k))^(2 t/eta) reaches N/300, Lambda = lambda_law growth_rate(k)/growth_rate(k*), lambda_law =
    log(N_c)/(2 T*) = 2/e; with one intercept per h2 and the same N for each, the mean of those slopes."""
    slopes = []
    for h2 in onset.ONSET_H2:
        k_star = float(stability.fastest_mode(h2)[0])
        ks = k_star * onset.K_GRID[np.abs(onset.K_GRID - 1) <= 0.2 + 1e-12]
        rate = math.log(stability.token_scaling(0.5, h2)) / (2 * 0.5 / (2 * h2))
        assert rate == pytest.approx(2 / math.e, rel=1e-12)
        big_lambda = rate * stability.growth_rate(ks, h2) / stability.growth_rate(k_star, h2)

        def reached(t, n):
            return np.mean((1 + onset.ETA * big_lambda) ** (2 * t / onset.ETA)) - n / 300

        depths = [optimize.brentq(reached, 0.0, 50.0, args=(n,), xtol=1e-14) for n in ONSET_NS]
        slopes.append(np.polyfit(np.log(ONSET_NS), depths, 1)[0])
    assert _predicted(monkeypatch, tmp_path) == pytest.approx(np.mean(slopes), rel=1e-8)
    assert "mean_band (1 + eta Lambda(k))^(2 t/eta) = N/300" in onset.ONSET_CRITERION


def test_the_n_c_law_passes_within_10_percent_on_the_two_sided_95_interval_as_its_criterion_says(monkeypatch, tmp_path):
    """(a) Coefficient intervals [0.9001, 1.0999] x the prediction pass; [0.9001, 1.1001] and [0.8999, 1.0999] fail
    (the 90% intervals of those lie inside +-10%: the two-sided 95% t-interval over seeds decides)."""
    assert "the 95% t-interval over seeds of the coefficient lies within +-10% of the prediction" in \
        _registered_onset().criterion
    predicted = _predicted(monkeypatch, tmp_path)
    assert 0.6 < predicted < 0.8  # the linear theory's slope near e/4
    for low, high, passes in ((0.9001, 1.0999, True), (0.9001, 1.1001, False), (0.8999, 1.0999, False)):
        coefficients = _with_interval(low * predicted, high * predicted, len(CONFIRM_SEEDS))
        centre, half = (low + high) / 2, (high - low) / 2 * scipy_stats.t.ppf(0.95, 6) / scipy_stats.t.ppf(0.975, 6)
        assert 0.9 < centre - half and centre + half < 1.1  # the 90% interval lies inside +-10%
        with monkeypatch.context() as m:
            evidence = _confirmatory(m, tmp_path, coefficients, [1.0] * 63)
        low_seen, high_seen = evidence.data["coefficient"][1:]
        assert (low_seen, high_seen) == pytest.approx((low * predicted, high * predicted), rel=1e-9)
        assert evidence.data["checks"]["coefficient within 10% of the prediction"] is passes
        assert evidence.passed is passes, evidence.summary


def test_the_n_c_law_must_exclude_the_halved_rate_as_its_criterion_says(monkeypatch, tmp_path):
    """(a) An interval within +-10% that contains the slope the law's rate halved predicts fails; that slope is the
    linear theory's at rate_factor 0.5 (lambda_law halved)."""
    predicted = _predicted(monkeypatch, tmp_path)
    real, factors = onset._departure_slope, []

    def slope(h2, ks, ns, rate_factor=1.0):
        factors.append(rate_factor)
        return real(h2, ks, ns) if rate_factor == 1.0 else 1.05 * real(h2, ks, ns)

    coefficients = _with_interval(0.95 * predicted, 1.09 * predicted, len(CONFIRM_SEEDS))
    with monkeypatch.context() as m:
        m.setattr(onset, "_departure_slope", slope)
        evidence = _confirmatory(m, tmp_path, coefficients, [1.0] * 63)
    assert evidence.data["checks"]["coefficient within 10% of the prediction"]
    assert not evidence.data["checks"]["coefficient excludes rate 1/e"] and not evidence.passed
    assert set(factors) == {1.0, 0.5}
    assert "excludes the prediction with lambda_law halved" in _registered_onset().criterion


def test_a_run_that_never_reaches_the_departure_level_fails_the_law_as_its_criterion_says(monkeypatch, tmp_path):
    predicted = _predicted(monkeypatch, tmp_path)
    coefficients = _with_interval(0.97 * predicted, 1.03 * predicted, len(CONFIRM_SEEDS))
    evidence = _confirmatory(monkeypatch, tmp_path, coefficients, [1.0] * 63, missing=True)
    assert evidence.data["coefficient"] is None and not evidence.passed
    assert "a run that never reaches the departure level has no coefficient, which fails (a)" in \
        _registered_onset().criterion


def test_the_clump_scale_passes_within_0_9_to_1_1_k_star_as_its_criterion_says(monkeypatch, tmp_path):
    """(b) Mean clump wavenumber / k* with 95% t-interval [0.9001, 0.93] or [1.07, 1.0999] passes, [0.8999, 0.93]
    or [1.07, 1.1001] fails (every run clumped in the band, the law passing)."""
    assert "the 95% t-interval over runs of the mean clump wavenumber / k* lies within [0.9, 1.1]" in \
        _registered_onset().criterion
    predicted = _predicted(monkeypatch, tmp_path)
    coefficients = _with_interval(0.97 * predicted, 1.03 * predicted, len(CONFIRM_SEEDS))
    for low, high, passes in ((0.9001, 0.93, True), (1.07, 1.0999, True), (0.8999, 0.93, False), (1.07, 1.1001, False)):
        with monkeypatch.context() as m:
            evidence = _confirmatory(m, tmp_path, coefficients, _with_interval(low, high, 63))
        assert evidence.data["clump_scale"][1:] == pytest.approx([low, high], rel=1e-9)
        assert evidence.data["checks"]["mean clump wavenumber within [0.9, 1.1] k*"] is passes
        assert evidence.passed is passes, evidence.summary


def test_the_binomial_test_is_one_sided_at_0_01_over_every_run_as_its_criterion_says(monkeypatch, tmp_path):
    """(b) 63 runs, a flat S putting 31/61 of them in the band: 42 clumped in the band (the other 21 never clump)
    give one-sided p = 0.008 (passes; two-sided 0.016 would not), 41 give 0.016 (fails; it would at 0.05). Counted
    over the clumped runs only, both would pass."""
    assert "one-sided exact binomial test against the fraction of grid points in the band, p < 0.01" in \
        _registered_onset().criterion and "the binomial test counts every run" in _registered_onset().criterion
    predicted = _predicted(monkeypatch, tmp_path)
    coefficients = _with_interval(0.97 * predicted, 1.03 * predicted, len(CONFIRM_SEEDS))
    for in_band, passes in ((42, True), (41, False)):
        with monkeypatch.context() as m:
            evidence = _confirmatory(m, tmp_path, coefficients, _with_interval(0.98, 1.02, in_band), in_band=in_band)
        assert evidence.data["flat_fraction"] == pytest.approx(31 / 61) and evidence.data["runs"] == 63
        one_sided = scipy_stats.binomtest(in_band, 63, 31 / 61, alternative="greater").pvalue
        assert evidence.data["binomial_p"] == pytest.approx(one_sided, rel=1e-12)
        assert bool(one_sided < 0.01) is passes and scipy_stats.binomtest(in_band, 63, 31 / 61).pvalue > 0.01
        assert evidence.data["checks"]["more clumps in the band than a flat S gives"] is passes
        assert evidence.passed is passes, evidence.summary


def test_t_c_is_interpolated_in_log_band_power_relative_to_depth_0_as_its_criterion_says():
    """t_c: the mean of S over |k/k* - 1| <= 0.2 (columns outside ignored), divided by its depth-0 value, reaches
    N/300, interpolated linearly in log power between the samples (every 2 layers)."""
    k_star = float(stability.fastest_mode(0.025)[0])
    depths = onset.ETA * onset.ONSET_EVERY * np.arange(40)
    band = onset.band_columns({"k": k_star * onset.K_GRID}, k_star)
    assert np.array_equal(band, np.abs(onset.K_GRID - 1) <= 0.2 + 1e-12) and band.sum() == 17  # k/k* in [0.8, 1.2]
    rates = np.linspace(0.5, 3.0, onset.K_GRID.size)  # each column its own rate: the mean of S is not exponential
    log_s = np.log(2.0 + onset.K_GRID) + np.outer(depths, rates)
    log_s[:, ~band] = 50.0  # huge outside the band: ignored
    run = {"n": 4096, "depths": depths, "k": k_star * onset.K_GRID, "log_structure": log_s}
    power = np.exp(log_s[:, band]).mean(axis=1)
    log_power, level = np.log(power / power[0]), math.log(4096 / 300)
    i = int(np.flatnonzero(log_power >= level)[0])
    expected = depths[i - 1] + (depths[i] - depths[i - 1]) * (level - log_power[i - 1]) / (log_power[i] - log_power[i - 1])
    assert onset.departure_depth(run, k_star) == pytest.approx(expected, rel=1e-12)
    assert abs(expected - float(np.interp(4096 / 300, power / power[0], depths))) > 1e-4  # linear in power: other


def test_the_onset_design_is_as_its_criterion_says():
    """'E3: onset of finite-N fluctuations' states the design the confirmatory check reuses ('same design')."""
    text = next(c.criterion for c in CLAIMS["S1"].checks if c.func is onset.onset_of_fluctuations)
    assert onset.ONSET_CRITERION == text
    assert REAL_ONSET_DESIGN(True) == {"h2": [0.05, 0.025, 0.0125], "n": [1024, 4096, 16384], "seeds": 5}
    assert REAL_ONSET_DESIGN(False) == {"h2": [0.05, 0.025, 0.0125], "n": [1024 * 2**i for i in range(7)], "seeds": 10}
    assert (onset.TAU2, onset.SIGMA2, onset.ETA, onset.ONSET_CONFIRM_SEED_START) == (1.0, 0.5, 0.05, 1000)
    assert np.array_equal(onset.K_GRID, np.linspace(0.5, 2.0, 61)) and onset.SMOOTH == 5 and onset.CLUMP_DIVISOR == 20
    assert onset.ONSET_EVERY == 2 and onset.ONSET_MAX_LAYERS * onset.ETA == pytest.approx(9.0)
    assert (onset.ONSET_HALF_BAND, onset.ONSET_LEVEL, onset.BAND_FRACTION) == (0.2, 1 / 300, 0.75)
    assert (onset.ONSET_LAW_RTOL, onset.ONSET_SCALE_BAND, onset.BINOMIAL_LEVEL) == (0.10, (0.9, 1.1), 0.01)
