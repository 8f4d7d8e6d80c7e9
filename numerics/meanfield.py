r"""Particle measurements of mean-field quantities: variance horizons and mode growth.

These run the Stage-1 flow (:func:`attneb.numerics.flow.particle_flow`) on prepared token
sets and measure what the mean-field analysis predicts, so that ``proofs_check``
can compare measurement and derivation:

* :func:`variance_horizon` -- the depth (and the number of Euler layers) at which the
  token variance, which starts at :math:`\tau^2 + \sigma^2`, first falls to :math:`\tau^2`;
* :func:`variance_horizon_ode` -- the same depth for the continuous-depth flow (the ODE,
  no layers), located by an event of the integrator;
* :func:`standardized_gaussian_tokens` -- Gaussian tokens whose sample mean and variance are
  set exactly, so that a measured horizon is conditional on the starting variance;
* :func:`mode_growth_rate` -- the exponential growth rate of a small sinusoidal
  displacement :math:`u(x) = \epsilon \sin(kx)` of tokens on a uniform lattice, whose
  linearised density perturbation :math:`-\rho_0 u'(x)` grows at the rate of the
  Fourier mode :math:`k` of the linearised mean-field PDE;
* :func:`structure_factor` and :func:`token_trajectory` -- the finite-``N`` side: the
  token variance and the density fluctuations of random tokens, layer by layer, where
  the linear stability analysis predicts that sampling noise grows into clumps;
* :func:`threshold_depth` -- the depth at which a sampled, growing quantity first reaches a
  threshold (e.g. where the fluctuation power reaches a fixed fraction of ``N``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.integrate import solve_ivp

from . import binned, flow, gpu, kernels, stats
from .validation import check_array, check_interval, check_positive, check_positive_int

__all__ = ["ContinuousHorizon", "TokenTrajectory", "VarianceHorizon", "mixture_quantile_tokens", "mode_growth_rate",
           "standardized_gaussian_tokens", "structure_factor", "threshold_depth", "token_cumulants",
           "token_trajectory", "variance_horizon", "variance_horizon_ode"]


@dataclass(frozen=True)
class VarianceHorizon:
    r"""Where the token variance of Euler layers first reaches the target.

    Attributes
    ----------
    depth : float
        Depth at which the pooled per-coordinate variance reaches ``target``, by linear
        interpolation between the two layers around the crossing.
    layers : int
        The first layer count whose variance is ``<= target``.
    depths, variances : ndarray
        The variance after every layer (depth 0 included), up to the crossing.
    fractional_layers : float
        The crossing as a layer index interpolated linearly in ``log`` variance,
        :math:`L - 1 + (\log s_{L-1} - \log s_\star)/(\log s_{L-1} - \log s_L)` (the rule of
        :func:`attneb.theory.depth_noise.gaussian_layers_fractional`).
    """

    depth: float
    layers: int
    depths: np.ndarray
    variances: np.ndarray
    fractional_layers: float = float("nan")


@dataclass(frozen=True)
class ContinuousHorizon:
    r"""Where the token variance of the continuous-depth flow reaches the target.

    Attributes
    ----------
    depth : float
        Depth :math:`t_\star` with :math:`\widehat{\mathrm{Var}}(x(t_\star)) = ` ``target``, located by
        the integrator's event (dense output, root found to machine precision).
    evaluations : int
        Evaluations of the vector field (each one kernel sum over all tokens).
    depths, variances : ndarray
        The variance at the integrator's accepted steps from depth 0, the last one at ``depth``
        (where it is ``target``).
    """

    depth: float
    evaluations: int
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


def _target_below(tokens, target) -> float:
    target = check_positive(target, "target")
    start = _pooled_variance(tokens)
    if start <= target:
        raise ValueError(f"target == {target} is not below the starting variance {start:.6g}")
    return target


def variance_horizon(x0, h2, target, *, eta=0.01, max_layers=100_000, backend="auto", tol=1e-9) -> VarianceHorizon:
    r"""Run Euler layers of step ``eta`` until the token variance falls to ``target``.

    Each layer is :math:`x_i \leftarrow x_i + \eta\,(a(x_i) - x_i)` over all tokens (the layers of
    :func:`attneb.numerics.flow.particle_flow`). The variance is the per-coordinate sample variance
    averaged over coordinates, :math:`s = \frac1d \sum_c \widehat{\mathrm{Var}}(x_{\cdot c})`.

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
    backend, tol : str, float
        Kernel path and its tolerance (:func:`attneb.numerics.flow.particle_flow`), chosen once from ``x0``.

    Returns
    -------
    VarianceHorizon
    """
    tokens = _variance_tokens(x0)
    h2 = check_positive(h2, "h2")
    target = _target_below(tokens, target)
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    max_layers = check_positive_int(max_layers, "max_layers")
    field = _LayerField(tokens, h2, backend, tol)
    tokens = field.arrange(tokens)
    variances = [_pooled_variance(tokens)]
    while variances[-1] > target:
        if len(variances) > max_layers:
            raise RuntimeError(f"variance still {variances[-1]:.6g} > target {target} after {max_layers} layers")
        tokens = tokens + eta * field(tokens)
        variances.append(_pooled_variance(tokens))
    layers = len(variances) - 1
    v0, v1 = variances[-2], variances[-1]
    depth = eta * (layers - 1 + (v0 - target) / (v0 - v1))
    fractional = layers - 1 + (np.log(v0) - np.log(target)) / (np.log(v0) - np.log(v1))
    return VarianceHorizon(depth, layers, eta * np.arange(layers + 1), np.array(variances), float(fractional))


def variance_horizon_ode(x0, h2, target, *, rtol=1e-6, atol=1e-8, max_depth=1000.0, backend="auto",
                         tol=1e-10) -> ContinuousHorizon:
    r"""Depth at which the continuous-depth flow brings the token variance down to ``target``.

    Integrates the depth ODE of all tokens together,

    .. math:: \frac{dx_i}{dt} = a_t(x_i) - x_i, \qquad
              a_t(x) = \frac{\sum_j e^{-\lVert x - x_j(t)\rVert^2/(2h_2)}\, x_j(t)}
                            {\sum_j e^{-\lVert x - x_j(t)\rVert^2/(2h_2)}},

    with :func:`scipy.integrate.solve_ivp` (DOP853, order 8), and returns the first depth
    :math:`t_\star` at which the pooled sample variance :math:`s(t)` falls to ``target`` (an event,
    found on the dense output). No layers, so no step bias: the error is the integrator's,
    controlled by ``rtol``/``atol``, plus the binned kernel sums' (``tol``, keep it well below
    ``rtol``). For a Gaussian token density of variance :math:`\tau^2 + \sigma^2` the mean-field
    answer is :math:`T_G = \sigma^2/(2h_2) + \tfrac12\log(1 + \sigma^2/\tau^2)` with ``target`` :math:`= \tau^2`.

    Parameters
    ----------
    x0 : array_like, shape (N, d)
        Tokens at depth 0 (N >= 2).
    h2 : float
        Kernel bandwidth, > 0.
    target : float
        Variance to reach, > 0 and below the starting variance.
    rtol, atol : float
        Tolerances of ``solve_ivp``, > 0.
    max_depth : float
        Give up (``RuntimeError``) if the variance is still above ``target`` at this depth, > 0.
    backend, tol : str, float
        Kernel path and its tolerance (:func:`attneb.numerics.flow.particle_flow`), chosen once from ``x0``.

    Returns
    -------
    ContinuousHorizon
    """
    tokens = _variance_tokens(x0)
    h2 = check_positive(h2, "h2")
    target = _target_below(tokens, target)
    rtol = check_positive(rtol, "rtol")
    atol = check_positive(atol, "atol")
    max_depth = check_positive(max_depth, "max_depth")
    field = _LayerField(tokens, h2, backend, tol)
    tokens = field.arrange(tokens)
    shape = tokens.shape
    evaluations = 0

    def velocity(_t, y):
        nonlocal evaluations
        evaluations += 1
        return field(y.reshape(shape)).ravel()

    def reached(_t, y):
        return _pooled_variance(y.reshape(shape)) - target

    reached.terminal, reached.direction = True, -1
    sol = solve_ivp(velocity, (0.0, max_depth), tokens.ravel(), method="DOP853", rtol=rtol, atol=atol,
                    events=reached)
    if sol.status == -1:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    if not sol.t_events[0].size:
        raise RuntimeError(f"variance still {_pooled_variance(sol.y[:, -1].reshape(shape)):.6g} > target {target} "
                           f"at max_depth == {max_depth}")
    depth = float(sol.t_events[0][0])
    variances = [_pooled_variance(sol.y[:, i].reshape(shape)) for i in range(sol.y.shape[1])]
    # solve_ivp ends a terminal event's solution at the event (its last step is cut there)
    return ContinuousHorizon(depth, evaluations, np.append(sol.t[:-1], depth), np.append(variances[:-1], target))


def standardized_gaussian_tokens(n, variance, rng, *, d=1) -> np.ndarray:
    r"""``n`` Gaussian tokens in ``R^d`` with sample mean exactly 0 and sample variance exactly ``variance``.

    Draws :math:`z_i \sim N(0, I_d)` i.i.d., then sets
    :math:`x_{ic} = (z_{ic} - \bar z_c)\,\sqrt{v / \widehat{\mathrm{Var}}(z_{\cdot c})}` per coordinate
    (``ddof=1``). A horizon measured from these tokens is conditional on the starting variance
    :math:`v = \tau^2 + \sigma^2`, so its spread over seeds holds the finite-``N`` effects of the
    flow and not the sampling error of the variance.

    Parameters
    ----------
    n : int
        Number of tokens, >= 2.
    variance : float
        Sample variance of every coordinate, > 0.
    rng : numpy.random.Generator or int
        Source of the draws (a seed makes them reproducible).
    d : int
        Dimension, >= 1.

    Returns
    -------
    ndarray, shape (n, d)
    """
    n = check_positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n == {n}, must be >= 2 for a sample variance")
    variance = check_positive(variance, "variance")
    d = check_positive_int(d, "d")
    z = np.random.default_rng(rng).standard_normal((n, d))
    z -= z.mean(axis=0)
    return z * np.sqrt(variance / z.var(axis=0, ddof=1))


def mixture_quantile_tokens(weights, means, variances, n) -> np.ndarray:
    r"""``n`` 1-D tokens at the quantiles :math:`(i + 1/2)/n` of a Gaussian mixture: a sample without sampling noise.

    Token :math:`i` solves :math:`F(x_i) = (i + 1/2)/n` with
    :math:`F(x) = \sum_c w_c\,\Phi((x - \mu_c)/\sqrt{v_c})`, by Newton's method from the interpolated inverse
    of ``F`` on a grid, kept between the smallest and largest component quantiles (where the root lies), until
    :math:`|F(x_i) - (i + 1/2)/n| \le 4` ulps of 1 (or 50 steps). Their empirical measure is the mixture to
    :math:`O(1/n)` in every quantile, so a flow run from them measures the mean field with no seed-to-seed
    spread; what remains of finite ``n`` is the flow's own (sparse tails, self-interaction).

    Parameters
    ----------
    weights, means, variances : array_like, shape (C,)
        The components (weights > 0, normalised here; variances > 0).
    n : int
        Number of tokens, >= 1.

    Returns
    -------
    ndarray, shape (n, 1)
        Increasing tokens.
    """
    weights, means, variances = (np.asarray(check_array(a, name, ndim=1), dtype=np.float64)
                                 for a, name in ((weights, "weights"), (means, "means"), (variances, "variances")))
    if not weights.size == means.size == variances.size:
        raise ValueError(f"weights, means and variances must have one length, got {weights.size}, {means.size}, "
                         f"{variances.size}")
    if np.any(weights <= 0) or np.any(variances <= 0):
        raise ValueError(f"weights == {weights.tolist()} and variances == {variances.tolist()} must be > 0")
    n = check_positive_int(n, "n")
    weights = weights / weights.sum()
    sd = np.sqrt(variances)
    p = (np.arange(n) + 0.5) / n
    each = means[:, None] + sd[:, None] * special.ndtri(p)[None, :]
    lo, hi = each.min(axis=0), each.max(axis=0)
    grid = np.linspace(lo[0], hi[-1], 4097)
    x = np.clip(np.interp(p, weights @ special.ndtr((grid[None, :] - means[:, None]) / sd[:, None]), grid), lo, hi)
    for _ in range(50):
        z = (x[None, :] - means[:, None]) / sd[:, None]
        excess = weights @ special.ndtr(z) - p
        if np.max(np.abs(excess)) <= 4 * np.finfo(np.float64).eps:
            break
        density = (weights / sd) @ np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.clip(np.where(density > 0, x - excess / density, x), lo, hi)
    return x[:, None]


def token_cumulants(tokens) -> tuple[float, float]:
    r"""Variance and fourth cumulant of 1-D tokens: :math:`\kappa_2 = \overline{u^2}`,
    :math:`\kappa_4 = \overline{u^4} - 3\,\overline{u^2}^2`, with :math:`u = x - \bar x` (plain sample moments).

    Parameters
    ----------
    tokens : array_like, shape (N, 1) or (N,)
        At least 2 tokens.
    """
    tokens = np.asarray(tokens, dtype=np.float64)
    tokens = check_array(tokens[:, None] if tokens.ndim == 1 else tokens, "tokens")
    if tokens.shape[1] != 1 or tokens.shape[0] < 2:
        raise ValueError(f"tokens.shape == {tokens.shape}, must be (N, 1) with N >= 2")
    u = tokens[:, 0] - tokens[:, 0].mean()
    m2 = float(np.mean(u**2))
    return m2, float(np.mean(u**4)) - 3.0 * m2**2


def threshold_depth(depths, values, threshold) -> float | None:
    r"""First depth at which sampled ``values`` reach ``threshold``, interpolated linearly in ``log``.

    With :math:`i` the first sample with :math:`v_i \ge c` (``c`` = ``threshold``) and :math:`i \ge 1`,

    .. math:: t_c = t_{i-1} + (t_i - t_{i-1})\,\frac{\log c - \log v_{i-1}}{\log v_i - \log v_{i-1}},

    exact for a quantity growing exponentially between samples (fluctuation power in the linear
    regime). ``t_0`` if the first sample already reaches the threshold; ``None`` if none does.

    Parameters
    ----------
    depths : array_like, shape (M,)
        Increasing, finite depths.
    values : array_like, shape (M,)
        Positive, finite values at those depths.
    threshold : float
        Level to reach, > 0.

    Returns
    -------
    float or None
    """
    t = np.asarray(depths, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.ndim != 1 or t.shape != v.shape or t.size == 0:
        raise ValueError(f"depths and values must be 1-D of the same non-zero length, got shapes {t.shape} and {v.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(v))):
        raise ValueError("depths and values must be finite")
    if np.any(np.diff(t) <= 0):
        raise ValueError("depths must be strictly increasing")
    if np.any(v <= 0):
        raise ValueError("values must be > 0 (the crossing is interpolated in log)")
    threshold = check_positive(threshold, "threshold")
    above = np.flatnonzero(v >= threshold)
    if not above.size:
        return None
    i = int(above[0])
    if i == 0:
        return float(t[0])
    lo, hi = np.log(v[i - 1]), np.log(v[i])
    return float(t[i - 1] + (t[i] - t[i - 1]) * (np.log(threshold) - lo) / (hi - lo))


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
    step = np.diff(k)
    uniform = k.size >= 3 and np.allclose(step, step[0], rtol=1e-12, atol=0.0)
    for start in range(0, len(centred), block):
        chunk = centred[start : start + block]
        if uniform:
            # k_j = k_0 + j dk: exp(i k_j x) = exp(i k_0 x) exp(i dk x)^j, one complex product per
            # wavenumber instead of one exponential (the phase error grows like j * 1e-16)
            wave, turn = np.exp(1j * k[0] * chunk), np.exp(1j * step[0] * chunk)
            for j in range(k.size):
                total[j] += wave.sum()
                wave *= turn
        else:
            total += np.exp(1j * np.outer(chunk, k)).sum(axis=0)
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
    x0, h2, layers, *, eta=0.05, every=5, k=(), keep=(), backend="auto", tol=1e-9, stop=None
) -> TokenTrajectory:
    r"""Run ``layers`` Euler layers of step ``eta`` and sample the tokens every ``every`` layers.

    Each layer is :math:`x \leftarrow x + \eta\,(a(x) - x)`, the layers of
    :func:`attneb.numerics.flow.particle_flow` with step exactly ``eta`` (kernel path chosen once, from
    ``x0``). At every sample the pooled variance and, for 1-D tokens and non-empty ``k``,
    :func:`structure_factor` are recorded; ``stop`` may end the run early.

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
        Kernel path of the layers and its tolerance (see :func:`attneb.numerics.flow.particle_flow`).
    stop : callable, optional
        ``stop(depth, variance, structure) -> bool``, called at every sample (``structure`` the row
        of the structure factor, empty without ``k``): the trajectory ends at the first sample where
        it returns true (kept layers beyond it are absent from ``tokens``).
    """
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be a callable stop(depth, variance, structure) -> bool or None, got {stop!r}")
    tokens = _variance_tokens(x0)
    h2 = check_positive(h2, "h2")
    layers = check_positive_int(layers, "layers")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    every = check_positive_int(every, "every")
    k = np.asarray(k, dtype=np.float64).reshape(-1)
    keep = sorted({int(layer) for layer in keep})
    if any(not 0 <= layer <= layers for layer in keep):
        raise ValueError(f"keep == {keep}: every kept layer must lie in [0, layers == {layers}]")
    field = _LayerField(tokens, h2, backend, tol)
    tokens = field.arrange(tokens)
    samples = set(range(0, layers + 1, every)) | {layers}
    depths, variances, structure, kept = [], [], [], {}
    for layer in range(layers + 1):
        if layer:
            tokens = tokens + eta * field(tokens)
        if layer in keep:
            kept[layer] = field.restore(tokens)
        if layer in samples or layer in keep:
            depths.append(eta * layer)
            variances.append(_pooled_variance(tokens))
            row = structure_factor(tokens, k) if k.size else np.empty(0)
            if k.size:
                structure.append(row)
            if stop is not None and stop(depths[-1], variances[-1], row):
                break
    return TokenTrajectory(np.array(depths), np.array(variances), np.array(structure).reshape(len(depths), k.size),
                           k, kept)


class _LayerField:
    """The Stage-1 velocity :math:`a(x_i) - x_i` with its kernel path chosen once, from ``x0``.

    As in :func:`attneb.numerics.flow.particle_flow`, the path (``backend``) is resolved and the binned grid
    planned from the tokens at depth 0, once, not at every layer or ODE evaluation; the tokens are
    kept in the grid order of ``x0`` (:meth:`arrange`, undone by :meth:`restore`) so that the grid
    accesses stay local. One difference: the length the binned tolerance is relative to is the
    largest coordinate range of ``x0`` (at least ``sqrt(h2)``) rounded up to a power of two, so that
    runs of similar ranges share one grid plan (planning costs about 0.2 s); every velocity is then
    within ``tol`` times that length (at most twice the range) of the exact one.
    """

    def __init__(self, x0, h2, backend, tol):
        tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
        self.h2 = h2
        extent = max(float(np.ptp(x0, axis=0).max()), float(np.sqrt(h2)))
        scale = float(2.0 ** np.ceil(np.log2(extent)))
        self.path = binned.resolve_backend(backend, len(x0), x0, h2, tol=tol, scale=scale)
        self.grid = binned.plan_grid(x0, h2, tol=tol, scale=scale) if self.path == "binned" else None
        self.order = None if self.grid is None else binned.spatial_order(x0, self.grid.spacing)

    def arrange(self, tokens):
        return tokens if self.order is None else tokens[self.order]

    def restore(self, tokens):
        if self.order is None:
            return tokens.copy()
        out = np.empty_like(tokens)
        out[self.order] = tokens
        return out

    def __call__(self, tokens):
        if self.path == "exact":
            return kernels.kernel_mean(tokens, tokens, self.h2) - tokens
        if self.path == "gpu":
            return gpu.kernel_mean(tokens, tokens, self.h2) - tokens
        return binned.kernel_mean(tokens, tokens, self.h2, tol=self.grid.tol, scale=self.grid.scale) - tokens
