import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb.numerics import kernels, schedules, stats
from attneb.numerics.estimators import TweedieKDE
from attneb.numerics.priors import Gaussian, GaussianMixture
from tests.strategies import bandwidths, log_uniform, point_clouds, priors, rotations, sigma2s

ratios = log_uniform(0.05, 4.0)


@given(sigma2s(1e-3, 1e3), st.integers(1, 64))
def test_noise_levels_fall_from_sigma2_to_zero_evenly_in_the_standard_deviation(sigma2, layers):
    levels = schedules.noise_levels(sigma2, layers)
    assert levels.shape == (layers + 1,) and levels[0] == pytest.approx(sigma2, rel=1e-15) and levels[-1] == 0
    assert np.all(np.diff(levels) < 0)
    np.testing.assert_allclose(np.diff(np.sqrt(levels)), -np.sqrt(sigma2) / layers, rtol=1e-9)


def test_no_layer_keeps_the_noise_level():
    np.testing.assert_array_equal(schedules.noise_levels(0.5, 0), [0.5])


@given(sigma2s(1e-3, 1e3), st.integers(1, 64), ratios)
def test_annealed_schedule_follows_the_noise_still_to_remove(sigma2, layers, ratio):
    bandwidths_, steps = schedules.annealed_schedule(sigma2, layers, ratio)
    levels = schedules.noise_levels(sigma2, layers)[:-1]
    np.testing.assert_allclose(bandwidths_ / levels, ratio, rtol=1e-12)
    np.testing.assert_allclose(steps * ratio * (layers - np.arange(layers)), 1.0, rtol=1e-12)
    # the depth budget 2 sum eta_l h_l = sigma2 (L + 1) / L whatever the ratio
    assert 2 * np.sum(steps * bandwidths_) == pytest.approx(sigma2 * (layers + 1) / layers, rel=1e-12)


@settings(max_examples=20)
@given(priors(1), sigma2s(1e-2, 1e2), st.data())
def test_one_oracle_layer_is_the_posterior_mean(prior, sigma2, data):
    noisy = data.draw(point_clouds(min_n=1, max_n=8, d=1))
    np.testing.assert_allclose(schedules.oracle_reverse_flow(noisy, prior, sigma2, 1),
                               prior.posterior_mean(noisy, sigma2), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(schedules.oracle_reverse_flow(noisy, prior, sigma2, 0), noisy)


@settings(max_examples=20)
@given(priors(1), sigma2s(1e-2, 1e2), st.integers(2, 12), st.data())
def test_oracle_moves_each_token_alone_and_keeps_their_order(prior, sigma2, layers, data):
    noisy = data.draw(point_clouds(min_n=2, max_n=10, d=1))
    out = schedules.oracle_reverse_flow(noisy, prior, sigma2, layers)
    subset = data.draw(st.lists(st.integers(0, len(noisy) - 1), min_size=1, max_size=len(noisy)))
    np.testing.assert_allclose(schedules.oracle_reverse_flow(noisy[subset], prior, sigma2, layers), out[subset],
                               rtol=1e-12, atol=1e-12 * (1 + np.abs(out).max()))
    # in 1-D the posterior mean increases with xt, so every layer is a convex mix of increasing maps
    order = np.argsort(noisy[:, 0], kind="stable")
    assert np.all(np.diff(out[order, 0]) >= -1e-12 * (1 + np.abs(out).max()))


@pytest.mark.parametrize("tau2,sigma2", [(1.0, 0.5), (0.2, 2.0)])
def test_oracle_converges_to_the_gaussian_transport_map_at_first_order(tau2, sigma2):
    prior = Gaussian([1.5], tau2)
    noisy = np.linspace(-3.0, 6.0, 7)[:, None]
    exact = 1.5 + np.sqrt(tau2 / (tau2 + sigma2)) * (noisy - 1.5)
    layers = np.array([16, 32, 64, 128, 256])
    errors = [np.abs(schedules.oracle_reverse_flow(noisy, prior, sigma2, int(L)) - exact).max() for L in layers]
    assert abs(stats.loglog_slope(layers, errors).slope.estimate + 1) < 0.05


@settings(max_examples=25)
@given(point_clouds(min_n=1, max_n=10), bandwidths, ratios)
def test_one_annealed_layer_is_tweedie_with_a_kernel_score(noisy, sigma2, ratio):
    expected = TweedieKDE(sigma2, ratio * sigma2, backend="exact").fit_denoise(noisy)
    got = schedules.annealed_flow(noisy, sigma2, 1, ratio, backend="exact")
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * (1 + np.abs(noisy).max()) / min(ratio, 1))
    np.testing.assert_array_equal(schedules.annealed_flow(noisy, sigma2, 0, ratio), noisy)


