"""Tests of the Kiefer-Wolfowitz NPMLE denoiser (:mod:`attneb.numerics.npmle`)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from attneb.numerics import estimators, experiments, npmle, priors, stats
from attneb.numerics.npmle import NPMLE, ConvergenceWarning
from attneb.numerics.validation import NotFittedError

from tests.strategies import bandwidths, point_clouds

SIGMA2 = 0.5
TWO_CLUSTERS = priors.GaussianMixture(np.array([[-2.0], [2.0]]), var=0.25)


def batch(prior=TWO_CLUSTERS, n=1000, seed=0):
    return experiments.draw_batch(prior, SIGMA2, n, seed)[1]


def _log_kernel(atoms, weights, noisy, sigma2):
    """``log w_k + log phi_sigma2(xt_i - a_k)``, shape (N, K), by direct differences."""
    sq = np.sum((noisy[:, None, :] - atoms[None, :, :]) ** 2, axis=2)
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    return log_w - sq / (2 * sigma2) - 0.5 * noisy.shape[1] * np.log(2 * np.pi * sigma2)


def mean_loglik(atoms, weights, noisy, sigma2=SIGMA2):
    """``(1/N) sum_i log sum_k w_k phi(xt_i - a_k)`` by scipy's logsumexp."""
    return np.mean(special.logsumexp(_log_kernel(atoms, weights, noisy, sigma2), axis=1))


def gradient(atoms, weights, noisy, sigma2=SIGMA2):
    """``g_k = (1/N) sum_i phi(xt_i - a_k) / p(xt_i)``, the gradient of the mean log-likelihood."""
    log_phi = _log_kernel(atoms, np.ones(len(atoms)), noisy, sigma2)
    log_p = special.logsumexp(_log_kernel(atoms, weights, noisy, sigma2), axis=1)
    return np.mean(np.exp(log_phi - log_p[:, None]), axis=0)


def clusters(n, d, spacing, sigma2, outlier=False):
    """Noisy points around cluster centres ``spacing`` apart; with ``outlier``, one 100 ``spacing`` out."""
    rng = np.random.default_rng(0)
    x = np.sqrt(sigma2) * rng.standard_normal((n, d)) + spacing * rng.integers(-2, 3, size=(n, d))
    x[0] += 100 * spacing * outlier
    return x


# --- interface -------------------------------------------------------------------------------


def test_interface():
    x = batch()
    est = NPMLE(SIGMA2)
    with pytest.raises(NotFittedError, match="not fitted"):
        est.denoise(x)
    assert est.fit(x) is est
    out = est.denoise(x[:7])
    assert out.shape == (7, 1) and out.dtype == np.float64 and np.all(np.isfinite(out))
    np.testing.assert_allclose(est.fit_denoise(x)[:7], out, atol=1e-13, rtol=0)
    with pytest.raises(ValueError, match="d == 2"):
        est.denoise(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="reshape"):
        est.denoise(np.zeros(2))
    assert repr(est) == (
        "NPMLE(sigma2=0.5, grid_size=256, max_iter=100, tol=1e-06, rng=0, budget_bytes=268435456)"
    )


def test_init_stores_arguments_only():
    est = NPMLE(-1.0, grid_size="x", max_iter=0, tol=-3, rng="r", budget_bytes=None)
    assert est.get_params() == {
        "sigma2": -1.0, "grid_size": "x", "max_iter": 0, "tol": -3, "rng": "r", "budget_bytes": None
    }


@pytest.mark.parametrize(
    "params,error,match",
    [
        ({"sigma2": 0.0}, ValueError, "sigma2 == 0.0, must be > 0"),
        ({"sigma2": np.nan}, ValueError, "sigma2 == nan, must be finite"),
        ({"grid_size": 0}, ValueError, "grid_size == 0, must be >= 1"),
        ({"grid_size": 2.5}, TypeError, "grid_size must be an integer"),
        ({"max_iter": 0}, ValueError, "max_iter == 0, must be >= 1"),
        ({"tol": 0.0}, ValueError, "tol == 0.0, must be > 0"),
        ({"tol": -1e-3}, ValueError, "tol == -0.001"),
        ({"rng": "seed"}, TypeError, "rng must be"),
        ({"budget_bytes": 100}, ValueError, "budget_bytes == 100 is too small for grid_size == 256"),
    ],
)
def test_bad_parameters_raise_at_fit(params, error, match):
    est = NPMLE(**{"sigma2": SIGMA2, **params})
    with pytest.raises(error, match=match):
        est.fit(batch(n=50))


# --- the fitted prior ------------------------------------------------------------------------


