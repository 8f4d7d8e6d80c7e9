"""C7: Stage 2 is the empirical-Bayes posterior mean over the refined tokens.

The bandwidth the theory asserts for Stage 2 is read through :func:`stage_two_bandwidth` at call
time, so that a wrong theory (the Stage-1 bandwidth, twice ``sigma2``) can be swapped in.
"""

from __future__ import annotations

import numpy as np

from attneb.numerics import estimators, kernels, priors, transformer
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.topics.attention import IDENTITY_TOL, identity_evidence
from attneb.theory import depth_noise


def stage_two_bandwidth(sigma2: float, h2: float) -> float:
    """The bandwidth C7 gives the Stage-2 head: the noise variance ``sigma2`` (``h2`` is Stage 1's)."""
    return sigma2


def _stage_two_with_stage_one_bandwidth(real):
    return lambda sigma2, h2: h2


def _denoise_at_double_bandwidth(real):
    return lambda self, q: kernels.kernel_mean(q, self.particles_, 2 * self.sigma2)


#: C7's problem: sigma2, h2, 2 h2, sigma2 + h2 and T* = 1.75 all differ, and no bandwidth is 1.
C7_SIGMA2, C7_H2, C7_ETA = 0.7, 0.2, 0.1


@check(
    "C7", "Stage 2 = posterior mean under the refined empirical prior",
    criterion=f"with sigma2 = {C7_SIGMA2}, h2 = {C7_H2}, eta = {C7_ETA}: the denoiser's horizon equals T* = sigma2/(2 h2) "
    "of theory.depth_noise, and |TwoStageDenoiser.denoise - Discrete(refined tokens).posterior_mean at "
    f"bandwidth sigma2|, |TwoStageDenoiser.denoise - TwoStageTransformer(L = round(T*/eta) layers)| and, for L = 0, "
    f"|StageTwoOnly.denoise - Discrete(noisy tokens).posterior_mean at sigma2| are <= {IDENTITY_TOL:g} (the horizon's "
    "difference from T* too)",
    alternatives=[
        alternative("Stage-2 bandwidth 2 sigma2", "the posterior mean taken at noise 2 sigma2",
                    swap(f"{__name__}:stage_two_bandwidth", lambda real: (lambda s2, h2: 2 * s2))),
        alternative("Stage-2 bandwidth h2 (Stage 1's)", "the posterior mean taken at the Stage-1 bandwidth",
                    swap(f"{__name__}:stage_two_bandwidth", _stage_two_with_stage_one_bandwidth)),
        alternative("Stage-2 bandwidth 2 h2", "the posterior mean taken at 2 h2",
                    swap(f"{__name__}:stage_two_bandwidth", lambda real: (lambda s2, h2: 2 * h2))),
        alternative("Stage-2 bandwidth sigma2 + h2", "the posterior mean taken at sigma2 + h2",
                    swap(f"{__name__}:stage_two_bandwidth", lambda real: (lambda s2, h2: s2 + h2))),
        alternative("denoiser's Stage 2 at 2 sigma2", "TwoStageDenoiser attends with bandwidth 2 sigma2",
                    swap("attneb.numerics.estimators:TwoStageDenoiser._denoise", _denoise_at_double_bandwidth),
                    kind="implementation"),
        alternative("denoiser's horizon sigma2 / h2", "the denoiser's default depth is 2 T*",
                    swap("attneb.numerics.flow:leading_horizon", lambda real: (lambda s2, h2: s2 / h2)),
                    kind="implementation"),
    ],
    covers=("attneb.numerics.estimators:TwoStageDenoiser.denoise", "attneb.numerics.transformer:TwoStageTransformer.__call__",
            "attneb.numerics.flow:leading_horizon", "attneb.numerics.estimators:StageTwoOnly.denoise"),
)
def stage_two_is_empirical_bayes(ctx: Context) -> Evidence:
    rng = np.random.default_rng(7)
    prior = priors.GaussianMixture(np.array([[-2.0, 0.0], [2.0, 1.0]]), var=0.25)
    sigma2, h2, eta = C7_SIGMA2, C7_H2, C7_ETA
    noisy = prior.sample(60, rng) + np.sqrt(sigma2) * rng.standard_normal((60, 2))
    queries = noisy[:20] + 0.3 * rng.standard_normal((20, 2))
    model = estimators.TwoStageDenoiser(sigma2, h2, eta=eta).fit(noisy)
    ours = model.denoise(queries)
    post = priors.Discrete(model.particles_).posterior_mean(queries, stage_two_bandwidth(sigma2, h2))
    T = depth_noise.leading_horizon(sigma2, h2)
    layers = max(1, round(T / eta))
    net = transformer.TwoStageTransformer(h2, sigma2, layers, T / layers)
    alone = estimators.StageTwoOnly(sigma2).fit(noisy).denoise(queries)
    residuals = {
        "horizon": abs(model.T_ - T),
        "denoise-posterior": float(np.abs(ours - post).max()),
        "denoise-transformer": float(np.abs(ours - net(noisy, queries)).max()),
        "L=0 vs noisy-prior posterior": float(np.abs(
            alone - priors.Discrete(noisy).posterior_mean(queries, stage_two_bandwidth(sigma2, h2))).max()),
    }
    return identity_evidence(residuals, IDENTITY_TOL, f"horizon vs T*, Stage 2 vs Discrete(particles).posterior_mean and the "
                     f"{layers}-layer transformer, Stage 2 alone vs Discrete(noisy tokens).posterior_mean")
