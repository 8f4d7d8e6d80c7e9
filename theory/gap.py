r"""The two-stage estimator's excess risk over Bayes, term by term, with no constant fitted to data (1-D priors).

Stage 2 over refined tokens of density :math:`\rho` is Tweedie's formula for the marginal
:math:`g = \rho * \varphi_{\sigma^2}` (the query :math:`q` attends with bandwidth :math:`\sigma^2`):

.. math:: \hat m(q) = q + \sigma^2\,\partial_q \log \hat g(q), \qquad m_B(q) = q + \sigma^2\,\partial_q\log p(q),

with :math:`\hat g` the same smoothing of the refined tokens' empirical measure, and :math:`p = \pi * \varphi_{\sigma^2}`
the noisy density (Bayes). The gap :math:`G = E_q(\hat m - m_B)^2` (per coordinate, :math:`q \sim p`) splits into

* **bias** (:func:`bias`): the mean field's refined density at depth ``T`` is not the prior. In the diffusive
  time :math:`s = h_2 t` it is :math:`\rho^{(0)}(s) + h_2\rho^{(1)}(s) + O(h_2^2)` (:mod:`attneb.theory.second_order`:
  :math:`\rho^{(0)}` the prior's components blurred by :math:`\sigma^2 - 2s`, :math:`\rho^{(1)}` driven by the
  second-order term :math:`R_2`), so that

  .. math:: g = g^{(0)} + h_2 g^{(1)}, \qquad g^{(1)}(q) = \int_0^s \big(R_2[\rho^{(0)}(u)] * \varphi_{\sigma^2 - 2(s-u)}\big)(q)\,du

  (the backward heat equation's deconvolution by :math:`2(s - u)` followed by Stage 2's smoothing by :math:`\sigma^2`
  is a smoothing by :math:`\sigma^2 - 2(s-u) \ge 0`: well defined). At :math:`T = T^*` (:math:`s = \sigma^2/2`)
  :math:`g^{(0)} = p` and the bias is :math:`\sigma^4 h_2^2 E_p[(\partial_q (g^{(1)}/p))^2]`: the estimator's error is
  linear in the residual blur, the risk quadratic. For a Gaussian prior the mean field stays Gaussian and
  :func:`gaussian_bias` gives the bias to all orders, through the exact Euler layers
  (:func:`attneb.theory.depth_noise.gaussian_variance_map`).
* **variance** (:func:`variance`): the Nadaraya-Watson variance of Stage 2 over ``N`` tokens drawn from
  :math:`\rho`, by the delta method,

  .. math:: V_{NW} = \frac1N E_q\Big[\frac{\int \varphi_{\sigma^2}(q - y)^2 (y - m(q))^2 \rho(y)\,dy}{g(q)^2}\Big],

* **amplified fluctuations**: the refined tokens are not ``N`` independent draws: Stage 1 grows the sampling
  noise of the noisy tokens, mode ``k`` by :math:`\prod_l (1 + \eta_l\lambda(k))` over its layers
  (:math:`\lambda(k) = h_2 k^2 e^{-h_2 k^2/2}`, :func:`attneb.theory.stability.growth_rate`; linear theory about
  a uniform density, applied locally). Stage 2 sees a density perturbation :math:`\delta\rho` through
  :math:`\sigma^2 (\delta g' - a\,\delta g)/g`, :math:`a = g'/g`, i.e. mode ``k`` with weight
  :math:`(k^2 + a^2) e^{-\sigma^2 k^2}`; the variance term is :math:`E_q[A(q)\,v_{NW}(q)]` with the gain

  .. math:: A(q) = \frac{\int (k^2 + a(q)^2)\,e^{-\sigma^2 k^2} \prod_l (1 + \eta_l\lambda(k))^2\,dk}
                        {\int (k^2 + a(q)^2)\,e^{-\sigma^2 k^2}\,dk}

  (1 at depth 0, where the term is :math:`V_{NW}`).

The predicted gap is bias + amplified variance (:func:`predicted_gap`, with the first-order bias). Left out: the
bias's :math:`O(h_2^3)` (mixtures; the Gaussian's is exact), the Euler step in the mixtures' bias (continuous depth),
the density's non-uniformity in the gain (local linear theory), fluctuations beyond linear order (they matter as
``N`` approaches :math:`N_c`), the self-attention of an in-sample query (an :math:`O(1/N)` bias), and the
correlation between bias and fluctuation. Question G6 (:mod:`attneb.proofs_check.topics.predicted_gap`) uses
:func:`mean_field_bias` (all orders in ``h2``, through the Euler layers) in place of :func:`bias`.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from . import depth_noise, second_order, stability
from ._evaluate import check_count, check_step

__all__ = ["bias", "gaussian_bias", "gain", "inverse_effective_tokens", "mean_field_bias", "predicted_gap", "variance"]

#: Gauss-Legendre nodes of the integral over the diffusive time in g1.
_TIME_NODES = 32
#: Grid spacing (fraction of the smallest standard deviation of the order-zero mixture) and reach (standard
#: deviations of the widest noisy component beyond the outermost means).
_SPACING, _REACH = 1.0 / 30.0, 12.0


def _grid(means, variances, sigma2):
    sd_min = np.sqrt(variances.min())
    reach = _REACH * np.sqrt(variances.max() + sigma2)
    return np.arange(means.min() - reach, means.max() + reach + 1e-12, _SPACING * sd_min)


def _mixture_density(x, weights, means, variances):
    return (weights[:, None] * np.exp(-0.5 * (x[None, :] - means[:, None]) ** 2 / variances[:, None])
            / np.sqrt(2 * np.pi * variances[:, None])).sum(axis=0)


def _smooth(values, x, width):
    """``values * phi_width`` on the grid ``x`` by a discrete Gaussian kernel normalised to sum 1 (the identity at 0)."""
    if width <= 0:
        return values.copy()
    kernel = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / width)
    return (kernel / kernel.sum(axis=1, keepdims=True)) @ values


def _check(weights, means, tau2s, sigma2, h2, depth):
    weights, means, tau2s = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (weights, means, tau2s))
    if not (weights.size == means.size == tau2s.size) or weights.size == 0:
        raise ValueError(f"weights, means and tau2s must be non-empty and of one length, got sizes {weights.size}, "
                         f"{means.size}, {tau2s.size}")
    if not all(np.all(np.isfinite(a)) for a in (weights, means, tau2s)) or np.any(weights <= 0) or np.any(tau2s < 0):
        raise ValueError(f"weights == {weights.tolist()} must be > 0, means == {means.tolist()} finite and "
                         f"tau2s == {tau2s.tolist()} >= 0")
    weights = weights / weights.sum()
    for name, value in (("sigma2", sigma2), ("h2", h2)):
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{name} == {value!r} must be finite and > 0")
    if not np.isfinite(depth) or depth < 0:
        raise ValueError(f"T == {depth!r} must be finite and >= 0")
    s = h2 * depth
    if s >= (tau2s.min() + sigma2) / 2:
        raise ValueError(f"h2 T == {s:g} must stay below (min(tau2) + sigma2)/2 == {(tau2s.min() + sigma2) / 2:g}")
    return weights, means, tau2s, float(sigma2), float(h2), float(depth), s


def _first_order_marginal(weights, means, tau2s, sigma2, h2, depth, x):
    """``(g0, g1)`` on ``x``: the order-zero marginal of refined tokens + Stage-2 noise and its first-order term."""
    s = h2 * depth
    g0 = _mixture_density(x, weights, means, tau2s + 2 * sigma2 - 2 * s)
    nodes, node_weights = np.polynomial.legendre.leggauss(_TIME_NODES)
    g1 = np.zeros_like(x)
    for node, w in zip(0.5 * s * (nodes + 1), 0.5 * s * node_weights):
        r2 = second_order.second_order_term(weights, means, tau2s + sigma2 - 2 * node, x)
        g1 += w * _smooth(r2, x, sigma2 - 2 * (s - node))
    return g0, g1


def bias(weights, means, tau2s, sigma2, h2, T) -> float:
    r"""Stage 2's bias over the mean field's refined tokens, per coordinate, to leading order in ``h2``.

    .. math:: B = \sigma^4 E_p\big[(\partial_q\log g^{(0)} - \partial_q \log p + h_2\,\partial_q(g^{(1)}/g^{(0)}))^2\big]

    (module docstring), on a uniform grid (spacing 1/30 of the smallest component's standard deviation; time
    integral by 32-point Gauss-Legendre). The prior is the mixture :math:`\sum_c w_c\,\mathcal N(\mu_c, \tau_c^2)`
    (``tau2s`` may be 0: atoms).

    Parameters
    ----------
    weights, means, tau2s : array_like, shape (C,)
        The prior's components (weights > 0, normalised here; ``tau2s >= 0``).
    sigma2, h2 : float
        Noise variance and Stage-1 bandwidth, > 0.
    T : float
        Stage-1 depth, with ``h2 T < (min(tau2s) + sigma2) / 2``.
    """
    weights, means, tau2s, sigma2, h2, depth, _ = _check(weights, means, tau2s, sigma2, h2, T)
    x = _grid(means, tau2s + sigma2, sigma2)
    p = _mixture_density(x, weights, means, tau2s + sigma2)
    g0, g1 = _first_order_marginal(weights, means, tau2s, sigma2, h2, depth, x)
    error = np.gradient(np.log(g0) - np.log(p) + h2 * g1 / g0, x)
    return float(sigma2**2 * np.trapezoid(p * error**2, x))


def gaussian_bias(tau2, sigma2, h2, T, eta) -> float:
    r"""Stage 2's bias for a Gaussian prior :math:`\mathcal N(m, \tau^2)`, to all orders, after Euler layers.

    The refined tokens' mean-field variance :math:`s` after ``n_layers(T, eta)`` layers of the exact map
    (:func:`attneb.theory.depth_noise.gaussian_variance_map`); Stage 2 is then the linear map
    :math:`m + s/(s + \sigma^2)(q - m)` and

    .. math:: B = (\tau^2 + \sigma^2)\Big(\frac{s}{s + \sigma^2} - \frac{\tau^2}{\tau^2 + \sigma^2}\Big)^2.
    """
    check_step(eta)
    if not np.isfinite(T) or T < 0:
        raise ValueError(f"T == {T!r} must be finite and >= 0")
    layers = max(1, int(round(T / eta)))
    s = depth_noise.gaussian_variance_map(tau2 + sigma2, h2, T / layers, layers)[-1]
    return float((tau2 + sigma2) * (s / (s + sigma2) - tau2 / (tau2 + sigma2)) ** 2)


def gain(a, sigma2, h2, steps, dim=1):
    r"""The gain :math:`A` of Stage-2 variance from Stage 1's amplified fluctuations (module docstring).

    In ``dim`` dimensions the modes of an isotropic sampling noise are counted by :math:`k^{d-1}\,dk`, and
    Stage 2 sees mode :math:`\mathbf k` with weight :math:`(|\mathbf k|^2 + |a|^2) e^{-\sigma^2 |\mathbf k|^2}`
    (the growth rate is the same in every dimension, S1):

    .. math:: A = \frac{\int_0^\infty (k^2 + |a|^2)\,e^{-\sigma^2 k^2} \prod_l (1 + \eta_l\lambda(k))^2\,k^{d-1}\,dk}
                       {\int_0^\infty (k^2 + |a|^2)\,e^{-\sigma^2 k^2}\,k^{d-1}\,dk}.

    Parameters
    ----------
    a : array_like
        :math:`|\nabla g|/g` at the queries.
    sigma2, h2 : float
        Stage-2 and Stage-1 bandwidths.
    steps : sequence of float
        The Euler layers' steps :math:`\eta_l` (empty: depth 0, gain 1).
    dim : int
        Dimension, >= 1.
    """
    dim = check_count(dim, "dim", 1)
    a = np.asarray(a, dtype=float)
    k = np.linspace(0.0, 12.0 / np.sqrt(min(sigma2, h2)), 4001)
    growth = np.ones_like(k)
    rate = stability.growth_rate(k, h2)
    for step in steps:
        growth *= (1 + step * rate) ** 2
    base = np.exp(-sigma2 * k**2) * k ** (dim - 1)
    # Both integrals are linear in the weight k^2 + |a|^2: two integrals each, whatever the number of queries.
    grown, plain = (np.trapezoid(np.stack((k**2 * f, f)), k, axis=1) for f in (base * growth, base))
    return (grown[0] + a**2 * grown[1]) / (plain[0] + a**2 * plain[1])


def _nadaraya_watson(weights, means, tau2s, sigma2, s):
    """Grid ``x``, noisy density ``p``, Stage 2's marginal ``g``, ``E_y[phi^2 (y - m)^2]`` and ``E_y[phi^2]`` at ``x``
    for tokens of the order-zero refined density at diffusive time ``s``."""
    refined = tau2s + sigma2 - 2 * s
    x = _grid(means, refined, sigma2)
    rho = _mixture_density(x, weights, means, refined)
    p = _mixture_density(x, weights, means, tau2s + sigma2)
    kernel = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / sigma2) / np.sqrt(2 * np.pi * sigma2)
    # The trapezoidal rule over the tokens' positions as matrix-vector products; (position - m)^2 expanded in powers
    # of y = position - c about the grid's centre c (no cancellation where the mixture sits far from 0).
    spacing = np.diff(x)
    rule = np.concatenate(([spacing[0]], spacing[:-1] + spacing[1:], [spacing[-1]])) / 2 * rho
    centre = (x[0] + x[-1]) / 2
    y = x - centre
    g, first = (kernel @ np.stack((rule, rule * y), axis=1)).T
    offset = first / g  # m - c
    np.square(kernel, out=kernel)
    square, linear, quadratic = (kernel @ np.stack((rule, rule * y, rule * y**2), axis=1)).T
    spread = quadratic - 2 * offset * linear + offset**2 * square
    return x, p, g, spread, square


def variance(weights, means, tau2s, sigma2, h2, T, eta, n) -> tuple[float, float]:
    r"""``(V_NW, V_amplified)``: Stage 2's Nadaraya-Watson variance over ``n`` independent tokens of the refined
    density (its order-zero mixture at depth ``T``), and the same with Stage 1's gain :math:`A(q)` (``n_layers(T,
    eta)`` Euler layers), per coordinate, averaged over noisy queries.
    """
    weights, means, tau2s, sigma2, h2, depth, s = _check(weights, means, tau2s, sigma2, h2, T)
    if n < 1:
        raise ValueError(f"n == {n!r} must be >= 1")
    check_step(eta)
    x, p, g, spread, _ = _nadaraya_watson(weights, means, tau2s, sigma2, s)
    spread = spread / g**2 / n
    layers = max(1, int(round(depth / eta))) if depth > 0 else 0
    amplified = spread * gain(np.gradient(np.log(g), x), sigma2, h2, [depth / layers] * layers if layers else [])
    return float(np.trapezoid(p * spread, x)), float(np.trapezoid(p * amplified, x))


def inverse_effective_tokens(weights, means, tau2s, sigma2, h2, T, n) -> float:
    r"""The mean over noisy queries of :math:`1/n_{\mathrm{eff}}(q)`, the inverse effective number of tokens under
    Stage 2's kernel (Kish's: :math:`n_{\mathrm{eff}} = (\sum_j K_j)^2/\sum_j K_j^2`), for ``n`` tokens of the
    order-zero refined density at depth ``T``, to leading order in ``1/n`` (a ratio of expectations):

    .. math:: E_p\Big[\frac{\int \varphi_{\sigma^2}(q - y)^2\rho(y)\,dy}{n\,g(q)^2}\Big].

    The delta method behind :func:`variance` drops terms of relative order :math:`1/n_{\mathrm{eff}}`.
    """
    weights, means, tau2s, sigma2, h2, depth, s = _check(weights, means, tau2s, sigma2, h2, T)
    if n < 1:
        raise ValueError(f"n == {n!r} must be >= 1")
    x, p, g, _, square = _nadaraya_watson(weights, means, tau2s, sigma2, s)
    return float(np.trapezoid(p * square / g**2, x) / n)


#: Quantile tokens of :func:`mean_field_bias`.
MEAN_FIELD_TOKENS = 1024


def _kernel_mean(queries, keys, h2):
    """Gaussian-kernel mean of 1-D ``keys`` at each query, by log-sum-exp (exact sums, no grid), in one array."""
    weights = np.subtract.outer(queries, keys)
    np.square(weights, out=weights)
    weights *= -0.5 / h2
    weights -= weights.max(axis=1, keepdims=True)
    np.exp(weights, out=weights)
    return weights @ keys / weights.sum(axis=1)


def _mixture_quantiles(weights, means, variances, m):
    """``m`` points at the quantiles ``(i + 1/2)/m`` of a 1-D Gaussian mixture (inverse CDF on a fine grid)."""
    sd = np.sqrt(variances)
    x = np.linspace(means.min() - 12 * sd.max(), means.max() + 12 * sd.max(), 200_001)
    cdf = weights @ special.ndtr((x[None, :] - means[:, None]) / sd[:, None])
    return np.interp((np.arange(m) + 0.5) / m, cdf, x)


def _within_variance(points, means):
    """Variance of the points about their nearest component mean, averaged over the components they fall in."""
    nearest = np.argmin(np.abs(points[:, None] - means[None, :]), axis=1)
    return float(np.mean([points[nearest == c].var() for c in np.unique(nearest)]))


def mean_field_bias(weights, means, tau2s, sigma2, h2, T, eta, m=MEAN_FIELD_TOKENS) -> dict[str, float]:
    r"""Stage 2's bias over the mean field's refined tokens, to all orders in ``h2``, through the Euler layers.

    The mean field (:math:`N \to \infty`) computed directly, with no expansion: ``m`` tokens at the quantiles of
    the noisy density :math:`p = \pi * \varphi_{\sigma^2}` (a sample without sampling noise) move through
    ``max(1, round(T/eta))`` Euler layers :math:`x \leftarrow x + \eta_l (a(x) - x)` with exact kernel sums
    (log-sum-exp; its own code, not :mod:`attneb.numerics`); Stage 2 over them at bandwidth :math:`\sigma^2` is
    held against Tweedie's formula :math:`q + \sigma^2 p'(q)/p(q)` on :func:`bias`'s grid:

    .. math:: B = E_p\big[(\hat m(q) - m_B(q))^2\big].

    Returns
    -------
    dict
        ``bias``; ``bias_half``, the same from ``m/2`` tokens (their difference measures the quantile
        discretisation); ``spread_start`` and ``spread_end``, the tokens' variance about their nearest component
        mean at depth 0 and ``T`` (averaged over components).
    """
    weights, means, tau2s, sigma2, h2, depth, _ = _check(weights, means, tau2s, sigma2, h2, T)
    check_step(eta)
    m = check_count(m, "m", 4)
    layers = max(1, int(round(depth / eta)))
    step = depth / layers
    x = _grid(means, tau2s + sigma2, sigma2)
    noisy = tau2s + sigma2
    p = _mixture_density(x, weights, means, noisy)
    slope = -(weights[:, None] * (x[None, :] - means[:, None]) / noisy[:, None]
              * np.exp(-0.5 * (x[None, :] - means[:, None]) ** 2 / noisy[:, None])
              / np.sqrt(2 * np.pi * noisy[:, None])).sum(axis=0)
    bayes = x + sigma2 * slope / p
    out = {}
    for key, count in (("bias", m), ("bias_half", m // 2)):
        tokens = start = _mixture_quantiles(weights, means, noisy, count)
        for _ in range(layers):
            tokens = tokens + step * (_kernel_mean(tokens, tokens, h2) - tokens)
        out[key] = float(np.trapezoid(p * (_kernel_mean(x, tokens, sigma2) - bayes) ** 2, x))
        if key == "bias":
            out["spread_start"], out["spread_end"] = _within_variance(start, means), _within_variance(tokens, means)
    return out


def predicted_gap(weights, means, tau2s, sigma2, h2, T, eta, n) -> dict[str, float]:
    """The terms of the predicted gap and their sum: ``bias``, ``variance`` (unamplified, for reference),
    ``fluctuation`` (the amplified variance's excess over it) and ``gap = bias + amplified variance``."""
    b = bias(weights, means, tau2s, sigma2, h2, T)
    v, amplified = variance(weights, means, tau2s, sigma2, h2, T, eta, n)
    return {"bias": b, "variance": v, "fluctuation": amplified - v, "gap": b + amplified}
