"""The estimator interface shared by every denoiser: ``fit``, ``denoise``, ``fit_denoise``.

Conventions follow scikit-learn: ``__init__`` stores its arguments and nothing else;
``fit`` validates them, computes, stores learned state in attributes ending in ``_``
and returns ``self``; calling ``denoise`` before ``fit`` raises
:class:`~attneb.numerics.validation.NotFittedError`.
"""

from __future__ import annotations

import inspect
from contextlib import AbstractContextManager
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from .validation import check_array, check_fitted

__all__ = ["Denoiser", "single_blas_thread"]


@cache
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()


def single_blas_thread() -> AbstractContextManager:
    """Context limiting BLAS to one thread (about 10 microseconds to enter).

    The kernel sums and the NPMLE multiply matrices with a small inner dimension, where a
    threaded BLAS spends more time starting threads than multiplying (1.4x to 3x slower with
    two threads on a 2-core machine).
    """
    return _blas_controller().limit(limits=1, user_api="blas")


class Denoiser:
    """Base class: validation of the batch and of queries, ``fit_denoise``, parameters, repr."""

    def get_params(self) -> dict:
        """The constructor's arguments, by name."""
        names = inspect.signature(type(self).__init__).parameters
        return {name: getattr(self, name) for name in names if name != "self"}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, noisy) -> "Denoiser":
        """Learn from a noisy batch ``noisy`` of shape ``(N, d)``; returns ``self``."""
        noisy = check_array(noisy, "noisy")
        self._fit(noisy)
        self.n_features_in_ = noisy.shape[1]
        return self

    def denoise(self, queries) -> np.ndarray:
        """Estimate :math:`E[x \\mid \\tilde x]` at each noisy query (rows of ``queries``)."""
        check_fitted(self, "n_features_in_")
        queries = check_array(queries, "queries")
        if queries.shape[1] != self.n_features_in_:
            raise ValueError(
                f"queries has d == {queries.shape[1]} coordinates per point but {type(self).__name__} "
                f"was fitted on d == {self.n_features_in_}"
            )
        return self._denoise(queries)

    def fit_denoise(self, noisy) -> np.ndarray:
        """Fit on the noisy batch and denoise the batch itself."""
        return self.fit(noisy).denoise(noisy)

    def _fit(self, noisy: np.ndarray) -> None:
        raise NotImplementedError

    def _denoise(self, queries: np.ndarray) -> np.ndarray:
        raise NotImplementedError
