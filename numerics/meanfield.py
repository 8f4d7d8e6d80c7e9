r"""Particle measurements of mean-field quantities: variance horizons and mode growth.

These run the Stage-1 flow (:func:`numerics.flow.particle_flow`) on prepared token
sets and measure what the mean-field analysis predicts, so that ``proofs_check``
can compare measurement and derivation:

* :func:`variance_horizon` -- the depth (and the number of Euler layers) at which the
  token variance, which starts at :math:`\tau^2 + \sigma^2`, first falls to :math:`\tau^2`;
* :func:`mode_growth_rate` -- the exponential growth rate of a small sinusoidal
  displacement :math:`u(x) = \epsilon \sin(kx)` of tokens on a uniform lattice, whose
  linearised density perturbation :math:`-\rho_0 u'(x)` grows at the rate of the
  Fourier mode :math:`k` of the linearised mean-field PDE;
* :func:`structure_factor` and :func:`token_trajectory` -- the finite-``N`` side: the
  token variance and the density fluctuations of random tokens, layer by layer, where
  the linear stability analysis predicts that sampling noise grows into clumps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import flow, stats
from .validation import check_array, check_interval, check_positive, check_positive_int

__all__ = ["TokenTrajectory", "VarianceHorizon", "mode_growth_rate", "structure_factor", "token_trajectory",
           "variance_horizon"]


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


def _variance_tokens(x0) -> np.ndarray:
    """``x0`` checked as tokens whose variance is tracked: a finite ``(N, d)`` array with ``N >= 2``."""
    tokens = check_array(x0, "x0")
    if tokens.shape[0] < 2:
        raise ValueError(f"x0 has {tokens.shape[0]} row; a variance needs at least 2 tokens")
    return tokens


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
    tokens = _variance_tokens(x0)
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


def structure_factor(tokens, k, *, block: int = 65_536) -> np.ndarray:
    r"""Structure factor :math:`S(k) = \frac1N \bigl|\sum_j e^{\mathrm i k x_j}\bigr|^2` of 1-D tokens.

    For independent tokens :math:`E\,S(k) = 1 + (N-1)|\hat\rho(k)|^2`, i.e. 1 at wavenumbers far
    above the inverse width of the density; a density fluctuation of relative amplitude
    :math:`\delta` at wavenumber ``k`` gives :math:`S \approx N\delta^2`, so ``S`` of order ``N``
    means clumps. Linearised, :math:`S(k)` grows like :math:`e^{2\lambda(k) t}` under the
    mean-field dynamics (claim S1).

    Parameters
    ----------
    tokens : array_like, shape (N, 1)
        One-dimensional tokens.
    k : array_like, shape (K,)
        Wavenumbers (radians per data unit).
    block : int
        Tokens per block (memory is ``block * K`` complex numbers).
    """
    x = check_array(tokens, "tokens")
    if x.shape[1] != 1:
        raise ValueError(f"tokens has shape {x.shape}; the structure factor here is for 1-D tokens (N, 1)")
    k = np.atleast_1d(np.asarray(k, dtype=np.float64))
    if k.ndim != 1 or not np.all(np.isfinite(k)):
        raise ValueError(f"k must be a finite 1-D array of wavenumbers, got shape {k.shape}")
    block = check_positive_int(block, "block")
    total = np.zeros(k.shape, dtype=np.complex128)
    centred = x[:, 0] - x[:, 0].mean()
    for start in range(0, len(centred), block):
        total += np.exp(1j * np.outer(centred[start : start + block], k)).sum(axis=0)
    return np.abs(total) ** 2 / len(centred)


@dataclass(frozen=True)
class TokenTrajectory:
    """Finite-``N`` Stage-1 trajectory, sampled every few layers.

    Attributes
    ----------
    depths : ndarray, shape (M,)
        Depths ``eta * layer`` of the samples (0 included).
    variances : ndarray, shape (M,)
        Pooled per-coordinate token variance at each depth.
    structure : ndarray, shape (M, K)
        :func:`structure_factor` at each depth over the wavenumbers ``k``.
    k : ndarray, shape (K,)
        The wavenumbers.
    tokens : dict of int to ndarray
        The tokens after the layers asked for in ``keep``.
    """

    depths: np.ndarray
    variances: np.ndarray
    structure: np.ndarray
    k: np.ndarray
    tokens: dict


def token_trajectory(
    x0, h2, layers, *, eta=0.05, every=5, k=(), keep=(), backend="exact", tol=1e-9
) -> TokenTrajectory:
    r"""Run ``layers`` Euler layers of step ``eta`` and sample the tokens every ``every`` layers.

    Each layer is :math:`x \leftarrow x + \eta\,(a(x) - x)` (:func:`numerics.flow.particle_flow`
    run ``every`` layers at a time with step exactly ``eta``). At every sample the pooled
    variance and, for 1-D tokens and non-empty ``k``, :func:`structure_factor` are recorded.

    Parameters
    ----------
    x0 : array_like, shape (N, d)
        Tokens at depth 0 (N >= 2).
    h2 : float
        Kernel bandwidth, > 0.
    layers : int
        Total number of layers, >= 1.
    eta : float
        Layer step in (0, 1].
    every : int
        Layers between samples, >= 1 (the last sample is at ``layers``).
    k : array_like
        Wavenumbers of the structure factor (1-D tokens only); empty to skip it.
    keep : iterable of int
        Layer indices whose tokens are returned in ``tokens``.
    backend, tol : str, float
        Kernel path of the layers and its tolerance (see :func:`numerics.flow.particle_flow`).
    """
    tokens = _variance_tokens(x0)
    h2 = check_positive(h2, "h2")
    layers = check_positive_int(layers, "layers")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    every = check_positive_int(every, "every")
    k = np.asarray(k, dtype=np.float64).reshape(-1)
    keep = sorted({int(layer) for layer in keep})
    if any(not 0 <= layer <= layers for layer in keep):
        raise ValueError(f"keep == {keep}: every kept layer must lie in [0, layers == {layers}]")
    stops = sorted(set(range(0, layers + 1, every)) | {layers} | set(keep))
    depths, variances, structure, kept = [], [], [], {}
    done = 0
    for stop in stops:
        if stop > done:
            steps = stop - done
            tokens = flow.particle_flow(tokens, h2, steps * eta, eta=eta, backend=backend, tol=tol)
            done = stop
        if stop in keep:
            kept[stop] = tokens.copy()
        depths.append(eta * stop)
        variances.append(_pooled_variance(tokens))
        if k.size:
            structure.append(structure_factor(tokens, k))
    return TokenTrajectory(np.array(depths), np.array(variances), np.array(structure).reshape(len(depths), k.size),
                           k, kept)
