"""G4 (anisotropic Gaussian prior): the particle check and the evaluator check pass on the real implementation,
fail on a broken one, and reject every wrong theory registered beside them; the decision on synthetic runs."""

from __future__ import annotations

import numpy as np
import pytest

from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.topics import anisotropic as anisotropic_checks
from attneb.theory import anisotropic, depth_noise


def registered(func):
    [chk] = [c for c in CLAIMS["G4"].checks if c.func is func]
    return chk


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick-mode context for the module: the particles are simulated once and every theory decides on them."""
    return Context(quick=True, out=tmp_path_factory.mktemp("g4"), power=True)


@pytest.mark.parametrize("func", [
    pytest.param(anisotropic_checks.anisotropic_particles, marks=pytest.mark.slow),  # 18 s; its pass also runs through verify G4
    anisotropic_checks.anisotropic_evaluators], ids=lambda f: f.__name__)
def test_the_check_passes_and_rejects_every_wrong_theory(func, quick):
    chk = registered(func)
    evidence = chk.func(quick)
    assert evidence.passed, evidence.summary
    assert chk.criterion and chk.wrong_theories()
    for wrong in chk.wrong_theories():
        with wrong.applied():
            assert not chk.func(quick).passed, wrong.name


@pytest.mark.slow  # simulates the quick design (15 s) unless the test above ran first
def test_the_particle_check_reports_its_numbers(quick):
    evidence = anisotropic_checks.anisotropic_particles(quick)
    [case] = evidence.data["cases"]
    assert case["h2"] == anisotropic_checks.BANDWIDTHS[0] and len(case["argmins"]) == anisotropic_checks.anisotropic_design(True)["seeds"]
    assert case["horizons"][0] < case["best"] < case["horizons"][1]
    assert "FAILED" not in evidence.summary


def _stage_one_with_half_the_bandwidth(monkeypatch):
    """Stage 1 flows with h2/2: the variances come down at about half the rate."""
    real = anisotropic_checks.flow.particle_flow
    monkeypatch.setattr(anisotropic_checks.flow, "particle_flow", lambda x0, h2, T, **kw: real(x0, h2 / 2, T, **kw))


def _stage_two_over_the_noisy_tokens(monkeypatch):
    """Stage 2 attends over the tokens at depth 0 whatever depth is asked for (Stage 1 skipped)."""
    real = anisotropic_checks.flow.particle_flow

    def unrefined(x0, h2, T, **kw):
        result = real(x0, h2, T, **kw)
        return type(result)(result.tokens, result.depths, np.stack([x0] * len(result.depths)), result.energy)

    monkeypatch.setattr(anisotropic_checks.flow, "particle_flow", unrefined)


@pytest.mark.slow  # 20 s; the first breakage also runs by default, through verify (tests/proofs_check/test_verify.py)
@pytest.mark.parametrize("breakage", [_stage_one_with_half_the_bandwidth, _stage_two_over_the_noisy_tokens],
                         ids=lambda b: b.__name__)
def test_a_broken_implementation_fails_the_particle_check(breakage, tmp_path, monkeypatch):
    breakage(monkeypatch)
    evidence = anisotropic_checks.anisotropic_particles(Context(quick=True, out=tmp_path))
    assert not evidence.passed and "FAILED" in evidence.summary


# --------------------------------------------------------------------------------------------
# The decision on synthetic runs (no simulation)
# --------------------------------------------------------------------------------------------


def _synthetic(seeds=5, *, variance_factor=1.0, excess_factor=1.0, delay=0.0, floor=2e-4):
    """Runs as ``measure`` returns them, where theory holds up to small noise (and a finite-N floor).

    The gaps of each direction are theory's excess at depth ``T - delay`` times ``excess_factor``, plus ``floor``.
    """
    rng = np.random.default_rng(0)
    measured = {}
    for h2 in anisotropic_checks.BANDWIDTHS:
        depths = anisotropic_checks.depth_grid(h2)
        variances = np.array([anisotropic.variances_at_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, h2, float(t)) for t in depths])
        gaps = np.array([[anisotropic.excess_at_depth([tau2], anisotropic_checks.SIGMA2, h2, float(t - delay)) for tau2 in anisotropic_checks.TAU2S]
                         for t in depths])
        measured[h2] = {
            "depths": depths, "seeds": list(range(seeds)),
            "variances": variance_factor * variances * (1 + 0.002 * rng.standard_normal((seeds, *variances.shape))),
            "gaps": excess_factor * gaps * (1 + 0.01 * rng.standard_normal((seeds, *gaps.shape))) + floor / 2,
        }
    return measured


def test_the_decision_passes_where_the_theory_holds():
    decided = anisotropic_checks.decide(_synthetic())
    assert decided["passed"], [r["checks"] for r in decided["rows"]]
    for row in decided["rows"]:
        assert abs(row["offset"].estimate) < 0.005 and abs(row["slope"].estimate - 1) < 0.02


@pytest.mark.parametrize("wrong, fails", [
    ({"variance_factor": 1.08}, "variances within 5%"),
    ({"excess_factor": 1.3}, "excess slope within [0.9, 1.1]"),
    ({"delay": 0.06}, "best depth within 0.03"),
], ids=["variances 8% high", "excess x 1.3", "minimum 0.06 late"])
def test_each_part_of_the_decision_can_fail(wrong, fails):
    decided = anisotropic_checks.decide(_synthetic(**wrong))
    assert not decided["passed"]
    assert all(not r["checks"][fails] for r in decided["rows"])


def test_measured_argmin_is_the_vertex_of_a_parabola():
    depths = np.linspace(1.0, 2.0, 11)
    assert anisotropic_checks.measured_argmin(depths, (depths - 1.437) ** 2 + 3.0) == pytest.approx(1.437, abs=1e-12)
    # at the edge of the grid the window is clipped to it, the vertex still found
    assert anisotropic_checks.measured_argmin(depths, (depths - 1.02) ** 2) == pytest.approx(1.02, abs=1e-12)


def test_the_depth_grid_brackets_the_per_direction_horizons():
    for h2 in anisotropic_checks.BANDWIDTHS:
        grid = anisotropic_checks.depth_grid(h2)
        horizons = [depth_noise.gaussian_horizon(anisotropic_checks.SIGMA2, tau2, h2) for tau2 in anisotropic_checks.TAU2S]
        best, _ = depth_noise.anisotropic_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, h2)
        assert grid[0] < min(horizons) < best < max(horizons) < grid[-1]
        assert len(grid) == anisotropic_checks.GRID_POINTS and np.all(np.diff(grid) > 0)


# --------------------------------------------------------------------------------------------
# The decisions at the edges of the numbers their criteria state
# --------------------------------------------------------------------------------------------


#: Theory's values at the arguments the decisions below ask for, computed once for the module.
_THEORY_MEMO: dict = {}


@pytest.fixture
def memoised_theory(monkeypatch):
    """The evaluators decide reads, memoised (the same values, computed once): the decisions below run repeatedly."""
    for module, name in ((anisotropic, "variances_at_depth"), (anisotropic, "excess_at_depth"),
                         (depth_noise, "anisotropic_depth")):
        real = getattr(module, name)

        def memo(*args, real=real, name=name):
            key = (name, *(tuple(a) if isinstance(a, list) else a for a in args))
            if key not in _THEORY_MEMO:
                _THEORY_MEMO[key] = real(*args)
            return _THEORY_MEMO[key]

        monkeypatch.setattr(module, name, memo)


def _with_interval(low: float, high: float, count: int) -> np.ndarray:
    """``count`` values whose 95% t-interval of the mean (stats.mean_interval) is exactly [low, high]."""
    from scipy import stats as scipy_stats

    z = np.linspace(-1.0, 1.0, count)
    z = (z - z.mean()) / z.std(ddof=1)
    sd = (high - low) / 2 * np.sqrt(count) / scipy_stats.t.ppf(0.975, count - 1)
    return (low + high) / 2 + sd * z


def _controlled(seeds=5, *, variance_error=None, slopes=None):
    """Runs as ``measure`` returns them, theory's exactly, except at h2 = 1/4 (the last bandwidth): per seed, the
    relative error ``variance_error`` of the variance at one depth and direction, and the slope ``slopes`` of the
    excess (direction 0 carries ``slope x theory's excess``, direction 1 a floor of 1e-4)."""
    measured = {}
    for h2 in anisotropic_checks.BANDWIDTHS:
        depths = anisotropic_checks.depth_grid(h2)
        variances = np.array([anisotropic.variances_at_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, h2, float(t))
                              for t in depths])
        excess = np.array([anisotropic.excess_at_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, h2, float(t))
                           for t in depths])
        relative = np.zeros((seeds, *variances.shape))
        slope = np.ones(seeds)
        if h2 == anisotropic_checks.BANDWIDTHS[-1]:
            if variance_error is not None:
                relative[:, 7, 1] = variance_error
            if slopes is not None:
                slope = np.asarray(slopes)
        gaps = np.zeros((seeds, len(depths), 2))
        gaps[:, :, 0] = slope[:, None] * excess
        gaps[:, :, 1] = 1e-4
        measured[h2] = {"depths": depths, "seeds": list(range(seeds)), "variances": variances * (1 + relative),
                        "gaps": gaps}
    return measured


