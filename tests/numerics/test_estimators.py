import numpy as np
import pytest
from scipy import stats

from attneb.numerics import estimators, experiments, flow, gpu, kernels, priors
from attneb.numerics.validation import NotFittedError

SIGMA2, H2 = 0.5, 0.1
ALL = [
    estimators.TwoStageDenoiser(SIGMA2, H2, eta=0.1),
    estimators.StageTwoOnly(SIGMA2),
    estimators.TweedieKDE(SIGMA2, H2),
    estimators.LinearShrinkage(SIGMA2),
    estimators.OracleBayes(priors.Gaussian(np.zeros(2), 1.0), SIGMA2),
]


def batch(n=200, d=2, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) * np.sqrt(1 + SIGMA2)


@pytest.mark.parametrize("est", ALL, ids=lambda e: type(e).__name__)
def test_interface(est):
    with pytest.raises(NotFittedError, match="not fitted"):
        type(est)(**est.get_params()).denoise(batch())
    x = batch()
    assert est.fit(x) is est
    out = est.denoise(x[:7])
    assert out.shape == (7, 2) and out.dtype == np.float64 and np.all(np.isfinite(out))
    np.testing.assert_allclose(est.fit_denoise(x)[:7], out, atol=1e-13, rtol=0)
    with pytest.raises(ValueError, match="d == 3"):
        est.denoise(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="reshape"):
        est.denoise(np.zeros(2))
    assert repr(est).startswith(type(est).__name__ + "(")


def test_init_stores_arguments_only():
    est = estimators.TwoStageDenoiser(-1.0, "x", T=-3, eta=7, method="nope", backend="gpu", tol=5)
    assert est.get_params() == {"sigma2": -1.0, "h2": "x", "T": -3, "eta": 7, "method": "nope", "backend": "gpu",
                                "tol": 5}


@pytest.mark.parametrize(
    "est,match",
    [
        (estimators.TwoStageDenoiser(0.0, H2), "sigma2 == 0.0"),
        (estimators.TwoStageDenoiser(SIGMA2, -1.0), "h2 == -1.0"),
        (estimators.TwoStageDenoiser(SIGMA2, H2, T=-1.0), "T == -1.0"),
        (estimators.TwoStageDenoiser(SIGMA2, H2, eta=2.0), "eta == 2.0"),
        (estimators.TwoStageDenoiser(SIGMA2, H2, method="rk4"), "method == 'rk4'"),
        (estimators.TwoStageDenoiser(SIGMA2, H2, backend="tpu"), "backend == 'tpu'"),
        (estimators.StageTwoOnly(SIGMA2, tol=0.0), "tol == 0.0"),
        (estimators.StageTwoOnly(-0.5), "sigma2"),
        (estimators.TweedieKDE(SIGMA2, 0.0), "h2"),
        (estimators.LinearShrinkage(np.nan), "sigma2"),
        (estimators.OracleBayes(priors.Gaussian(np.zeros(3), 1.0), SIGMA2), "dim == 3"),
    ],
)
def test_bad_parameters_raise_at_fit(est, match):
    with pytest.raises(ValueError, match=match):
        est.fit(batch())


@pytest.mark.skipif(gpu.available(), reason="the GPU path runs here")
@pytest.mark.parametrize("est", [estimators.TwoStageDenoiser(SIGMA2, H2, backend="gpu"),
                                 estimators.StageTwoOnly(SIGMA2, backend="gpu"),
                                 estimators.TweedieKDE(SIGMA2, H2, backend="gpu")])
def test_gpu_backend_without_a_gpu_says_what_is_missing(est):
    with pytest.raises(RuntimeError, match="torch with a CUDA device and triton"):
        est.fit(batch())


def test_empty_and_nan_context():
    with pytest.raises(ValueError, match="X is empty"):
        estimators.StageTwoOnly(SIGMA2).fit(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="nan or inf"):
        estimators.TwoStageDenoiser(SIGMA2, H2).fit(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="at least 2"):
        estimators.LinearShrinkage(SIGMA2).fit(np.zeros((1, 2)))


