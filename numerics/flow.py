r"""Stage 1: the context tokens as interacting particles.

The vector field (:func:`velocity`), the solvers and what is recorded are separate
pieces behind one entry point, :func:`particle_flow`.

Vector field. At depth :math:`t` every token moves with
:math:`\dot x_i = a_t(x_i) - x_i = h_2 \nabla \log \mathrm{KDE}_t(x_i) = -\nabla E_t(x_i)`,
where :math:`a_t` is the Gaussian-kernel mean over the current tokens and
:math:`E_t(x) = -h_2 \log \sum_j e^{-\lVert x - x_j(t)\rVert^2/(2h_2)}`.

Solvers (:data:`SOLVERS`, each with its declared order):

* ``"euler"`` -- the transformer: :math:`L = \max(1, \mathrm{round}(T/\eta))` residual
  layers of step :math:`T/L`, :math:`x^{l+1} = x^l + (T/L)(a_l(x^l) - x^l)`; order 1.
* ``"ode"`` -- the continuous-depth limit through :func:`scipy.integrate.solve_ivp`
  (DOP853, order 8), the reference the layers converge to.

Kernel sums (``backend``): ``"exact"`` (:mod:`attneb.numerics.kernels`), ``"binned"``
(:mod:`attneb.numerics.binned`: grid and FFT, every velocity coordinate within ``tol * scale`` of the
exact one, ``scale`` the largest coordinate range of the tokens at depth 0), ``"gpu"`` (the exact
sums on a GPU, :mod:`attneb.numerics.gpu`, float64) or ``"auto"``, the default: binned where the grid's
bound holds and it is the cheaper path, else the GPU where one is present and the sums are large
enough, else exact (:func:`attneb.numerics.binned.resolve_backend`). The path is chosen once, from the
tokens at depth 0. A flow of many layers over many tokens shows a progress bar on a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from tqdm import tqdm

from . import binned, gpu, kernels
from .validation import (
    check_array,
    check_interval,
    check_nonnegative,
    check_option,
    check_positive,
    check_positive_int,
)

__all__ = ["FlowResult", "SOLVERS", "Solver", "energy", "leading_horizon", "n_layers", "particle_flow",
           "particle_flow_at", "velocity"]


@dataclass(frozen=True)
class Solver:
    """A Stage-1 integrator: its name, its order of convergence in the step, and what it is."""

    name: str
    order: int
    description: str


SOLVERS = {
    "euler": Solver("euler", 1, "residual attention layers (explicit Euler), the transformer"),
    "ode": Solver("ode", 8, "scipy.integrate.solve_ivp with DOP853, the continuous-depth reference"),
}


@dataclass(frozen=True)
class FlowResult:
    """Tokens at depth ``T`` and the recorded trajectory.

    Attributes
    ----------
    tokens : ndarray, shape (N, d)
        Tokens at depth ``T``.
    depths : ndarray, shape (R,)
        Depths at which the trajectory was recorded (for ``"euler"``, the requested depths
        rounded to the nearest layer).
    trajectory : ndarray, shape (R, N, d)
        Tokens at each recorded depth.
    energy : ndarray, shape (R, N), or None
        :math:`E_t(x_i(t))` of each token at each recorded depth (``None`` when not asked for).
    """

    tokens: np.ndarray
    depths: np.ndarray
    trajectory: np.ndarray
    energy: np.ndarray | None


def velocity(tokens, h2, *, budget_bytes=kernels.DEFAULT_BUDGET_BYTES, backend="auto", tol=1e-9) -> np.ndarray:
    r"""Depth-ODE vector field :math:`a(x_i) - x_i` of every token, attending over all tokens.

    Parameters
    ----------
    tokens : array_like, shape (N, d)
        The current tokens.
    h2 : float
        Kernel bandwidth, > 0.
    budget_bytes : int
        Memory budget of the exact kernel sums.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel path (module docstring); the binned field is within ``tol`` times the largest
        coordinate range of ``tokens`` of the exact one, in every coordinate.
    tol : float
        Tolerance of the binned path, in (0, 1).
    """
    tokens = check_array(tokens, "tokens")
    h2 = check_positive(h2, "h2")
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    return _velocity(tokens, h2, budget_bytes, _plan(backend, tokens, h2, tol))


def _plan(backend, x0, h2, tol):
    """The kernel path ``backend`` resolves to for ``x0``: ``None`` (exact), ``"gpu"``, or the binned
    grid's plan, whose scale is fixed by ``x0``."""
    path = binned.resolve_backend(backend, len(x0), x0, h2, tol=tol)
    if path == "binned":
        return binned.plan_grid(x0, h2, tol=tol)
    return "gpu" if path == "gpu" else None


def _velocity(tokens, h2, budget_bytes, plan):
    if plan is None:
        return kernels.kernel_mean(tokens, tokens, h2, budget_bytes=budget_bytes) - tokens
    if plan == "gpu":
        return gpu.kernel_mean(tokens, tokens, h2) - tokens
    return binned.kernel_mean(tokens, tokens, h2, tol=plan.tol, scale=plan.scale) - tokens