def _argmins_at(monkeypatch, offsets: dict):
    """measured_argmin replaced: per h2 (in the order decide reads them), the best depth plus ``offsets[h2]``."""
    queue = []
    for h2 in anisotropic_checks.BANDWIDTHS:
        best, _ = depth_noise.anisotropic_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, h2)
        queue.extend(best + np.asarray(offsets.get(h2, np.zeros(5))))
    monkeypatch.setattr(anisotropic_checks, "measured_argmin", lambda depths, curve: queue.pop(0))


def _check(decided, name):
    return all(row["checks"][name] for row in decided["rows"])


def test_the_variances_must_lie_within_5_percent_at_every_depth_and_direction_as_its_criterion_says(monkeypatch, memoised_theory):
    """(i) One depth and direction at h2 = 1/4 with a 95% t-interval of relative error [0.01, 0.0499] passes,
    [0.01, 0.0501] or [-0.0501, -0.01] fails (their 90% intervals lie inside +-5%)."""
    assert "(i) at every depth and direction the 95% t-interval over seeds of the measured variance / " \
        "anisotropic.variances_at_depth - 1 lies within +-5%" in anisotropic_checks.CRITERION
    for low, high, passes in ((0.01, 0.0499, True), (-0.0499, -0.01, True), (0.01, 0.0501, False), (-0.0501, -0.01, False)):
        with monkeypatch.context() as m:
            _argmins_at(m, {})
            decided = anisotropic_checks.decide(_controlled(variance_error=_with_interval(low, high, 5)))
        assert _check(decided, "variances within 5%") is passes and decided["passed"] is passes, (low, high)
        assert decided["rows"][-1]["worst"] == pytest.approx(max(abs(low), abs(high)), rel=1e-9)


