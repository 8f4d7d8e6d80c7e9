"""C3 (Euler layers converge to the depth ODE, first order): the check decides on the numbers its criterion states.

The flow, the reference ODE and the transformer are replaced by stand-ins whose errors are ``C (T/L)^p`` exactly,
so that the fitted order is ``p`` and the decision is seen at the edges of its band.
"""

from __future__ import annotations

import numpy as np
import pytest

from attneb.numerics import flow, transformer
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.topics import depth_ode


def registered():
    [chk] = [c for c in CLAIMS["C3"].checks if c.func is depth_ode.euler_order_check]
    return chk


def _stand_ins(monkeypatch, order: float, identity_error: float = 0.0) -> list:
    """Reference = the initial tokens; L layers of nominal step eta miss it by 0.3 (T/L)^order (L = round(T/eta));
    the transformer's Stage 1 is the stand-in flow at eta = 0.2 moved by ``identity_error``. Returns the etas asked for."""
    asked = []

    def layers_of(T, eta):
        return max(1, round(T / eta))

    def particle_flow(x0, h2, T, eta=0.05, **kwargs):
        asked.append(eta)
        return x0 + 0.3 * (T / layers_of(T, eta)) ** order

    class Network:
        def __init__(self, h2, sigma2, n_layers, eta):
            assert (h2, n_layers) == (depth_ode.C3_H2, 6) and eta == pytest.approx(depth_ode.C3_T / 6, rel=1e-15)

        def stage_one(self, x0):
            out = x0 + 0.3 * (depth_ode.C3_T / 6) ** order
            out.flat[0] += identity_error
            return out

    monkeypatch.setattr(depth_ode, "reference_flow", lambda x0, h2, T: np.array(x0, copy=True))
    monkeypatch.setattr(flow, "particle_flow", particle_flow)
    monkeypatch.setattr(transformer, "TwoStageTransformer", Network)
    return asked


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_the_fitted_order_must_lie_within_0_1_of_one_as_its_criterion_says(quick, monkeypatch, tmp_path):
    """Orders 0.905 and 1.095 pass, 0.895 and 1.105 fail: '+-0.1 of the order C3 asserts (1)'; the steps are
    T/round(T/eta) for eta = 0.2 .. 0.025 (quick) and to 0.00625 (full), T = 1.3, h2 = 0.2."""
    chk = registered()
    assert "depth T = 1.3 (h2 = 0.2)" in chk.criterion and "within +-0.1 of the order C3 asserts (1)" in chk.criterion
    assert "eta = 0.2 .. 0.025, to 0.00625 in full mode" in chk.criterion
    assert depth_ode.euler_order() == 1 and (depth_ode.C3_T, depth_ode.C3_H2) == (1.3, 0.2)
    ctx = Context(quick=quick, out=tmp_path)
    for order, passes in ((0.905, True), (1.095, True), (0.895, False), (1.105, False)):
        with monkeypatch.context() as m:
            asked = _stand_ins(m, order)
            evidence = chk.func(ctx)
        assert evidence.passed is passes, (order, evidence.summary)
        assert evidence.data["slope"] == pytest.approx(order, abs=1e-9)
    etas = [0.2, 0.1, 0.05, 0.025] + ([] if quick else [0.0125, 0.00625])
    assert asked == etas + [0.2]  # the fit's steps, then the identity at the largest step
    assert evidence.data["steps"] == pytest.approx([1.3 / max(1, round(1.3 / eta)) for eta in etas], rel=1e-15)


def test_the_identity_with_the_transformer_is_decided_at_1e_10_as_its_criterion_says(monkeypatch, tmp_path):
    """At the largest step (eta = 0.2, L = 6) particle_flow and the transformer's 6 layers: a difference of 0.9e-10
    passes, of 1.1e-10 fails (the fitted order being exactly 1)."""
    assert "(eta = 0.2, L = 6) particle_flow's L layers equal the transformer's L layers of step T/L to 1e-10" in \
        registered().criterion
    ctx = Context(quick=True, out=tmp_path)
    for error, passes in ((0.9e-10, True), (1.1e-10, False)):
        with monkeypatch.context() as m:
            _stand_ins(m, 1.0, error)
            evidence = depth_ode.euler_order_check(ctx)
        assert evidence.passed is passes, (error, evidence.summary)
