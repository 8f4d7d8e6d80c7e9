r"""Gaussian-kernel sums: the computation inside one attention step.

For queries :math:`q_m` and keys :math:`k_j` (:math:`j = 1..N`) in :math:`\mathbb{R}^d`
and bandwidth :math:`h_2 > 0`, write the logits
:math:`\ell_{mj} = -\lVert q_m - k_j\rVert^2 / (2 h_2)`. Then

* ``kernel_mean``: :math:`a(q_m) = \sum_j \mathrm{softmax}_j(\ell_{mj})\, k_j`
  (Nadaraya-Watson mean; the posterior mean of :math:`x` given :math:`q \sim N(x, h_2 I)`
  under the empirical prior on the keys),
* ``log_kde``: :math:`\log \frac1N \sum_j \varphi_{h_2}(q_m - k_j)`,
* ``kde_score``: :math:`\nabla_q \log \mathrm{KDE}(q_m) = (a(q_m) - q_m)/h_2`.

Every sum runs as a streaming log-sum-exp over blocks of rows and columns
(Flash-attention style running maximum), so the temporaries never exceed
``budget_bytes`` whatever ``M x N`` is, and no exponential overflows or
underflows to a ``0/0``: the results stay finite for bandwidths from 1e-8 to
1e8 times the data scale. Squared distances go through a matrix product with
clipping at zero, after centring queries and keys on the key mean (the sums are
translation invariant, and centring keeps the cancellation error relative to the
spread of the data rather than its distance from the origin).

The block loop runs with BLAS limited to one thread
(:func:`numerics.base.single_blas_thread`): its matrix products have an inner
dimension of only ``d``.
"""

from __future__ import annotations

import numpy as np

from .base import single_blas_thread
from .validation import check_array, check_positive, check_positive_int, check_same_dim

__all__ = ["DEFAULT_BUDGET_BYTES", "kernel_mean", "log_kde", "kde_score", "kernel_logsumexp"]

DEFAULT_BUDGET_BYTES = 256 * 2**20
#: float64 temporaries of one block: squared distances and their exponentials.
_TEMPORARIES_PER_ENTRY = 2 * 8


def _block_sizes(m: int, n: int, budget_bytes: int) -> tuple[int, int]:
    """Row and column block sizes whose ``rows x cols`` temporaries fit the budget."""
    entries = max(1, budget_bytes // _TEMPORARIES_PER_ENTRY)
    cols = min(n, entries)
    rows = max(1, min(m, entries // cols))
    return rows, cols


def _streaming_kernel_sums(queries, keys, h2, budget_bytes, *, want_mean):
    with single_blas_thread():
        return _streaming_kernel_sums_single_thread(queries, keys, h2, budget_bytes, want_mean=want_mean)


def _streaming_kernel_sums_single_thread(queries, keys, h2, budget_bytes, *, want_mean):
    """Return ``(lse, mean)`` for validated, centred inputs.

    ``lse[m] = logsumexp_j(-||q_m - k_j||^2 / (2 h2))`` and, if ``want_mean``,
    ``mean[m] = sum_j softmax_j(...) k_j`` (else ``None``).
    """
    m, d = queries.shape
    n = keys.shape[0]
    rows, cols = _block_sizes(m, n, budget_bytes)
    lse = np.empty(m)
    mean = np.empty((m, d)) if want_mean else None
    key_sq = np.einsum("ij,ij->i", keys, keys)
    scale = -0.5 / h2
    for r0 in range(0, m, rows):
        q = queries[r0 : r0 + rows]
        q_sq = np.einsum("ij,ij->i", q, q)[:, None]
        run_max = np.full(q.shape[0], -np.inf)
        run_sum = np.zeros(q.shape[0])
        run_vec = np.zeros((q.shape[0], d)) if want_mean else None
        for c0 in range(0, n, cols):
            k = keys[c0 : c0 + cols]
            logits = q @ k.T
            logits *= -2.0
            logits += q_sq
            logits += key_sq[c0 : c0 + cols]
            np.maximum(logits, 0.0, out=logits)
            logits *= scale
            block_max = logits.max(axis=1)
            new_max = np.maximum(run_max, block_max)
            rescale = np.exp(run_max - new_max)
            logits -= new_max[:, None]
            np.exp(logits, out=logits)
            run_sum = run_sum * rescale + logits.sum(axis=1)
            if want_mean:
                run_vec = run_vec * rescale[:, None] + logits @ k
            run_max = new_max
            del logits
        lse[r0 : r0 + rows] = run_max + np.log(run_sum)
        if want_mean:
            mean[r0 : r0 + rows] = run_vec / run_sum[:, None]
    return lse, mean


def _prepare(queries, keys, h2, budget_bytes):
    queries = check_array(queries, "queries")
    keys = check_array(keys, "keys")
    check_same_dim(queries, "queries", keys, "keys")
    h2 = check_positive(h2, "h2")
    budget_bytes = check_positive_int(budget_bytes, "budget_bytes")
    centre = keys.mean(axis=0)
    return queries - centre, keys - centre, centre, h2, budget_bytes


def kernel_logsumexp(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Log of the unnormalised kernel sum, :math:`\log \sum_j e^{-\lVert q_m - k_j\rVert^2/(2 h_2)}`.

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M,)
    """
    q, k, _, h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    return _streaming_kernel_sums(q, k, h2, budget_bytes, want_mean=False)[0]


def kernel_mean(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Gaussian-kernel (Nadaraya-Watson) mean of the keys seen from each query.

    .. math:: a(q_m) = \sum_{j=1}^N \frac{e^{-\lVert q_m - k_j\rVert^2/(2h_2)}}
              {\sum_{i} e^{-\lVert q_m - k_i\rVert^2/(2h_2)}}\, k_j

    As ``h2 -> 0`` it tends to the nearest key; as ``h2 -> inf`` to the plain mean of the keys.

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        Keys, which are also the values.
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M, d)
    """
    q, k, centre, h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    mean = _streaming_kernel_sums(q, k, h2, budget_bytes, want_mean=True)[1]
    return mean + centre


def log_kde(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Log of the Gaussian kernel density estimate at each query.

    .. math:: \log \frac1N \sum_{j=1}^N (2\pi h_2)^{-d/2} e^{-\lVert q_m - k_j\rVert^2/(2h_2)}

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M,)
    """
    q, k, _, h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    lse = _streaming_kernel_sums(q, k, h2, budget_bytes, want_mean=False)[0]
    n, d = k.shape
    return lse - np.log(n) - 0.5 * d * np.log(2.0 * np.pi * h2)


def kde_score(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Gradient of the log kernel density estimate (Tweedie's identity for the empirical prior).

    .. math:: \nabla_q \log \mathrm{KDE}(q_m) = \frac{a(q_m) - q_m}{h_2}

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M, d)
    """
    q, k, _, h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    mean = _streaming_kernel_sums(q, k, h2, budget_bytes, want_mean=True)[1]
    return (mean - q) / h2