def test_the_excess_slope_must_lie_within_0_9_to_1_1_as_its_criterion_says(monkeypatch, memoised_theory):
    """(ii) Per-seed least-squares slopes (with intercept) of the measured excess on theory's with 95% t-interval
    [0.9001, 1.0999] pass, [0.8999, 1.0] or [1.0, 1.1001] fail (at h2 = 1/4; h2 = 1/2 exact)."""
    assert "(ii) the 95% t-interval over seeds of the least-squares slope (with intercept) of the measured excess on " \
        "anisotropic.excess_at_depth over the depths lies within [0.9, 1.1]" in anisotropic_checks.CRITERION
    for low, high, passes in ((0.9001, 1.0999, True), (0.8999, 1.0, False), (1.0, 1.1001, False)):
        with monkeypatch.context() as m:
            _argmins_at(m, {})
            decided = anisotropic_checks.decide(_controlled(slopes=_with_interval(low, high, 5)))
        row = decided["rows"][-1]
        assert (row["slope"].low, row["slope"].high) == pytest.approx((low, high), rel=1e-9)
        assert row["floor"].estimate == pytest.approx(1e-4, rel=1e-6)  # the intercept: the other direction's floor
        assert _check(decided, "excess slope within [0.9, 1.1]") is passes and decided["passed"] is passes, (low, high)


def test_the_best_depth_must_lie_within_0_03_of_anisotropic_depth_as_its_criterion_says(monkeypatch, memoised_theory):
    """(iii) Measured minimisers minus anisotropic_depth with 95% t-interval [-0.0299, 0.0299] pass, [0, 0.0301] or
    [-0.0301, 0] fail (at h2 = 1/4 only: 'for every h2')."""
    assert "minus depth_noise.anisotropic_depth lies within +-0.03" in anisotropic_checks.CRITERION
    last = anisotropic_checks.BANDWIDTHS[-1]
    for low, high, passes in ((-0.0299, 0.0299, True), (0.0, 0.0301, False), (-0.0301, 0.0, False)):
        with monkeypatch.context() as m:
            _argmins_at(m, {last: _with_interval(low, high, 5)})
            decided = anisotropic_checks.decide(_controlled())
        assert _check(decided, "best depth within 0.03") is passes and decided["passed"] is passes, (low, high)


