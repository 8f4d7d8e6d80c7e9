r"""The two-stage attention-only transformer with free parameters, trained by Adam in numpy.

The network is that of :class:`attneb.numerics.transformer.TwoStageTransformer`. Stage 1 is ``L``
residual self-attention layers, every token attending to all tokens of its own context
(itself included), the keys being the tokens before the update:

.. math:: x^{(l)}_i = x^{(l-1)}_i + \eta_l\big(\mathrm{attn}_l(x^{(l-1)}_i; X^{(l-1)})
          - x^{(l-1)}_i\big), \qquad x^{(0)} = \tilde x .

Stage 2 is one head whose queries are the original noisy tokens (a long skip past Stage 1) and
whose keys and values are the refined tokens: :math:`\hat x_i = \mathrm{attn}_s(\tilde x_i; X^{(L)})`.
Every head has a key-query matrix :math:`A`, with the key-norm bias tied to it, and a value
matrix :math:`W`:

.. math:: \mathrm{attn}(q; X) = \sum_j \mathrm{softmax}_j\big(q^\top A x_j
          - \tfrac12 x_j^\top A x_j\big)\, W x_j .

Two parametrizations (:data:`PARAMETRIZATIONS`), held in a dict of arrays (the gradient of
:func:`loss_and_gradient` is a dict with the same keys and shapes):

* ``"scalar"``: :math:`A_l = \beta_l I` (logits :math:`-\beta_l\lVert q - x_j\rVert^2/2` up to a
  per-query constant, a Gaussian kernel of bandwidth :math:`h_2 = 1/\beta_l`),
  :math:`W_l = v_l I`, a step :math:`\eta_l`; Stage 2 :math:`A_s = \beta_s I`, :math:`W_s = v_s I`.
  Keys ``log_beta``, ``log_value``, ``eta`` (shape ``(L,)``), ``log_beta_s``, ``log_value_s``
  (shape ``()``): the positive :math:`\beta` and :math:`v` are stored through their logs so that
  the optimisation is unconstrained; :math:`\eta_l` is any real. The parameters do not depend on
  the dimension ``d``.
* ``"matrix"``: full ``d x d`` matrices. Keys ``A``, ``W`` (shape ``(L, d, d)``), ``eta``
  (``(L,)``), ``A_s``, ``W_s`` (``(d, d)``), all unconstrained.

With :math:`v_l = v_s = 1`, :math:`\beta_l = 1/h_2`, :math:`\beta_s = 1/\sigma^2` the network is
exactly the paper's denoiser (``init="construction"`` in :func:`init_params`). The value scales
are free on purpose, and they change what training can find. For a Gaussian prior
:math:`N(0, s^2 I)` the posterior mean is the linear shrinkage
:math:`\tfrac{s^2}{s^2+\sigma^2}\tilde x`, and the network reaches it without any empirical
Bayes at all: every query is itself a token of the context, so with Stage 1 idle
(:math:`\eta_l = 0`) and :math:`\beta_s \to \infty` the Stage-2 head attends to the query alone
and returns :math:`v_s \tilde x`, the Bayes rule for :math:`v_s = s^2/(s^2+\sigma^2)`. That
optimum is degenerate: a bandwidth trained on such a prior says nothing about the construction.

Training (:func:`fit_transformer`) draws fresh contexts at every step, minimises the mean squared
error of all tokens of every context with a hand-written backward pass (:func:`loss_and_gradient`)
and Adam, and can checkpoint to an SQLite file and resume bit for bit.

Numerics: float64 throughout, softmax with its logits shifted by the row maximum (or, for the
``"scalar"`` heads, by a bound on it: see :func:`attend`), all contexts of a batch at
once (arrays ``(B, n, d)``, batched matrix products). Each head holds its ``B x n x n`` attention
weights for the backward pass, and the backward pass one more such array: ``8 B n^2 (L + 2)`` bytes,
144 MiB at ``B = 64``, ``n = 128``, ``L = 16``, the sizes this module is meant for; there is no blocking.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import sqlite3

import numpy as np

from .priors import Prior
from .sweep import canonical_json
from .validation import (
    check_array,
    check_nonnegative_int,
    check_option,
    check_positive,
    check_positive_int,
    check_rng,
)

__all__ = [
    "INITS",
    "PARAMETRIZATIONS",
    "SCHEDULES",
    "TrainedTransformer",
    "fit_transformer",
    "init_params",
    "loss_and_gradient",
]

PARAMETRIZATIONS = ("scalar", "matrix")
INITS = ("random", "construction")
SCHEDULES = ("constant", "cosine")
_KEYS = {
    "scalar": ("log_beta", "log_value", "eta", "log_beta_s", "log_value_s"),
    "matrix": ("A", "W", "eta", "A_s", "W_s"),
}
_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8
# Spread of the random initialisation (see init_params).
_LOG_BETA_HALF_WIDTH = 1.0
_LOG_BETA_S_OFFSET = (np.log(2.0), np.log(4.0))
_LOG_VALUE_SD = 0.1
_MATRIX_NOISE = 0.2
_TABLE = "training_checkpoints"
_LEAST_ROW_SUM = 1e-150


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------


def _parametrization(params) -> str:
    """Which parametrization a params dict holds, after checking its keys and shapes."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays, got {type(params).__name__}")
    kind = next((k for k, keys in _KEYS.items() if set(params) == set(keys)), None)
    if kind is None:
        raise ValueError(f"params has keys {sorted(params)}; expected {_KEYS['scalar']} or {_KEYS['matrix']}")
    n_layers = np.shape(params["eta"])[0] if np.ndim(params["eta"]) == 1 else -1
    dim = np.shape(params["A_s"])[0] if kind == "matrix" and np.ndim(params["A_s"]) == 2 else -1
    shapes = {"log_beta": (n_layers,), "log_value": (n_layers,), "eta": (n_layers,), "log_beta_s": (),
              "log_value_s": (), "A": (n_layers, dim, dim), "W": (n_layers, dim, dim), "A_s": (dim, dim),
              "W_s": (dim, dim)}
    for key in _KEYS[kind]:
        if np.shape(params[key]) != shapes[key] or not np.all(np.isfinite(params[key])):
            raise ValueError(f"params[{key!r}] has shape {np.shape(params[key])}, expected {shapes[key]} "
                             "(L = len(params['eta'])), with finite entries")
    return kind


