r"""Risk of denoisers on simulated batches.

A batch is ``N`` clean tokens :math:`x_i \sim \rho_0` (the prior) and their noisy copies
:math:`\tilde x_i = x_i + \sigma z_i`. Each estimator is fitted on the noisy batch and
denoises the batch itself. Per-coordinate risks:

* MSE :math:`\frac{1}{Nd}\sum_i \lVert \hat x_i - x_i\rVert^2`,
* gap to Bayes :math:`\frac{1}{Nd}\sum_i \lVert \hat x_i - E[x\mid\tilde x_i]\rVert^2`.

Everything is reproducible from the seed: the batch of seed ``s`` is drawn from
``numpy.random.default_rng(s)`` and is the same for every estimator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .base import Denoiser
from .validation import check_positive, check_positive_int

__all__ = ["RiskRecord", "draw_batch", "risk_records"]


@dataclass(frozen=True)
class RiskRecord:
    """Risk of one estimator on one seeded batch."""

    estimator: str
    seed: int
    n: int
    sigma2: float
    mse: float
    gap: float


def draw_batch(prior, sigma2, n, seed) -> tuple[np.ndarray, np.ndarray]:
    """Clean tokens ``(n, d)`` from ``prior`` and their noisy copies, from ``default_rng(seed)``."""
    sigma2 = check_positive(sigma2, "sigma2")
    n = check_positive_int(n, "n")
    rng = np.random.default_rng(seed)
    clean = prior.sample(n, rng)
    noisy = clean + np.sqrt(sigma2) * rng.standard_normal(clean.shape)
    return clean, noisy


def risk_records(
    estimators: Mapping[str, Denoiser], prior, sigma2, n, seeds: Sequence[int]
) -> list[RiskRecord]:
    """MSE and gap to Bayes of every estimator on the batch of every seed.

    Parameters
    ----------
    estimators : mapping of str to Denoiser
        Unfitted estimators by display name; each is fitted on every batch.
    prior : numerics.priors.Prior
        Source of the clean tokens; its ``posterior_mean`` is the Bayes reference.
    sigma2 : float
        Noise variance.
    n : int
        Batch size ``N``.
    seeds : sequence of int
        One batch per seed.
    """
    records = []
    for seed in seeds:
        clean, noisy = draw_batch(prior, sigma2, n, seed)
        bayes = prior.posterior_mean(noisy, sigma2)
        for name, estimator in estimators.items():
            est = estimator.fit_denoise(noisy)
            records.append(
                RiskRecord(
                    estimator=name,
                    seed=int(seed),
                    n=int(n),
                    sigma2=float(sigma2),
                    mse=float(np.mean((est - clean) ** 2)),
                    gap=float(np.mean((est - bayes) ** 2)),
                )
            )
    return records
