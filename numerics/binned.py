r"""Gaussian-kernel sums in one to three dimensions by binning and FFT convolution.

The sums of :mod:`attneb.numerics.kernels` for :math:`d \le 3` in :math:`O(N + M + G\log G)`
operations instead of :math:`O(MN)` (``G`` grid cells), the method of fast KDE software:
spread the keys onto a regular grid, convolve with the kernel sampled on the grid
(``scipy.fft``, zero-padded), interpolate at the queries. With
:math:`K(v) = e^{-\lVert v\rVert^2/(2h_2)}`,

.. math:: S_0(q) = \sum_j K(q - x_j), \qquad
          D(q) = \sum_j K(q - x_j)\,(x_j - q) = S_1(q) - q\,S_0(q),

and the kernel mean is :math:`a(q) = q + D(q)/S_0(q)`. ``D`` is convolved directly with the
kernel :math:`-v\,K(v)`, so no large terms cancel.

Scheme. Spreading and interpolation use Lagrange weights on ``p`` nodes per dimension
(tensor products for ``d >= 2``): ``p = 4`` (cubic) in 1-D, ``p = 6`` (quintic) in 2-D, where the
cubic grid for the same tolerance has about five times the cells at ``tol = 1e-6`` (more at
tighter tolerances) and its FFTs dominate, and ``p = 8`` in 3-D, whose grid has a third of the
cells of ``p = 6`` (spacing 0.091 against 0.061 :math:`\sqrt{h_2}` at ``tol = 1e-6``, scale
:math:`10\sqrt{h_2}`) for 2.4 times the stencil. A key
at :math:`x` gives node :math:`y_g` the weight :math:`\ell_g(x)`; the value at a query is
:math:`\sum_g \ell_g(q)\,C[g]`. What is computed is :math:`\sum_j \hat K(q, x_j)` with
:math:`\hat K(q, x) = \sum_{g, g'} \ell_g(q)\,\ell_{g'}(x)\,K(y_g - y_{g'})`: ``K``
interpolated in both arguments, with error :math:`O((\delta^2/h_2)^{p/2})` for spacing
:math:`\delta` (linear binning: :math:`O(\delta^2/h_2)`).

Error bound (derived here, constants computed by :func:`plan_grid`). On the middle interval of
its ``p`` nodes, Lagrange interpolation has error at most
:math:`C_p\,\delta^p \max\lvert f^{(p)}\rvert` over the nodes,
:math:`C_p = \max_{t\in[0,1]} \lvert\prod_k (t - k)\rvert / p!` (:math:`\tfrac{9}{16}/4!`,
:math:`\tfrac{225}{64}/6!`, :math:`\tfrac{11025}{256}/8!`), and Lebesgue constant :math:`\Lambda`
(5/4, 89/64, 381/256); the tensor product interpolates one direction after the other, so the
error of direction ``m`` (counted from 0) carries the factor :math:`\Lambda^m` of those before it.
:math:`\hat K - K` is the spreading error (seen through the interpolation: factor
:math:`\Lambda^d`) plus the interpolation error, each a ``p``-th derivative of ``K`` taken
within :math:`p\delta` of :math:`v = q - x` in every coordinate. With :math:`s = v/\sqrt{h_2}`,
:math:`\tau = p\delta/\sqrt{h_2}` and the wider Gaussian
:math:`K_\alpha(v) = e^{-\lVert v\rVert^2/(2\alpha h_2)}`, :math:`\alpha = 2`, let

.. math:: G_n = \sup_{s \ge 0,\ \lvert t\rvert \le \tau}\, \lvert\mathrm{He}_n(s + t)\rvert\,
          e^{-(s + t)^2/2 + s^2/(2\alpha)}

(:math:`\mathrm{He}_n` the Hermite polynomials, :math:`\partial_s^n e^{-s^2/2} = (-1)^n
\mathrm{He}_n(s) e^{-s^2/2}`; :func:`_majorant` bounds it from above on a fine grid).
Then for every key and every query on the grid

.. math:: \lvert \hat K(q, x) - K(v)\rvert \le \varepsilon_0\, K_\alpha(v), \qquad
          \lvert \hat K_D(q, x) + v_k K(v)\rvert \le \varepsilon_1 \sqrt{h_2}\, K_\alpha(v),

.. math:: \varepsilon_0 = C_p (1 + \Lambda^d)\Big(\sum_{m<d}\Lambda^m\Big) G_p G_0^{d-1}
          \Big(\frac{\delta^2}{h_2}\Big)^{p/2},

.. math:: \varepsilon_1 = C_p (1 + \Lambda^d) \max_{k<d}\Big(\Lambda^k G_{p+1} G_0^{d-1}
          + \sum_{m<d,\, m\ne k}\Lambda^m\, G_1 G_p G_0^{d-2}\Big) \Big(\frac{\delta^2}{h_2}\Big)^{p/2}

(for ``D_k`` the ``p``-th derivative of :math:`-v_k K(v)` along direction ``k`` is a Hermite
function of order ``p + 1``; along another direction it leaves :math:`\mathrm{He}_1` on ``k``).

Summing over the keys, with :math:`B(q) = \sum_j K_\alpha(q - x_j)`,

.. math:: \lvert \hat S_0 - S_0\rvert \le E_0 = \varepsilon_0 \bar B + \rho_0, \quad
          \lvert \hat D_k - D_k\rvert \le E_D = \varepsilon_1 \sqrt{h_2}\,\bar B + \rho_D, \quad
          \lvert \hat a_k - a_k\rvert \le \frac{E_D + \lvert \hat a_k - q_k\rvert E_0}{\hat S_0 - E_0},

and :math:`\lvert\log\hat S_0 - \log S_0\rvert \le -\log(1 - E_0/\hat S_0)`. The majorant
:math:`\bar B \ge B(q)` comes from the same grid: for the nearest node ``y`` of ``q``
(:math:`\lVert q - y\rVert^2 \le d\delta^2/4`) and :math:`\alpha' = (1 + \epsilon)\alpha`,
:math:`\epsilon = 1/4`, the inequality
:math:`\lVert q-x\rVert^2 \ge (\lVert y-x\rVert^2 - (1 + 1/\epsilon)\lVert q-y\rVert^2)/(1+\epsilon)` gives
:math:`B(q) \le e^{d\delta^2/(8\alpha\epsilon h_2)} B_{\alpha'}(y)`, and :math:`B_{\alpha'}` at a node
carries only the spreading error, at most :math:`N c_B` with
:math:`c_B = C_p (\sum_k\Lambda^k) M_p (\delta^2/(\alpha' h_2))^{p/2}`,
:math:`M_p = \sup_s \lvert\mathrm{He}_p(s)\rvert e^{-s^2/2}`, plus its cut-off. The kernels are cut at
:math:`\lvert v_k\rvert > r = \sqrt{2 h_2 \ln(1/u)}` (``u`` the unit roundoff), which drops
at most :math:`N\Lambda^{2d}e^{-r^2/(2h_2)}` from :math:`S_0` (times ``r`` from ``D``) and
:math:`N\Lambda^d u^{1/\alpha'}` from :math:`B_{\alpha'}` (a term of :math:`\bar B` that matters only
where :math:`S_0 \lesssim 10^{-6} N`, in far tails; cutting :math:`K_{\alpha'}` at its own roundoff
would pad every FFT by :math:`\sqrt{\alpha'}` times as many cells). The floating-point error of spreading, FFTs and
interpolation is *estimated*, not proven (standard rounding model of the FFT: Higham,
*Accuracy and Stability of Numerical Algorithms*, ch. 24), as
:math:`\rho = u\,\Lambda^{2d} (8\log_2 n_{\mathrm{fft}} + n_{\mathrm{cell}} + p^d)\max_g\lvert C[g]\rvert`,
:math:`n_{\mathrm{cell}}` the most keys in one cell. Everything else is proven.

Spacing from ``tol``. :math:`\bar B/S_0` is about :math:`\alpha'^{d/2}` where the keys are
locally uniform and grows in the tails. :func:`plan_grid` takes the largest
:math:`\delta \le \sqrt{h_2}/8` with
:math:`4\,\beta(\varepsilon_0 + \varepsilon_1)\sqrt{h_2} \le \mathrm{tol}\cdot\mathrm{scale}`
for means and scores (it assumes :math:`\lvert a - q\rvert \le \sqrt{h_2}`), or
:math:`4\,\beta\varepsilon_0 \le \mathrm{tol}` for log-sums, where
:math:`\beta = \alpha'^{d/2} e^{d\delta^2/(8\alpha\epsilon h_2)}` is :math:`\bar B/S_0` for
locally uniform keys: such queries meet the tolerance four times over.

Tails and far queries. Where :math:`S_0` is small compared with its error bound (far tails:
sparse keys, where the relative error of a ratio is not controlled, or a grid sum that is
mostly rounding), the bound exceeds the tolerance. Those queries are computed again on a grid planned
for ``tol`` times :data:`REFINE_TOL` (where that grid is the cheaper for them); those whose bound still
exceeds the tolerance, and the queries farther than ``r`` beyond the keys' bounding box (the grid
does not reach them), are recomputed with the exact :mod:`attneb.numerics.kernels` functions. Every
returned value is therefore within ``tol`` (times the scale of the quantity) of the exact sum;
``full_output=True`` returns the per-query bounds and which queries were recomputed exactly.

Three dimensions. The grid has about :math:`(L/\delta + r/\delta)^3` cells for data of range
``L``, with :math:`\delta \approx 0.09\sqrt{h_2}` at ``tol = 1e-6`` and :math:`r = 8.6\sqrt{h_2}`:
it fits :data:`MAX_GRID_CELLS` only where ``L`` is at most about :math:`10\sqrt{h_2}` (10^6 noisy
tokens of the unit sphere with ``sigma2 = 0.5``: ``h2 >= 0.85``). The bound is worst-case (the
Lebesgue constants of three directions, no cancellation between keys): the errors measured in
3-D are 1e-4 to 1e-5 of it, so the spacing is finer than the errors need. ``"auto"`` keeps
3-D sums on the exact path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import factorial

import numpy as np
import scipy.fft
from numpy.polynomial import hermite_e, polynomial
from scipy.ndimage import maximum_filter1d
from scipy.optimize import brentq

from . import gpu, kernels
from .validation import check_array, check_interval, check_option, check_positive, check_same_dim

__all__ = [
    "AUTO_GPU_MIN_PAIRS",
    "AUTO_MIN_PAIRS",
    "AUTO_MIN_PAIRS_1D",
    "AUTO_PAIRS_PER_CELL",
    "BACKENDS",
    "BinnedResult",
    "GridPlan",
    "MAX_GRID_CELLS",
    "REFINE_TOL",
    "kde_score",
    "kernel_logsumexp",
    "kernel_mean",
    "log_kde",
    "plan_grid",
    "resolve_backend",
    "spatial_order",
]

#: Kernel-sum paths: the exact blocked sums on the CPU, the binned grid, the exact sums on a GPU
#: (:mod:`attneb.numerics.gpu`), or the fastest that applies.
BACKENDS = ("exact", "binned", "gpu", "auto")
#: ``"auto"`` takes the GPU, where one is present (:func:`attneb.numerics.gpu.available`) and the grid does
#: not apply, from queries x keys >= this (below it, copying to the GPU costs more than the sums).
AUTO_GPU_MIN_PAIRS = 2**20
#: ``"auto"`` takes the binned path when ``d <= 2``, the grid fits and queries x keys >= this
#: (4096 tokens attending to each other); in 1-D from :data:`AUTO_MIN_PAIRS_1D`.
AUTO_MIN_PAIRS = 4096**2
#: The same threshold in 1-D, where the grid is a few hundred cells: one Stage-1 layer of 1024 tokens took 4.6 ms
#: exact and 1.0 ms binned, 2048 tokens 13.3 and 1.15 ms; Stage 2 of 1024 queries over 1024 tokens 5.3 and 1.5 ms
#: (two clusters, h2 = 0.09, sigma2 = 0.5, tol 1e-9, best of 3-5; 2-core VM, 2026-11-28). In 2-D the grid costs
#: more than the exact sums up to 4096 tokens (130-156 ms against 4-47 ms a layer), so there it stays.
AUTO_MIN_PAIRS_1D = 1024**2
#: Exact pairs that cost as much as one cell of the binned path's grid: about 100 ns per FFT cell
#: (spreading, transforms, interpolation) against 0.7-0.85 ns per pair of the exact path, d <= 2
#: (``benchmarks/kernels_table.py`` at N = 16384, d = 2, 2 cores); "auto" takes the grid above this ratio.
AUTO_PAIRS_PER_CELL = 150
#: Queries whose bound misses the tolerance are computed again on a grid planned for ``tol`` times this before
#: the exact path takes those still missing it: in 1-D, E2's Stage 2 at N = 65536 (tau2 = 0.25, h2 = 0.25) sent
#: about 900 tail queries to the exact path (0.56 CPU s); a grid at tol/100 met the tolerance at all of them in
#: 0.016 s (2-core VM, 2026-11-28).
REFINE_TOL = 1e-2
#: Largest zero-padded FFT grid (cells) the binned path builds: 2**23 float64 cells are 64 MiB
#: per array, and the convolution holds about eight such arrays at once.
MAX_GRID_CELLS = 2**23

#: Largest dimension of the binned path.
MAX_DIM = 3
#: Lagrange nodes per dimension, by dimension.
ORDERS = {1: 4, 2: 6, 3: 8}
#: ``p -> (C_p, Lambda_p)``: max |node polynomial| / p! and Lebesgue constant on the middle
#: interval, both attained at t = 1/2 (checked numerically in the tests).
_LAGRANGE = {
    4: ((9 / 16) / factorial(4), 5 / 4),
    6: ((225 / 64) / factorial(6), 89 / 64),
    8: ((11025 / 256) / factorial(8), 381 / 256),
}
_ALPHA = 2.0  # the error majorant K_alpha
_EPS = 0.25  # B(q) <= e^{...} B_{alpha'}(nearest node), alpha' = (1 + eps) alpha
_ALPHA_NODE = (1.0 + _EPS) * _ALPHA
_SAFETY = 4.0  # margin of the a-priori spacing for locally uniform keys
_MAX_RATIO = 0.125  # spacing <= sqrt(h2) / 8
_CHUNK_VALUES = 2**20  # stencil entries (points x p**d nodes) spread or interpolated at once ...
_CHUNK_POINTS = 2**13  # ... and at most this many points (their gathered values stay in cache)
_LOCAL_ROWS, _LOCAL_CELLS = 4, 64  # mean step between consecutive points that counts as local
_UNIT = np.finfo(np.float64).eps / 2
_CUT = np.sqrt(2.0 * np.log(1.0 / _UNIT))  # kernel cut-off radius / sqrt(h2)


def _hermite_majorant(n: int):
    """``P_n``: coefficients of the Hermite polynomial ``He_n`` made positive, so ``|He_n(u)| <= P_n(|u|)``."""
    return np.abs(hermite_e.herme2poly([0] * n + [1]))


def _majorant(n: int, tau: float, alpha: float) -> float:
    r"""An upper bound of :math:`G_n = \sup_{s \ge 0,\, |t| \le \tau} \varphi_n(s + t)\, e^{s^2/(2\alpha)}`.

    Here :math:`\varphi_n(u) = |\mathrm{He}_n(u)|\, e^{-u^2/2}`.

    On cells of width ``h = 1e-3``, :math:`\varphi_n` is at most its larger end value plus
    :math:`(h^2/8)\max|g_n''|` (:math:`g_n = \mathrm{He}_n e^{-u^2/2}` differs from its linear
    interpolant by at most that), and :math:`|g_n''(u)| = |\mathrm{He}_{n+2}(u)|e^{-u^2/2}
    \le P_{n+2}(\max|u|)\, e^{-\min|u|^2/2}` on the cell; the supremum over the window of
    ``s + t`` is a sliding maximum of the cell bounds, and :math:`e^{s^2/(2\alpha)}` is taken at
    the right end of the cell of ``s``. Beyond ``s = 40`` the function is below 1e-100 and
    decreasing (``alpha <= 2.5``, ``tau <= 1``, ``n <= 9``); ``alpha = inf`` drops the last factor.
    The bound depends on ``tau`` only through the cells it spans, ``ceil(tau / h)``: it is computed once
    per ``(n, cells, alpha)`` (a grid plan's root search asks for the same cells many times).
    """
    return _majorant_over_cells(n, int(np.ceil(tau / _MAJORANT_CELL)), alpha)


#: Width of the cells on which :func:`_majorant` bounds its function, and how many of them it scans.
_MAJORANT_CELL, _MAJORANT_CELLS = 1e-3, 40000


@lru_cache(maxsize=16384)
def _majorant_over_cells(n: int, reach: int, alpha: float) -> float:
    """:func:`_majorant` for a window of ``reach`` cells on each side."""
    h, cells = _MAJORANT_CELL, _MAJORANT_CELLS
    u = np.abs(np.arange(-reach, cells + reach + 1) * h)  # ends of the fine cells; phi is even
    phi = np.abs(hermite_e.hermeval(u, [0] * n + [1])) * np.exp(-(u**2) / 2)
    near, far = np.minimum(u[:-1], u[1:]), np.maximum(u[:-1], u[1:])
    curvature = polynomial.polyval(far, _hermite_majorant(n + 2)) * np.exp(-(near**2) / 2)
    cell = np.maximum(phi[:-1], phi[1:]) + h**2 / 8 * curvature
    window = maximum_filter1d(cell, size=2 * reach + 1)[reach : reach + cells]  # cells i - reach .. i + reach
    right = (np.arange(cells) + 1) * h
    return float(np.max(window * np.exp(right**2 / (2.0 * alpha))))


@lru_cache(maxsize=8)
def _peak(n: int) -> float:
    r""":math:`M_n = \sup_s |\mathrm{He}_n(s)| e^{-s^2/2}` (bounded above)."""
    return _majorant(n, 0.0, np.inf)


def _coefficients(dim: int, ratio: float) -> tuple[float, float]:
    r""":math:`(\varepsilon_0, \varepsilon_1)` of the module docstring for spacing ``ratio * sqrt(h2)``."""
    p = ORDERS[dim]
    c_p, lam = _LAGRANGE[p]
    g0, g1, gp, gp1 = (_majorant(n, p * ratio, _ALPHA) for n in (0, 1, p, p + 1))
    base = c_p * (1.0 + lam**dim) * ratio**p
    powers = [lam**k for k in range(dim)]
    # D_k: the p-th derivative falls on axis k (He_{p+1}) at telescoping position m, or on another axis (He_1 He_p)
    across = g1 * gp * g0 ** (dim - 2) if dim > 1 else 0.0
    dev = max(lam_k * gp1 * g0 ** (dim - 1) + (sum(powers) - lam_k) * across for lam_k in powers)
    return base * sum(powers) * gp * g0 ** (dim - 1), base * dev


@lru_cache(maxsize=64)
def _spacing_ratio(dim: int, target: str, tol: float, reach: float) -> float:
    """Largest ``spacing / sqrt(h2)`` meeting the a-priori requirement (``reach = scale / sqrt(h2)``)."""
    nominal = _SAFETY * _ALPHA_NODE ** (dim / 2)

    def excess(ratio):
        eps0, eps1 = _coefficients(dim, ratio)
        worst = eps0 / tol if target == "log" else (eps0 + eps1) / (tol * reach)
        return np.log(nominal * worst * np.exp(dim * ratio**2 / (8 * _ALPHA * _EPS)))

    top = excess(_MAX_RATIO)
    if top <= 0:
        return _MAX_RATIO
    # the coefficients shrink with the spacing, so excess(low) <= top - p log(max / low) < 0
    low = _MAX_RATIO * np.exp(-(top + 1.0) / ORDERS[dim])
    return brentq(excess, low, _MAX_RATIO, xtol=1e-14, rtol=1e-10)


@dataclass(frozen=True)
class GridPlan:
    r"""Spacing, cut-off and error coefficients of the binned sums (independent of where the data lie).

    Attributes
    ----------
    dim : int
        Dimension, 1 to 3.
    h2 : float
        Kernel bandwidth.
    tol : float
        Target error: of kernel means relative to ``scale``, of scores relative to
        ``scale / h2``, of log-sums absolute.
    scale : float
        Length the tolerance of means is relative to.
    target : {"mean", "log"}
        The quantity the spacing was chosen for.
    spacing : float
        Grid spacing :math:`\delta`.
    half_width : int
        Kernel cut-off in cells, :math:`\lceil r/\delta\rceil`, :math:`r = \sqrt{2 h_2 \ln(1/u)}`.
    sum_coef, dev_coef : float
        :math:`\varepsilon_0` and :math:`\varepsilon_1` of the module docstring: per key,
        :math:`\lvert\hat K - K\rvert \le \varepsilon_0 K_\alpha` and the ``D`` kernel's error is
        at most :math:`\varepsilon_1 \sqrt{h_2} K_\alpha`.
    order : int
        Spreading and interpolation nodes per dimension (Lagrange).
    """

    dim: int
    h2: float
    tol: float
    scale: float
    target: str
    spacing: float
    half_width: int
    sum_coef: float
    dev_coef: float
    order: int

    @property
    def node_coef(self) -> float:
        r"""Per-key bound :math:`c_B` on the error of :math:`B_{\alpha'}` at a grid node (spreading and cut-off)."""
        c_p, lam = _LAGRANGE[self.order]
        spread = c_p * sum(lam**k for k in range(self.dim)) * _peak(self.order)
        cut = lam**self.dim * np.exp(-((self.half_width * self.spacing) ** 2) / (2 * _ALPHA_NODE * self.h2))
        return spread * (self.spacing**2 / (_ALPHA_NODE * self.h2)) ** (self.order / 2) + cut

    @property
    def node_factor(self) -> float:
        r"""Factor from :math:`B_{\alpha'}` at the nearest node to ``B`` at a query.

        :math:`e^{d\delta^2/(8\alpha\epsilon h_2)}`.
        """
        return float(np.exp(self.dim * self.spacing**2 / (8 * _ALPHA * _EPS * self.h2)))


def _check_dim(points, name):
    if points.shape[1] > MAX_DIM:
        raise ValueError(
            f"{name} has d == {points.shape[1]} coordinates per point; the binned path supports d <= {MAX_DIM}. "
            f"Use numerics.kernels (the exact path) in higher dimensions."
        )


def _box(points):
    """Smallest and largest coordinate of ``(n, d)`` points, per coordinate (column by column: fast for n >> d)."""
    columns = [points[:, k] for k in range(points.shape[1])]
    return np.array([c.min() for c in columns]), np.array([c.max() for c in columns])


def _default_scale(keys, h2):
    lo, hi = _box(keys)
    return float(max((hi - lo).max(), np.sqrt(h2)))


def plan_grid(keys, h2, *, tol=1e-9, scale=None, target="mean") -> GridPlan:
    r"""Choose the grid spacing for ``tol`` from the a-priori error bound.

    The spacing is the largest :math:`\delta \le \sqrt{h_2}/8` with
    :math:`4\,\beta(\varepsilon_0 + \varepsilon_1)\sqrt{h_2} \le \mathrm{tol}\cdot\mathrm{scale}`
    (``target="mean"``) or :math:`4\,\beta\varepsilon_0 \le \mathrm{tol}` (``"log"``), with
    :math:`\varepsilon_{0,1} \propto (\delta^2/h_2)^{p/2}` and :math:`\beta \approx \alpha'^{d/2}`
    as in the module docstring.

    Parameters
    ----------
    keys : array_like, shape (N, d)
        The keys (only ``d`` and, for the default ``scale``, their range are used); ``d <= 3``.
    h2 : float
        Kernel bandwidth, > 0.
    tol : float
        Target error in (0, 1).
    scale : float, optional
        Length the tolerance of means is relative to; default the largest coordinate range
        of the keys, at least :math:`\sqrt{h_2}`.
    target : {"mean", "log"}
        Kernel means and scores, or log-sums and log-densities.

    Returns
    -------
    GridPlan
    """
    keys = check_array(keys, "keys")
    _check_dim(keys, "keys")
    h2 = check_positive(h2, "h2")
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    target = check_option(target, "target", ("mean", "log"))
    scale = _default_scale(keys, h2) if scale is None else check_positive(scale, "scale")
    return _plan(keys.shape[1], h2, tol, scale, target)


@lru_cache(maxsize=64)
def _plan(dim, h2, tol, scale, target):
    ratio = _spacing_ratio(dim, target, tol, scale / np.sqrt(h2))
    eps0, eps1 = _coefficients(dim, ratio)
    return GridPlan(
        dim=dim,
        h2=h2,
        tol=tol,
        scale=scale,
        target=target,
        spacing=ratio * np.sqrt(h2),
        half_width=int(np.ceil(_CUT / ratio)),
        sum_coef=eps0,
        dev_coef=eps1,
        order=ORDERS[dim],
    )


@dataclass(frozen=True)
class BinnedResult:
    """Values of a binned kernel sum with their error bounds (``full_output=True``).

    Attributes
    ----------
    values : ndarray
        What the function returns without ``full_output``.
    error_bound : ndarray, shape (M,)
        Per query, a bound on the absolute error of its value (the largest over coordinates);
        0 for the queries recomputed by the exact path.
    exact : ndarray of bool, shape (M,)
        The queries recomputed by the exact path (far tails, queries off the grid).
    tol : float
        The tolerance: ``error_bound <= tol * scale`` (means), ``tol * scale / h2`` (scores) or
        ``tol`` (log-sums).
    plan : GridPlan
        Spacing, cut-off and error coefficients.
    origin : ndarray, shape (d,)
        Position of grid node 0.
    shape : tuple of int
        Grid nodes per dimension.
    fft_shape : tuple of int
        Zero-padded FFT size per dimension (``scipy.fft.next_fast_len``).
    """

    values: np.ndarray
    error_bound: np.ndarray
    exact: np.ndarray
    tol: float
    plan: GridPlan
    origin: np.ndarray
    shape: tuple
    fft_shape: tuple


@dataclass(frozen=True)
class _Layout:
    origin: np.ndarray
    lo: np.ndarray  # points outside [lo, hi] are off the grid
    hi: np.ndarray
    shape: tuple
    fft_shape: tuple
    cut: tuple  # kernel half-width per axis (offsets beyond the grid never occur)


def _layout(queries, keys, plan) -> _Layout:
    """Grid over the keys' box, extended towards the queries by at most the cut-off radius.

    Where the extended grid would exceed :data:`MAX_GRID_CELLS`, the grid covers the keys' box
    only (the queries off it take the exact path).
    """
    (kmin, kmax), (qmin, qmax) = _box(keys), _box(queries)
    reach = plan.half_width * plan.spacing
    lo = np.maximum(np.minimum(kmin, qmin), kmin - reach)
    hi = np.minimum(np.maximum(kmax, qmax), kmax + reach)
    shape, fft_shape, cut, origin = _grid_shape(lo, hi, plan)
    if np.prod(fft_shape) > MAX_GRID_CELLS and (np.any(lo < kmin) or np.any(hi > kmax)):
        lo, hi = kmin, kmax
        shape, fft_shape, cut, origin = _grid_shape(lo, hi, plan)
    cells = int(np.prod(fft_shape))
    if cells > MAX_GRID_CELLS:
        raise ValueError(
            f"the binned grid would need {cells} cells (fft shape {fft_shape}, spacing {plan.spacing:.3g} for "
            f"tol == {plan.tol}, h2 == {plan.h2}), more than MAX_GRID_CELLS == {MAX_GRID_CELLS}; "
            f"increase tol or use the exact path (numerics.kernels)"
        )
    return _Layout(origin, lo, hi, shape, fft_shape, cut)


def _grid_shape(lo, hi, plan):
    """Nodes, zero-padded FFT size and kernel half-width per axis, and node 0, of a grid over ``[lo, hi]``."""
    delta, p = plan.spacing, plan.order
    origin = lo - (p // 2 - 1) * delta
    last_cell = np.maximum(np.floor((hi - origin) / delta), p // 2 - 1)  # >= the first, despite rounding
    shape = tuple(int(n) for n in last_cell + p // 2 + 1)
    cut = tuple(min(plan.half_width, n - 1) for n in shape)
    last = len(shape) - 1
    fft_shape = tuple(
        scipy.fft.next_fast_len(n + c, real=(axis == last)) for axis, (n, c) in enumerate(zip(shape, cut))
    )
    return shape, fft_shape, cut, origin


@dataclass(frozen=True)
class _Stencil:
    """Points on the grid: flat index of the first and of the nearest node, Lagrange weights ``(d, p, M)``."""

    flat: np.ndarray
    nearest: np.ndarray
    weights: np.ndarray

    def take(self, order):
        return _Stencil(self.flat[order], self.nearest[order], self.weights[:, :, order])


def _lagrange(t, p, out):
    r"""Lagrange weights of the nodes ``-(p/2 - 1) .. p/2`` at ``t`` (shape ``(M,)``), into ``out`` ``(p, M)``.

    In place, with two temporaries: products of the differences before each node, then times
    those after it, over :math:`\prod_{m \ne k} (k - m)`.
    """
    nodes = np.arange(1 - p // 2, p // 2 + 1)
    diff = np.empty_like(t)
    out[0] = 1.0
    for k in range(1, p):
        np.subtract(t, nodes[k - 1], out=diff)
        np.multiply(out[k - 1], diff, out=out[k])
    after = np.ones_like(t)
    for k in range(p - 1, 0, -1):
        out[k] *= after
        np.subtract(t, nodes[k], out=diff)
        after *= diff
    out[0] = after
    out /= np.array([np.prod([k - m for m in nodes if m != k]) for k in nodes], dtype=np.float64)[:, None]
    return out


def _stencil(points_t, layout, plan) -> _Stencil:
    """Stencil of points given coordinate-major, ``points_t`` of shape ``(d, M)``."""
    p, shape = plan.order, layout.shape
    flat = nearest = 0
    weights = np.empty((len(shape), p, points_t.shape[1]))
    for k, n in enumerate(shape):
        t = points_t[k] - layout.origin[k]
        t /= plan.spacing
        cell = np.floor(t)
        np.clip(cell, p // 2 - 1, n - p // 2 - 1, out=cell)
        t -= cell
        _lagrange(t, p, weights[k])
        first = cell.astype(np.intp)
        flat = flat * n + (first - (p // 2 - 1))
        first += t >= 0.5
        nearest = nearest * n + first
    return _Stencil(flat, nearest, weights)


def _node_offsets(shape, p):
    """Flat offsets of the ``p**d`` stencil nodes, row-major."""
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]
    return sum(np.arange(p).reshape((p,) + (1,) * (len(shape) - 1 - k)) * stride
               for k, stride in enumerate(strides)).ravel()


def _chunks(n, p, d):
    """``(lo, hi)`` ranges of points whose stencils hold at most :data:`_CHUNK_VALUES` entries."""
    size = max(1, min(_CHUNK_POINTS, _CHUNK_VALUES // p**d))
    return ((lo, min(n, lo + size)) for lo in range(0, n, size))


def _tensor_weights(weights):
    """Tensor-product weights ``(p,) * d + (m,)`` of points with per-axis weights ``(d, p, m)``."""
    out = weights[0]
    for axis_weights in weights[1:]:
        out = out[..., None, :] * axis_weights
    return out


def _spread(stencil, shape, p):
    """Grid array ``G[g] = sum_j l_g(x_j)``.

    Per chunk of points, one ``bincount`` over the cells between its lowest first node and its
    highest last node: a short range when the points are sorted by cell (:func:`_sorted`).
    """
    d = len(shape)
    grid = np.zeros(int(np.prod(shape)))
    offsets = _node_offsets(shape, p).reshape((p,) * d + (1,))
    for lo, hi in _chunks(len(stencil.flat), p, d):
        first = stencil.flat[lo:hi]
        start = int(first.min())
        counts = np.bincount((first - start + offsets).ravel(), weights=_tensor_weights(stencil.weights[:, :, lo:hi]).ravel())
        grid[start : start + counts.size] += counts
    return grid.reshape(shape)


def _axis_spectra(n_fft, cut, delta, h2, last):
    """Spectra of the 1-D factors ``k(v)``, ``-v k(v)`` and ``k_alpha'(v)`` cut at ``cut`` cells."""
    offsets = np.arange(-cut, cut + 1)
    v = offsets * delta
    k = np.exp(-(v**2) / (2.0 * h2))
    transform = scipy.fft.rfft if last else scipy.fft.fft
    spectra = []
    for values in (k, -v * k, np.exp(-(v**2) / (2.0 * _ALPHA_NODE * h2))):
        arr = np.zeros(n_fft)
        arr[offsets % n_fft] = values
        spectra.append(transform(arr))
    return spectra


def _convolve(grid, layout, plan, want_dev):
    """Convolutions on the grid, cells flattened.

    Returns ``columns`` (``[S0, D_1, .., D_d]`` or ``[S0]``, one row each), ``B_alpha'`` and the
    largest absolute value of each.
    """
    d = grid.ndim
    axes = [
        _axis_spectra(n, c, plan.spacing, plan.h2, last=(axis == d - 1))
        for axis, (n, c) in enumerate(zip(layout.fft_shape, layout.cut))
    ]
    # which 1-D factor (0: k, 1: -v k, 2: k_alpha') each output uses along each axis
    recipes = [(0,) * d] + ([tuple(int(a == k) for a in range(d)) for k in range(d)] if want_dev else []) + [(2,) * d]
    spectrum = scipy.fft.rfftn(grid, s=layout.fft_shape)
    region = tuple(slice(0, n) for n in layout.shape)
    outputs = np.empty((len(recipes),) + layout.shape)
    for col, recipe in enumerate(recipes):
        kernel = axes[0][recipe[0]]
        for axis in range(1, d):
            kernel = np.multiply.outer(kernel, axes[axis][recipe[axis]])
        kernel *= spectrum
        outputs[col] = scipy.fft.irfftn(kernel, s=layout.fft_shape)[region]
    outputs = outputs.reshape(len(recipes), -1)
    peaks = np.maximum(outputs.max(axis=1), -outputs.min(axis=1))
    return outputs[:-1], outputs[-1], peaks


def _interpolate(columns, stencil, shape, p):
    """``sum_g l_g(q) C[g]`` for every query (last axis) and every row of ``columns``.

    In chunks of queries: gather the ``p**d`` node values of a chunk, then contract them with the
    weights one dimension at a time, the last first (``einsum``).
    """
    n, d = len(stencil.flat), len(shape)
    offsets = _node_offsets(shape, p).reshape((p,) * d + (1,))
    out = np.empty((columns.shape[0], n))
    for lo, hi in _chunks(n, p, d):
        index = stencil.flat[lo:hi] + offsets
        for row, column in zip(out, columns):
            values = np.take(column, index)
            for axis in range(d - 1, -1, -1):
                values = np.einsum("...bn,bn->...n", values, stencil.weights[axis, :, lo:hi])
            row[lo:hi] = values
    return out


@dataclass(frozen=True)
class _GridSums:
    inside: np.ndarray  # (M,) queries on the grid; the other entries below are 0 or inf
    s0: np.ndarray  # (M,)
    dev: np.ndarray | None  # (d, M)
    err_s0: np.ndarray  # (M,) bound on |s0 - S0|
    err_dev: np.ndarray | None  # (M,) bound on |dev_k - D_k| (every k)
    layout: _Layout


def _sorted(stencil, shape):
    """The stencil in an order local on the grid, and the permutation (``None``: kept as it was).

    Only the speed of the grid accesses depends on the order. Points whose consecutive first
    nodes are on average within a few grid rows of each other (the tokens of a flow, sorted once
    by :func:`spatial_order`) are kept as they are; others are sorted by first node.
    """
    row = shape[-1] if len(shape) >= 2 else 1
    if len(stencil.flat) < 2 or np.abs(np.diff(stencil.flat)).mean() <= _LOCAL_ROWS * row + _LOCAL_CELLS:
        return stencil, None
    order = np.argsort(stencil.flat, kind="stable")
    return stencil.take(order), order


def _inside(points_t, layout):
    inside = np.ones(points_t.shape[1], dtype=bool)
    for coord, lo, hi in zip(points_t, layout.lo, layout.hi):
        inside &= (coord >= lo) & (coord <= hi)
    return inside


def _grid_sums(queries, keys, plan, *, want_dev) -> _GridSums:
    """Raw grid values of ``S0`` (and ``D``) at the queries with their error bounds, no fallback."""
    layout = _layout(queries, keys, plan)
    p, d = plan.order, plan.dim
    lam = _LAGRANGE[p][1]
    keys_t = np.ascontiguousarray(keys.T)
    key_stencil, key_order = _sorted(_stencil(keys_t, layout, plan), layout.shape)
    grid = _spread(key_stencil, layout.shape, p)
    columns, node_sums, peaks = _convolve(grid, layout, plan, want_dev)

    if queries is keys:
        inside = np.ones(len(queries), dtype=bool)
        q_stencil, q_order = key_stencil, key_order
    else:
        queries_t = np.ascontiguousarray(queries.T)
        inside = _inside(queries_t, layout)
        q_stencil, q_order = _sorted(_stencil(queries_t[:, inside], layout, plan), layout.shape)
    sums = _interpolate(columns, q_stencil, layout.shape, p)
    near = node_sums[q_stencil.nearest]
    if q_order is not None:
        sums[:, q_order], near[q_order] = sums.copy(), near.copy()
    if not inside.all():
        full_sums, full_near = np.zeros((sums.shape[0], len(queries))), np.full(len(queries), np.inf)
        full_sums[:, inside], full_near[inside] = sums, near
        sums, near = full_sums, full_near

    n_keys = keys.shape[0]
    n_cell = int(np.bincount(key_stencil.flat).max())
    rounding = _UNIT * lam ** (2 * d) * (8.0 * np.log2(max(np.prod(layout.fft_shape), 2)) + n_cell + p**d)
    rho = rounding * peaks
    r = plan.half_width * plan.spacing
    cut = n_keys * lam ** (2 * d) * np.exp(-(r**2) / (2 * plan.h2))
    b_bar = plan.node_factor * (near + n_keys * plan.node_coef + rho[-1])
    err_s0 = plan.sum_coef * b_bar + rho[0] + cut
    if want_dev:
        err_dev = plan.dev_coef * np.sqrt(plan.h2) * b_bar + rho[1 : 1 + d].max() + cut * r
        dev = sums[1:]
    else:
        err_dev = dev = None
    return _GridSums(inside, sums[0], dev, err_s0, err_dev, layout)


def _prepare(queries, keys, h2, tol, scale, target):
    queries = check_array(queries, "queries")
    keys = check_array(keys, "keys")
    check_same_dim(queries, "queries", keys, "keys")
    _check_dim(keys, "keys")
    h2 = check_positive(h2, "h2")
    tol = check_interval(tol, "tol", 0.0, 1.0, closed="neither")
    scale = _default_scale(keys, h2) if scale is None else check_positive(scale, "scale")
    if queries is not keys and queries.shape == keys.shape and np.array_equal(queries, keys):
        queries = keys  # self-attention: one stencil for spreading and interpolation
    return queries, keys, _plan(keys.shape[1], h2, tol, scale, target)


def _result(values, bound, exact, plan, layout, full_output):
    if not full_output:
        return values
    return BinnedResult(values, bound, exact, plan.tol, plan, layout.origin, layout.shape, layout.fft_shape)


def _with_fallback(grid_pass, exact_path, queries, keys, plan, limit):
    """Values at the queries, their error bounds, the mask of queries computed exactly, and the first grid's layout.

    ``grid_pass(queries, keys, plan, limit)`` returns the grid's values, bounds, the mask of queries whose bound
    exceeds ``limit`` (or that are off the grid) and the layout. Those queries are computed again on a grid
    planned for ``tol *`` :data:`REFINE_TOL` (spacing about ``REFINE_TOL ** (1/p)`` times the first's, ``p`` nodes
    per axis) where :func:`_grid_applies` finds it the cheaper for them, and kept where their bound now meets
    ``limit``; ``exact_path(queries, keys, h2)`` computes the rest.
    """
    values, bound, failed, layout = grid_pass(queries, keys, plan, limit)
    todo = np.flatnonzero(failed)
    if todo.size and _grid_applies(todo.size * len(keys), keys, plan.h2, plan.tol * REFINE_TOL, plan.scale,
                                   plan.target):
        fine = _plan(plan.dim, plan.h2, plan.tol * REFINE_TOL, plan.scale, plan.target)
        fine_values, fine_bound, fine_failed, _ = grid_pass(queries[todo], keys, fine, limit)
        met = todo[~fine_failed]
        values[met], bound[met], failed[met] = fine_values[~fine_failed], fine_bound[~fine_failed], False
        todo = todo[fine_failed]
    if todo.size:
        values[todo] = exact_path(queries[todo], keys, plan.h2)
        bound[todo] = 0.0
    return values, bound, failed, layout


def _mean_pass(queries, keys, plan, limit):
    sums = _grid_sums(queries, keys, plan, want_dev=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = sums.s0 - sums.err_s0
        step = sums.dev / sums.s0
        largest = np.abs(step).max(axis=0)
        bound = (sums.err_dev + largest * sums.err_s0) / margin
    failed = ~sums.inside | ~(margin > 0) | ~(bound <= limit)
    step[:, failed] = 0.0
    return queries + step.T, np.where(failed, 0.0, bound), failed, sums.layout


def _mean_and_bound(queries, keys, plan):
    """Kernel mean at the queries, its error bound, and the mask of queries computed exactly."""
    return _with_fallback(_mean_pass, kernels.kernel_mean, queries, keys, plan, plan.tol * plan.scale)


def kernel_mean(queries, keys, h2, *, tol=1e-9, scale=None, full_output=False):
    r"""Gaussian-kernel (Nadaraya-Watson) mean of the keys seen from each query, on a grid.

    .. math:: a(q_m) = \frac{\sum_j e^{-\lVert q_m - k_j\rVert^2/(2h_2)}\, k_j}
              {\sum_j e^{-\lVert q_m - k_j\rVert^2/(2h_2)}} = q_m + \frac{D(q_m)}{S_0(q_m)}

    The sum of :func:`attneb.numerics.kernels.kernel_mean`, every coordinate within ``tol * scale`` of
    it: the grid values carry the bound of the module docstring, and the queries whose bound
    exceeds ``tol * scale`` (far tails, queries off the grid) are computed again on a finer grid
    or exactly (module docstring).

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        Keys, which are also the values; ``d <= 3``.
    h2 : float
        Kernel bandwidth (variance), > 0.
    tol : float
        Error tolerance in (0, 1), relative to ``scale``.
    scale : float, optional
        Length the tolerance is relative to; default the largest coordinate range of the keys
        (at least :math:`\sqrt{h_2}`).
    full_output : bool
        Return a :class:`BinnedResult` with the per-query bounds instead of the array.

    Returns
    -------
    ndarray, shape (M, d), or BinnedResult
    """
    queries, keys, plan = _prepare(queries, keys, h2, tol, scale, "mean")
    mean, bound, exact, layout = _mean_and_bound(queries, keys, plan)
    return _result(mean, bound, exact, plan, layout, full_output)


def kde_score(queries, keys, h2, *, tol=1e-9, scale=None, full_output=False):
    r"""Gradient of the log kernel density estimate, on a grid.

    .. math:: \nabla_q \log \mathrm{KDE}(q_m) = \frac{a(q_m) - q_m}{h_2} = \frac{D(q_m)}{h_2\, S_0(q_m)}

    The score of :func:`attneb.numerics.kernels.kde_score`, every coordinate within ``tol * scale / h2``
    of it (the kernel-mean tolerance divided by ``h2``).

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        ``d <= 3``.
    h2 : float
        Kernel bandwidth (variance), > 0.
    tol : float
        Error tolerance in (0, 1), relative to ``scale / h2``.
    scale : float, optional
        As in :func:`kernel_mean`.
    full_output : bool
        Return a :class:`BinnedResult` instead of the array.

    Returns
    -------
    ndarray, shape (M, d), or BinnedResult
    """
    queries, keys, plan = _prepare(queries, keys, h2, tol, scale, "mean")
    mean, bound, exact, layout = _mean_and_bound(queries, keys, plan)
    return _result((mean - queries) / plan.h2, bound / plan.h2, exact, plan, layout, full_output)


def _logsumexp_pass(queries, keys, plan, limit):
    sums = _grid_sums(queries, keys, plan, want_dev=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = -np.log1p(-sums.err_s0 / sums.s0)
        lse = np.log(sums.s0)
    failed = ~sums.inside | ~(sums.s0 > sums.err_s0) | ~(bound <= limit)
    return np.where(failed, 0.0, lse), np.where(failed, 0.0, bound), failed, sums.layout


def _logsumexp_and_bound(queries, keys, plan):
    return _with_fallback(_logsumexp_pass, kernels.kernel_logsumexp, queries, keys, plan, plan.tol)


def kernel_logsumexp(queries, keys, h2, *, tol=1e-9, full_output=False):
    r"""Log of the unnormalised kernel sum, on a grid.

    .. math:: \log S_0(q_m) = \log \sum_j e^{-\lVert q_m - k_j\rVert^2/(2 h_2)}

    The sum of :func:`attneb.numerics.kernels.kernel_logsumexp`, within ``tol`` (absolute).

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        ``d <= 3``.
    h2 : float
        Kernel bandwidth (variance), > 0.
    tol : float
        Absolute error tolerance in (0, 1).
    full_output : bool
        Return a :class:`BinnedResult` instead of the array.

    Returns
    -------
    ndarray, shape (M,), or BinnedResult
    """
    queries, keys, plan = _prepare(queries, keys, h2, tol, None, "log")
    lse, bound, exact, layout = _logsumexp_and_bound(queries, keys, plan)
    return _result(lse, bound, exact, plan, layout, full_output)


def log_kde(queries, keys, h2, *, tol=1e-9, full_output=False):
    r"""Log of the Gaussian kernel density estimate at each query, on a grid.

    .. math:: \log \frac1N \sum_{j=1}^N (2\pi h_2)^{-d/2} e^{-\lVert q_m - k_j\rVert^2/(2h_2)}
              = \log S_0(q_m) - \log N - \frac d2 \log(2\pi h_2)

    The density of :func:`attneb.numerics.kernels.log_kde` (same normalisation), within ``tol`` (absolute).

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        ``d <= 3``.
    h2 : float
        Kernel bandwidth (variance), > 0.
    tol : float
        Absolute error tolerance in (0, 1).
    full_output : bool
        Return a :class:`BinnedResult` instead of the array.

    Returns
    -------
    ndarray, shape (M,), or BinnedResult
    """
    queries, keys, plan = _prepare(queries, keys, h2, tol, None, "log")
    lse, bound, exact, layout = _logsumexp_and_bound(queries, keys, plan)
    n, d = keys.shape
    values = lse - np.log(n) - 0.5 * d * np.log(2.0 * np.pi * plan.h2)
    return _result(values, bound, exact, plan, layout, full_output)


def spatial_order(points, spacing) -> np.ndarray:
    """Permutation sorting ``points`` row-major by grid cells of size ``spacing``.

    The binned sums visit the grid in this order. Points that move little between calls (the
    layers of a flow) and were sorted once make every later sort nearly free.
    """
    points = check_array(points, "points")
    spacing = check_positive(spacing, "spacing")
    cells = np.floor((points - points.min(axis=0)) / spacing)
    return np.lexsort(cells.T[::-1])


def resolve_backend(backend, n_queries, keys, h2, *, tol=1e-9, scale=None, target="mean") -> str:
    """``"exact"``, ``"binned"`` or ``"gpu"``: ``backend`` itself, or the path ``"auto"`` picks.

    ``"auto"`` picks ``"binned"`` when ``d <= 2``, the grid for ``tol`` fits in
    :data:`MAX_GRID_CELLS` and the pairs ``n_queries * N`` number at least :data:`AUTO_MIN_PAIRS`
    (:data:`AUTO_MIN_PAIRS_1D` in 1-D)
    and :data:`AUTO_PAIRS_PER_CELL` times the grid's FFT cells (where the grid is the cheaper);
    else ``"gpu"`` where a GPU is present and the pairs number at least :data:`AUTO_GPU_MIN_PAIRS`;
    else ``"exact"``. ``keys`` is a validated ``(N, d)`` array.

    Raises
    ------
    RuntimeError
        For ``backend="gpu"`` where the GPU path cannot run (:func:`attneb.numerics.gpu.available`).
    """
    backend = check_option(backend, "backend", BACKENDS)
    if backend == "gpu":
        gpu.require()
    if backend != "auto":
        return backend
    pairs = n_queries * keys.shape[0]
    if _grid_applies(pairs, keys, h2, tol, scale, target):
        return "binned"
    return "gpu" if pairs >= AUTO_GPU_MIN_PAIRS and gpu.available() else "exact"


def _grid_applies(pairs, keys, h2, tol, scale, target) -> bool:
    """Whether the binned path applies to ``pairs`` kernel terms over ``keys`` and is the cheaper."""
    if keys.shape[1] > 2 or pairs < (AUTO_MIN_PAIRS_1D if keys.shape[1] == 1 else AUTO_MIN_PAIRS):
        return False
    scale = _default_scale(keys, h2) if scale is None else scale
    try:
        layout = _layout(keys, keys, _plan(keys.shape[1], h2, tol, scale, target))
    except ValueError:
        return False
    return pairs >= AUTO_PAIRS_PER_CELL * np.prod(layout.fft_shape)