def matrices(params, kind: str, dim: int):
    """Key-query and value matrices ``(A_l, W_l)`` of Stage 1 (stacked, ``(L, d, d)``) and of Stage 2."""
    if kind == "matrix":
        return params["A"], params["W"], params["A_s"], params["W_s"]
    eye = np.eye(dim)
    return (np.exp(params["log_beta"])[:, None, None] * eye, np.exp(params["log_value"])[:, None, None] * eye,
            np.exp(params["log_beta_s"]) * eye, np.exp(params["log_value_s"]) * eye)


def init_params(dim, n_layers, sigma2, *, parametrization="scalar", init="random", h2=None, rng=None) -> dict:
    r"""Initial parameters of the network (a dict of float64 arrays, see the module docstring).

    ``init="construction"``: :math:`\beta_l = 1/h_2`, :math:`\eta_l = \min(T^*/L, 1)` with
    :math:`T^* = \sigma^2/(2h_2)` (the depth :math:`T^*` is reached only while :math:`T^* \le L`),
    value scales 1, :math:`\beta_s = 1/\sigma^2`; for ``"matrix"`` the same with
    :math:`A = \beta I`, :math:`W = I`.

    ``init="random"`` (draws in this order from ``rng``): :math:`\log\beta_l = \log(1/\sigma^2) + u_l`
    with :math:`u_l \sim U(-1, 1)` (so :math:`h_2 \in [\sigma^2/e, e\sigma^2]`, away from the
    construction's :math:`\sigma^2/4`), :math:`\log v_l \sim N(0, 0.1^2)`,
    :math:`\eta_l \sim U(0, 1/L)`, then :math:`\log\beta_s = \log(1/\sigma^2) + \epsilon u` with a
    random sign :math:`\epsilon` and :math:`u \sim U(\log 2, \log 4)` (the Stage-2 bandwidth starts a
    factor 2 to 4 above or below the construction's :math:`\sigma^2`), :math:`\log v_s \sim N(0, 0.1^2)`.
    For ``"matrix"``: :math:`A_l = \beta_l (I + 0.2 G_l/\sqrt d)`, :math:`W_l = v_l (I + 0.2 G'_l/\sqrt d)`
    with standard normal ``G``, likewise ``A_s``, ``W_s``.

    Parameters
    ----------
    dim : int
        Token dimension ``d``, >= 1.
    n_layers : int
        Number of Stage-1 layers ``L``, >= 0.
    sigma2 : float
        Noise variance, > 0.
    parametrization : {"scalar", "matrix"}
    init : {"random", "construction"}
    h2 : float, optional
        Stage-1 bandwidth of the construction, > 0; default ``sigma2 / 4``. Ignored for ``"random"``.
    rng : numpy.random.Generator or int or None
        Randomness of ``init="random"``.
    """
    dim = check_positive_int(dim, "dim")
    n_layers = check_nonnegative_int(n_layers, "n_layers")
    sigma2 = check_positive(sigma2, "sigma2")
    kind = check_option(parametrization, "parametrization", PARAMETRIZATIONS)
    init = check_option(init, "init", INITS)
    eye = np.eye(dim)
    if init == "construction":
        h2 = sigma2 / 4 if h2 is None else check_positive(h2, "h2")
        eta = np.full(n_layers, min(sigma2 / (2 * h2) / max(n_layers, 1), 1.0))
        log_beta, log_value = np.full(n_layers, -np.log(h2)), np.zeros(n_layers)
        log_beta_s, log_value_s = -np.log(sigma2), 0.0
        noise = np.zeros((2 * n_layers + 2, dim, dim))
    else:
        rng = check_rng(rng)
        log_beta = -np.log(sigma2) + rng.uniform(-_LOG_BETA_HALF_WIDTH, _LOG_BETA_HALF_WIDTH, n_layers)
        log_value = rng.normal(0.0, _LOG_VALUE_SD, n_layers)
        eta = rng.uniform(0.0, 1.0, n_layers) / max(n_layers, 1)
        log_beta_s = -np.log(sigma2) + rng.choice((-1.0, 1.0)) * rng.uniform(*_LOG_BETA_S_OFFSET)
        log_value_s = rng.normal(0.0, _LOG_VALUE_SD)
        noise = _MATRIX_NOISE / np.sqrt(dim) * rng.standard_normal((2 * n_layers + 2, dim, dim))
    if kind == "scalar":
        return {"log_beta": log_beta, "log_value": log_value, "eta": eta,
                "log_beta_s": np.asarray(log_beta_s, dtype=float), "log_value_s": np.asarray(log_value_s, dtype=float)}
    scales = np.exp(np.concatenate([log_beta, log_value, [log_beta_s, log_value_s]]))[:, None, None]
    A, W, A_s, W_s = np.split(scales * (eye + noise), [n_layers, 2 * n_layers, 2 * n_layers + 1])
    return {"A": A, "W": W, "eta": eta, "A_s": A_s[0], "W_s": W_s[0]}


