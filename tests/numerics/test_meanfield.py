import numpy as np
import pytest

from attneb.numerics import flow, meanfield


def test_mode_growth_matches_linearised_rate_on_a_small_lattice():
    h2, k = 0.5, 2.0
    fit = meanfield.mode_growth_rate(h2, k, length=60.0, margin=15.0, T=1.0, n_times=5)
    # linear stability of the mean-field PDE around a uniform density: h2 k^2 exp(-h2 k^2 / 2)
    assert fit.slope.estimate == pytest.approx(h2 * k**2 * np.exp(-h2 * k**2 / 2), rel=1e-3)


def test_variance_horizon_brackets_the_crossing():
    x0 = np.random.default_rng(0).normal(0.0, np.sqrt(2.0), (400, 1))
    res = meanfield.variance_horizon(x0, 0.5, 1.0, eta=0.05)
    assert res.variances[-1] <= 1.0 < res.variances[-2]
    assert np.all(np.diff(res.variances) < 0)
    assert (res.layers - 1) * 0.05 <= res.depth <= res.layers * 0.05
    assert res.depths.shape == res.variances.shape == (res.layers + 1,)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"target": 10.0}, "not below"), ({"h2": 0.0}, "h2"), ({"eta": 2.0}, "eta"), ({"max_layers": 2}, "after 2 layers")],
)
def test_variance_horizon_bad_input(kwargs, match):
    params = {"x0": np.random.default_rng(1).normal(size=(50, 1)) * 2, "h2": 0.5, "target": 0.5} | kwargs
    with pytest.raises((ValueError, RuntimeError), match=match):
        meanfield.variance_horizon(params.pop("x0"), params.pop("h2"), params.pop("target"), **params)


def test_variance_horizon_is_the_crossing_of_euler_layers_written_out():
    x0 = np.random.default_rng(8).normal(0.0, np.sqrt(2.0), (150, 1))
    h2, target, eta = 0.5, 1.0, 0.1
    tokens, variances = x0, [x0.var(ddof=1)]
    while variances[-1] > target:
        logits = -((tokens - tokens.T) ** 2) / (2 * h2)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        tokens = tokens + eta * (weights / weights.sum(axis=1, keepdims=True) @ tokens - tokens)
        variances.append(tokens.var(ddof=1))
    layers, (v0, v1) = len(variances) - 1, variances[-2:]
    res = meanfield.variance_horizon(x0, h2, target, eta=eta, backend="exact")
    assert res.layers == layers
    np.testing.assert_allclose(res.variances, variances, rtol=1e-10)
    np.testing.assert_allclose(res.depths, eta * np.arange(layers + 1), rtol=1e-12)
    assert res.depth == pytest.approx(eta * (layers - 1 + (v0 - target) / (v0 - v1)), rel=1e-10)
    assert res.fractional_layers == pytest.approx(layers - 1 + np.log(v0 / target) / np.log(v0 / v1), rel=1e-10)


def test_mode_growth_bad_input():
    with pytest.raises(ValueError, match="margin"):
        meanfield.mode_growth_rate(1.0, 1.0, length=10.0, margin=6.0)
    with pytest.raises(ValueError, match="n_times"):
        meanfield.mode_growth_rate(1.0, 1.0, n_times=2)


def test_structure_factor_of_a_lattice_and_of_random_tokens():
    lattice = np.arange(200.0)[:, None] * 0.5
    S = meanfield.structure_factor(lattice, [2 * np.pi / 0.5, np.pi / 0.5 * 0.37])
    assert S[0] == pytest.approx(200.0)
    x = np.random.default_rng(3).normal(size=(300, 1))
    k = np.array([0.3, 7.0, 19.0])
    direct = np.abs(np.exp(1j * np.outer(x[:, 0], k)).sum(axis=0)) ** 2 / 300
    np.testing.assert_allclose(meanfield.structure_factor(x, k, block=64), direct, rtol=1e-10)


def test_structure_factor_bad_input():
    with pytest.raises(ValueError, match="1-D tokens"):
        meanfield.structure_factor(np.zeros((5, 2)), [1.0])
    with pytest.raises(ValueError, match="k must be"):
        meanfield.structure_factor(np.zeros((5, 1)), [np.nan])


