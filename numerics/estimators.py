r"""Denoisers with one interface: ``fit(X)``, ``denoise(queries)``, ``fit_denoise(X)``.

All of them see only a noisy batch :math:`\tilde x_i = x_i + \sigma z_i` (shape ``(N, d)``),
except :class:`OracleBayes`, which knows the prior.

=====================  ==============================================================
``TwoStageDenoiser``   Stage 1 particle flow to depth ``T``, then Stage 2 attention
``StageTwoOnly``       Stage 2 over the noisy tokens (``L = 0``)
``TweedieKDE``         one extrapolated attention step, :math:`q + \sigma^2 \nabla\log\mathrm{KDE}(q)`
``LinearShrinkage``    positive-part James-Stein / linear empirical Bayes
``NPMLE``              Kiefer-Wolfowitz NPMLE of the prior, then its posterior mean
``OracleBayes``        the Bayes posterior mean :math:`E[x\mid\tilde x]` under the true prior
=====================  ==============================================================

All follow the interface of :class:`attneb.numerics.base.Denoiser`, scikit-learn's estimator contract included
(``transform``, ``fit_transform``, ``score``, ``get_params``/``set_params``).
"""

from __future__ import annotations

import numpy as np

from . import binned, flow, gpu, kernels
from .base import Denoiser
from .npmle import NPMLE
from .validation import (
    check_array,
    check_interval,
    check_nonnegative,
    check_option,
    check_positive,
    check_same_dim,
)

__all__ = [
    "Denoiser",
    "LinearShrinkage",
    "NPMLE",
    "OracleBayes",
    "StageTwoOnly",
    "TweedieKDE",
    "TwoStageDenoiser",
    "stage_two",
]


class TwoStageDenoiser(Denoiser):
    r"""The paper's two-stage attention denoiser.

    Stage 1 (``fit``) moves the noisy tokens by the particle flow
    :math:`\dot x_i = a_t(x_i) - x_i` of bandwidth ``h2`` to depth ``T``
    (:func:`attneb.numerics.flow.particle_flow`). Stage 2 (``denoise``) attends from the
    original noisy query over the refined tokens with the noise variance as bandwidth:

    .. math:: \hat x(\tilde x) = \sum_j \mathrm{softmax}_j\!\big(-\lVert\tilde x - x_j(T)\rVert^2
              / (2\sigma^2)\big)\, x_j(T)

    Parameters
    ----------
    sigma2 : float
        Noise variance, > 0.
    h2 : float
        Stage-1 kernel bandwidth, > 0.
    T : float or None
        Stage-1 horizon; ``None`` means the leading-order depth-noise relation
        :math:`T^* = \sigma^2 / (2 h_2)`.
    eta : float
        Nominal residual step in (0, 1] (``method="euler"``).
    method : {"euler", "ode"}
        Stage-1 solver: the transformer's layers or the continuous-depth ODE.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel sums of both stages: exact (:mod:`attneb.numerics.kernels`), on a grid
        (:mod:`attneb.numerics.binned`), exact on a GPU (:mod:`attneb.numerics.gpu`) or, by default, the fastest
        that applies (see :func:`attneb.numerics.flow.particle_flow`).
    tol : float
        Tolerance of the binned path in (0, 1), relative to the largest coordinate range of the
        batch (Stage 1) or of the refined tokens (Stage 2).

    Attributes
    ----------
    T_ : float
        Horizon used.
    n_layers_ : int or None
        Number of Stage-1 layers (``None`` for ``method="ode"``).
    particles_ : ndarray, shape (N, d)
        The refined tokens :math:`x_j(T)`.
    """

    def __init__(self, sigma2, h2, T=None, eta=0.05, method="euler", backend="auto", tol=1e-9):
        self.sigma2 = sigma2
        self.h2 = h2
        self.T = T
        self.eta = eta
        self.method = method
        self.backend = backend
        self.tol = tol

    def _stage_one(self) -> dict:
        """The validated Stage-1 arguments: ``h2``, ``T`` (the horizon used), ``eta``, ``method``, ``backend``, ``tol``."""
        sigma2 = check_positive(self.sigma2, "sigma2")
        h2 = check_positive(self.h2, "h2")
        T = flow.leading_horizon(sigma2, h2) if self.T is None else check_nonnegative(self.T, "T")
        eta = check_interval(self.eta, "eta", 0.0, 1.0, closed="right")
        method = check_option(self.method, "method", flow.SOLVERS)
        backend, tol = _check_backend(self.backend, self.tol)
        return {"h2": h2, "T": T, "eta": eta, "method": method, "backend": backend, "tol": tol}

    def _fitted(self, particles, T, eta, method):
        self.particles_ = particles
        self.T_ = T
        self.n_layers_ = flow.n_layers(T, eta) if method == "euler" else None

    def _fit(self, X):
        a = self._stage_one()
        particles = flow.particle_flow(X, a["h2"], a["T"], eta=a["eta"], method=a["method"], backend=a["backend"],
                                       tol=a["tol"])
        self._fitted(particles, a["T"], a["eta"], a["method"])

    def _denoise(self, queries):
        return stage_two(queries, self.particles_, self.sigma2, backend=self.backend, tol=self.tol)

    def fit_depths(self, X, depths) -> list["TwoStageDenoiser"]:
        """Copies of this denoiser with ``T`` set to each of ``depths``, each fitted on the noisy batch ``X``.

        Each equals ``TwoStageDenoiser(**{**self.get_params(), "T": depth}).fit(X)`` bit for bit; with
        ``method="euler"`` Stage 1 runs once per distinct step (:func:`attneb.numerics.flow.particle_flow_at`),
        so a grid of depths costs about the layers of its deepest point.
        """
        copies = [type(self)(**{**self.get_params(deep=False), "T": depth}) for depth in depths]
        if self.method != "euler" or not copies:
            return [copy.fit(X) for copy in copies]
        X = check_array(X, "X")
        arguments = [copy._stage_one() for copy in copies]
        a = arguments[0]
        paths = flow.particle_flow_at(X, a["h2"], [b["T"] for b in arguments], eta=a["eta"], backend=a["backend"],
                                      tol=a["tol"])
        for copy, b, particles in zip(copies, arguments, paths):
            copy._fitted(particles, b["T"], b["eta"], b["method"])
            copy.n_features_in_ = X.shape[1]
        return copies


