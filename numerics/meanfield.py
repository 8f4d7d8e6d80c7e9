r"""Particle measurements of mean-field quantities: variance horizons and mode growth.

These run the Stage-1 flow (:func:`numerics.flow.particle_flow`) on prepared token
sets and measure what the mean-field analysis predicts, so that ``proofs_check``
can compare measurement and derivation:

* :func:`variance_horizon` -- the depth (and the number of Euler layers) at which the
  token variance, which starts at :math:`\tau^2 + \sigma^2`, first falls to :math:`\tau^2`;
* :func:`mode_growth_rate` -- the exponential growth rate of a small sinusoidal
  displacement :math:`u(x) = \epsilon \sin(kx)` of tokens on a uniform lattice, whose
  linearised density perturbation :math:`-\rho_0 u'(x)` grows at the rate of the
  Fourier mode :math:`k` of the linearised mean-field PDE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import flow, stats
from .validation import check_array, check_interval, check_positive, check_positive_int

__all__ = ["VarianceHorizon", "mode_growth_rate", "variance_horizon"]


@dataclass(frozen=True)
class VarianceHorizon:
    """Where the token variance first reaches the target.

    Attributes
    ----------
    depth : float
        Depth at which the pooled per-coordinate variance reaches ``target``, by linear
        interpolation between the two layers around the crossing.
    layers : int
        The first layer count whose variance is ``<= target``.
    depths, variances : ndarray
        The variance after every layer (depth 0 included), up to the crossing.
    """

    depth: float
    layers: int
    depths: np.ndarray
    variances: np.ndarray


def _pooled_variance(tokens: np.ndarray) -> float:
    return float(tokens.var(axis=0, ddof=1).mean())


def variance_horizon(x0, h2, target, *, eta=0.01, max_layers=100_000) -> VarianceHorizon:
    r"""Run Euler layers of step ``eta`` until the token variance falls to ``target``.

    The variance is the per-coordinate sample variance averaged over coordinates,
    :math:`\frac1d \sum_c \widehat{\mathrm{Var}}(x_{\cdot c})`.

    Parameters
    ----------
    x0 : array_like, shape (N, d)
        Tokens at depth 0 (N >= 2).
    h2 : float
        Kernel bandwidth, > 0.
    target : float
        Variance to reach, > 0 and below the starting variance.
    eta : float
        Layer step in (0, 1].
    max_layers : int
        Give up (``RuntimeError``) after this many layers.
    """
    tokens = check_array(x0, "x0")
    if tokens.shape[0] < 2:
        raise ValueError(f"x0 has {tokens.shape[0]} row; a variance needs at least 2 tokens")
    h2 = check_positive(h2, "h2")
    target = check_positive(target, "target")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    max_layers = check_positive_int(max_layers, "max_layers")
    variances = [_pooled_variance(tokens)]
    if variances[0] <= target:
        raise ValueError(f"target == {target} is not below the starting variance {variances[0]:.6g}")
    while variances[-1] > target:
        if len(variances) > max_layers:
            raise RuntimeError(f"variance still {variances[-1]:.6g} > target {target} after {max_layers} layers")
        tokens = tokens + eta * flow.velocity(tokens, h2)
        variances.append(_pooled_variance(tokens))
    layers = len(variances) - 1
    v0, v1 = variances[-2], variances[-1]
    depth = eta * (layers - 1 + (v0 - target) / (v0 - v1))
    return VarianceHorizon(depth, layers, eta * np.arange(layers + 1), np.array(variances))


def mode_growth_rate(h2, k, *, spacing=0.1, length=200.0, amplitude=1e-4, T=2.0, n_times=9, margin=40.0):
    r"""Measure the growth rate of a sinusoidal perturbation of a uniform token lattice.

    Tokens start at :math:`x_i = a_i + \epsilon \sin(k a_i)` on the lattice
    :math:`a_i = i \cdot \mathrm{spacing}` of ``[0, length)`` (1-D). At ``n_times`` depths
    in ``[0, T]`` the displacement :math:`x_i(t) - a_i`, restricted to the interior
    ``[margin, length - margin]`` (away from the edges of the block, which move on their
    own), is projected on :math:`\sin(k a)` and :math:`\cos(k a)`; the log of the
    amplitude is fitted linearly in :math:`t`.

    Returns
    -------
    numerics.stats.SlopeFit
        Fit of log-amplitude against depth; ``slope.estimate`` is the measured rate.
    """
    h2 = check_positive(h2, "h2")
    k = check_positive(k, "k")
    spacing = check_positive(spacing, "spacing")
    length = check_positive(length, "length")
    amplitude = check_positive(amplitude, "amplitude")
    T = check_positive(T, "T")
    n_times = check_positive_int(n_times, "n_times")
    if n_times < 3:
        raise ValueError(f"n_times == {n_times}, must be >= 3 to fit a rate with an interval")
    if not 0 <= margin < length / 2:
        raise ValueError(f"margin == {margin}, must lie in [0, length/2) with length == {length}")
    lattice = np.arange(0.0, length, spacing)
    x0 = (lattice + amplitude * np.sin(k * lattice))[:, None]
    depths = np.linspace(0.0, T, n_times)
    traj = flow.particle_flow(x0, h2, T, method="ode", record=depths, rtol=1e-10, atol=1e-13)
    inner = (lattice >= margin) & (lattice <= length - margin)
    basis = np.stack([np.sin(k * lattice[inner]), np.cos(k * lattice[inner])], axis=1)
    amps = []
    for tokens in traj.trajectory:
        coef, *_ = np.linalg.lstsq(basis, tokens[inner, 0] - lattice[inner], rcond=None)
        amps.append(np.hypot(*coef))
    return stats.linear_fit(traj.depths, np.log(amps))
