r"""The predicted gap's terms for the uniform prior on a sphere in :math:`\mathbb R^3` (E1's third prior), radially.

Everything here is radially symmetric: the noisy tokens, the mean field's refined tokens, Stage 2's marginal and
estimate. A radial density is a mixture of uniform shells, and a Gaussian kernel averaged over the shell of radius
:math:`R` seen from a point at radius :math:`r` has a closed form (:math:`z = rR/h`):

.. math:: E_{y \sim U(S_R)}\big[e^{-\lVert x - y\rVert^2/(2h)}\big] = e^{-(r - R)^2/(2h)}\,\frac{1 - e^{-2z}}{2z},
          \qquad E\big[e^{-\lVert x - y\rVert^2/(2h)}\, y\cdot\hat x\big] = (\text{the same})\; R\,L(z),

with the Langevin function :math:`L(z) = \coth z - 1/z`. So the kernel mean of shells is radial,
:math:`a(r) = \sum_j w_j E_j R_j L(z_j) / \sum_j w_j E_j`, and the Bayes posterior mean under the sphere of
radius :math:`R_0` is :math:`R_0 L(r R_0/\sigma^2)\,\hat x` (one shell at bandwidth :math:`\sigma^2`).

* :func:`mean_field_bias`: the mean field (``N -> oo``) to all orders in ``h2``: ``m`` shells at the radial
  quantiles of the noisy tokens move through the Euler layers :math:`r \leftarrow r + \eta_l (a(r) - r)`;
  Stage 2 over them is held against Bayes over the noisy query density.
* :func:`variance`: Stage 2's Nadaraya-Watson variance over ``n`` independent tokens of the order-zero refined
  density (the sphere blurred by :math:`\sigma^2 - 2 h_2 T`; at :math:`T^*` the sphere itself), its amplification
  by Stage 1 (:func:`attneb.theory.gap.gain` with ``dim = 3``), and the mean inverse effective number of tokens.

Gaps are per coordinate (the squared error's mean over the three coordinates), like E1's.
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
from scipy import special

from . import gap
from ._evaluate import check_count, check_step

__all__ = ["DIM", "MEAN_FIELD_SHELLS", "bayes_radius", "blur_bias_coefficient", "mean_field_bias", "noisy_radial_density",
           "shell_kernel_mean", "variance"]

#: Dimension of the sphere's ambient space.
DIM = 3
#: Radial quantile shells of :func:`mean_field_bias`.
MEAN_FIELD_SHELLS = 512
#: Radial grid spacing, as a fraction of the noise's standard deviation, and its reach beyond the radius.
_SPACING, _REACH = 1.0 / 40.0, 12.0


def _check(radius, sigma2, h2, T, order_zero=True):
    for name, value in (("radius", radius), ("sigma2", sigma2), ("h2", h2)):
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{name} == {value!r} must be finite and > 0")
    if not np.isfinite(T) or T < 0:
        raise ValueError(f"T == {T!r} must be finite and >= 0")
    if order_zero and h2 * T > sigma2 / 2 + 1e-12:
        raise ValueError(f"h2 T == {h2 * T:g} must not exceed sigma2/2 == {sigma2 / 2:g} (the order-zero blur "
                         "sigma2 - 2 h2 T would be negative)")
    return float(radius), float(sigma2), float(h2), float(T)


def _log_shell_average(r, R, h):
    """``log E_{y ~ U(S_R)} exp(-|x - y|^2/(2h))`` for ``|x| = r``, broadcast over ``r`` and ``R``."""
    z = r * R / h
    safe = np.where(z > 0, z, 1.0)
    ratio = np.where(z > 0, -np.expm1(-2 * safe) / (2 * safe), 1.0)
    return -((r - R) ** 2) / (2 * h) + np.log(ratio)


def _langevin(z):
    """``L(z) = coth z - 1/z`` (its series below 1e-3)."""
    z = np.asarray(z, dtype=float)
    small = np.abs(z) < 1e-3
    safe = np.where(small, 1.0, z)
    return np.where(small, z / 3 - z**3 / 45, 1 / np.tanh(safe) - 1 / safe)


def shell_kernel_mean(r, shells, h, weights=None) -> np.ndarray:
    r"""Radial component of the Gaussian-kernel mean of uniform shells seen from radius ``r``.

    .. math:: a(r) = \frac{\sum_j w_j E_j R_j L(r R_j/h)}{\sum_j w_j E_j}, \qquad
              E_j = e^{-(r - R_j)^2/(2h)}\,\frac{1 - e^{-2 r R_j/h}}{2 r R_j/h}

    (log-sum-exp over the shells).

    Parameters
    ----------
    r : array_like, shape (M,)
        Radii of the query points, >= 0.
    shells : array_like, shape (S,)
        Shell radii, >= 0.
    h : float
        Kernel bandwidth (variance), > 0.
    weights : array_like, shape (S,), optional
        Shell masses (default equal).
    """
    r, shells = np.asarray(r, dtype=float).reshape(-1), np.asarray(shells, dtype=float).reshape(-1)
    logw = _log_shell_average(r[:, None], shells[None, :], h)
    if weights is not None:
        logw = logw + np.log(np.asarray(weights, dtype=float))[None, :]
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return (w * shells[None, :] * _langevin(r[:, None] * shells[None, :] / h)).sum(axis=1) / w.sum(axis=1)


def bayes_radius(r, radius, sigma2) -> np.ndarray:
    """Radial component of the Bayes posterior mean under the uniform sphere of ``radius``: ``radius L(r radius/sigma2)``."""
    return radius * _langevin(np.asarray(r, dtype=float) * radius / sigma2)


def noisy_radial_density(r, radius, variance) -> np.ndarray:
    r"""Density of :math:`\lVert x + \sqrt{v} z\rVert` for :math:`x` uniform on the sphere of ``radius`` in
    :math:`\mathbb R^3`: :math:`(r/R)\,(\varphi_v(r - R) - \varphi_v(r + R))`."""
    r = np.asarray(r, dtype=float)
    norm = 1.0 / np.sqrt(2 * np.pi * variance)
    return r / radius * norm * (np.exp(-((r - radius) ** 2) / (2 * variance)) - np.exp(-((r + radius) ** 2) / (2 * variance)))


def _radial_grid(radius, sigma2):
    return np.arange(0.0, radius + _REACH * np.sqrt(sigma2), _SPACING * np.sqrt(sigma2))


def _radial_quantiles(radius, variance, m):
    r = np.linspace(0.0, radius + _REACH * np.sqrt(variance), 200_001)
    density = noisy_radial_density(r, radius, variance)
    cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(r))])
    return np.interp((np.arange(m) + 0.5) / m, cdf / cdf[-1], r)


def mean_field_bias(radius, sigma2, h2, T, eta, m=MEAN_FIELD_SHELLS) -> dict[str, float]:
    r"""Stage 2's bias over the mean field's refined tokens (module docstring), per coordinate.

    .. math:: B = \frac13 \int_0^\infty p(r)\,\big(\hat a_{\sigma^2}(r) - R_0 L(r R_0/\sigma^2)\big)^2\,dr,

    :math:`p` the noisy tokens' radial density, :math:`\hat a_{\sigma^2}` Stage 2 over the refined shells.

    Returns
    -------
    dict
        ``bias``; ``bias_half`` from ``m/2`` shells; ``spread_start`` and ``spread_end``, the shells' radial
        variance at depth 0 and ``T``; ``square_end``, their mean squared radius at ``T`` (a sphere blurred by
        :math:`\varepsilon` has :math:`R^2 + 3\varepsilon`).
    """
    radius, sigma2, h2, T = _check(radius, sigma2, h2, T, order_zero=False)
    check_step(eta)
    m = check_count(m, "m", 4)
    layers = max(1, int(round(T / eta)))
    step = T / layers
    r = _radial_grid(radius, sigma2)
    p = noisy_radial_density(r, radius, sigma2)
    bayes = bayes_radius(r, radius, sigma2)
    out = {}
    for key, count in (("bias", m), ("bias_half", m // 2)):
        shells = start = _radial_quantiles(radius, sigma2, count)
        for _ in range(layers):
            shells = shells + step * (shell_kernel_mean(shells, shells, h2) - shells)
        out[key] = float(np.trapezoid(p * (shell_kernel_mean(r, shells, sigma2) - bayes) ** 2, r) / DIM)
        if key == "bias":
            out["spread_start"], out["spread_end"] = float(start.var()), float(shells.var())
            out["square_end"] = float(np.mean(shells**2))
    return out


@functools.cache
def _laplacian_ratio_gradient():
    """``d/dr (Laplacian(p)/p)`` of the noisy sphere's density in R^3, as a numpy function of ``(r, R, v)`` (sympy)."""
    r, R, v = sp.symbols("r R v", positive=True)
    density = (sp.exp(-(r - R) ** 2 / (2 * v)) - sp.exp(-(r + R) ** 2 / (2 * v))) / (4 * sp.pi * r * R
                                                                                     * sp.sqrt(2 * sp.pi * v))
    laplacian = sp.diff(density, r, 2) + 2 / r * sp.diff(density, r)
    return sp.lambdify((r, R, v), sp.simplify(sp.diff(sp.simplify(laplacian / density), r)), "numpy")