def energy(points, tokens, h2, *, budget_bytes=kernels.DEFAULT_BUDGET_BYTES, backend="auto", tol=1e-9) -> np.ndarray:
    r"""Context-induced energy :math:`E(x) = -h_2 \log \sum_j e^{-\lVert x - x_j\rVert^2/(2h_2)}`.

    Parameters
    ----------
    points : array_like, shape (M, d)
        Where to evaluate the energy.
    tokens : array_like, shape (N, d)
        The current tokens :math:`x_j(t)` that shape it.
    h2 : float
        Kernel bandwidth, > 0.
    budget_bytes : int
        Memory budget of the exact kernel sums.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel path (module docstring); the binned energy is within ``h2 * tol`` of the exact one.
    tol : float
        Tolerance of the binned path, in (0, 1).
    """
    tokens = check_array(tokens, "tokens")
    h2 = check_positive(h2, "h2")
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    path = binned.resolve_backend(backend, len(np.asarray(points)), tokens, h2, tol=tol, target="log")
    if path == "exact":
        return -h2 * kernels.kernel_logsumexp(points, tokens, h2, budget_bytes=budget_bytes)
    if path == "gpu":
        return -h2 * gpu.kernel_logsumexp(points, tokens, h2)
    return -h2 * binned.kernel_logsumexp(points, tokens, h2, tol=tol)


def leading_horizon(sigma2, h2) -> float:
    r"""Leading-order depth-noise relation :math:`T^* = \sigma^2 / (2 h_2)` (claim C6; derived in ``attneb.theory.depth_noise``)."""
    return check_positive(sigma2, "sigma2") / (2.0 * check_positive(h2, "h2"))


def n_layers(T, eta) -> int:
    """Number of Euler layers used for horizon ``T`` and nominal step ``eta``: ``max(1, round(T/eta))``."""
    T = check_nonnegative(T, "T")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    return max(1, int(round(T / eta)))


def _record_depths(record, T):
    depths = np.asarray(record, dtype=float)
    if depths.ndim != 1 or depths.size == 0:
        raise ValueError(f"record must be a non-empty 1-D sequence of depths, got {record!r}")
    if not np.all(np.isfinite(depths)) or depths.min() < 0 or depths.max() > T:
        raise ValueError(f"record == {record!r}: every depth must lie in [0, T] with T == {T}")
    if np.any(np.diff(depths) < 0):
        raise ValueError(f"record == {record!r} must be sorted in increasing order")
    return depths


#: Kernel terms (layers x N^2) above which a flow shows its progress on a terminal (about a minute
#: of the exact path on 2 cores).
PROGRESS_MIN_TERMS = 10**11


def _euler(x0, h2, T, eta, depths, budget_bytes, plan=None):
    layers = n_layers(T, eta)
    step = T / layers
    wanted = [] if depths is None else list(np.rint(depths / step).astype(int))
    saved = []
    tokens = x0
    quiet = True if layers * len(x0) ** 2 < PROGRESS_MIN_TERMS else None  # None: shown on a terminal only
    for layer in tqdm(range(layers + 1), desc="Stage 1", unit="layer", disable=quiet, leave=False):
        while wanted and wanted[0] == layer:
            saved.append((layer * step, tokens))
            wanted.pop(0)
        if layer < layers:
            tokens = tokens + step * _velocity(tokens, h2, budget_bytes, plan)
    return tokens, saved


