r"""Kiefer-Wolfowitz nonparametric maximum likelihood (NPMLE) empirical Bayes: g-modeling.

From the noisy batch alone, the prior is estimated by maximising the marginal likelihood of
:math:`\tilde x_i \sim \int \varphi_{\sigma^2}(\tilde x - a)\, dG(a)` over all priors :math:`G`
(Kiefer & Wolfowitz 1956), here over the priors carried by a fixed set of atoms
:math:`a_1..a_K`, and each query is denoised by the posterior mean under the fitted prior
(Jiang & Zhang 2009; Koenker & Mizera 2014). :class:`NPMLE` is the baseline "Kiefer-Wolfowitz
NPMLE followed by its posterior mean" of the toolkit's theory notes.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import solve_triangular
from scipy.optimize import nnls

from .base import Denoiser, single_blas_thread
from .kernels import DEFAULT_BUDGET_BYTES
from .priors import Discrete
from .validation import check_positive, check_positive_int, check_rng

__all__ = ["ConvergenceWarning", "NPMLE"]

#: float64 temporaries per (point, atom) pair: the likelihood block, its column selection
#: scaled by ``1 / s_i`` for the Hessian, and the squared distances while it is built.
_BYTES_PER_ENTRY = 3 * 8
#: Likelihood entries below this are set to 0: subnormal floats slow BLAS down a hundredfold.
_TINY = np.finfo(float).tiny
#: Smallest admissible ``s_i = (L w)_i``: ``1 / s_i^2 <= 1e200`` keeps the gradient and Hessian
#: sums finite for any N. At the optimum ``s_i >= 1 / N`` (see :func:`_maximise`).
_S_MIN = 1e-100
#: At most this many atoms that violate the optimality condition join the support per step.
_MAX_NEW_ATOMS = 32
#: Ridge added to the Jacobi-scaled Hessian (unit diagonal). Gaussian columns on a fine grid are
#: nearly collinear; 1e-10 is well above the rounding error of the scaled Gram matrix (about
#: ``K * eps``) so the Cholesky factorisation always exists.
_RIDGE = 1e-10
#: Armijo sufficient-increase constant and the number of step halvings tried.
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


class ConvergenceWarning(UserWarning):
    """The NPMLE optimiser stopped before the optimality condition held to ``tol``."""


class NPMLE(Denoiser):
    r"""Kiefer-Wolfowitz NPMLE of the prior on fixed atoms, then its posterior mean.

    **Prior.** With atoms :math:`a_1..a_K` and the Gaussian likelihood
    :math:`\varphi_{\sigma^2}(\tilde x - a) = (2\pi\sigma^2)^{-d/2}
    e^{-\lVert\tilde x - a\rVert^2/(2\sigma^2)}`, ``fit`` finds weights on the simplex
    :math:`\Delta_K` maximising the mean log marginal likelihood

    .. math:: \ell(w) = \frac1N \sum_{i=1}^N \log \sum_{k=1}^K w_k\, \varphi_{\sigma^2}(\tilde x_i - a_k),

    a concave function of :math:`w`. Write :math:`L_{ik} = \varphi_{\sigma^2}(\tilde x_i - a_k)`
    and :math:`g_k(w) = \frac1N \sum_i L_{ik} / (Lw)_i = \partial\ell/\partial w_k`. Since
    :math:`\sum_k w_k g_k(w) = 1`, the optimality (KKT) condition of the NPMLE is
    :math:`\max_k g_k(w) \le 1`, with equality on the support of :math:`w`; by concavity
    :math:`\ell(w^*) - \ell(w) \le \max_k g_k(w) - 1`, so the stopping rule
    :math:`\max_k g_k(w) \le 1 + \mathrm{tol}` certifies that :math:`\ell(w)` is within ``tol``
    (nats per observation) of the maximum over :math:`\Delta_K`.

    **Atoms.** For ``d == 1``, ``grid_size`` equally spaced points spanning
    :math:`[\min_i \tilde x_i, \max_i \tilde x_i]` (Jiang & Zhang 2009; Koenker & Mizera 2014).
    For ``d >= 2``, where a grid grows exponentially with ``d``, the "exemplar" support
    (Saha & Guntuboyina 2020): ``grid_size`` noisy points drawn without replacement with ``rng``
    (all of them, in batch order, if ``N <= grid_size``).

    **Denoiser.** With the fitted prior :math:`\hat G = \sum_k \hat w_k \delta_{a_k}`,

    .. math:: \hat x(\tilde x) = \sum_k \mathrm{softmax}_k\!\big(\log \hat w_k
              - \lVert\tilde x - a_k\rVert^2/(2\sigma^2)\big)\, a_k,

    computed by :meth:`attneb.numerics.priors.Discrete.posterior_mean` (log-sum-exp).

    **Optimiser: sequential quadratic programming (SQP) interleaved with EM**, on the
    equivalent problem :math:`\max_{w \ge 0}\ \ell(w) - \mathbf 1^\top w`, whose maximiser lies on
    the simplex (Kim, Carbonetto, Stephens & Anitescu 2020; the fixed-grid form of Wang's 2007
    constrained Newton method). Starting from the uniform prior, each iteration

    1. takes the atoms with :math:`w_k > 0` plus the at most 32 with the largest
       :math:`g_k > 1` as the active set :math:`C`, less those with :math:`g_k \le 1/2`, which
       the model below sets to 0 anyway (:math:`H \ge 0` entrywise);
    2. solves the quadratic model :math:`\min_{y \ge 0,\ y_{\bar C} = 0}\ \tfrac12 y^\top H y
       - (2g - \mathbf 1)^\top y` with :math:`H = \frac1N \sum_i L_{i\cdot}^\top L_{i\cdot} /
       (Lw)_i^2`, the negative Hessian of :math:`\ell` (plus ``1e-10`` times its diagonal: a
       ridge of ``1e-10`` after Jacobi scaling to a unit diagonal). A Cholesky factor
       :math:`H = RR^\top` turns it into the non-negative least squares problem
       :math:`\min_{y\ge0} \lVert R^\top y - R^{-1}(2g - \mathbf 1)\rVert^2`, solved by
       :func:`scipy.optimize.nnls`;
    3. backtracks (Armijo) along :math:`w + \lambda(y - w)` until :math:`\ell - \mathbf 1^\top w`
       increases enough, and rescales the result onto the simplex, which can only increase it
       further (:math:`t - 1 - \log t \ge 0`);
    4. takes one EM step :math:`w_k \leftarrow w_k\, g_k(w)`, which never decreases
       :math:`\ell` and restores at once a weight that step 3 drove near 0 while some point
       still needs it (the Newton model of :math:`\log (Lw)_i` only about doubles it per step).

    Hence :math:`\ell` never decreases over the iterations. Each costs three passes over the
    likelihood matrix, one of them a Gram product on the active columns (all atoms with
    :math:`g_k > 1/2` at the first iteration, a few dozen afterwards). The likelihood is
    row-normalised in the log domain, :math:`L_{ik} \propto \exp(\lambda_{ik} - \max_k
    \lambda_{ik})` with :math:`\lambda_{ik} = -\lVert\tilde x_i - a_k\rVert^2/(2\sigma^2)`
    (:math:`g` and :math:`H` are invariant to this row scaling), kept in memory when it fits
    ``budget_bytes`` and otherwise recomputed in row blocks on every pass. BLAS runs on one
    thread: the factorisations and products here are small enough that a threaded OpenBLAS
    spends more time on its threads than on them (the fit measured 2-3x slower with two threads
    on a 2-core machine).

    Measured on the two-cluster prior :math:`\tfrac12 N(\pm 2, 0.25)`, ``sigma2 = 0.5``,
    ``d = 1``, ``grid_size = 256``, ``tol = 1e-6``, on a 2-core machine: 10-14 iterations,
    about 0.05 s for ``N = 4096`` and 0.3 s for ``N = 16384`` (``d = 2``, three clusters,
    ``N = 4096``: 0.05 s). Plain EM needed 7000 iterations (3 s) to reach ``tol = 1e-4`` at
    ``N = 4096`` and had not reached ``1e-6`` after 20000; EM accelerated by SQUAREM
    (Varadhan & Roland 2008, with a monotonicity safeguard) needed about 6000 EM steps to
    reach ``1e-6``: 3 s at ``N = 4096``, 43 s at ``N = 16384``. EM crawls along the nearly
    flat directions that neighbouring grid atoms create; the Newton model follows them.

    Parameters
    ----------
    sigma2 : float
        Noise variance of the likelihood, > 0.
    grid_size : int
        Number of atoms ``K`` >= 1. The default 256 is of the order of the ~300 grid points
        customary for the 1-D Kiefer-Wolfowitz estimator (Koenker & Mizera 2014) and above
        :math:`\sqrt N` up to ``N = 65536``, the grid size at which the grid NPMLE keeps the
        statistical accuracy of the exact one (Dicker & Zhao 2016).
    max_iter : int
        Maximum number of iterations, >= 1. The default 100 is several times the 10-30
        seen in practice.
    tol : float
        Tolerance on the optimality condition, > 0: stop when :math:`\max_k g_k \le 1 + \mathrm{tol}`.
        The default ``1e-6`` (nats per observation) is far below the sampling fluctuation of
        :math:`\ell`, of order :math:`N^{-1/2}`. Below about ``1e-10`` rounding of :math:`\ell`
        may stop the line search first.
    rng : numpy.random.Generator or int or None
        Draws the exemplar atoms when ``d >= 2``; unused for ``d == 1``.
    budget_bytes : int
        Memory allowed for the likelihood matrix and its temporaries (24 bytes per
        (point, atom) pair); at least ``24 * grid_size``.

    Attributes
    ----------
    atoms_ : ndarray, shape (K, d)
        The atoms :math:`a_k`.
    weights_ : ndarray, shape (K,)
        The fitted weights :math:`\hat w`, non-negative and summing to 1.
    prior_ : numerics.priors.Discrete
        The fitted prior, on the atoms of positive weight.
    loglik_ : float
        :math:`\ell(\hat w)`, the mean log marginal likelihood per observation.
    loglik_path_ : ndarray, shape (n_iter_ + 1,)
        :math:`\ell` at the uniform start and after each iteration (non-decreasing).
    n_iter_ : int
        Number of iterations taken.
    converged_ : bool
        Whether :math:`\max_k g_k(\hat w) \le 1 + \mathrm{tol}`. When it is ``False`` (``max_iter``
        reached, or no step could increase :math:`\ell` any more), a :class:`ConvergenceWarning`
        is issued.

    References
    ----------
    Kiefer, J. and Wolfowitz, J. (1956). Consistency of the maximum likelihood estimator in the
    presence of infinitely many incidental parameters. *Ann. Math. Statist.* 27, 887-906.
    Jiang, W. and Zhang, C.-H. (2009). General maximum likelihood empirical Bayes estimation of
    normal means. *Ann. Statist.* 37, 1647-1684.
    Koenker, R. and Mizera, I. (2014). Convex optimization, shape constraints, compound decisions,
    and empirical Bayes rules. *J. Amer. Statist. Assoc.* 109, 674-685.
    Wang, Y. (2007). On fast computation of the non-parametric maximum likelihood estimate of a
    mixing distribution. *J. R. Stat. Soc. B* 69, 185-198.
    Kim, Y., Carbonetto, P., Stephens, M. and Anitescu, M. (2020). A fast algorithm for maximum
    likelihood estimation of mixture proportions using sequential quadratic programming.
    *J. Comput. Graph. Statist.* 29, 261-273.
    Saha, S. and Guntuboyina, A. (2020). On the nonparametric maximum likelihood estimator for
    Gaussian location mixture densities with application to Gaussian denoising.
    *Ann. Statist.* 48, 738-762.
    Dicker, L. H. and Zhao, S. D. (2016). High-dimensional classification via nonparametric
    empirical Bayes and maximum likelihood inference. *Biometrika* 103, 21-34.
    Varadhan, R. and Roland, C. (2008). Simple and globally convergent methods for accelerating
    the convergence of any EM algorithm. *Scand. J. Statist.* 35, 335-353.
    """

    def __init__(
        self, sigma2, grid_size=256, max_iter=100, tol=1e-6, rng=0, budget_bytes=DEFAULT_BUDGET_BYTES
    ):
        self.sigma2 = sigma2
        self.grid_size = grid_size
        self.max_iter = max_iter
        self.tol = tol
        self.rng = rng
        self.budget_bytes = budget_bytes

    def _fit(self, noisy):
        sigma2 = check_positive(self.sigma2, "sigma2")
        grid_size = check_positive_int(self.grid_size, "grid_size")
        max_iter = check_positive_int(self.max_iter, "max_iter")
        tol = check_positive(self.tol, "tol")
        rng = check_rng(self.rng)
        budget_bytes = check_positive_int(self.budget_bytes, "budget_bytes")
        if budget_bytes < _BYTES_PER_ENTRY * grid_size:
            raise ValueError(
                f"budget_bytes == {budget_bytes} is too small for grid_size == {grid_size}; must be >= "
                f"{_BYTES_PER_ENTRY * grid_size} ({_BYTES_PER_ENTRY} bytes per atom for one point)"
            )
        atoms = _support(noisy, grid_size, rng)
        with single_blas_thread():
            likelihood = _Likelihood(noisy, atoms, sigma2, budget_bytes)
            weights, path, gap = _maximise(likelihood, tol, max_iter)
            path = path + likelihood.mean_log_scale() - 0.5 * noisy.shape[1] * np.log(2 * np.pi * sigma2)
        self.atoms_ = atoms
        self.weights_ = weights
        self.prior_ = Discrete(atoms[weights > 0], weights[weights > 0])
        self.loglik_path_ = path
        self.loglik_ = float(path[-1])
        self.n_iter_ = path.size - 1
        self.converged_ = bool(gap <= tol)
        if not self.converged_:
            if self.n_iter_ == max_iter:
                reason = "max_iter was reached"
            else:
                reason = "no SQP step increased the likelihood"
            warnings.warn(
                f"NPMLE stopped after {self.n_iter_} iterations ({reason}) with max_k g_k - 1 == {gap:.3g} > "
                f"tol == {tol}; increase max_iter or tol",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _denoise(self, queries):
        with single_blas_thread():
            return self.prior_.posterior_mean(queries, self.sigma2)


def _support(noisy: np.ndarray, grid_size: int, rng: np.random.Generator) -> np.ndarray:
    """The atoms: a grid over the data range (``d == 1``) or ``grid_size`` exemplars (``d >= 2``)."""
    n, d = noisy.shape
    if d == 1:
        return np.linspace(noisy.min(), noisy.max(), grid_size)[:, None]
    if n <= grid_size:
        return noisy.copy()
    return noisy[np.sort(rng.choice(n, size=grid_size, replace=False))]


class _Likelihood:
    r"""Row-normalised likelihood :math:`L_{ik} = e^{\lambda_{ik} - m_i}`, :math:`m_i = \max_k \lambda_{ik}`.

    :meth:`blocks` yields ``(rows, L[rows], m[rows])``: one block computed once when the
    matrix and its temporaries fit ``budget_bytes``, else row blocks recomputed on each call.
    """

    def __init__(self, noisy, atoms, sigma2, budget_bytes):
        centre = atoms.mean(axis=0)
        self._points = noisy - centre
        self._atoms = atoms - centre
        self._half_sq_atoms = 0.5 * np.einsum("kj,kj->k", self._atoms, self._atoms)
        self._sigma2 = sigma2
        self.n, self.k = noisy.shape[0], atoms.shape[0]
        rows = budget_bytes // (_BYTES_PER_ENTRY * self.k)
        self._slices = [slice(start, start + rows) for start in range(0, self.n, rows)]
        self._cached = [self._compute(self._slices[0])] if len(self._slices) == 1 else None

    def _compute(self, rows):
        points = self._points[rows]
        # lambda_ik = (x_i . a_k - |a_k|^2 / 2 - |x_i|^2 / 2) / sigma2, clipped at 0 (a distance >= 0)
        logits = points @ self._atoms.T
        logits -= self._half_sq_atoms
        logits -= 0.5 * np.einsum("ij,ij->i", points, points)[:, None]
        np.minimum(logits, 0.0, out=logits)
        logits /= self._sigma2
        top = logits.max(axis=1)
        logits -= top[:, None]
        np.exp(logits, out=logits)
        logits[logits < _TINY] = 0.0
        return rows, logits, top

    def blocks(self):
        return self._cached if self._cached is not None else map(self._compute, self._slices)

    def mean_log_scale(self) -> float:
        """``mean_i m_i``: ``l(w) = mean_i log (L w)_i + mean_i m_i - (d / 2) log(2 pi sigma2)``."""
        return sum(top.sum() for _, _, top in self.blocks()) / self.n


def evaluate(likelihood: _Likelihood, w: np.ndarray):
    """``(s, l, g)``: ``s = L w``, ``l = mean_i log s_i`` and ``g = L^T (1 / s) / N``.

    ``l`` leaves out the constant ``mean_i m_i``, which can be large (``-1e8`` when atoms lie
    1e4 noise sd from some points) and would swamp the increments the line search compares.

    Returns ``(None, -inf, None)`` if some ``s_i < _S_MIN`` (the trial point is rejected).
    """
    s = np.empty(likelihood.n)
    grad = np.zeros(likelihood.k)
    total = 0.0
    for rows, block, _ in likelihood.blocks():
        s_block = block @ w
        if s_block.min() < _S_MIN:
            return None, -np.inf, None
        s[rows] = s_block
        total += np.sum(np.log(s_block))
        grad += (1.0 / s_block) @ block
    return s, total / likelihood.n, grad / likelihood.n


def _hessian(likelihood: _Likelihood, s: np.ndarray, active: np.ndarray) -> np.ndarray:
    """``H[C, C] = (1 / N) sum_i L[i, C]^T L[i, C] / s_i^2`` on the active atoms ``C``."""
    hessian = np.zeros((active.size, active.size))
    for rows, block, _ in likelihood.blocks():
        scaled = block[:, active]
        scaled /= s[rows, None]
        hessian += scaled.T @ scaled
    return hessian / likelihood.n


def _maximise(likelihood: _Likelihood, tol: float, max_iter: int):
    """Maximise ``l(w)`` over the simplex from the uniform prior by iterations of an SQP and an EM step.

    Returns the weights, ``l`` at the start and after each iteration (without the constant
    ``mean_i m_i - (d / 2) log(2 pi sigma2)``) and the final ``max_k g_k - 1``.

    At the optimum ``g_k <= 1`` for all ``k``; for the atom ``k`` with ``L_ik = 1`` this gives
    ``s_i >= 1 / N``, so the admissibility bound ``s_i >= _S_MIN`` of :func:`evaluate` holds
    with a wide margin near the optimum, and at the start ``s_i >= 1 / K``.
    """
    w = np.full(likelihood.k, 1.0 / likelihood.k)
    s, loglik, grad = evaluate(likelihood, w)
    path = [loglik]
    while grad.max() - 1 > tol and len(path) <= max_iter:
        step = _sqp_step(likelihood, w, s, loglik, grad)
        if step is None:
            break
        w, s, loglik, grad = em_step(likelihood, *step)
        path.append(loglik)
    return w, np.array(path), float(grad.max() - 1)


def em_step(likelihood, w, s, loglik, grad):
    """The EM update ``w_k <- w_k g_k`` (which stays on the simplex since ``sum_k w_k g_k = 1``).

    A Newton model of ``log s_i`` only about doubles a weight that a step has driven near 0 while
    some point still needs it; EM multiplies it by ``g_k``, which is then large. EM never
    decreases ``l``; the check keeps the current point if rounding (or admissibility) says otherwise.
    """
    em = w * grad
    em /= em.sum()
    s_em, loglik_em, grad_em = evaluate(likelihood, em)
    if loglik_em >= loglik:
        return em, s_em, loglik_em, grad_em
    return w, s, loglik, grad


def _sqp_step(likelihood, w, s, loglik, grad):
    """One step of SQP with Armijo backtracking; ``None`` if no step increases the objective."""
    violators = np.flatnonzero(grad > 1)
    violators = violators[np.argsort(grad[violators])[-_MAX_NEW_ATOMS:]]
    # H >= 0 entrywise, so an atom whose linear coefficient 2 g_k - 1 is <= 0 has y_k = 0 at the
    # minimum of the model: leaving it out changes nothing, and every atom kept has
    # H_kk >= g_k^2 > 1/4 (Cauchy-Schwarz)
    active = np.union1d(np.flatnonzero((w > 0) & (grad > 0.5)), violators)
    # Jacobi scaling y = z / scale gives the Hessian a unit diagonal (its entries can span dozens
    # of orders of magnitude) and the linear coefficients (2 g_k - 1) / scale_k lie in (0, 2]
    hessian = _hessian(likelihood, s, active)
    scale = np.sqrt(hessian.diagonal())
    hessian /= np.outer(scale, scale)
    hessian[np.diag_indices_from(hessian)] += _RIDGE
    factor = np.linalg.cholesky(hessian)
    target = solve_triangular(factor, (2 * grad[active] - 1) / scale, lower=True)
    y = np.zeros_like(w)
    y[active] = nnls(factor.T, target, maxiter=10 * active.size)[0] / scale
    direction = y - w
    slope = (grad - 1) @ direction
    if not slope > 0:
        return None
    # objective l(v) - sum(v), which equals l(w) - 1 at the current point (on the simplex)
    step = 1.0
    for _ in range(_MAX_HALVINGS):
        trial = w + step * direction
        s_trial, loglik_trial, grad_trial = evaluate(likelihood, trial)
        if loglik_trial - trial.sum() >= loglik - 1 + _ARMIJO * step * slope:
            total = trial.sum()
            return trial / total, s_trial / total, loglik_trial - np.log(total), grad_trial * total
        step /= 2
    return None