# --------------------------------------------------------------------------------------------
# Forward and backward
# --------------------------------------------------------------------------------------------


def attend(queries, keys, A, W, *, psd=False, weights=None):
    r"""One head over a batch: queries ``(B, m, d)``, keys ``(B, n, d)``; returns ``(out, (E, r, Y, V))``.

    :math:`Y = X A^\top`, :math:`S_{ij} = q_i\cdot y_j - \tfrac12 x_j\cdot y_j`,
    :math:`E_{ij} = \exp(S_{ij} - m_i)`, :math:`r_i = 1/\sum_j E_{ij}`, :math:`V = X W^\top`,
    out :math:`_i = r_i\,(EV)_i`: the softmax weights are :math:`P_{ij} = r_i E_{ij}`, and the
    normalisation is applied to the ``(m, d)`` outputs, never to the ``(m, n)`` weights.

    The shift :math:`m_i` is the row maximum of :math:`S`; with ``psd=True`` (``A`` symmetric
    positive semi-definite, as :math:`\beta I` with :math:`\beta > 0`), the bound
    :math:`m_i = \tfrac12 q_i\cdot A q_i`, since then
    :math:`S_{ij} - m_i = -\tfrac12 (q_i - x_j)^\top A (q_i - x_j) \le 0`. It is computed inside one
    matrix product, :math:`S_{ij} - m_i = [q_i, 1, -m_i]\cdot[y_j, -\tfrac12 x_j\cdot y_j, 1]`, and it
    is the row maximum itself when the queries are the keys. Where a row's weights all fall below
    ``1e-150`` under the bound (a query far from every key), the head is computed again with the
    row maximum. ``weights``, an array ``(B, m, n)``, receives :math:`E` (training reuses one per
    layer instead of allocating them at every step).
    """
    Y = keys @ A.T
    keys_side = np.concatenate((Y, -0.5 * np.einsum("bjk,bjk->bj", keys, Y)[:, :, None]), axis=2)
    ones = np.ones(queries.shape[:2] + (1,))
    if psd:
        shift = 0.5 * np.einsum("bik,bik->bi", queries, queries @ A.T)[:, :, None]
        E = np.matmul(np.concatenate((queries, ones, -shift), axis=2), np.concatenate(
            (keys_side, np.ones(keys.shape[:2] + (1,))), axis=2).swapaxes(1, 2), out=weights)
        np.exp(E, out=E)
        total = E @ np.ones(E.shape[2])
        if total.min() < _LEAST_ROW_SUM:
            return attend(queries, keys, A, W, weights=weights)
    else:
        E = np.matmul(np.concatenate((queries, ones), axis=2), keys_side.swapaxes(1, 2), out=weights)
        E -= E.max(axis=2, keepdims=True)
        np.exp(E, out=E)
        total = E @ np.ones(E.shape[2])
    r = 1.0 / total
    V = keys @ W.T
    out = E @ V
    out *= r[:, :, None]
    return out, (E, r, Y, V)


