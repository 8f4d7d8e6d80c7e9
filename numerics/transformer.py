r"""The two-stage denoiser written as an attention-only transformer.

This module spells out the network of the paper with explicit weight matrices,
so that tests can show it computes exactly what :mod:`attneb.numerics.kernels` and
:mod:`attneb.numerics.flow` compute in kernel form.

* :class:`AttentionHead`: :math:`\mathrm{softmax}(Q K^\top + b)\, V` with
  :math:`Q = X_q W_Q^\top`, :math:`K = X W_K^\top`, :math:`V = X W_V^\top` and the
  key-norm bias :math:`b_j = -\tfrac{c}{2}\lVert x_j\rVert^2`. With
  :math:`W_Q = W_K = \sqrt{\beta} I`, :math:`W_V = I`, :math:`c = \beta = 1/h_2`
  the logits are :math:`-\lVert q - x_j\rVert^2/(2h_2)` up to a per-query constant.
* :class:`ResidualAttentionLayer`: :math:`x \mapsto x + \eta\,(\mathrm{attn}(x; X) - x)`,
  all tokens updated together (Stage 1).
* :class:`TwoStageTransformer`: ``n_layers`` residual layers with bandwidth ``h2``,
  then a final head of bandwidth ``sigma2`` whose query is the original noisy token,
  carried past Stage 1 by a long skip connection (Stage 2).

It is a readable reference, not the fast path: each head materialises the full
``M x N`` logit matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from .validation import (
    check_array,
    check_interval,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_same_dim,
)

__all__ = ["AttentionHead", "ResidualAttentionLayer", "TwoStageTransformer"]


@dataclass(frozen=True)
class AttentionHead:
    r"""One softmax attention head with a key-norm bias.

    .. math:: \mathrm{attn}(X_q; X)_m = \sum_j \mathrm{softmax}_j\!\big(
              (W_Q q_m)\cdot(W_K x_j) - \tfrac{c}{2}\lVert x_j\rVert^2\big)\, W_V x_j

    Parameters
    ----------
    W_Q, W_K, W_V : ndarray, shape (d, d)
        Query, key and value matrices.
    key_norm_coef : float
        The coefficient ``c`` of the key-norm bias.
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    key_norm_coef: float

    @classmethod
    def gaussian(cls, dim: int, h2: float) -> "AttentionHead":
        """The head whose attention is the Gaussian-kernel mean of bandwidth ``h2``."""
        dim = check_positive_int(dim, "dim")
        beta = 1.0 / check_positive(h2, "h2")
        eye = np.eye(dim)
        return cls(W_Q=np.sqrt(beta) * eye, W_K=np.sqrt(beta) * eye, W_V=eye, key_norm_coef=beta)

    def __call__(self, queries, context) -> np.ndarray:
        """Attend from ``queries`` (M, d) over ``context`` (N, d); returns (M, d)."""
        queries = check_array(queries, "queries")
        context = check_array(context, "context")
        check_same_dim(queries, "queries", context, "context")
        if queries.shape[1] != self.W_Q.shape[1]:
            raise ValueError(
                f"queries have d == {queries.shape[1]} but the head's matrices are {self.W_Q.shape}"
            )
        q = queries @ self.W_Q.T
        k = context @ self.W_K.T
        v = context @ self.W_V.T
        logits = q @ k.T - 0.5 * self.key_norm_coef * np.einsum("ij,ij->i", context, context)
        return softmax(logits, axis=1) @ v


@dataclass(frozen=True)
class ResidualAttentionLayer:
    r"""Residual self-attention layer :math:`x_i \mapsto x_i + \eta\,(\mathrm{attn}(x_i; X) - x_i)`."""

    head: AttentionHead
    eta: float

    def __call__(self, tokens) -> np.ndarray:
        """Update all tokens (N, d) together; the keys are the tokens before the update."""
        tokens = check_array(tokens, "tokens")
        return tokens + self.eta * (self.head(tokens, tokens) - tokens)


@dataclass(frozen=True)
class TwoStageTransformer:
    r"""Stage 1: ``n_layers`` residual layers; Stage 2: a head queried through a long skip.

    .. math:: \hat x(\tilde x) = \sum_j \mathrm{softmax}_j\!\big(
              -\lVert \tilde x - x_j^{(L)}\rVert^2/(2\sigma^2)\big)\, x_j^{(L)}

    Parameters
    ----------
    h2 : float
        Bandwidth of the Stage-1 heads, > 0.
    sigma2 : float
        Noise variance, the bandwidth of the Stage-2 head, > 0.
    n_layers : int
        Number of Stage-1 layers ``L`` (0 allowed: Stage 2 alone).
    eta : float
        Residual step of each layer, in (0, 1].
    """

    h2: float
    sigma2: float
    n_layers: int
    eta: float

    def __post_init__(self):
        check_positive(self.h2, "h2")
        check_positive(self.sigma2, "sigma2")
        check_nonnegative(self.n_layers, "n_layers")
        if int(self.n_layers) != self.n_layers:
            raise ValueError(f"n_layers == {self.n_layers}, must be a whole number")
        check_interval(self.eta, "eta", 0.0, 1.0, closed="right")

    def stage_one(self, noisy) -> np.ndarray:
        """Refine the context tokens (N, d) through the residual layers."""
        tokens = check_array(noisy, "noisy")
        layer = ResidualAttentionLayer(AttentionHead.gaussian(tokens.shape[1], self.h2), self.eta)
        for _ in range(int(self.n_layers)):
            tokens = layer(tokens)
        return tokens

    def __call__(self, noisy, queries=None) -> np.ndarray:
        """Denoise ``queries`` (default: the context tokens themselves) given the noisy context."""
        noisy = check_array(noisy, "noisy")
        skip = noisy if queries is None else check_array(queries, "queries")
        refined = self.stage_one(noisy)
        return AttentionHead.gaussian(noisy.shape[1], self.sigma2)(skip, refined)