def test_support_is_a_grid_in_one_dimension_and_exemplars_in_two():
    x = batch(n=300)
    one = NPMLE(SIGMA2, grid_size=40).fit(x)
    np.testing.assert_array_equal(one.atoms_, np.linspace(x.min(), x.max(), 40)[:, None])
    plane = batch(priors.Gaussian(np.zeros(2), 1.0), n=300)
    two = NPMLE(SIGMA2, grid_size=40, rng=3).fit(plane)
    rows = [np.flatnonzero(np.all(plane == atom, axis=1)) for atom in two.atoms_]
    assert all(r.size == 1 for r in rows) and np.unique(np.concatenate(rows)).size == 40
    np.testing.assert_array_equal(NPMLE(SIGMA2, grid_size=300).fit(plane).atoms_, plane)


@pytest.mark.parametrize("d", [1, 2])
def test_weights_on_the_simplex_and_prior_on_the_positive_ones(d):
    est = NPMLE(SIGMA2, grid_size=64).fit(batch(priors.Gaussian(np.zeros(d), 1.0), n=500))
    assert est.atoms_.shape == (64, d) and est.weights_.shape == (64,)
    assert np.all(est.weights_ >= 0)
    assert est.weights_.sum() == pytest.approx(1.0, abs=1e-14)
    keep = est.weights_ > 0
    np.testing.assert_array_equal(est.prior_.atoms, est.atoms_[keep])
    np.testing.assert_array_equal(est.prior_.weights, est.weights_[keep])
    q = np.linspace(-3, 3, 2 * d).reshape(-1, d)
    # the posterior mean under the fitted atoms and weights, written out: sum_k softmax_k(log w_k + log phi) a_k
    bayes_under_fit = special.softmax(_log_kernel(est.atoms_, est.weights_, q, SIGMA2), axis=1) @ est.atoms_
    np.testing.assert_allclose(est.denoise(q), bayes_under_fit, rtol=1e-12, atol=1e-12)


def test_loglik_is_non_decreasing_and_matches_scipy():
    x = batch(n=2000)
    est = NPMLE(SIGMA2, tol=1e-9).fit(x)
    path = est.loglik_path_
    assert path.size == est.n_iter_ + 1 >= 3
    # each step increases the objective; only rounding of a mean of N logs may show as a decrease
    rounding = 8 * np.finfo(float).eps * np.abs(path[1:])
    assert np.all(np.diff(path) >= -rounding)
    assert path[-1] > path[0]
    assert est.loglik_ == path[-1]
    assert est.loglik_ == pytest.approx(mean_loglik(est.atoms_, est.weights_, x), abs=1e-12)
    assert path[0] == pytest.approx(mean_loglik(est.atoms_, np.full(256, 1 / 256), x), abs=1e-12)


@pytest.mark.parametrize(
    "x,sigma2,grid_size",
    [
        (batch(n=2000), SIGMA2, 256),
        # clusters 10 noise sd apart on a 2-atom grid: the full Newton step loses 34 nats here,
        # so only the line search keeps the SQP step monotone
        (clusters(6, 1, 10.0, 1.0), 1.0, 2),
    ],
)
def test_each_sqp_and_em_step_increases_the_loglik_on_the_simplex(x, sigma2, grid_size):
    likelihood = npmle._Likelihood(x, npmle._support(x, grid_size, None), sigma2, 2**26)
    w = np.full(grid_size, 1 / grid_size)
    s, loglik, grad = npmle.evaluate(likelihood, w)
    while grad.max() - 1 > 1e-6:
        w, s, sqp_loglik, grad = npmle._sqp_step(likelihood, w, s, loglik, grad)
        assert w.sum() == pytest.approx(1.0, abs=1e-14) and np.all(w >= 0)
        w, s, em_loglik, grad = npmle.em_step(likelihood, w, s, sqp_loglik, grad)
        assert w.sum() == pytest.approx(1.0, abs=1e-14) and np.all(w >= 0)
        assert loglik < sqp_loglik <= em_loglik
        loglik = em_loglik


@pytest.mark.parametrize("tol", [1e-4, 1e-7])
def test_kkt_conditions_hold_at_convergence(tol):
    x = batch(n=2000, seed=1)
    est = NPMLE(SIGMA2, tol=tol).fit(x)
    assert est.converged_
    g = gradient(est.atoms_, est.weights_, x)
    # max_k g_k <= 1 + tol, and sum_k w_k g_k = 1 forces g_k >= 1 + tol - tol / w_k on the support
    assert g.max() <= 1 + tol + 1e-12
    assert est.weights_ @ g == pytest.approx(1.0, abs=1e-12)
    w = est.weights_
    assert np.all(g[w > 0] >= 1 + tol - tol / w[w > 0] - 1e-12)