def _attend_backward(d_out, out, queries, keys, A, W, cache, *, want_queries: bool, work=None):
    r"""Gradients of one head with respect to ``queries`` (or ``None``), ``keys``, ``A`` and ``W``.

    With :math:`G = \partial L/\partial\,\mathrm{out}` and :math:`P_{ij} = r_i E_{ij}` (see :func:`attend`):
    :math:`\partial L/\partial S_{ij} = P_{ij}(g_i\cdot v_j - g_i\cdot\mathrm{out}_i)
    = E_{ij}\,[r_i g_i, -r_i\, g_i\cdot\mathrm{out}_i]\cdot[v_j, 1]` (softmax),
    :math:`s_j = \sum_i \partial L/\partial S_{ij}`;
    :math:`\partial L/\partial Y = (\partial L/\partial S)^\top Q - \tfrac12 s\, X`,
    :math:`\partial L/\partial V = P^\top G = E^\top (rG)`,
    :math:`\partial L/\partial Q = (\partial L/\partial S)\, Y`,
    :math:`\partial L/\partial X = (\partial L/\partial Y) A + (\partial L/\partial V) W - \tfrac12 s\, Y`,
    :math:`\partial L/\partial A = \sum_b (\partial L/\partial Y)^\top X`,
    :math:`\partial L/\partial W = \sum_b (\partial L/\partial V)^\top X`.
    ``work``, an array of the shape of :math:`E`, receives :math:`\partial L/\partial S`.
    """
    E, r, Y, V = cache
    scaled = d_out * r[:, :, None]
    rows = np.concatenate((scaled, -np.einsum("bik,bik->bi", scaled, out)[:, :, None]), axis=2)
    dS = np.matmul(rows, np.concatenate((V, np.ones(V.shape[:2] + (1,))), axis=2).swapaxes(1, 2), out=work)
    dS *= E
    s = (np.ones(dS.shape[1]) @ dS)[:, :, None]
    dY = dS.swapaxes(1, 2) @ queries - 0.5 * s * keys
    dV = E.swapaxes(1, 2) @ scaled
    d_keys = dY @ A + dV @ W - 0.5 * s * Y
    dim = keys.shape[2]
    flat_keys = keys.reshape(-1, dim)
    dA = dY.reshape(-1, dim).T @ flat_keys
    dW = dV.reshape(-1, dim).T @ flat_keys
    return (dS @ Y if want_queries else None), d_keys, dA, dW


def stage_one(params, kind: str, noisy, tape=None, *, buffers=None):
    """Refined tokens ``(B, n, d)`` after the Stage-1 layers; with a list ``tape``, appends each layer's input.

    ``buffers`` (see :func:`_workspace`) receive the layers' attention weights.
    """
    A, W, _, _ = matrices(params, kind, noisy.shape[2])
    x = noisy
    for l, (A_l, W_l, eta) in enumerate(zip(A, W, params["eta"])):
        attn, cache = attend(x, x, A_l, W_l, psd=kind == "scalar", weights=None if buffers is None else buffers[l])
        if tape is not None:
            tape.append((x, attn, cache))
        x = x + eta * (attn - x)
    return x