def _ode(x0, h2, T, depths, rtol, atol, budget_bytes, plan=None):
    shape = x0.shape

    def field(_t, y):
        return _velocity(y.reshape(shape), h2, budget_bytes, plan).ravel()

    t_eval = np.array([T]) if depths is None else np.unique(np.append(depths, T))
    sol = solve_ivp(field, (0.0, T), x0.ravel(), method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    states = {float(t): sol.y[:, i].reshape(shape) for i, t in enumerate(sol.t)}
    saved = [] if depths is None else [(float(t), states[float(t)]) for t in depths]
    return states[float(T)], saved


def particle_flow_at(x0, h2, depths, *, eta=0.05, budget_bytes=kernels.DEFAULT_BUDGET_BYTES, backend="auto",
                     tol=1e-9) -> list[np.ndarray]:
    r"""Euler Stage 1 to each of several depths, each result equal, bit for bit, to its own :func:`particle_flow`.

    ``particle_flow(x0, h2, T, eta=eta)`` takes ``n_layers(T, eta)`` layers of step
    :math:`T / \mathrm{n\_layers}(T, \eta)`. Depths whose steps are the same float lie on one path: one call
    of :func:`particle_flow` runs it to the largest of them and records the tokens at the others' layers (the
    kernel path is chosen from ``x0`` in both, so every layer computes the same numbers). A grid of depths
    spaced by multiples of ``eta`` costs the layers of its deepest point and of one depth per distinct step,
    instead of all of them. Stage 1 is :func:`particle_flow` as this module holds it at call time (a
    substitute put in its place runs instead; one that returns only the final tokens when asked to record is
    called once per depth).

    Parameters
    ----------
    depths : sequence of float
        Horizons, >= 0, in any order (repeats allowed).
    x0, h2, eta, budget_bytes, backend, tol
        As in :func:`particle_flow`.

    Returns
    -------
    list of ndarray, shape (N, d) each
        The tokens at ``depths[k]``, in the order given.
    """
    x0 = check_array(x0, "x0")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    horizons = [check_nonnegative(T, f"depths[{k}]") for k, T in enumerate(depths)]
    if not horizons:
        raise ValueError("depths == [] must name at least one depth")
    paths: dict[float, set[float]] = {}
    for T in horizons:
        paths.setdefault(T / n_layers(T, eta) if T > 0 else 0.0, set()).add(T)
    options = {"eta": eta, "budget_bytes": budget_bytes, "backend": backend, "tol": tol}
    at = {}
    for ends in (sorted(group) for group in paths.values()):
        result = particle_flow(x0, h2, ends[-1], record=ends, record_energy=False, **options) if len(ends) > 1 else None
        if isinstance(result, FlowResult):
            at.update(zip(ends, result.trajectory))
        else:
            at.update((T, particle_flow(x0, h2, T, **options)) for T in ends)
    return [at[T] for T in horizons]


def particle_flow(
    x0,
    h2,
    T,
    *,
    eta=0.05,
    method="euler",
    record: Sequence[float] | None = None,
    record_energy=True,
    rtol=1e-8,
    atol=1e-10,
    budget_bytes=kernels.DEFAULT_BUDGET_BYTES,
    backend="auto",
    tol=1e-9,
):
    r"""Run Stage 1: move the tokens ``x0`` for depth ``T`` under :math:`\dot x_i = a_t(x_i) - x_i`.

    Parameters
    ----------
    x0 : array_like, shape (N, d)
        The noisy context tokens at depth 0.
    h2 : float
        Kernel bandwidth of every layer, > 0.
    T : float
        Horizon (depth time), >= 0.
    eta : float
        Nominal residual step in (0, 1] for ``"euler"``; the step used is ``T / n_layers(T, eta)``.
    method : {"euler", "ode"}
        The transformer's layers, or the continuous-depth ODE (``solve_ivp``, DOP853).
    record : sequence of float, optional
        Increasing depths in ``[0, T]`` at which to keep the tokens and their energies.
    record_energy : bool
        Whether to compute the recorded tokens' energies (one kernel sum per recorded depth).
    rtol, atol : float
        Tolerances of ``solve_ivp`` (``"ode"`` only).
    budget_bytes : int
        Memory budget of each exact kernel sum.
    backend : {"auto", "exact", "binned", "gpu"}
        Kernel path of every layer (module docstring); chosen once, from ``x0``.
    tol : float
        Tolerance of the binned path in (0, 1): every velocity coordinate of every layer (or
        ODE evaluation) is within ``tol`` times the largest coordinate range of ``x0`` of the
        exact velocity at the same tokens, and recorded energies within ``h2 * tol``. With
        ``"ode"``, keep ``tol`` well below ``rtol``.

    Returns
    -------
    ndarray, shape (N, d), or FlowResult
        The tokens at depth ``T``; a :class:`FlowResult` with the trajectory when ``record`` is given.
    """
    x0 = check_array(x0, "x0")
    h2 = check_positive(h2, "h2")
    T = check_nonnegative(T, "T")
    eta = check_interval(eta, "eta", 0.0, 1.0, closed="right")
    method = check_option(method, "method", SOLVERS)
    rtol = check_positive(rtol, "rtol")
    atol = check_positive(atol, "atol")
    budget_bytes = check_positive_int(budget_bytes, "budget_bytes")
    depths = None if record is None else _record_depths(record, T)
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    plan = _plan(backend, x0, h2, tol)

    # the private solvers keep their positional signature (tests substitute them); the binned
    # path runs on tokens sorted once by grid cell, so that every layer's grid accesses stay local
    extra, order = ({} if plan is None else {"plan": plan}), None
    if isinstance(plan, binned.GridPlan):
        order = binned.spatial_order(x0, plan.spacing)
        x0 = x0[order]
    if T == 0:
        tokens, saved = x0, [(0.0, x0)] * (0 if depths is None else len(depths))
    elif method == "euler":
        tokens, saved = _euler(x0, h2, T, eta, depths, budget_bytes, **extra)
    else:
        tokens, saved = _ode(x0, h2, T, depths, rtol, atol, budget_bytes, **extra)
    if order is not None:
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        tokens, saved = tokens[inverse], [(t, x[inverse]) for t, x in saved]
    if record is None:
        return tokens
    return FlowResult(
        tokens=tokens,
        depths=np.array([t for t, _ in saved]),
        trajectory=np.stack([x for _, x in saved]),
        energy=np.stack([energy(x, x, h2, budget_bytes=budget_bytes, backend=backend, tol=tol) for _, x in saved])
        if record_energy else None,
    )
