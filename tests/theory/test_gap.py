"""theory.gap: the bias against the Gaussian's closed form and its exact Euler layers, the Stage-2 variance against
a Monte Carlo of Stage 2 itself, the gain of Stage 1's fluctuations, and the arguments' errors."""

from __future__ import annotations

import numpy as np
import pytest

from attneb.numerics import kernels
from attneb.theory import depth_noise, gap


def test_the_gaussian_bias_at_t_star_is_the_residual_variance_through_stage_2():
    # first order: the refined variance exceeds tau2 by eps = h2 log(1 + sigma2/tau2) (dv/ds = -2 + 2 h2/v), and
    # Stage 2's linear map gives sigma2^2 eps^2/(tau2 + sigma2)^3
    tau2, sigma2 = 1.0, 0.5
    for h2 in (0.1, 0.05):
        eps = h2 * np.log(1 + sigma2 / tau2)
        expected = sigma2**2 * eps**2 / (tau2 + sigma2) ** 3
        assert gap.bias([1.0], [0.3], [tau2], sigma2, h2, sigma2 / (2 * h2)) == pytest.approx(expected, rel=1e-8)


def test_the_first_order_bias_tends_to_the_gaussians_exact_one_as_h2_falls():
    tau2, sigma2 = 1.0, 0.5
    excess = [gap.bias([1.0], [0.0], [tau2], sigma2, h2, sigma2 / (2 * h2))
              / gap.gaussian_bias(tau2, sigma2, h2, sigma2 / (2 * h2), 1e-4) - 1 for h2 in (0.1, 0.05, 0.025)]
    assert 0 < excess[2] < excess[1] < excess[0] < 0.3
    assert excess[1] / excess[0] == pytest.approx(0.5, abs=0.1) and excess[2] / excess[1] == pytest.approx(0.5, abs=0.1)


def test_the_gaussian_bias_is_that_of_the_exact_layer_map():
    tau2, sigma2, h2, depth, eta = 1.0, 0.5, 0.1, 2.5, 0.5
    s = tau2 + sigma2
    for _ in range(5):
        s *= (1 - eta * h2 / (s + h2)) ** 2
    expected = (tau2 + sigma2) * (s / (s + sigma2) - tau2 / (tau2 + sigma2)) ** 2
    assert gap.gaussian_bias(tau2, sigma2, h2, depth, eta) == pytest.approx(expected, rel=1e-12)


def test_the_gaussian_bias_nearly_vanishes_at_t_g():
    """Past T* by (1/2) log(1 + sigma2/tau2) (T_G, C6) the residual blur is removed to first order."""
    tau2, sigma2, h2 = 1.0, 0.5, 0.05
    at_t_star = gap.bias([1.0], [0.0], [tau2], sigma2, h2, sigma2 / (2 * h2))
    at_t_g = gap.bias([1.0], [0.0], [tau2], sigma2, h2, depth_noise.gaussian_horizon(sigma2, tau2, h2))
    assert at_t_g < 0.01 * at_t_star


def test_the_gain_is_one_at_depth_zero_and_grows_with_depth():
    a = np.array([0.0, 1.0, 3.0])
    np.testing.assert_allclose(gap.gain(a, 0.5, 0.1, []), 1.0)
    shallow, deep = gap.gain(a, 0.5, 0.1, [0.05] * 20), gap.gain(a, 0.5, 0.1, [0.05] * 50)
    assert np.all(shallow > 1) and np.all(deep > shallow)


def test_the_gain_of_many_queries_is_the_gain_of_each():
    a = np.array([0.0, 0.5, 3.0, 40.0])
    steps = [0.05] * 30
    np.testing.assert_allclose(gap.gain(a, 0.5, 0.1, steps, dim=2),
                               [gap.gain(value, 0.5, 0.1, steps, dim=2) for value in a], rtol=1e-15)


@pytest.mark.parametrize("shift", [30.0, 3000.0])
def test_the_stage_two_variances_do_not_depend_on_where_the_mixture_sits(shift):
    """Translating every component leaves V_NW, its amplified form and 1/n_eff unchanged (to rounding)."""
    weights, means, tau2s = np.array([0.3, 0.7]), np.array([-2.0, 2.0]), np.array([0.25, 0.25])
    args = (0.5, 0.125, 2.0)
    here = (*gap.variance(weights, means, tau2s, *args, 0.1, 4096), gap.inverse_effective_tokens(weights, means, tau2s, *args, 4096))
    there = (*gap.variance(weights, means + shift, tau2s, *args, 0.1, 4096),
             gap.inverse_effective_tokens(weights, means + shift, tau2s, *args, 4096))
    np.testing.assert_allclose(there, here, rtol=1e-10)


