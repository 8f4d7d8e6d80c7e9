r"""Stage 1 with an explicit noise schedule: the oracle reverse flow and the annealed empirical flow.

The paper's Stage 1 has no schedule: one bandwidth :math:`h_2` in every layer and a horizon
:math:`T^* = \sigma^2/(2h_2)`. This module gives the two comparators with a schedule (issue 11,
experiment E7), with the same number of layers ``L`` and the same tokens.

The reverse flow
----------------
Noising is variance exploding: :math:`x_s = x + \sqrt{s}\,z` for noise levels
:math:`s \in [0, \sigma^2]`, whose density :math:`p_s = \rho_0 * \varphi_s` obeys the heat
equation :math:`\partial_s p_s = \tfrac12 \Delta p_s`. Its probability-flow ODE
:math:`dx/ds = -\tfrac12 \nabla\log p_s(x)` moves every point so that the law follows
:math:`p_s`: run from :math:`s = \sigma^2` down to 0, it transports :math:`p_{\sigma^2}` onto
:math:`\rho_0`, token by token and without noise. By Tweedie,
:math:`\nabla\log p_s(x) = (D_s(x) - x)/s` with :math:`D_s(x) = E[x_0 \mid x_s = x]`, so

.. math:: \frac{dx}{d(-s)} = \tfrac12 \nabla\log p_s(x) = \frac{D_s(x) - x}{2s}, \qquad
          \frac{dx}{d\sigma_s} = \frac{x - D_s(x)}{\sigma_s} \quad (\sigma_s = \sqrt s).

The paper's particle flow is this ODE with a biased score. In mean field with a small bandwidth
the tokens of depth :math:`t` have density :math:`p_{s(t)}`, :math:`s(t) = \sigma^2 - 2h_2 t`
(the depth-noise relation C6). The reverse flow's velocity in depth is
:math:`-\tfrac{ds}{dt}\cdot\tfrac12\nabla\log p_s = h_2 \nabla\log p_s`, while the particles move
with :math:`a_t(x) - x = h_2 \nabla\log(p_s * \varphi_{h_2})(x) = h_2 \nabla\log p_{s + h_2}(x)`:
the score at level :math:`s + h_2` instead of :math:`s`. Its relative bias :math:`h_2/s` is small
at the start and the whole score once :math:`s \lesssim h_2`, at the end of Stage 1. A bandwidth
that shrinks with :math:`s` keeps that bias a fixed fraction; its price is the variance of a
kernel score estimated from the fewer tokens within :math:`\sqrt{h}` of each other.

The layers (both flows, ``L`` each)
-----------------------------------
Noise levels :func:`noise_levels`: :math:`\sigma_l = \sigma(1 - l/L)`, :math:`s_l = \sigma_l^2`,
:math:`l = 0..L`, uniform in the noise standard deviation. Layer ``l`` is an explicit Euler step
of :math:`dx/d\sigma = (x - D)/\sigma` in :math:`\sigma` from :math:`\sigma_l` to
:math:`\sigma_{l+1}`, which is also the exponential integrator in :math:`s` (freeze :math:`D` over
the step and solve exactly: :math:`x - D \propto \sigma`), the deterministic DDIM update:

.. math:: x_{l+1} = x_l + \Big(1 - \frac{\sigma_{l+1}}{\sigma_l}\Big)\big(D_l(x_l) - x_l\big)
          = x_l + \frac{D_l(x_l) - x_l}{L - l},

first order in :math:`1/L`. The last layer (:math:`\sigma_L = 0`) sets :math:`x = D_{L-1}(x)`;
nothing is evaluated at :math:`s = 0`.

* Oracle (:func:`oracle_reverse_flow`): :math:`D_l = E[x_0 \mid x_{s_l} = \cdot\,]`, the prior's
  exact posterior mean at the remaining level :math:`s_l`.
* Annealed (:func:`annealed_flow`): Tweedie's formula with the score of the kernel density
  estimate of bandwidth :math:`h_l` over the current tokens,
  :math:`\hat D_l(x) = x + (s_l/h_l)(a_{h_l}(x) - x)` (:math:`a_h` the kernel mean; tokens of
  density :math:`p_{s_l}` make a KDE of density :math:`p_{s_l + h_l}`), with
  :math:`h_l = c\,s_l`: proportional to the noise still to remove, so that the score's relative
  bias is the same fraction :math:`c` at every layer. Every layer is a residual attention layer
  :math:`x \leftarrow x + \eta_l(a_{h_l}(x) - x)` with :math:`\eta_l = 1/(c(L - l))`
  (:func:`annealed_schedule`); its depth budget :math:`2\sum_l \eta_l h_l = 2\sum_l s_l/(L-l)
  = \sigma^2 (L + 1)/L` does not depend on :math:`c`.

Why uniform in :math:`\sigma`: fixed before the E7 runs by a pilot of the oracle (seeds of its
own, ``N = 16384``, :math:`\sigma^2 = 0.5`): on the grid uniform in :math:`s` the oracle's gap to
Bayes at ``L = 4`` was 2 to 30 times that on the grid uniform in :math:`\sigma` (Gaussian
1.9e-3 vs 9.1e-4, two clusters 5.3e-3 vs 1.6e-3, three atoms 5.4e-4 vs 1.8e-5), and the grid
uniform in :math:`\sigma` was within 30% of the best of :math:`s_l = \sigma^2(1 - l/L)^\rho`,
:math:`\rho \in \{1, 2, 3, 4, 6\}`, for every prior and ``L`` in {4, 16}.

What the oracle tends to. As :math:`L \to \infty` the oracle's tokens are :math:`\Phi(\tilde x_i)`,
:math:`\Phi` the flow map of the ODE, which pushes :math:`p_{\sigma^2}` onto :math:`\rho_0`: the
refined tokens are ``N`` independent draws of the prior, and Stage 2 over them is the
clean-context empirical Bayes estimator (claim G3), up to the pairing of each query with its own
key. Its gap to Bayes is positive at finite ``N`` and tends to 0 as ``N`` grows: that, not 0, is
the ideal Stage 1's gap. For a Gaussian prior :math:`N(m, \tau^2)`, :math:`D_s` is linear and
:math:`\Phi(x) = m + \sqrt{\tau^2/(\tau^2 + \sigma^2)}\,(x - m)`.
"""