@settings(max_examples=25)
@given(point_clouds(min_n=1, max_n=10), bandwidths, ratios)
def test_two_annealed_layers_written_out(noisy, sigma2, ratio):
    # levels sigma2, sigma2/4, 0: bandwidths c sigma2 and c sigma2/4, steps 1/(2c) and 1/c
    first = noisy + (kernels.kernel_mean(noisy, noisy, ratio * sigma2) - noisy) / (2 * ratio)
    second = first + (kernels.kernel_mean(first, first, ratio * sigma2 / 4) - first) / ratio
    got = schedules.annealed_flow(noisy, sigma2, 2, ratio, backend="exact")
    np.testing.assert_allclose(got, second, rtol=1e-9, atol=1e-9 * (1 + np.abs(second).max()))


@settings(max_examples=20)
@given(point_clouds(min_n=2, max_n=10), st.integers(1, 6), st.data())
def test_annealed_flow_is_translation_rotation_permutation_equivariant(x, layers, data):
    d = x.shape[1]
    shift = data.draw(point_clouds(min_n=1, max_n=1, d=d))[0]
    rot = data.draw(rotations(d))
    perm = list(data.draw(st.permutations(range(len(x)))))
    run = lambda y: schedules.annealed_flow(y, 0.7, layers, 0.5, backend="exact")  # noqa: E731
    base = run(x)
    scale = 1 + np.abs(base).max()
    np.testing.assert_allclose(run(x @ rot.T + shift), base @ rot.T + shift, atol=1e-8 * scale)
    np.testing.assert_allclose(run(x[perm]), base[perm], atol=1e-10 * scale)


def test_annealed_flow_binned_path_agrees_with_the_exact_one():
    rng = np.random.default_rng(3)
    noisy = np.concatenate([rng.normal(-2, 0.8, (300, 1)), rng.normal(2, 0.8, (300, 1))])
    exact = schedules.annealed_flow(noisy, 0.5, 4, 0.25, backend="exact")
    binned = schedules.annealed_flow(noisy, 0.5, 4, 0.25, backend="binned", tol=1e-9)
    np.testing.assert_allclose(binned, exact, atol=1e-6)


@pytest.mark.parametrize("call,error,match", [
    (lambda: schedules.noise_levels(0.0, 4), ValueError, "sigma2"),
    (lambda: schedules.noise_levels(0.5, -1), ValueError, "n_layers"),
    (lambda: schedules.noise_levels(0.5, 2.0), TypeError, "n_layers"),
    (lambda: schedules.annealed_schedule(0.5, 4, 0.0), ValueError, "ratio"),
    (lambda: schedules.oracle_reverse_flow(np.zeros((3, 1)), "N(0, 1)", 0.5, 4), TypeError, "prior"),
    (lambda: schedules.oracle_reverse_flow(np.zeros((3, 2)), Gaussian([0.0], 1.0), 0.5, 4), ValueError, "dim"),
    (lambda: schedules.oracle_reverse_flow(np.zeros(3), Gaussian([0.0], 1.0), 0.5, 4), ValueError, "reshape"),
    (lambda: schedules.oracle_reverse_flow(np.zeros((3, 1)), Gaussian([0.0], 1.0), -1.0, 4), ValueError, "sigma2"),
    (lambda: schedules.annealed_flow(np.zeros((3, 1)), 0.5, 4, -1.0), ValueError, "ratio"),
    (lambda: schedules.annealed_flow(np.zeros((3, 1)), 0.5, 0, 1.0, backend="fast"), ValueError, "backend"),
    (lambda: schedules.annealed_flow(np.zeros((3, 1)), 0.5, 0, 1.0, tol=2.0), ValueError, "tol"),
    (lambda: schedules.annealed_flow(np.full((3, 1), np.nan), 0.5, 4, 1.0), ValueError, "nan"),
])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_oracle_tokens_approach_the_prior_law_for_a_mixture():
    # 1-D: the flow map is the monotone transport F_0^-1(F_sigma2(x)); with many layers the oracle's
    # tokens are draws of the prior (the two clusters' means and spreads)
    prior = GaussianMixture([[-2.0], [2.0]], var=0.25)
    rng = np.random.default_rng(0)
    noisy = prior.sample(8000, rng) + np.sqrt(0.5) * rng.standard_normal((8000, 1))
    out = schedules.oracle_reverse_flow(noisy, prior, 0.5, 100)[:, 0]
    for side in (out[out < 0], out[out > 0]):
        assert abs(abs(side.mean()) - 2.0) < 0.02 and abs(side.var() - 0.25) < 0.02