def _check_backend(backend, tol):
    backend = check_option(backend, "backend", binned.BACKENDS)
    if backend == "gpu":
        gpu.require()
    return backend, check_interval(tol, "tol", 0.0, 1.0, closed="neither")


def stage_two(queries, tokens, sigma2, *, backend="exact", tol=1e-9) -> np.ndarray:
    r"""Stage 2: each noisy query attends, with bandwidth ``sigma2``, to the refined tokens.

    .. math:: \hat x(\tilde x) = \sum_j \mathrm{softmax}_j\!\big(-\lVert\tilde x - x_j\rVert^2
              / (2\sigma^2)\big)\, x_j

    the posterior mean of ``x`` under the empirical prior :math:`\frac1N\sum_j\delta_{x_j}` of the
    tokens and the Gaussian likelihood :math:`N(\tilde x; x, \sigma^2 I)` (claim C7). With the
    tokens of Stage 1 (:func:`attneb.numerics.flow.particle_flow`) it is the two-stage estimator;
    with the noisy tokens themselves, Stage 2 alone (``L = 0``).

    Parameters
    ----------
    queries : array_like, shape (M, d)
        Noisy tokens: the query of the final attention step (the long skip connection).
    tokens : array_like, shape (N, d)
        The tokens attended to (keys and values), e.g. the refined tokens of Stage 1.
    sigma2 : float
        Noise variance, the bandwidth of Stage 2, > 0.
    backend : {"exact", "auto", "binned", "gpu"}
        ``"exact"`` (default): exact kernel sums by log-sum-exp in blocks
        (:func:`attneb.numerics.kernels.kernel_mean`); ``"binned"``: grid and FFT sums within ``tol``
        (``d <= 3``, :mod:`attneb.numerics.binned`); ``"gpu"``: :mod:`attneb.numerics.gpu`;
        ``"auto"``: the fastest of these that is allowed for these points (the binned path only
        where its error bound holds, so in 1-D it may pick the grid).
    tol : float
        Tolerance of the binned path in (0, 1), relative to the largest coordinate range of the tokens.

    Returns
    -------
    ndarray, shape (M, d)
    """
    queries = check_array(queries, "queries")
    tokens = check_array(tokens, "tokens")
    check_same_dim(queries, "queries", tokens, "tokens")
    check_positive(sigma2, "sigma2")
    backend, tol = _check_backend(backend, tol)
    path = binned.resolve_backend(backend, len(queries), tokens, sigma2, tol=tol)
    if path == "exact":
        return kernels.kernel_mean(queries, tokens, sigma2)
    if path == "gpu":
        return gpu.kernel_mean(queries, tokens, sigma2)
    return binned.kernel_mean(queries, tokens, sigma2, tol=tol)


class StageTwoOnly(Denoiser):
    r"""Stage 2 without Stage 1 (``L = 0``): attention over the *noisy* tokens.

    .. math:: \hat x(\tilde x) = \sum_j \mathrm{softmax}_j\!\big(-\lVert\tilde x - \tilde x_j\rVert^2
              / (2\sigma^2)\big)\, \tilde x_j

    Parameters
    ----------
    sigma2 : float
        Noise variance, > 0.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel path (see :class:`TwoStageDenoiser`).
    tol : float
        Tolerance of the binned path in (0, 1), relative to the largest coordinate range of the batch.
    """

    def __init__(self, sigma2, backend="auto", tol=1e-9):
        self.sigma2 = sigma2
        self.backend = backend
        self.tol = tol

    def _fit(self, X):
        check_positive(self.sigma2, "sigma2")
        _check_backend(self.backend, self.tol)
        self.particles_ = X

    def _denoise(self, queries):
        return stage_two(queries, self.particles_, self.sigma2, backend=self.backend, tol=self.tol)