def blur_bias_coefficient(radius, sigma2) -> float:
    r"""``C`` of Stage 2's bias over the sphere blurred by a small variance :math:`\varepsilon`:
    :math:`B = C\varepsilon^2 + O(\varepsilon^3)`, per coordinate.

    Stage 2 over the prior blurred by :math:`\varepsilon` is Tweedie's formula for :math:`p_{\sigma^2 + \varepsilon}`, and
    the heat equation :math:`\partial_v p_v = \Delta p_v/2` gives
    :math:`\hat m - m_B = \varepsilon\,\sigma^2\nabla(\Delta p/(2p)) + O(\varepsilon^2)`, so

    .. math:: C = \frac{\sigma^4}{4 d}\,E_p\big[\lVert\nabla(\Delta p/p)\rVert^2\big]

    (``d = 3``; :math:`\Delta p/p` differentiated by sympy, the expectation over the radial density by the trapezoid
    rule from ``r = 1e-3``). For a point prior (``radius -> 0``) it is :math:`1/\sigma^2`, the Gaussian's
    :math:`\sigma^4/(\tau^2 + \sigma^2)^3` at :math:`\tau^2 = 0`.
    """
    radius, sigma2, _, _ = _check(radius, sigma2, 1.0, 0.0)
    r = np.arange(1e-3, radius + _REACH * np.sqrt(sigma2), 1e-3 * np.sqrt(sigma2))
    slope = _laplacian_ratio_gradient()(r, radius, sigma2)
    return float(sigma2**2 / (4 * DIM) * np.trapezoid(noisy_radial_density(r, radius, sigma2) * slope**2, r))