def test_the_stage_two_variance_is_that_of_stage_two_over_independent_tokens():
    """V_NW at depth 0 (tokens of the noisy density N(0, tau2 + sigma2)) against Stage 2 run over 300 samples."""
    tau2, sigma2, n = 1.0, 0.5, 400
    v_nw, amplified = gap.variance([1.0], [0.0], [tau2], sigma2, 0.1, 0.0, 0.05, n)
    assert amplified == pytest.approx(v_nw, rel=1e-12)
    rng = np.random.default_rng(0)
    queries = rng.normal(0.0, np.sqrt(tau2 + sigma2), (2000, 1))
    limit = (tau2 + sigma2) / (tau2 + 2 * sigma2) * queries  # Stage 2 over the noisy density itself, N -> oo
    errors = [np.mean((kernels.kernel_mean(queries, rng.normal(0.0, np.sqrt(tau2 + sigma2), (n, 1)), sigma2)
                       - limit) ** 2) for _ in range(300)]
    measured, se = np.mean(errors), np.std(errors, ddof=1) / np.sqrt(len(errors))
    assert abs(measured - v_nw) < max(4 * se, 0.1 * v_nw), (measured, se, v_nw)


def test_the_predicted_gap_is_the_sum_of_its_terms():
    terms = gap.predicted_gap([0.5, 0.5], [-2.0, 2.0], [0.25, 0.25], 0.5, 0.0885, 0.5 / (2 * 0.0885), 0.05, 4096)
    assert terms["gap"] == pytest.approx(terms["bias"] + terms["variance"] + terms["fluctuation"], rel=1e-12)
    assert terms["fluctuation"] > 0 and terms["variance"] > 0


@pytest.mark.parametrize(("call", "match"), [
    (lambda: gap.bias([1.0], [0.0], [1.0], 0.5, 0.1, 10.0), "must stay below"),
    (lambda: gap.bias([1.0, 1.0], [0.0], [1.0], 0.5, 0.1, 1.0), "one length"),
    (lambda: gap.bias([1.0], [0.0], [-1.0], 0.5, 0.1, 1.0), "tau2s"),
    (lambda: gap.bias([1.0], [0.0], [1.0], 0.0, 0.1, 1.0), "sigma2 == 0.0"),
    (lambda: gap.bias([1.0], [0.0], [1.0], 0.5, 0.1, -1.0), "T == -1.0"),
    (lambda: gap.variance([1.0], [0.0], [1.0], 0.5, 0.1, 1.0, 0.05, 0), "n == 0"),
    (lambda: gap.variance([1.0], [0.0], [1.0], 0.5, 0.1, 1.0, 0.0, 10), "eta == 0.0"),
    (lambda: gap.gaussian_bias(1.0, 0.5, 0.1, -1.0, 0.05), "T == -1.0"),
    (lambda: gap.gaussian_bias(1.0, 0.5, 0.1, 1.0, 2.0), "eta == 2.0"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_mean_fields_kernel_sums_are_those_of_numerics():
    rng = np.random.default_rng(3)
    keys, queries = rng.normal(size=300), rng.normal(size=50) * 3
    np.testing.assert_allclose(gap._kernel_mean(queries, keys, 0.2), kernels.kernel_mean(queries[:, None], keys[:, None], 0.2)[:, 0],
                               rtol=1e-12, atol=1e-12)


def test_the_mean_field_bias_of_a_gaussian_tends_to_the_exact_one_within_its_stated_error():
    """The quantile tokens' error shrinks like 1/m, and |B - B from m/2 tokens| covers it."""
    tau2, sigma2, h2 = 1.0, 0.5, 0.1327
    depth = sigma2 / (2 * h2)
    exact = gap.gaussian_bias(tau2, sigma2, h2, depth, 0.05)
    errors = []
    for m in (512, 1024):
        r = gap.mean_field_bias([1.0], [0.0], [tau2], sigma2, h2, depth, 0.05, m=m)
        errors.append(abs(r["bias"] - exact))
        assert errors[-1] <= abs(r["bias"] - r["bias_half"])
        assert r["spread_start"] == pytest.approx(tau2 + sigma2, rel=1e-2)
    assert errors[1] < 0.6 * errors[0]


def test_the_mean_field_bias_of_two_clusters_is_below_its_first_order_expansion():
    """At E1's h2 the expansion parameter h2/tau2 is 0.25-0.5: the all-orders bias is 0.37-0.6 of the first-order one."""
    args = ([0.5, 0.5], [-2.0, 2.0], [0.25, 0.25], 0.5, 0.1327, 0.5 / (2 * 0.1327))
    all_orders = gap.mean_field_bias(*args, 0.05)["bias"]
    assert 0.3 < all_orders / gap.bias(*args) < 0.7


def test_the_inverse_effective_tokens_is_that_of_the_kernel_weights():
    """E_q[sum K^2/(sum K)^2] over samples of the refined density (depth 0: the noisy N(0, 1.5)), against n = 200."""
    tau2, sigma2, n = 1.0, 0.5, 200
    predicted = gap.inverse_effective_tokens([1.0], [0.0], [tau2], sigma2, 0.1, 0.0, n)
    rng = np.random.default_rng(4)
    values = []
    for _ in range(200):
        tokens = rng.normal(scale=np.sqrt(tau2 + sigma2), size=n)
        q = rng.normal(scale=np.sqrt(tau2 + sigma2), size=50)
        k = np.exp(-0.5 * (q[:, None] - tokens[None, :]) ** 2 / sigma2)
        values.append(np.mean((k**2).sum(axis=1) / k.sum(axis=1) ** 2))
    assert np.mean(values) == pytest.approx(predicted, rel=0.1)