from __future__ import annotations

import numpy as np

from . import binned, flow, kernels
from .priors import Prior
from .validation import (
    check_array,
    check_interval,
    check_nonnegative_int,
    check_option,
    check_positive,
    check_positive_int,
)

__all__ = ["annealed_flow", "annealed_schedule", "noise_levels", "oracle_reverse_flow"]


def noise_levels(sigma2, n_layers) -> np.ndarray:
    r"""The noise levels of the layers' grid, uniform in the noise standard deviation.

    .. math:: s_l = \sigma^2 \Big(1 - \frac{l}{L}\Big)^2, \qquad l = 0, \dots, L

    Parameters
    ----------
    sigma2 : float
        Noise variance of the tokens at depth 0, > 0.
    n_layers : int
        Number of layers ``L``, >= 0.

    Returns
    -------
    ndarray, shape (L + 1,)
        Decreasing from ``sigma2`` to 0 (just ``[sigma2]`` for ``L = 0``).
    """
    sigma2 = check_positive(sigma2, "sigma2")
    n_layers = check_nonnegative_int(n_layers, "n_layers")
    if n_layers == 0:
        return np.array([sigma2])
    return sigma2 * (1.0 - np.arange(n_layers + 1) / n_layers) ** 2


def annealed_schedule(sigma2, n_layers, ratio) -> tuple[np.ndarray, np.ndarray]:
    r"""Bandwidths and residual steps of the annealed flow's layers.

    .. math:: h_l = c\, s_l, \qquad \eta_l = \frac{1}{c\,(L - l)}, \qquad l = 0, \dots, L - 1,

    with :math:`s_l` the levels of :func:`noise_levels` and :math:`c` = ``ratio``.

    Parameters
    ----------
    sigma2 : float
        Noise variance, > 0.
    n_layers : int
        Number of layers ``L``, >= 0.
    ratio : float
        :math:`c = h_l / s_l`, > 0.

    Returns
    -------
    bandwidths, steps : ndarray, shape (L,)
    """
    ratio = check_positive(ratio, "ratio")
    levels = noise_levels(sigma2, n_layers)[:-1]
    remaining = len(levels) - np.arange(len(levels))
    return ratio * levels, 1.0 / (ratio * remaining)