def _refined_shells(radius, blur):
    """Radial quadrature (radii, masses) of the sphere blurred by ``blur`` (one shell when ``blur`` is 0)."""
    if blur <= 1e-12:
        return np.array([radius]), np.array([1.0])
    step = np.sqrt(blur) / 40.0
    radii = np.arange(step / 2, radius + _REACH * np.sqrt(blur), step)
    masses = noisy_radial_density(radii, radius, blur) * step
    return radii, masses / masses.sum()


def variance(radius, sigma2, h2, T, eta, n) -> dict[str, float]:
    r"""Stage 2's Nadaraya-Watson variance over ``n`` independent tokens of the order-zero refined density, per
    coordinate, averaged over noisy queries; amplified by Stage 1; and the mean inverse effective number of tokens.

    With :math:`\rho` the sphere blurred by :math:`\sigma^2 - 2h_2T` and :math:`g = \rho * \varphi_{\sigma^2}`,

    .. math:: v(q) = \frac{E_{y\sim\rho}[\varphi_{\sigma^2}(q - y)^2\,\lVert y - m(q)\rVert^2]}{3\,n\,g(q)^2},
              \qquad \frac1{n_{\mathrm{eff}}(q)} = \frac{E_{y\sim\rho}[\varphi_{\sigma^2}(q - y)^2]}{n\,g(q)^2},

    where :math:`\varphi^2_{\sigma^2}` is a Gaussian of variance :math:`\sigma^2/2` (shell averages at
    :math:`h = \sigma^2/2`) and :math:`\lVert y - m\rVert^2` averages over a shell to :math:`R^2 + m^2 - 2 m R L(z)`.

    Returns
    -------
    dict
        ``variance`` (:math:`E_p[v]`), ``amplified`` (:math:`E_p[A v]`, :func:`attneb.theory.gap.gain` over
        ``max(1, round(T/eta))`` layers, 3-D) and ``inverse_effective_tokens`` (:math:`E_p[1/n_{\mathrm{eff}}]`).
    """
    radius, sigma2, h2, T = _check(radius, sigma2, h2, T)
    if n < 1:
        raise ValueError(f"n == {n!r} must be >= 1")
    check_step(eta)
    radii, masses = _refined_shells(radius, sigma2 - 2 * h2 * T)
    r = _radial_grid(radius, sigma2)
    r = r[r > 0]
    log_mass = np.log(masses)[None, :]
    z_half = r[:, None] * radii[None, :] / (sigma2 / 2)
    log_g = special.logsumexp(log_mass + _log_shell_average(r[:, None], radii[None, :], sigma2), axis=1)
    m = shell_kernel_mean(r, radii, sigma2, masses)
    spread = np.maximum(radii[None, :] ** 2 + m[:, None] ** 2 - 2 * m[:, None] * radii[None, :] * _langevin(z_half), 0.0)
    log_square = log_mass + _log_shell_average(r[:, None], radii[None, :], sigma2 / 2)
    # phi^2 = (2 pi sigma2)^(-3) e^(-|q-y|^2/sigma2); g = (2 pi sigma2)^(-3/2) sum_j w_j E_j: the constants cancel
    with np.errstate(divide="ignore"):
        v = np.exp(special.logsumexp(log_square + np.log(spread), axis=1) - 2 * log_g) / (DIM * n)
    inverse = np.exp(special.logsumexp(log_square, axis=1) - 2 * log_g) / n
    layers = max(1, int(round(T / eta))) if T > 0 else 0
    slope = np.gradient(log_g, r)
    amplification = gap.gain(np.abs(slope), sigma2, h2, [T / layers] * layers if layers else [], dim=DIM)
    p = noisy_radial_density(r, radius, sigma2)
    return {"variance": float(np.trapezoid(p * v, r)), "amplified": float(np.trapezoid(p * v * amplification, r)),
            "inverse_effective_tokens": float(np.trapezoid(p * inverse, r))}