def test_token_trajectory_samples_the_euler_layers():
    x0 = np.random.default_rng(4).normal(size=(120, 1)) * 1.5
    traj = meanfield.token_trajectory(x0, 0.2, 7, eta=0.1, every=3, k=[2.0, 3.0], keep=[2, 7])
    np.testing.assert_allclose(traj.depths, [0.0, 0.2, 0.3, 0.6, 0.7])
    tokens = x0
    for layer in range(1, 8):
        tokens = tokens + 0.1 * flow.velocity(tokens, 0.2)
        if layer in traj.tokens:
            np.testing.assert_allclose(traj.tokens[layer], tokens, atol=1e-12)
    assert traj.variances[-1] == pytest.approx(tokens.var(ddof=1))
    assert traj.structure.shape == (5, 2)
    np.testing.assert_allclose(traj.structure[-1], meanfield.structure_factor(tokens, [2.0, 3.0]), rtol=1e-9)


def test_token_trajectory_bad_input():
    x0 = np.zeros((10, 1)) + np.arange(10)[:, None]
    with pytest.raises(ValueError, match="keep"):
        meanfield.token_trajectory(x0, 0.5, 3, keep=[4])
    with pytest.raises(ValueError, match="every"):
        meanfield.token_trajectory(x0, 0.5, 3, every=0)


# --------------------------------------------------------------------------------------------
# Continuous-depth horizon, standardised tokens, threshold depths, the uniform-grid structure
# factor and the early stop of token_trajectory
# --------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def token_sets(draw, n_min=20, n_max=80):
    """Small 1-D token sets: a Gaussian draw (seeded) of a drawn size, scale and offset."""
    n = draw(st.integers(n_min, n_max))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.floats(0.5, 2.0))
    offset = draw(st.floats(-5.0, 5.0))
    return offset + scale * np.random.default_rng(seed).standard_normal((n, 1))


def test_continuous_horizon_matches_the_gaussian_mean_field():
    # T_G = sigma2/(2 h2) + (1/2) log(1 + sigma2/tau2) for a Gaussian density; large standardised N
    sigma2, tau2, h2 = 1.0, 0.5, 0.5
    x0 = meanfield.standardized_gaussian_tokens(8192, tau2 + sigma2, 0)
    res = meanfield.variance_horizon_ode(x0, h2, tau2)
    exact = sigma2 / (2 * h2) + 0.5 * np.log1p(sigma2 / tau2)
    assert res.depth == pytest.approx(exact, rel=0.01)
    assert res.variances[0] == pytest.approx(tau2 + sigma2) and res.variances[-1] == tau2
    assert np.all(np.diff(res.depths) > 0) and res.depths[-1] == res.depth and res.evaluations > 0


def test_euler_horizons_converge_to_the_continuous_one_at_first_order():
    x0 = meanfield.standardized_gaussian_tokens(300, 2.0, 1)
    ode = meanfield.variance_horizon_ode(x0, 0.5, 1.0, rtol=1e-9, atol=1e-11).depth
    errors = [meanfield.variance_horizon(x0, 0.5, 1.0, eta=eta).depth - ode for eta in (0.04, 0.02, 0.01)]
    # Euler layers are first order: halving the step halves the depth error
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.1)
    assert errors[1] / errors[2] == pytest.approx(2.0, rel=0.1)


def test_binned_and_exact_layers_agree():
    x0 = np.random.default_rng(2).normal(size=(600, 1)) * 1.3
    exact = meanfield.variance_horizon(x0, 0.3, 0.8, eta=0.1, backend="exact")
    grid = meanfield.variance_horizon(x0, 0.3, 0.8, eta=0.1, backend="binned")
    assert exact.layers == grid.layers
    np.testing.assert_allclose(grid.variances, exact.variances, rtol=1e-7)


def test_fractional_layers_interpolate_the_log_variance():
    x0 = np.random.default_rng(5).normal(size=(200, 1)) * 1.5
    res = meanfield.variance_horizon(x0, 0.5, 1.0, eta=0.2)
    v0, v1 = res.variances[-2:]
    assert res.layers - 1 < res.fractional_layers <= res.layers
    assert res.fractional_layers == pytest.approx(res.layers - 1 + np.log(v0 / 1.0) / np.log(v0 / v1))