def test_two_stage_default_horizon_and_layers():
    est = estimators.TwoStageDenoiser(SIGMA2, H2, eta=0.1).fit(batch())
    assert est.T_ == pytest.approx(SIGMA2 / (2 * H2))
    assert est.n_layers_ == 25
    np.testing.assert_allclose(est.particles_, flow.particle_flow(batch(), H2, 2.5, eta=0.1))
    ode = estimators.TwoStageDenoiser(SIGMA2, H2, method="ode").fit(batch())
    assert ode.n_layers_ is None


def test_zero_depth_two_stage_is_stage_two_only():
    x = batch()
    np.testing.assert_allclose(
        estimators.TwoStageDenoiser(SIGMA2, H2, T=0.0).fit_denoise(x), estimators.StageTwoOnly(SIGMA2).fit_denoise(x)
    )


def test_tweedie_kde_is_extrapolated_attention_step():
    x = batch()
    q = x[:5]
    expected = q + SIGMA2 / H2 * (kernels.kernel_mean(q, x, H2) - q)
    np.testing.assert_allclose(estimators.TweedieKDE(SIGMA2, H2).fit(x).denoise(q), expected, atol=1e-12)


def test_linear_shrinkage_is_positive_part_james_stein_in_one_dimension():
    x = batch(d=1)
    s2 = x.var(ddof=1)
    expected = x.mean() + max(0.0, 1 - SIGMA2 / s2) * (x - x.mean())
    np.testing.assert_allclose(estimators.LinearShrinkage(SIGMA2).fit_denoise(x), expected, atol=1e-12)
    pure_noise = np.random.default_rng(1).normal(size=(500, 1)) * 0.1
    out = estimators.LinearShrinkage(SIGMA2).fit_denoise(pure_noise)
    np.testing.assert_allclose(out, pure_noise.mean())


def test_linear_shrinkage_reaches_bayes_for_a_gaussian_prior():
    prior = priors.Gaussian(np.array([1.0, -2.0]), 2.0)
    clean, noisy = experiments.draw_batch(prior, SIGMA2, 20000, seed=3)
    gap = np.mean((estimators.LinearShrinkage(SIGMA2).fit_denoise(noisy) - prior.posterior_mean(noisy, SIGMA2)) ** 2)
    assert gap < 1e-3


def _two_clusters_posterior_mean(noisy, centres, var, sigma2):
    """``E[x | xt]`` under the equal-weight mixture of ``N(c, var)`` in 1-D, in closed form with scipy.stats.norm."""
    y = noisy[:, 0]
    evidence = np.stack([stats.norm.pdf(y, c, np.sqrt(var + sigma2)) for c in centres], axis=1)
    component_means = np.stack([c + var / (var + sigma2) * (y - c) for c in centres], axis=1)
    return (np.sum(evidence * component_means, axis=1) / evidence.sum(axis=1))[:, None]


def test_risk_records_are_reproducible_and_oracle_has_no_gap():
    prior = priors.GaussianMixture(np.array([[-2.0], [2.0]]), var=0.25)
    ests = {"oracle": estimators.OracleBayes(prior, SIGMA2), "L=0": estimators.StageTwoOnly(SIGMA2)}
    a = experiments.risk_records(ests, prior, SIGMA2, 300, [0, 1])
    b = experiments.risk_records(ests, prior, SIGMA2, 300, [0, 1])
    assert a == b
    assert [(r.estimator, r.seed) for r in a] == [(e, s) for s in (0, 1) for e in ests]
    for r in a:
        # every number recomputed against the closed-form Bayes posterior mean (not the prior's posterior_mean)
        clean, noisy = experiments.draw_batch(prior, SIGMA2, 300, r.seed)
        q_clean, q_noisy = experiments.draw_queries(prior, SIGMA2, 300, r.seed)
        bayes, q_bayes = (_two_clusters_posterior_mean(x, (-2.0, 2.0), 0.25, SIGMA2) for x in (noisy, q_noisy))
        est = ests[r.estimator].fit_denoise(noisy)
        oos = ests[r.estimator].denoise(q_noisy)
        if r.estimator == "oracle":  # the oracle is the Bayes posterior mean: no gap, up to rounding
            np.testing.assert_allclose(np.c_[est, oos], np.c_[bayes, q_bayes], rtol=0, atol=1e-12)
        # the records hold these errors, to rounding
        assert (r.mse, r.oos_mse) == pytest.approx((np.mean((est - clean) ** 2), np.mean((oos - q_clean) ** 2)),
                                                   rel=1e-12)
        assert (r.gap, r.oos_gap) == pytest.approx((np.mean((est - bayes) ** 2), np.mean((oos - q_bayes) ** 2)),
                                                   rel=1e-9, abs=1e-22)
    assert all(r.gap > 0.0 for r in a if r.estimator == "L=0")