def _forward(params, kind: str, noisy, tape=None, *, buffers=None):
    """Output ``(B, n, d)`` of the network; with a list ``tape``, appends what the backward pass needs."""
    _, _, A_s, W_s = matrices(params, kind, noisy.shape[2])
    x = stage_one(params, kind, noisy, tape, buffers=buffers)
    out, cache = attend(noisy, x, A_s, W_s, psd=kind == "scalar",
                        weights=None if buffers is None else buffers[len(params["eta"])])
    if tape is not None:
        tape.append((x, out, cache))
    return out


def _workspace(n_layers: int, batch: int, n_tokens: int) -> np.ndarray:
    """Buffers ``(L + 2, B, n, n)`` for one :func:`_loss_and_gradient`: each head's weights, then its ``dL/dS``.

    Training reuses them at every step; allocating them afresh costs about a quarter of a step.
    """
    return np.empty((n_layers + 2, batch, n_tokens, n_tokens))


def _loss_and_gradient(params, kind: str, noisy, clean, buffers=None):
    """:func:`loss_and_gradient` on validated inputs, with the buffers of :func:`_workspace` or fresh arrays."""
    tape = []
    out = _forward(params, kind, noisy, tape, buffers=buffers)
    work = None if buffers is None else buffers[-1]
    err = out - clean
    loss = float(np.mean(err * err))
    A, W, A_s, W_s = matrices(params, kind, noisy.shape[2])
    refined, _, cache = tape.pop()
    _, d_x, dA_s, dW_s = _attend_backward(2.0 * err / err.size, out, noisy, refined, A_s, W_s, cache,
                                          want_queries=False, work=work)
    n_layers = len(tape)
    dA, dW, d_eta = np.empty_like(A), np.empty_like(W), np.empty(n_layers)
    for l in reversed(range(n_layers)):
        x, attn, cache = tape[l]
        eta = params["eta"][l]
        d_eta[l] = np.sum(d_x * (attn - x))
        d_q, d_k, dA[l], dW[l] = _attend_backward(eta * d_x, attn, x, x, A[l], W[l], cache, want_queries=True,
                                                  work=work)
        d_x = (1.0 - eta) * d_x + d_q + d_k
    if kind == "matrix":
        return loss, {"A": dA, "W": dW, "eta": d_eta, "A_s": dA_s, "W_s": dW_s}
    # A = exp(theta) I: dL/dtheta = exp(theta) tr(dL/dA).
    return loss, {
        "log_beta": np.exp(params["log_beta"]) * np.trace(dA, axis1=1, axis2=2),
        "log_value": np.exp(params["log_value"]) * np.trace(dW, axis1=1, axis2=2),
        "eta": d_eta,
        "log_beta_s": np.asarray(np.exp(params["log_beta_s"]) * np.trace(dA_s)),
        "log_value_s": np.asarray(np.exp(params["log_value_s"]) * np.trace(dW_s)),
    }


def _check_contexts(x, name: str) -> np.ndarray:
    """``x`` as a ``(B, n, d)`` float64 array; a single ``(n, d)`` context is an error saying how to reshape."""
    if np.ndim(x) == 2:
        raise ValueError(f"Expected 3D array (B, n, d) for {name}, got 2D array of shape {np.shape(x)}: "
                         f"pass {name}[None] for a single context")
    return check_array(x, name, ndim=3)


