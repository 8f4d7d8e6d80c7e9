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