def test_the_best_depth_must_lie_strictly_between_the_horizons_as_its_criterion_says(monkeypatch, memoised_theory):
    """(iv) An interval of the measured depth whose lower end equals the smallest T_G fails ('strictly'); with that
    horizon 1e-9 lower it passes. The horizons are moved (depth_noise.gaussian_horizon, read at call time), the best
    depth kept."""
    assert "(iv) that interval of the measured depth lies strictly between the smallest and the largest T_G" in \
        anisotropic_checks.CRITERION
    measured = _controlled()
    h2 = anisotropic_checks.BANDWIDTHS[-1]
    best = {b: depth_noise.anisotropic_depth(anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2, b)
            for b in anisotropic_checks.BANDWIDTHS}
    offsets = _with_interval(-0.01, 0.01, 5)
    low = anisotropic_checks.stats.mean_interval(best[h2][0] + offsets).low
    real = depth_noise.gaussian_horizon
    for margin, passes in ((0.0, False), (1e-9, True)):
        def horizon(sigma2, tau2, bandwidth, margin=margin):
            if bandwidth == h2 and tau2 == max(anisotropic_checks.TAU2S):  # the smaller horizon
                return low - margin
            return real(sigma2, tau2, bandwidth)
        with monkeypatch.context() as m:
            _argmins_at(m, {h2: offsets})
            m.setattr(depth_noise, "anisotropic_depth", lambda tau2s, sigma2, bandwidth: best[bandwidth])
            m.setattr(depth_noise, "gaussian_horizon", horizon)
            decided = anisotropic_checks.decide(measured)
        assert decided["rows"][-1]["horizons"][0] == low - margin
        assert _check(decided, "best depth strictly between the horizons") is passes and decided["passed"] is passes


@pytest.mark.parametrize("quantity", ["best depth", "excess at the best depth", "variances", "excess T="])
def test_the_evaluators_must_agree_within_1e_6_relative_as_its_criterion_says(quantity, monkeypatch, memoised_theory, tmp_path):
    """A numeric route equal to the evaluators except one quantity, scaled by 1 + 0.9e-6 (passes) or 1 + 1.1e-6
    (fails): 'agree with it within 1e-06 relative', for the best depth, its excess, the variances and the excess."""
    assert "agree with it within 1e-06 relative" in registered(anisotropic_checks.anisotropic_evaluators).criterion

    def route(factor):
        def scale(name, value):
            return value / factor if quantity == name else value
        cases = []
        for tau2s, sigma2, h2 in anisotropic_checks.EVALUATOR_CASES:
            best, excess = depth_noise.anisotropic_depth(tau2s, sigma2, h2)
            horizons = [depth_noise.gaussian_horizon(sigma2, tau2, h2) for tau2 in tau2s]
            depths = np.linspace(0.0, max(horizons) + 0.5, 5)
            cases.append({"case": (tau2s, sigma2, h2), "best": scale("best depth", best),
                          "best_excess": scale("excess at the best depth", excess), "depths": depths,
                          "variances": [[scale("variances", v) for v in anisotropic.variances_at_depth(tau2s, sigma2, h2, float(t))]
                                        for t in depths],
                          "excess": [scale("excess T=", anisotropic.excess_at_depth(tau2s, sigma2, h2, float(t)))
                                     for t in depths]})
        return cases

    ctx = Context(quick=True, out=tmp_path)
    for delta, passes in ((0.9e-6, True), (1.1e-6, False)):
        with monkeypatch.context() as m:
            m.setattr(anisotropic_checks, "numeric_route", lambda ctx, r=route(1 + delta): r)
            evidence = anisotropic_checks.anisotropic_evaluators(ctx)
        worst = max(v for k, v in evidence.data["residuals"].items() if k.startswith(quantity))
        assert worst == pytest.approx(delta, rel=1e-3) and evidence.passed is passes, (delta, evidence.summary)