def loss_and_gradient(params, noisy, clean):
    r"""Loss of the network on a batch of contexts and its gradient, by a hand-written backward pass.

    .. math:: \mathcal L = \frac{1}{B n d}\sum_{b, i} \lVert \hat x_{b i} - x_{b i}\rVert^2

    (the mean squared error per coordinate over all tokens of all contexts, comparable with
    :meth:`attneb.numerics.priors.Prior.mmse`). The backward pass goes through both the query and the key
    (and value) dependence of every Stage-1 head, the residual steps and the long skip; see
    ``_attend_backward`` for the formulas of one head.

    Parameters
    ----------
    params : dict of ndarray
        Parameters in either parametrization (see the module docstring).
    noisy, clean : array_like, shape (B, n, d)
        Noisy contexts and their clean tokens.

    Returns
    -------
    loss : float
    grad : dict of ndarray
        Same keys and shapes as ``params``.
    """
    kind = _parametrization(params)
    noisy = _check_contexts(noisy, "noisy")
    clean = _check_contexts(clean, "clean")
    if noisy.shape != clean.shape:
        raise ValueError(f"noisy has shape {noisy.shape} but clean has shape {clean.shape}; they must match")
    params = {k: np.asarray(v, dtype=float) for k, v in params.items()}
    _check_dim(params, kind, noisy.shape[2])
    return _loss_and_gradient(params, kind, noisy, clean)


def _check_dim(params, kind: str, dim: int) -> None:
    if kind == "matrix" and params["A_s"].shape[0] != dim:
        raise ValueError(f"the tokens have d == {dim} but the matrices are {params['A_s'].shape}")


# --------------------------------------------------------------------------------------------
# The trained network
# --------------------------------------------------------------------------------------------


class TrainedTransformer:
    r"""A trained (or initialised) network and its training curve.

    A result object built by :func:`fit_transformer` (or directly from a params dict), not a
    scikit-learn estimator: the derived attributes are computed when it is built.

    Parameters
    ----------
    params : dict of ndarray
        Parameters in either parametrization (see the module docstring).
    losses : array_like of float, optional
        Training loss of every step.

    Attributes
    ----------
    params_ : dict of ndarray
    parametrization_ : str
    stage1_h2_ : ndarray, shape (L,)
        Stage-1 bandwidths :math:`1/\beta_l`; for ``"matrix"``, :math:`1/\bar\lambda_l` with
        :math:`\bar\lambda_l = \mathrm{tr}(A_l)/d` the mean eigenvalue of the symmetric part of
        :math:`A_l` (``inf`` where :math:`\bar\lambda_l \le 0`).
    stage1_eta_ : ndarray, shape (L,)
        Residual steps :math:`\eta_l`.
    stage2_h2_ : float
        Stage-2 bandwidth, :math:`1/\beta_s` (``"matrix"``: as for Stage 1, from :math:`A_s`).
    value_scales_ : ndarray, shape (L + 1,)
        :math:`v_1, \dots, v_L, v_s`; for ``"matrix"`` the mean eigenvalues :math:`\mathrm{tr}(W)/d`.
    losses_ : ndarray, shape (steps,)
    """

    def __init__(self, params, losses=()):
        self.parametrization_ = _parametrization(params)
        self.params_ = {k: np.array(v, dtype=float) for k, v in params.items()}
        self.losses_ = np.asarray(losses, dtype=float)
        p = self.params_
        if self.parametrization_ == "scalar":
            self.stage1_h2_ = np.exp(-p["log_beta"])
            self.stage2_h2_ = float(np.exp(-p["log_beta_s"]))
            self.value_scales_ = np.exp(np.append(p["log_value"], p["log_value_s"]))
        else:
            mean_eig = np.append(np.trace(p["A"], axis1=1, axis2=2), np.trace(p["A_s"])) / p["A_s"].shape[0]
            h2 = np.divide(1.0, mean_eig, out=np.full(mean_eig.shape, np.inf), where=mean_eig > 0)
            self.stage1_h2_, self.stage2_h2_ = h2[:-1], float(h2[-1])
            self.value_scales_ = np.append(np.trace(p["W"], axis1=1, axis2=2), np.trace(p["W_s"])) / p["W_s"].shape[0]
        self.stage1_eta_ = p["eta"].copy()

    def denoise(self, noisy) -> np.ndarray:
        """Denoise every token of a context ``(n, d)``, or of each context of a batch ``(B, n, d)``."""
        return self._apply(_forward, noisy)

    def stage_one(self, noisy) -> np.ndarray:
        """The tokens of a context ``(n, d)`` (or of each context of a batch) refined by the Stage-1 layers."""
        return self._apply(stage_one, noisy)

    def _apply(self, network, noisy) -> np.ndarray:
        single = np.ndim(noisy) != 3
        noisy = check_array(noisy, "noisy", ndim=2 if single else 3)
        batch = noisy[None] if single else noisy
        _check_dim(self.params_, self.parametrization_, batch.shape[2])
        out = network(self.params_, self.parametrization_, batch)
        return out[0] if single else out

    def __repr__(self) -> str:
        return (f"TrainedTransformer(parametrization={self.parametrization_!r}, "
                f"n_layers={len(self.stage1_eta_)}, steps={len(self.losses_)})")


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def _adam_step(params, grad, m, v, step: int, lr: float) -> None:
    r"""One Adam update in place: :math:`m \leftarrow \beta_1 m + (1-\beta_1) g`,
    :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
    :math:`\theta \leftarrow \theta - \mathrm{lr}\, \hat m / (\sqrt{\hat v} + \epsilon)` with the
    bias corrections :math:`\hat m = m/(1-\beta_1^t)`, :math:`\hat v = v/(1-\beta_2^t)`."""
    for key, g in grad.items():
        m[key] *= _ADAM_B1
        m[key] += (1 - _ADAM_B1) * g
        v[key] *= _ADAM_B2
        v[key] += (1 - _ADAM_B2) * g * g
        m_hat = m[key] / (1 - _ADAM_B1**step)
        v_hat = v[key] / (1 - _ADAM_B2**step)
        params[key] -= lr * m_hat / (np.sqrt(v_hat) + _ADAM_EPS)


