"""G2 at eta = 1 (Gaussian blurring mean shift): the check passes, and rejects each wrong theory."""

import pytest

from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.topics.gaussian import blurring


@pytest.fixture(scope="module")
def measured():
    ctx = Context(quick=True, out=None)
    return ctx, [c for c in CLAIMS["G2"].checks if c.func is blurring.blurring_mean_shift][0]


@pytest.mark.slow  # 13 s; the check's pass (and a breakage) also run by default, through verify G2 (test_verify)
def test_particles_follow_the_cubic_map_and_every_wrong_theory_is_rejected(measured, tmp_path, monkeypatch):
    monkeypatch.setattr(blurring, "blurring_design",
                        lambda quick: {"n": 65536, "seeds": 8, "risk_n": 2048, "risk_seeds": 2})
    ctx, chk = measured
    evidence = chk.func(ctx)
    assert evidence.passed, evidence.summary
    assert [c["counts"] for c in evidence.data["cases"]] == [[5], [2], [4]]
    assert "Reported, not decided on" in evidence.summary
    for wrong in chk.wrong_theories():
        with wrong.applied():
            assert not chk.func(ctx).passed, wrong.name


def test_the_ratio_is_the_cubic_map_of_the_standard_deviation():
    for sd, h2 in ((1.7, 0.25), (0.05, 0.5), (3.0, 1e-3)):
        assert blurring.blurring_ratio(sd**2, h2) == pytest.approx((sd**3 / (sd**2 + h2)) ** 2 / sd**2, rel=1e-13)
