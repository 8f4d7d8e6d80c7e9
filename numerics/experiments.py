r"""Risk of denoisers on simulated batches, in-sample and on fresh queries.

A batch is ``N`` clean tokens :math:`x_i \sim \rho_0` (the prior) and their noisy copies
:math:`\tilde x_i = x_i + \sigma z_i`. Each estimator is fitted on the noisy batch and denoises

* the batch itself (**in-sample**: each token is also in the context it is denoised with), and
* ``N`` **fresh noisy queries** :math:`\tilde x^*_m = x^*_m + \sigma z^*_m`, new draws from the
  prior that are not in the context (**out-of-sample**: the paper's query, a new noisy token).

Per-coordinate risks, in-sample (and the same over the queries, out-of-sample):

* MSE :math:`\frac{1}{Nd}\sum_i \lVert \hat x_i - x_i\rVert^2`,
* gap to Bayes :math:`\frac{1}{Nd}\sum_i \lVert \hat x_i - E[x\mid\tilde x_i]\rVert^2`.

Everything is reproducible from the seed: the batch of seed ``s`` is drawn from
``numpy.random.default_rng(s)`` and is the same for every estimator; its queries come from an
independent stream, ``numpy.random.default_rng([s, QUERY_STREAM])`` (another
:class:`numpy.random.SeedSequence` entropy: the same as the integer seed ``s + QUERY_STREAM * 2**32``,
far beyond any seed of a batch), so adding the queries changed no batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .base import Denoiser
from .validation import check_positive, check_positive_int

__all__ = ["QUERY_STREAM", "RiskRecord", "draw_batch", "draw_queries", "risk_records"]

#: Second entropy word of the fresh queries' stream: ``default_rng([seed, QUERY_STREAM])``.
QUERY_STREAM = 0x51E7


@dataclass(frozen=True)
class RiskRecord:
    """Risk of one estimator on one seeded batch (in-sample) and on its fresh queries (``oos_``)."""

    estimator: str
    seed: int
    n: int
    sigma2: float
    mse: float
    gap: float
    oos_mse: float
    oos_gap: float


def _draw(prior, sigma2, n, rng) -> tuple[np.ndarray, np.ndarray]:
    clean = prior.sample(n, rng)
    return clean, clean + np.sqrt(sigma2) * rng.standard_normal(clean.shape)


def draw_batch(prior, sigma2, n, seed) -> tuple[np.ndarray, np.ndarray]:
    """Clean tokens ``(n, d)`` from ``prior`` and their noisy copies, from ``default_rng(seed)``."""
    sigma2 = check_positive(sigma2, "sigma2")
    n = check_positive_int(n, "n")
    return _draw(prior, sigma2, n, np.random.default_rng(seed))


def draw_queries(prior, sigma2, n, seed) -> tuple[np.ndarray, np.ndarray]:
    """``n`` fresh clean draws and their noisy copies, from ``default_rng([seed, QUERY_STREAM])``.

    Independent of the batch of the same seed (:func:`draw_batch`): the out-of-sample queries.
    """
    sigma2 = check_positive(sigma2, "sigma2")
    n = check_positive_int(n, "n")
    return _draw(prior, sigma2, n, np.random.default_rng([int(seed), QUERY_STREAM]))


def risk_records(
    estimators: Mapping[str, Denoiser], prior, sigma2, n, seeds: Sequence[int]
) -> list[RiskRecord]:
    """MSE and gap to Bayes of every estimator on the batch of every seed, and on ``n`` fresh queries.

    Parameters
    ----------
    estimators : mapping of str to Denoiser
        Unfitted estimators by display name; each is fitted on every batch.
    prior : numerics.priors.Prior
        Source of the clean tokens; its ``posterior_mean`` is the Bayes reference.
    sigma2 : float
        Noise variance.
    n : int
        Batch size ``N`` (and number of fresh queries).
    seeds : sequence of int
        One batch per seed.
    """
    records = []
    for seed in seeds:
        clean, noisy = draw_batch(prior, sigma2, n, seed)
        bayes = prior.posterior_mean(noisy, sigma2)
        q_clean, q_noisy = draw_queries(prior, sigma2, n, seed)
        q_bayes = prior.posterior_mean(q_noisy, sigma2)
        for name, estimator in estimators.items():
            est = estimator.fit_denoise(noisy)
            oos = estimator.denoise(q_noisy)
            records.append(
                RiskRecord(
                    estimator=name,
                    seed=int(seed),
                    n=int(n),
                    sigma2=float(sigma2),
                    mse=float(np.mean((est - clean) ** 2)),
                    gap=float(np.mean((est - bayes) ** 2)),
                    oos_mse=float(np.mean((oos - q_clean) ** 2)),
                    oos_gap=float(np.mean((oos - q_bayes) ** 2)),
                )
            )
    return records