def test_tol_bounds_the_suboptimality_of_the_loglik():
    # concavity: l(w*) - l(w) <= max_k g_k(w) - 1 <= tol
    x = batch(n=2000, seed=2)
    loose = NPMLE(SIGMA2, tol=1e-3).fit(x)
    tight = NPMLE(SIGMA2, tol=1e-9).fit(x)
    # l(w_loose) <= l(w*) <= l(w_tight) + 1e-9
    assert -1e-9 <= tight.loglik_ - loose.loglik_ <= 1e-3


def test_non_convergence_is_reported():
    x = batch(n=500)
    with pytest.warns(ConvergenceWarning, match="max_iter was reached"):
        est = NPMLE(SIGMA2, max_iter=1).fit(x)
    assert not est.converged_ and est.n_iter_ == 1
    assert np.all(np.isfinite(est.denoise(x)))


def test_row_blocks_give_the_fit_of_the_whole_matrix():
    x = batch(n=1000)
    whole = NPMLE(SIGMA2, grid_size=32).fit(x)
    blocks = NPMLE(SIGMA2, grid_size=32, budget_bytes=24 * 32 * 77).fit(x)  # 13 blocks of 77 rows
    assert blocks.n_iter_ == whole.n_iter_
    np.testing.assert_allclose(blocks.weights_, whole.weights_, atol=1e-9)
    assert blocks.loglik_ == pytest.approx(whole.loglik_, abs=1e-12)


def test_degenerate_batches():
    same = np.full((5, 1), 2.0)
    est = NPMLE(SIGMA2, grid_size=8).fit(same)
    assert est.converged_ and est.n_iter_ == 0
    np.testing.assert_allclose(est.denoise(np.array([[-1.0], [7.0]])), 2.0)
    single = NPMLE(SIGMA2).fit(np.array([[1.0, -1.0]]))
    np.testing.assert_array_equal(single.atoms_, [[1.0, -1.0]])
    np.testing.assert_array_equal(single.weights_, [1.0])


def test_an_outlier_keeps_its_atom():
    # atoms 100 noise sd apart: the likelihood separates and the optimum is the share of points
    # nearest each atom, 40/41 and 1/41. The first Newton step drops the outlier's atom; the EM
    # step must restore it (a Newton model of log s_i only about doubles a weight near 0 per step).
    x = np.append(np.random.default_rng(0).normal(size=40), 100.0)[:, None]
    est = NPMLE(1.0, grid_size=2).fit(x)
    assert est.converged_ and est.n_iter_ <= 5
    np.testing.assert_allclose(est.weights_, [40 / 41, 1 / 41], rtol=1e-6)


S2_OUTLIER = 0.029427271762092817


@pytest.mark.parametrize(
    "x,sigma2,grid_size",
    [
        # exemplars miss whole clusters 1e4 noise sd away: mean_i m_i ~ -1e8 must not swamp
        # the line search, whose increments are ~tol
        (clusters(279, 2, 1e4, 1.0), 1.0, 7),
        # an outlier 3.6 noise sd from the rest: Hessian diagonal entries up to 2e11 apart, which
        # a ridge relative to the largest one (no Jacobi scaling) turns into too short steps
        (clusters(124, 2, 0.007233941627366748, S2_OUTLIER, outlier=True), S2_OUTLIER, 60),
    ],
)
def test_hard_batches_converge(x, sigma2, grid_size):
    est = NPMLE(sigma2, grid_size=grid_size).fit(x)
    assert est.converged_
    np.testing.assert_allclose(est.loglik_, mean_loglik(est.atoms_, est.weights_, x, sigma2), rtol=1e-12)