def oracle_reverse_flow(noisy, prior, sigma2, n_layers) -> np.ndarray:
    r"""The reverse (probability-flow) ODE with the prior's exact score, in ``n_layers`` layers.

    .. math:: x_{l+1} = x_l + \frac{D_{s_l}(x_l) - x_l}{L - l}, \qquad
              D_s(x) = E[x_0 \mid x_s = x] \;(\text{``prior.posterior_mean(x, s)``})

    on the levels :math:`s_l` of :func:`noise_levels` (module docstring): each token moves on its
    own, without attention. With ``n_layers = 1`` it is the posterior mean; as ``n_layers`` grows
    it tends, at first order, to the flow map that transports the noisy law onto the prior.

    Parameters
    ----------
    noisy : array_like, shape (N, d)
        The noisy tokens, at noise variance ``sigma2``.
    prior : numerics.priors.Prior
        The prior of the clean tokens, on ``R^d``.
    sigma2 : float
        Noise variance, > 0.
    n_layers : int
        Number of layers ``L``, >= 0 (0 returns the tokens unchanged).

    Returns
    -------
    ndarray, shape (N, d)
    """
    noisy = check_array(noisy, "noisy")
    if not isinstance(prior, Prior):
        raise TypeError(f"prior must be a numerics.priors.Prior, got {prior!r} of type {type(prior).__name__}")
    if noisy.shape[1] != prior.dim:
        raise ValueError(f"noisy has d == {noisy.shape[1]} but the prior {prior!r} has dim == {prior.dim}")
    levels = noise_levels(sigma2, n_layers)
    tokens = noisy
    for layer, level in enumerate(levels[:-1]):
        tokens = tokens + (prior.posterior_mean(tokens, float(level)) - tokens) / (n_layers - layer)
    return tokens


def annealed_flow(noisy, sigma2, n_layers, ratio, *, backend="auto", tol=1e-9,
                  budget_bytes=kernels.DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""The particle flow with a bandwidth proportional to the noise still to remove, in ``n_layers`` layers.

    .. math:: x_{l+1} = x_l + \eta_l\big(a_{h_l}(x_l) - x_l\big), \qquad
              a_h(x) = \sum_j \mathrm{softmax}_j\!\Big(-\frac{\lVert x - x_j^l\rVert^2}{2h}\Big) x_j^l,

    with :math:`(h_l, \eta_l)` of :func:`annealed_schedule`: the oracle's layers
    (:func:`oracle_reverse_flow`) with the posterior mean replaced by Tweedie's formula on the
    kernel score of the current tokens, :math:`x + (s_l/h_l)(a_{h_l}(x) - x)`. With one layer it is
    :class:`attneb.numerics.estimators.TweedieKDE` of bandwidth ``ratio * sigma2`` applied to the batch
    itself.

    Parameters
    ----------
    noisy : array_like, shape (N, d)
        The noisy tokens, at noise variance ``sigma2``.
    sigma2 : float
        Noise variance, > 0.
    n_layers : int
        Number of layers ``L``, >= 0 (0 returns the tokens unchanged).
    ratio : float
        :math:`c = h_l / s_l`, > 0.
    backend, tol, budget_bytes
        Kernel path of every layer, as in :func:`attneb.numerics.flow.velocity`, chosen per layer. On the
        binned path the kernel mean of layer ``l`` is within ``tol * R * sqrt(h_l)`` of the exact
        one, ``R`` the largest power of 2 not above ``max(r_0, sqrt(h_0)) / sqrt(h_0)``, ``r_0``
        the largest coordinate range of ``noisy``: at most ``tol * max(r_0, sqrt(h_0))``, tighter
        as the bandwidth shrinks.

    Returns
    -------
    ndarray, shape (N, d)
    """
    noisy = check_array(noisy, "noisy")
    n_layers = check_nonnegative_int(n_layers, "n_layers")
    bandwidths, steps = annealed_schedule(sigma2, n_layers, ratio)
    backend = check_option(backend, "backend", binned.BACKENDS)
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    budget_bytes = check_positive_int(budget_bytes, "budget_bytes")
    if n_layers == 0:
        return noisy
    spread = max(float(np.ptp(noisy, axis=0).max()), np.sqrt(bandwidths[0]))
    # a power of 2 keeps scale / sqrt(h_l) bit-identical in every layer: the grid's spacing is planned once
    reach = 2.0 ** np.floor(np.log2(spread / np.sqrt(bandwidths[0])))
    tokens = noisy
    for h2, step in zip(bandwidths, steps):
        tokens = tokens + step * _velocity(tokens, float(h2), reach * np.sqrt(h2), backend, tol, budget_bytes)
    return tokens


def _velocity(tokens, h2, scale, backend, tol, budget_bytes):
    """``a_h2(x) - x`` for every token, on the path ``backend`` resolves to; binned sums to ``tol * scale``."""
    path = binned.resolve_backend(backend, len(tokens), tokens, h2, tol=tol, scale=scale)
    if path == "binned":
        return binned.kernel_mean(tokens, tokens, h2, tol=tol, scale=scale) - tokens
    return flow.velocity(tokens, h2, backend=path, tol=tol, budget_bytes=budget_bytes)
