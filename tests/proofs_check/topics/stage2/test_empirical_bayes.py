"""C7 (Stage 2 = empirical-Bayes posterior mean): the check decides on the numbers its criterion states."""

from __future__ import annotations

import numpy as np
import pytest

from attneb.numerics import estimators, flow, transformer
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.topics.stage2 import empirical_bayes


def registered():
    [chk] = [c for c in CLAIMS["C7"].checks if c.func is empirical_bayes.stage_two_is_empirical_bayes]
    return chk


def _off_by(delta: float):
    """An output with one entry moved by ``delta``: its largest difference from the true one is ``delta``."""
    def moved(out):
        out = np.array(out, dtype=float, copy=True)
        out.flat[0] += delta
        return out
    return moved


def _error_in(where: str, delta: float, monkeypatch):
    """``delta`` put into one of the four quantities the check compares (each read by one residual, or two)."""
    move = _off_by(delta)
    if where == "horizon":
        class Denoiser(estimators.TwoStageDenoiser):
            def fit(self, noisy):
                super().fit(noisy)
                self.T_ = self.T_ + delta
                return self
        monkeypatch.setattr(estimators, "TwoStageDenoiser", Denoiser)
    elif where == "two-stage denoiser":  # read by the posterior-mean and the transformer residuals
        class Denoiser(estimators.TwoStageDenoiser):
            def denoise(self, queries):
                return move(super().denoise(queries))
        monkeypatch.setattr(estimators, "TwoStageDenoiser", Denoiser)
    elif where == "transformer":
        class Network(transformer.TwoStageTransformer):
            def __call__(self, *args, **kwargs):
                return move(super().__call__(*args, **kwargs))
        monkeypatch.setattr(transformer, "TwoStageTransformer", Network)
    else:  # "Stage 2 alone (L = 0)"
        class Alone(estimators.StageTwoOnly):
            def denoise(self, queries):
                return move(super().denoise(queries))
        monkeypatch.setattr(estimators, "StageTwoOnly", Alone)


@pytest.mark.parametrize("where", ["horizon", "two-stage denoiser", "transformer", "Stage 2 alone (L = 0)"])
def test_each_identity_is_decided_at_1e_10_as_its_criterion_says(where, monkeypatch, tmp_path):
    """An error of 0.9e-10 in any one compared quantity passes, of 1.1e-10 fails: '<= 1e-10' for each of the
    horizon, the denoiser against the posterior mean and the transformer, and Stage 2 alone."""
    chk = registered()
    assert "with sigma2 = 0.7, h2 = 0.2, eta = 0.1:" in chk.criterion and "are <= 1e-10" in chk.criterion
    assert (empirical_bayes.C7_SIGMA2, empirical_bayes.C7_H2, empirical_bayes.C7_ETA) == (0.7, 0.2, 0.1)
    ctx = Context(quick=True, out=tmp_path)
    assert chk.func(ctx).passed
    with monkeypatch.context() as inside:
        _error_in(where, 0.9e-10, inside)
        evidence = chk.func(ctx)
        assert evidence.passed, evidence.summary
    with monkeypatch.context() as outside:
        _error_in(where, 1.1e-10, outside)
        evidence = chk.func(ctx)
        assert not evidence.passed, evidence.summary


def test_the_transformer_has_the_denoisers_round_t_star_over_eta_layers_as_its_criterion_says(monkeypatch, tmp_path):
    """L = round(T*/eta) in floating point: T* = 0.7 / (2 x 0.2) is 1.7499999999999998, so T*/eta sits just below
    the tie 17.5 and L = 17 (not 18), the layer count of the denoiser's own flow (flow.n_layers), of step T*/L."""
    built = []

    class Network(transformer.TwoStageTransformer):
        def __init__(self, h2, sigma2, n_layers, eta, *args, **kwargs):
            built.append((h2, sigma2, n_layers, eta))
            super().__init__(h2, sigma2, n_layers, eta, *args, **kwargs)

    monkeypatch.setattr(transformer, "TwoStageTransformer", Network)
    evidence = registered().func(Context(quick=True, out=tmp_path))
    assert evidence.passed and evidence.data["residuals"]["horizon"] <= 1e-10
    [(h2, sigma2, n_layers, eta)] = built
    t_star = empirical_bayes.depth_noise.leading_horizon(0.7, 0.2)
    assert t_star == pytest.approx(1.75, rel=1e-15) and n_layers == round(t_star / 0.1) == flow.n_layers(t_star, 0.1) == 17
    assert (h2, sigma2) == (0.2, 0.7) and eta == t_star / n_layers
    assert "L = round(T*/eta) layers" in registered().criterion