def test_the_numeric_route_minimises_over_the_horizons_at_five_depths_as_its_criterion_says(monkeypatch, tmp_path):
    """The route: bounded scalar minimisation over [min T_G, max T_G], and 5 depths from 0 to max T_G + 0.5 (the
    variance paths replaced by the evaluator's, so that no ODE is integrated here)."""
    text = registered(anisotropic_checks.anisotropic_evaluators).criterion
    assert "minimised over [min T_G, max T_G] by bounded scalar minimisation" in text
    assert "at 5 depths from 0 to max T_G + 0.5" in text
    assert f"at (tau2s, sigma2, h2) in {anisotropic_checks.EVALUATOR_CASES}" in text
    monkeypatch.setattr(anisotropic_checks, "_numeric_variance", lambda tau2, sigma2, h2, until: (
        lambda depth: anisotropic.variances_at_depth([tau2], sigma2, h2, float(depth))[0]))
    real, bounds = anisotropic_checks.optimize.minimize_scalar, []
    monkeypatch.setattr(anisotropic_checks.optimize, "minimize_scalar",
                        lambda f, **kw: bounds.append((kw["bounds"], kw["method"])) or real(f, **kw))
    monkeypatch.setattr(anisotropic_checks, "EVALUATOR_CASES", anisotropic_checks.EVALUATOR_CASES[:1])
    [case] = anisotropic_checks.numeric_route(Context(quick=True, out=tmp_path))
    tau2s, sigma2, h2 = case["case"]
    horizons = [depth_noise.gaussian_horizon(sigma2, tau2, h2) for tau2 in tau2s]
    assert bounds == [((min(horizons), max(horizons)), "bounded")]
    assert np.array_equal(case["depths"], np.linspace(0.0, max(horizons) + 0.5, 5))
    assert case["best"] == pytest.approx(depth_noise.anisotropic_depth(tau2s, sigma2, h2)[0], rel=1e-6)


def test_the_measured_minimum_is_the_five_point_vertex_whatever_the_curvature_as_its_criterion_says():
    """(iii)'s minimiser: the parabola through the lowest grid point and two on either side (points farther off do
    not count), clipped to the grid at its ends, its vertex taken even where it is a maximum."""
    assert "(vertex of the parabola fitted to the lowest grid point and two on either side, the five-point window " \
        "clipped to the grid at its ends, the vertex taken whatever the sign of the curvature)" in anisotropic_checks.CRITERION
    depths = np.linspace(1.0, 2.0, 11)
    curve = (depths - 1.437) ** 2
    far = np.abs(np.arange(11) - 4) > 2  # the lowest point is depths[4] = 1.4
    assert anisotropic_checks.measured_argmin(depths, np.where(far, curve + 0.3, curve)) == pytest.approx(1.437, abs=1e-12)
    # concave: the lowest point is the last, the window the last five points, the vertex (a maximum) at 1.437
    assert anisotropic_checks.measured_argmin(depths, -curve) == pytest.approx(1.437, abs=1e-12)


def test_the_particle_design_is_as_its_criterion_says():
    """Prior N(0, diag(0.25, 2)), sigma2 = 1, h2 = 1/2 and 1/4 (quick: 1/2), N = 65536 (quick 16384), M = 32768
    (quick 16384), 5 seeds (quick 4), 11 depths from min T_G - 0.1 span to max T_G + 0.1 span, DOP853 rtol 1e-5,
    binned sums to 1e-6."""
    text = anisotropic_checks.CRITERION
    for phrase in ("Prior N(0, diag(0.25, 2)) in d = 2, sigma2 = 1, Stage-1 bandwidths h2 = 1/2 and 1/4 (quick: 1/2)",
                   "N tokens (65536; quick 16384)", "(DOP853 rtol 1e-5, binned sums to 1e-6)", "recorded at 11 depths from "
                   "min T_G - 0.1 span to max T_G + 0.1 span", "queries (32768; quick 16384)", "5 seeds (quick 4)"):
        assert phrase in text, phrase
    assert (anisotropic_checks.TAU2S, anisotropic_checks.SIGMA2) == ((0.25, 2.0), 1.0)
    assert anisotropic_checks.anisotropic_design(True) == {"n": 16384, "queries": 16384, "seeds": 4, "bandwidths": (0.5,)}
    assert anisotropic_checks.anisotropic_design(False) == {"n": 65536, "queries": 32768, "seeds": 5, "bandwidths": (0.5, 0.25)}
    assert (anisotropic_checks.ODE_RTOL, anisotropic_checks.KERNEL_TOL) == (1e-5, 1e-6)
    for h2 in anisotropic_checks.BANDWIDTHS:
        horizons = [depth_noise.gaussian_horizon(1.0, tau2, h2) for tau2 in (0.25, 2.0)]
        span = max(horizons) - min(horizons)
        assert np.allclose(anisotropic_checks.depth_grid(h2), np.linspace(min(horizons) - 0.1 * span,
                                                                          max(horizons) + 0.1 * span, 11), rtol=0, atol=1e-14)