@settings(max_examples=8, deadline=None)
@given(token_sets(10, 40), st.floats(0.3, 1.0), st.floats(0.6, 0.9))
def test_continuous_horizon_is_invariant_under_permutation_translation_and_scaling(x0, relative_h2, fraction):
    # a kernel as wide as the cloud (relative_h2 * its variance) and a target the flow reaches: a
    # narrow kernel may leave a far token alone, and the variance then stalls above the target
    target, h2 = fraction * x0.var(ddof=1), relative_h2 * x0.var(ddof=1)

    def depth(x, h2, target):
        return meanfield.variance_horizon_ode(x, h2, target, rtol=1e-10, atol=1e-12, max_depth=100.0,
                                              backend="exact").depth

    reference = depth(x0, h2, target)
    perm = np.random.default_rng(0).permutation(len(x0))
    assert depth(x0[perm], h2, target) == pytest.approx(reference, rel=1e-7)
    assert depth(x0 + 3.0, h2, target) == pytest.approx(reference, rel=1e-7)
    # x -> c x with h2 -> c^2 h2 moves every token the same way in scaled units: same depth
    c = 1.7
    assert depth(c * x0, c**2 * h2, c**2 * target) == pytest.approx(reference, rel=1e-7)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"target": 10.0}, "not below"), ({"h2": -1.0}, "h2"), ({"rtol": 0.0}, "rtol"), ({"atol": -1.0}, "atol"),
     ({"max_depth": 0.0}, "max_depth"), ({"tol": 2.0}, "tol"), ({"backend": "tpu"}, "backend")],
)
def test_continuous_horizon_bad_input(kwargs, match):
    params = {"x0": np.random.default_rng(1).normal(size=(50, 1)) * 2, "h2": 0.5, "target": 0.5} | kwargs
    with pytest.raises(ValueError, match=match):
        meanfield.variance_horizon_ode(params.pop("x0"), params.pop("h2"), params.pop("target"), **params)


def test_continuous_horizon_gives_up_at_max_depth():
    x0 = np.random.default_rng(1).normal(size=(50, 1)) * 2
    with pytest.raises(RuntimeError, match="max_depth"):
        meanfield.variance_horizon_ode(x0, 0.5, 0.5, max_depth=0.01)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        meanfield.variance_horizon_ode(np.zeros((1, 1)), 0.5, 0.5)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 500), st.floats(1e-3, 1e3), st.integers(1, 3), st.integers(0, 2**16))
def test_standardized_tokens_have_exactly_the_asked_moments(n, variance, d, seed):
    x = meanfield.standardized_gaussian_tokens(n, variance, seed, d=d)
    assert x.shape == (n, d)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12 * np.sqrt(variance))
    np.testing.assert_allclose(x.var(axis=0, ddof=1), variance, rtol=1e-12)
    np.testing.assert_array_equal(x, meanfield.standardized_gaussian_tokens(n, variance, seed, d=d))


@pytest.mark.parametrize("kwargs,match", [({"n": 1}, "n == 1"), ({"variance": 0.0}, "variance"), ({"d": 0}, "d")])
def test_standardized_tokens_bad_input(kwargs, match):
    params = {"n": 10, "variance": 1.0, "rng": 0} | kwargs
    with pytest.raises(ValueError, match=match):
        meanfield.standardized_gaussian_tokens(**params)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.1, 5.0), st.floats(1.5, 1e4), st.floats(0.01, 0.5))
def test_threshold_depth_is_exact_for_exponential_growth(rate, threshold, step):
    t = step * np.arange(int(np.log(threshold) / (rate * step)) + 3)
    assert meanfield.threshold_depth(t, np.exp(rate * t), threshold) == pytest.approx(np.log(threshold) / rate,
                                                                                       rel=1e-9)


def test_threshold_depth_edges_and_bad_input():
    t = np.array([0.0, 1.0, 2.0])
    assert meanfield.threshold_depth(t, [5.0, 6.0, 7.0], 2.0) == 0.0
    assert meanfield.threshold_depth(t, [1.0, 2.0, 3.0], 10.0) is None
    for depths, values, threshold, match in [
        (t, [1.0, 2.0], 1.5, "same non-zero length"), ([0.0, 0.0, 1.0], [1.0, 2.0, 3.0], 1.5, "increasing"),
        (t, [1.0, 0.0, 3.0], 1.5, "> 0"), (t, [1.0, np.inf, 3.0], 1.5, "finite"), (t, [1.0, 2.0, 3.0], 0.0, "threshold"),
    ]:
        with pytest.raises(ValueError, match=match):
            meanfield.threshold_depth(depths, values, threshold)


@settings(max_examples=20, deadline=None)
@given(token_sets(20, 300), st.floats(0.1, 20.0), st.floats(0.01, 2.0), st.integers(3, 80))
def test_structure_factor_on_a_uniform_grid_equals_the_direct_sum(x, k0, dk, count):
    k = k0 + dk * np.arange(count)
    centred = x[:, 0] - x[:, 0].mean()
    direct = np.abs(np.exp(1j * np.outer(centred, k)).sum(axis=0)) ** 2 / len(x)
    np.testing.assert_allclose(meanfield.structure_factor(x, k, block=64), direct, rtol=1e-9, atol=1e-9)


