"""Trained networks: the trainable network is the paper's (T0), and what training finds (T1-T3, questions).

- T0 (:mod:`.network`): :mod:`attneb.numerics.training`'s network at the construction's parameters
  is the paper's network, and its hand-written backward pass is the gradient of its loss;
- T1-T3 (:mod:`.experiment`, experiment E6): questions with criteria fixed before the runs: does
  trained Stage 2 learn the bandwidth ``sigma2`` (T1), trained Stage 1 the depth-noise relation (T2),
  and is training no worse than the construction (T3)?

Figures: :mod:`.figures` (E6).
"""

from __future__ import annotations

from attneb.proofs_check.engine.registry import claim

claim(
    "T0",
    "the trainable network is the paper's network, with an exact gradient",
    "attneb.numerics.training's network with the construction's parameters (beta_l = 1/h2, eta_l = min(T*/L, 1), value scales 1, "
    "beta_s = 1/sigma2) computes TwoStageTransformer's output, and its hand-written backward pass is the gradient "
    "of its loss (the mean squared error over all tokens).",
)
claim(
    "T1",
    "trained Stage 2 learns the bandwidth sigma2",
    "A minimal transformer trained from a random initialisation (Stage-2 bandwidth a factor 2 to 4 from sigma2) on "
    "all-token-corrupted contexts learns the Stage-2 bandwidth 1/beta_s = sigma2 (two-cluster prior); for a "
    "Gaussian prior, where Stage 2 over tokens of variance s is Bayes on the whole family h = s sigma2/tau2, it "
    "learns a point of that family.",
    ("scalar parametrization", "N = 64 tokens, L = 4 layers, finite training"),
    question=True,
)
claim(
    "T2",
    "trained Stage 1 learns the depth-noise relation",
    "The depth budget 2 sum_l eta_l h2_l of the trained Stage-1 layers grows with sigma2 at the slope of the "
    "depth-noise relation, 2 h2 T* = sigma2 (slope 1).",
    ("two-cluster prior", "scalar parametrization", "N = 64 tokens, L = 4 layers, finite training"),
    question=True,
)
claim(
    "T3",
    "training is no worse than the construction",
    "The trained network's risk is no larger than that of the constructed two-stage network with the same L and N "
    "(h2 = sigma2/4, eta = T*/L, Stage-2 bandwidth sigma2).",
    ("scalar parametrization", "N = 64 tokens, L = 4 layers, finite training"),
    question=True,
)

# the modules that register their checks and studies
from . import experiment, figures, network  # noqa: E402,F401
