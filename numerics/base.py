"""The estimator interface shared by every denoiser: ``fit``, ``denoise``, ``fit_denoise``.

Conventions follow scikit-learn: ``__init__`` stores its arguments and nothing else;
``fit`` validates them, computes, stores learned state in attributes ending in ``_``
and returns ``self``; calling ``denoise`` before ``fit`` raises
:class:`~attneb.numerics.validation.NotFittedError`.

Every denoiser also honours scikit-learn's estimator contract (``get_params(deep)``,
``set_params``, ``fit(X, y=None)``, ``transform``, ``fit_transform``, ``score``,
``__sklearn_tags__``), so that :func:`sklearn.base.clone`, ``Pipeline`` and ``GridSearchCV``
accept it, without this package depending on scikit-learn: ``transform`` and ``fit_transform``
are the scikit-learn names of ``denoise`` and ``fit_denoise``, and only ``__sklearn_tags__``,
which scikit-learn alone calls, imports it.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
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
    """Base class: parameters, validation of the batch and of queries, ``fit_denoise``, repr, score.

    Subclasses define ``__init__`` (storing each keyword argument under its own name),
    ``_fit(X)`` (validated batch; stores attributes ending in ``_``) and ``_denoise(queries)``.
    """

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The names of the constructor's arguments, in order (``*args``/``**kwargs`` are not parameters)."""
        parameters = inspect.signature(cls.__init__).parameters.values()
        return [p.name for p in parameters
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments, by name.

        Parameters
        ----------
        deep : bool
            Also return the parameters of arguments that are estimators themselves (having
            ``get_params``), as ``name__param``, as scikit-learn does. No denoiser of this
            package takes an estimator as argument, so ``deep`` changes nothing for them.
        """
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and _is_estimator(value):
                out.update((f"{name}__{key}", item) for key, item in value.get_params(deep=True).items())
            out[name] = value
        return out

    def set_params(self, **params) -> "Denoiser":
        """Set constructor arguments by name and return ``self`` (the estimator is not refitted).

        A key ``name__param`` sets ``param`` of the argument ``name``, which must be an
        estimator (have ``set_params``). An unknown name raises ``ValueError`` listing the valid ones.
        """
        valid = self._get_param_names()
        nested = defaultdict(dict)
        for key, value in params.items():
            name, delim, sub_key = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}. Valid parameters are: {valid!r}."
                )
            if delim:
                nested[name][sub_key] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            inner = getattr(self, name)
            if not _is_estimator(inner):
                raise ValueError(
                    f"Invalid parameter {name + '__' + next(iter(sub_params))!r} for estimator {type(self).__name__}: "
                    f"{name} == {inner!r} is not an estimator, so it has no parameters to set; "
                    f"set {name!r} itself instead"
                )
            inner.set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"

    def fit(self, X, y=None) -> "Denoiser":
        """Learn from a noisy batch.

        Parameters
        ----------
        X : array_like, shape (N, d)
            The noisy batch: one point per row.
        y : None
            Ignored, present for scikit-learn's API (``Pipeline`` and ``GridSearchCV`` pass
            the clean points here; they are used only by :meth:`score`).

        Returns
        -------
        self
        """
        X = check_array(X, "X")
        self._fit(X)
        self.n_features_in_ = X.shape[1]
        return self

    def denoise(self, queries) -> np.ndarray:
        """Estimate :math:`E[x \\mid \\tilde x]` at each noisy query (rows of ``queries``)."""
        return self._denoise(self._check_queries(queries, "queries"))

    def transform(self, X) -> np.ndarray:
        """scikit-learn's name of :meth:`denoise`: the denoised rows of ``X``, shape ``(M, d)``.

        Validation errors name the argument ``X`` (as scikit-learn's checks require) where
        :meth:`denoise` names ``queries``; the rest is :meth:`denoise`'s.
        """
        return self._denoise(self._check_queries(X, "X"))

    def fit_denoise(self, X) -> np.ndarray:
        """Fit on the noisy batch ``X`` and denoise the batch itself."""
        return self.fit(X).denoise(X)

    def fit_transform(self, X, y=None) -> np.ndarray:
        """scikit-learn's name of :meth:`fit_denoise`; ``y`` is ignored, present for scikit-learn's API."""
        return self.fit_denoise(X)

    def score(self, X, y) -> float:
        r"""Minus the mean squared error per coordinate of the denoised ``X`` against the clean ``y``.

        .. math:: \mathrm{score} = -\frac{1}{M d} \sum_{i=1}^{M} \lVert \hat x(\tilde x_i) - x_i \rVert^2

        with :math:`\tilde x_i` the rows of ``X`` and :math:`x_i` those of ``y``: the MSE per
        coordinate, the normalisation of every MSE the toolkit reports
        (:func:`attneb.numerics.experiments.risk_records`, :meth:`attneb.numerics.priors.Prior.mmse`),
        with the sign flipped so that greater is better, as ``GridSearchCV`` expects. The MSE per
        point, :math:`\frac1M\sum_i\lVert\hat x_i - x_i\rVert^2`, is ``d`` times it.

        Parameters
        ----------
        X : array_like, shape (M, d)
            Noisy queries.
        y : array_like, shape (M, d)
            The clean point of each query, finite.

        Returns
        -------
        float
            A number <= 0; 0 when the denoised ``X`` equals ``y``.
        """
        estimate = self.transform(X)
        y = check_array(y, "y")
        if y.shape != estimate.shape:
            raise ValueError(
                f"y has shape {y.shape} but X has shape {estimate.shape}; y must hold the clean point "
                f"of each row of X, with the same shape"
            )
        return -float(np.mean((estimate - y) ** 2))

    def __sklearn_tags__(self):
        """scikit-learn's tags: a transformer of finite 2-D float input that needs no ``y`` to fit.

        Only scikit-learn calls this method, so importing scikit-learn here adds no dependency to
        the package; its defaults otherwise (deterministic, requires fit, dense input).
        """
        from sklearn.utils import Tags, TargetTags, TransformerTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=TransformerTags())

    def _check_queries(self, queries, name: str) -> np.ndarray:
        """Validate queries of a fitted denoiser: 2-D, finite, with the ``d`` of the batch it was fitted on."""
        check_fitted(self, "n_features_in_")
        queries = check_array(queries, name)
        if queries.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{name} has {queries.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input: {name} has d == {queries.shape[1]} coordinates per "
                f"point but {type(self).__name__} was fitted on d == {self.n_features_in_}"
            )
        return queries

    def _fit(self, X: np.ndarray) -> None:
        raise NotImplementedError

    def _denoise(self, queries: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _is_estimator(value) -> bool:
    """Whether ``value`` is an estimator instance (scikit-learn's test: it has ``get_params`` and is no class)."""
    return hasattr(value, "get_params") and not isinstance(value, type)