# --- each estimator against its formula written out (a softmax of numpy, not numerics.kernels) ---------------


def _softmax_mean(queries, keys, h2):
    """The Gaussian-kernel mean of ``keys`` seen from each query, by an explicit softmax."""
    logits = -((queries[:, None, :] - keys[None, :, :]) ** 2).sum(axis=2) / (2 * h2)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ keys


def _euler_layers(tokens, h2, eta, layers):
    for _ in range(layers):
        tokens = tokens + eta * (_softmax_mean(tokens, tokens, h2) - tokens)
    return tokens


PRIOR = priors.Gaussian(np.array([0.5, -1.0]), 1.0)
CLOSED_FORMS = {
    "StageTwoOnly": (estimators.StageTwoOnly(SIGMA2), lambda q, x: _softmax_mean(q, x, SIGMA2)),
    "TweedieKDE": (estimators.TweedieKDE(SIGMA2, H2), lambda q, x: q + SIGMA2 / H2 * (_softmax_mean(q, x, H2) - q)),
    # T = sigma2 / (2 h2) = 2.5: 25 layers of 0.1
    "TwoStageDenoiser": (estimators.TwoStageDenoiser(SIGMA2, H2, eta=0.1),
                         lambda q, x: _softmax_mean(q, _euler_layers(x, H2, 0.1, 25), SIGMA2)),
    # the Gaussian posterior mean: mu + tau2 / (tau2 + sigma2) (q - mu)
    "OracleBayes": (estimators.OracleBayes(PRIOR, SIGMA2),
                    lambda q, x: PRIOR.mean() + 1.0 / (1.0 + SIGMA2) * (q - PRIOR.mean())),
}


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_fit_then_denoise_is_the_closed_form(name):
    est, formula = CLOSED_FORMS[name]
    x = batch(n=60)
    queries = np.random.default_rng(1).normal(size=(9, 2))
    np.testing.assert_allclose(est.fit(x).denoise(queries), formula(queries, x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.fit_denoise(x), formula(x, x), rtol=1e-10, atol=1e-12)


def test_stage_two_is_the_posterior_mean_of_the_empirical_prior():
    tokens, queries = batch(n=50), np.random.default_rng(2).normal(size=(8, 2)) * 2
    np.testing.assert_allclose(estimators.stage_two(queries, tokens, SIGMA2), _softmax_mean(queries, tokens, SIGMA2),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", ["euler", "ode"])
def test_fit_depths_equals_fitting_each_depth(method):
    noisy = np.random.default_rng(2).standard_normal((200, 1)) * 1.2
    base = estimators.TwoStageDenoiser(0.5, 0.25, eta=0.05, method=method, backend="exact")
    depths = [1.2, 1.1, None, 1.25]
    copies = base.fit_depths(noisy, depths)
    assert base.get_params()["T"] is None and not hasattr(base, "particles_")  # the original is left unfitted
    for depth, fitted in zip(depths, copies):
        alone = estimators.TwoStageDenoiser(**{**base.get_params(), "T": depth}).fit(noisy)
        assert fitted.get_params() == alone.get_params()
        assert (fitted.T_, fitted.n_layers_, fitted.n_features_in_) == (alone.T_, alone.n_layers_, alone.n_features_in_)
        assert np.array_equal(fitted.particles_, alone.particles_)
        assert np.array_equal(fitted.denoise(noisy[:20]), alone.denoise(noisy[:20]))