def test_tiny_noise():
    # noise sd 1e-3 against a grid spacing of 0.2: most likelihood columns underflow to 0, and
    # the atom at 0 (nearest to both 0 and 0.1) takes 2/3 of the mass, the atom at 10 the rest
    line = np.array([[0.0], [0.1], [10.0]])
    est = NPMLE(1e-6, grid_size=50).fit(line)
    assert est.converged_
    np.testing.assert_allclose(est.weights_[[0, -1]], [2 / 3, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(est.denoise(line), [[0.0], [0.0], [10.0]], atol=1e-12)


@given(x=point_clouds(d=1, min_n=1, max_n=12), sigma2=bandwidths, seed=st.integers(0, 2**16))
def test_one_dimensional_posterior_mean_is_monotone_and_in_the_data_range(x, sigma2, seed):
    est = NPMLE(sigma2, grid_size=32).fit(x)
    assert est.converged_
    q = np.sort(np.random.default_rng(seed).uniform(-20, 20, size=(50, 1)), axis=0)
    out = est.denoise(q)[:, 0]
    # d E[x|xt] / d xt = Var[x|xt] / sigma2 >= 0, up to rounding of the softmax
    assert np.all(np.diff(out) >= -1e-12 * (1 + np.abs(out[1:])))
    span = 1e-12 * (1 + np.abs(x).max())
    assert np.all(out >= x.min() - span) and np.all(out <= x.max() + span)


# --- statistical behaviour -------------------------------------------------------------------


def gaps(prior, n, seeds, **params):
    """Gap to Bayes ``mean ||xhat - E[x|xt]||^2 / d`` of NPMLE and of StageTwoOnly, one per seed."""
    est = {"npmle": NPMLE(SIGMA2, **params), "L=0": estimators.StageTwoOnly(SIGMA2)}
    records = experiments.risk_records(est, prior, SIGMA2, n, seeds)
    return {name: np.array([r.gap for r in records if r.estimator == name]) for name in est}


def test_recovers_a_discrete_prior():
    atoms, weights = np.array([[-3.0], [0.0], [3.0]]), np.array([0.3, 0.5, 0.2])
    prior = priors.Discrete(atoms, weights)
    n = 4000
    clean, x = experiments.draw_batch(prior, SIGMA2, n, 0)
    est = NPMLE(SIGMA2).fit(x)
    # against each atom's frequency among the clean draws, not its weight (their binomial sd, up to 0.008, is no
    # error of the NPMLE). Over seeds 0-29, the fitted mass nearest each atom was off its frequency by sd <= 0.0035
    # (bound: 3 sd), and the mass within one noise sd of it fell short of its frequency by at most mean + 3 sd = 0.022
    freq = np.mean(clean == atoms.T, axis=0)
    nearest = np.bincount(np.argmin(np.abs(est.atoms_ - atoms.T), axis=1), weights=est.weights_, minlength=3)
    assert np.all(np.abs(nearest - freq) <= 0.011)
    within = est.weights_ @ (np.abs(est.atoms_ - atoms.T) <= np.sqrt(SIGMA2))  # (K,) @ (K, 3)
    assert np.all(within >= freq - 0.022)
    g = gaps(prior, n, [0])
    assert g["npmle"][0] < 0.05 * g["L=0"][0]


def test_gap_to_bayes_shrinks_with_n():
    small, large = gaps(TWO_CLUSTERS, 500, [0, 1, 2]), gaps(TWO_CLUSTERS, 8000, [0, 1, 2])
    # the gap decays like a power of N, so its seed-to-seed spread is multiplicative: a 95%
    # t-interval over the seeds for the drop of log(gap) from N = 500 to N = 8000
    drop = stats.mean_interval(np.log(small["npmle"]) - np.log(large["npmle"]))
    assert drop.low > 0
    assert np.all(large["npmle"] < large["L=0"])


def test_works_in_two_dimensions():
    prior = priors.GaussianMixture(np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]]), var=0.25)
    g = gaps(prior, 2000, [0, 1, 2], grid_size=128)
    drop = stats.mean_interval(g["L=0"] - g["npmle"])
    assert drop.low > 0


def test_reproducible_from_rng():
    plane = batch(priors.Gaussian(np.zeros(2), 1.0), n=400)
    a, b = NPMLE(SIGMA2, grid_size=50, rng=7).fit(plane), NPMLE(SIGMA2, grid_size=50, rng=7).fit(plane)
    np.testing.assert_array_equal(a.atoms_, b.atoms_)
    np.testing.assert_array_equal(a.weights_, b.weights_)
    gen = NPMLE(SIGMA2, grid_size=50, rng=np.random.default_rng(7)).fit(plane)
    np.testing.assert_array_equal(gen.atoms_, a.atoms_)
    other = NPMLE(SIGMA2, grid_size=50, rng=8).fit(plane)
    assert not np.array_equal(other.atoms_, a.atoms_)


def test_fit_denoise_is_the_posterior_mean_of_the_fitted_prior():
    x = batch(n=300)
    est = NPMLE(SIGMA2)
    out = est.fit_denoise(x)
    keep = est.weights_ > 0
    atoms, log_weights = est.atoms_[keep], np.log(est.weights_[keep])
    logits = log_weights - ((x[:, None, :] - atoms[None, :, :]) ** 2).sum(axis=2) / (2 * SIGMA2)
    np.testing.assert_allclose(out, special.softmax(logits, axis=1) @ atoms, rtol=1e-10, atol=1e-12)