@contextlib.contextmanager
def _checkpoints(path):
    """An SQLite connection to ``path`` with the table ``training_checkpoints`` (WAL journal)."""
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (config TEXT NOT NULL, step INTEGER NOT NULL, "
                     "state TEXT NOT NULL, saved_at TEXT NOT NULL, PRIMARY KEY (config, step))")
        yield conn
    finally:
        conn.close()


def _save_checkpoint(conn, config: str, step: int, state: dict) -> None:
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"INSERT OR REPLACE INTO {_TABLE} VALUES (?, ?, ?, ?)", (config, step, canonical_json(state), stamp))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _load_checkpoint(conn, config: str, steps: int):
    """The state of the latest checkpoint of ``config`` at a step <= ``steps``, or ``None``."""
    row = conn.execute(f"SELECT state FROM {_TABLE} WHERE config = ? AND step <= ? ORDER BY step DESC LIMIT 1",
                       (config, steps)).fetchone()
    return None if row is None else json.loads(row[0])


def fit_transformer(prior, sigma2, *, n_tokens, n_layers, parametrization="scalar", steps, batch, seed,
                    init="random", h2=None, lr=1e-2, schedule="constant", store=None, checkpoint_every=200,
                    progress=False) -> TrainedTransformer:
    r"""Train the network by Adam on fresh contexts drawn from ``prior``.

    Step :math:`t` draws ``batch`` contexts of ``n_tokens`` clean tokens ``prior.sample`` and
    their noisy versions :math:`\tilde x = x + \sigma z`, :math:`z \sim N(0, I_d)`, computes the
    loss of :func:`loss_and_gradient` (MSE per coordinate over all tokens) and takes one Adam step
    (:math:`\beta_1 = 0.9`, :math:`\beta_2 = 0.999`, :math:`\epsilon = 10^{-8}`) at the rate
    ``lr`` (``schedule="constant"``) or :math:`\mathrm{lr}\,\tfrac12(1 + \cos(\pi (t - 1)/\mathrm{steps}))`
    (``"cosine"``: the parameters settle as the rate decays to 0). All randomness
    (the initialisation, then the contexts of steps 1, 2, ...) comes from one generator seeded by
    ``seed``, so a seed gives identical losses and parameters.

    With ``store``, every ``checkpoint_every`` steps and after the last step the parameters, the
    Adam moments, the step count, the generator's state and the losses are written in one
    transaction to the table ``training_checkpoints`` of that SQLite file, keyed by the canonical
    JSON of the configuration (``repr(prior)``, ``sigma2``, ``n_tokens``, ``n_layers``,
    ``parametrization``, ``batch``, ``seed``, ``init``, ``h2``, ``lr``, ``schedule``; ``steps`` only
    for ``"cosine"``, whose rates depend on it). A later call
    with the same configuration resumes from the latest checkpoint at a step <= ``steps`` and gives
    exactly the parameters and losses of an uninterrupted run. (A prior whose ``repr`` abbreviates
    a large array, ``<array of shape ...>``, is identified by that abbreviation only.)

    Parameters
    ----------
    prior : numerics.priors.Prior
        Distribution of the clean tokens.
    sigma2 : float
        Noise variance, > 0.
    n_tokens : int
        Tokens per context ``n``, >= 1.
    n_layers : int
        Stage-1 layers ``L``, >= 0.
    parametrization : {"scalar", "matrix"}
    steps : int
        Number of Adam steps, >= 1.
    batch : int
        Contexts per step ``B``, >= 1.
    seed : int
        Seed, >= 0.
    init : {"random", "construction"}
        See :func:`init_params`.
    h2 : float, optional
        Stage-1 bandwidth of ``init="construction"``; default ``sigma2 / 4``.
    lr : float
        Adam learning rate, > 0.
    schedule : {"constant", "cosine"}
        Learning-rate schedule.
    store : str or Path, optional
        SQLite file for checkpoints (created if missing).
    checkpoint_every : int
        Steps between checkpoints, >= 1.
    progress : bool
        Show a tqdm bar (on a terminal).

    Returns
    -------
    TrainedTransformer
    """
    from tqdm import tqdm

    if not isinstance(prior, Prior):
        raise TypeError(f"prior must be a numerics.priors.Prior, got {prior!r} of type {type(prior).__name__}")
    sigma2 = check_positive(sigma2, "sigma2")
    n_tokens = check_positive_int(n_tokens, "n_tokens")
    n_layers = check_nonnegative_int(n_layers, "n_layers")
    parametrization = check_option(parametrization, "parametrization", PARAMETRIZATIONS)
    steps = check_positive_int(steps, "steps")
    batch = check_positive_int(batch, "batch")
    seed = check_nonnegative_int(seed, "seed")
    init = check_option(init, "init", INITS)
    h2 = (sigma2 / 4 if h2 is None else check_positive(h2, "h2")) if init == "construction" else None
    lr = check_positive(lr, "lr")
    schedule = check_option(schedule, "schedule", SCHEDULES)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")

    rng = np.random.default_rng(seed)
    params = init_params(prior.dim, n_layers, sigma2, parametrization=parametrization, init=init, h2=h2, rng=rng)
    m = {k: np.zeros_like(p) for k, p in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    losses, start = [], 0
    config = canonical_json({"prior": repr(prior), "sigma2": sigma2, "n_tokens": n_tokens, "n_layers": n_layers,
                             "parametrization": parametrization, "batch": batch, "seed": seed, "init": init,
                             "h2": h2, "lr": lr, "schedule": schedule,
                             **({"steps": steps} if schedule == "cosine" else {})})
    with contextlib.ExitStack() as stack:
        conn = None if store is None else stack.enter_context(_checkpoints(store))
        state = None if conn is None else _load_checkpoint(conn, config, steps)
        if state is not None:
            for name, target in (("params", params), ("m", m), ("v", v)):
                for k, p in target.items():
                    target[k] = np.asarray(state[name][k], dtype=float).reshape(p.shape)
            losses, start = state["losses"], len(state["losses"])
            rng.bit_generator.state = state["rng"]
        scale = np.sqrt(sigma2)
        buffers = _workspace(n_layers, batch, n_tokens)
        bar = stack.enter_context(tqdm(total=steps, initial=start, desc="training", unit="step",
                                       disable=None if progress else True, dynamic_ncols=True))
        for step in range(start + 1, steps + 1):
            clean = prior.sample(batch * n_tokens, rng).reshape(batch, n_tokens, prior.dim)
            noisy = clean + scale * rng.standard_normal(clean.shape)
            loss, grad = _loss_and_gradient(params, parametrization, noisy, clean, buffers)
            if not (np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grad.values())):
                raise FloatingPointError(f"training diverged at step {step}: loss {loss}, a non-finite gradient or "
                                         f"both (lr == {lr}; try a smaller one)")
            rate = lr if schedule == "constant" else lr * 0.5 * (1.0 + np.cos(np.pi * (step - 1) / steps))
            _adam_step(params, grad, m, v, step, rate)
            losses.append(loss)
            if conn is not None and (step % checkpoint_every == 0 or step == steps):
                _save_checkpoint(conn, config, step, {"params": params, "m": m, "v": v, "losses": losses,
                                                      "rng": rng.bit_generator.state})
            bar.update()
    return TrainedTransformer(params, losses)