def test_token_trajectory_stops_at_the_first_sample_asked():
    x0 = np.random.default_rng(6).normal(size=(150, 1))
    full = meanfield.token_trajectory(x0, 0.2, 12, eta=0.1, every=2, k=[2.0, 3.0])
    stopped = meanfield.token_trajectory(x0, 0.2, 12, eta=0.1, every=2, k=[2.0, 3.0],
                                         stop=lambda depth, variance, row: depth >= 0.55)
    np.testing.assert_allclose(stopped.depths, [0.0, 0.2, 0.4, 0.6])
    np.testing.assert_allclose(stopped.structure, full.structure[:4])
    with pytest.raises(ValueError, match="stop must be"):
        meanfield.token_trajectory(x0, 0.2, 3, stop=1.0)


def test_token_trajectory_binned_agrees_with_exact():
    x0 = np.random.default_rng(7).normal(size=(500, 1)) * 1.2
    exact = meanfield.token_trajectory(x0, 0.05, 20, eta=0.05, every=5, k=[6.0, 7.0], keep=[20], backend="exact")
    grid = meanfield.token_trajectory(x0, 0.05, 20, eta=0.05, every=5, k=[6.0, 7.0], keep=[20], backend="binned")
    np.testing.assert_allclose(grid.tokens[20], exact.tokens[20], atol=1e-7)
    np.testing.assert_allclose(grid.variances, exact.variances, rtol=1e-7)


# --- quantile tokens and token cumulants (G5) ---------------------------------------------------------------

from scipy import special  # noqa: E402


@pytest.mark.parametrize("mixture", [([0.5, 0.5], [-2.0, 2.0], [0.75, 0.75]), ([1 / 3] * 3, [-1.5, 0.0, 1.5], [0.5] * 3),
                                     ([0.2, 0.8], [0.0, 0.0], [0.1, 4.0]), ([1.0], [0.3], [2.0])])
def test_quantile_tokens_sit_at_the_mixture_quantiles(mixture):
    n = 4096
    tokens = meanfield.mixture_quantile_tokens(*mixture, n)
    weights, means, variances = (np.asarray(a, dtype=float) for a in mixture)
    cdf = (weights[:, None] / weights.sum() * special.ndtr((tokens[:, 0] - means[:, None]) / np.sqrt(variances)[:, None])).sum(0)
    assert tokens.shape == (n, 1) and np.all(np.diff(tokens[:, 0]) > 0)
    np.testing.assert_allclose(cdf, (np.arange(n) + 0.5) / n, rtol=0, atol=1e-14)


def test_weights_need_not_sum_to_one():
    np.testing.assert_array_equal(meanfield.mixture_quantile_tokens([1.0, 1.0], [-1.0, 1.0], [0.5, 0.5], 64),
                                  meanfield.mixture_quantile_tokens([0.5, 0.5], [-1.0, 1.0], [0.5, 0.5], 64))


def test_token_cumulants_are_the_sample_moments_and_tend_to_the_gaussians():
    x = np.array([[0.0], [1.0], [3.0], [-2.0]])
    u = x[:, 0] - x.mean()
    assert meanfield.token_cumulants(x) == pytest.approx((np.mean(u**2), np.mean(u**4) - 3 * np.mean(u**2) ** 2))
    assert meanfield.token_cumulants(x[:, 0]) == meanfield.token_cumulants(x)
    kappa2, kappa4 = meanfield.token_cumulants(meanfield.mixture_quantile_tokens([1.0], [0.0], [2.0], 1 << 16))
    assert kappa2 == pytest.approx(2.0, rel=1e-3) and abs(kappa4) < 0.01


@pytest.mark.parametrize(("call", "match"), [
    (lambda: meanfield.mixture_quantile_tokens([1.0, 1.0], [0.0], [1.0, 1.0], 8), "one length"),
    (lambda: meanfield.mixture_quantile_tokens([1.0], [0.0], [-1.0], 8), "must be > 0"),
    (lambda: meanfield.mixture_quantile_tokens([1.0], [np.inf], [1.0], 8), "means"),
    (lambda: meanfield.mixture_quantile_tokens([1.0], [0.0], [1.0], 0), "n"),
    (lambda: meanfield.token_cumulants(np.zeros((5, 2))), r"must be \(N, 1\)"),
    (lambda: meanfield.token_cumulants(np.zeros((1, 1))), "N >= 2"),
])
def test_quantile_tokens_and_cumulants_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