class TweedieKDE(Denoiser):
    r"""Tweedie's formula with a kernel-density score: one extrapolated attention step.

    .. math:: \hat x(\tilde x) = \tilde x + \sigma^2 \nabla \log \mathrm{KDE}_{h_2}(\tilde x)
              = \tilde x + \frac{\sigma^2}{h_2}\big(a(\tilde x) - \tilde x\big)

    The KDE of bandwidth ``h2`` over the noisy batch estimates the density of the
    noisy tokens smoothed once more, i.e. at noise variance ``sigma2 + h2``.

    Parameters
    ----------
    sigma2 : float
        Noise variance, > 0.
    h2 : float
        KDE bandwidth, > 0.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel path (see :class:`TwoStageDenoiser`).
    tol : float
        Tolerance of the binned path in (0, 1): the step :math:`a(\tilde x) - \tilde x` is within
        ``tol`` times the largest coordinate range of the batch.
    """

    def __init__(self, sigma2, h2, backend="auto", tol=1e-9):
        self.sigma2 = sigma2
        self.h2 = h2
        self.backend = backend
        self.tol = tol

    def _fit(self, X):
        check_positive(self.sigma2, "sigma2")
        check_positive(self.h2, "h2")
        _check_backend(self.backend, self.tol)
        self.context_ = X

    def _denoise(self, queries):
        path = binned.resolve_backend(self.backend, len(queries), self.context_, self.h2, tol=self.tol)
        if path == "exact":
            return queries + self.sigma2 * kernels.kde_score(queries, self.context_, self.h2)
        if path == "gpu":
            return queries + self.sigma2 / self.h2 * (gpu.kernel_mean(queries, self.context_, self.h2) - queries)
        return queries + self.sigma2 * binned.kde_score(queries, self.context_, self.h2, tol=self.tol)


class LinearShrinkage(Denoiser):
    r"""Linear empirical Bayes (positive-part James-Stein type), fitted on the batch.

    With :math:`\bar x` and :math:`S = \sum_k \lambda_k v_k v_k^\top` the mean and covariance of
    the noisy batch, the prior covariance is estimated by :math:`(S - \sigma^2 I)_+` and

    .. math:: \hat x(\tilde x) = \bar x + \sum_k \Big(1 - \frac{\sigma^2}{\lambda_k}\Big)_+
              v_k v_k^\top (\tilde x - \bar x),

    the Bayes posterior mean under the Gaussian prior that matches the batch's first two moments.

    Parameters
    ----------
    sigma2 : float
        Noise variance, > 0.

    Attributes
    ----------
    mean_ : ndarray, shape (d,)
    gain_ : ndarray, shape (d, d)
        The shrinkage matrix.
    """

    def __init__(self, sigma2):
        self.sigma2 = sigma2

    def _fit(self, X):
        sigma2 = check_positive(self.sigma2, "sigma2")
        if X.shape[0] < 2:
            raise ValueError(f"X has {X.shape[0]} sample (row); LinearShrinkage needs at least 2 to estimate a covariance")
        self.mean_ = X.mean(axis=0)
        cov = np.atleast_2d(np.cov(X, rowvar=False))
        eigval, eigvec = np.linalg.eigh(cov)
        factor = np.clip(1.0 - sigma2 / np.maximum(eigval, np.finfo(float).tiny), 0.0, None)
        self.gain_ = (eigvec * factor) @ eigvec.T

    def _denoise(self, queries):
        return self.mean_ + (queries - self.mean_) @ self.gain_.T


class OracleBayes(Denoiser):
    r"""The Bayes-optimal denoiser :math:`E[x \mid \tilde x]`, from the true prior.

    ``fit`` only checks that the batch lives in the prior's dimension.

    Parameters
    ----------
    prior : numerics.priors.Prior
        The prior the clean tokens were drawn from.
    sigma2 : float
        Noise variance, > 0.
    """

    def __init__(self, prior, sigma2):
        self.prior = prior
        self.sigma2 = sigma2

    def _fit(self, X):
        check_positive(self.sigma2, "sigma2")
        if X.shape[1] != self.prior.dim:
            raise ValueError(f"X has d == {X.shape[1]} but the prior {self.prior!r} has dim == {self.prior.dim}")

    def _denoise(self, queries):
        return self.prior.posterior_mean(queries, self.sigma2)
