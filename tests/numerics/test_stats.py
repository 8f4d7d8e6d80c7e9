"""numerics.stats: every interval and fit against scipy or the formula written out."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sstats

from attneb.numerics import stats


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_mean_interval_is_scipys_t_interval(level):
    v = np.random.default_rng(7).normal(1.5, 0.4, 9)
    iv = stats.mean_interval(v, level)
    low, high = sstats.t.interval(level, v.size - 1, loc=v.mean(), scale=sstats.sem(v))
    assert (iv.n, iv.level) == (9, level)
    np.testing.assert_allclose([iv.estimate, iv.low, iv.high], [v.mean(), low, high], rtol=1e-12)


def test_linear_fit_is_least_squares_with_its_t_interval():
    rng = np.random.default_rng(8)
    x = np.linspace(0.0, 3.0, 12)
    y = 0.7 - 1.3 * x + rng.normal(0, 0.2, x.size)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - intercept - slope * x
    se = np.sqrt(resid @ resid / (x.size - 2) / ((x - x.mean()) @ (x - x.mean())))
    half = sstats.t.ppf(0.975, x.size - 2) * se
    fit = stats.linear_fit(x, y)
    np.testing.assert_allclose([fit.slope.estimate, fit.slope.low, fit.slope.high, fit.intercept, fit.residual_std],
                               [slope, slope - half, slope + half, intercept, resid.std(ddof=2)], rtol=1e-10)


def test_loglog_slope_of_a_power_law_is_its_exponent():
    x = np.array([16.0, 64.0, 256.0, 1024.0])
    fit = stats.loglog_slope(x, 3.0 * x**-0.7)
    assert fit.slope.estimate == pytest.approx(-0.7, rel=1e-12)
    assert fit.intercept == pytest.approx(np.log(3.0), rel=1e-12)
    assert fit.slope.high - fit.slope.low == pytest.approx(0.0, abs=1e-12)
    noisy = 3.0 * x**-0.7 * np.exp([0.05, -0.05, 0.05, -0.05])
    reference = sstats.linregress(np.log(x), np.log(noisy))
    assert stats.loglog_slope(x, noisy).slope.estimate == pytest.approx(reference.slope, rel=1e-12)
    with pytest.raises(ValueError, match="> 0"):
        stats.loglog_slope(x, -x)


def _balanced(rng, groups=5, xs=(0.25, 0.5, 1.0, 2.0)):
    x = np.tile(xs, groups)
    labels = np.repeat(np.arange(groups), len(xs))
    y = 1.5 * x + rng.normal(0, 0.3, x.size) + rng.normal(0, 1.0, groups)[labels]
    return x, y, labels


def test_group_slopes_interval_is_the_t_interval_of_scipy_per_group_slopes():
    x, y, labels = _balanced(np.random.default_rng(0))
    slopes = np.array([sstats.linregress(x[labels == g], y[labels == g]).slope for g in np.unique(labels)])
    half = sstats.t.ppf(0.975, slopes.size - 1) * slopes.std(ddof=1) / np.sqrt(slopes.size)
    iv = stats.group_slopes_interval(x, y, labels)
    assert iv.n == slopes.size and iv.level == 0.95
    np.testing.assert_allclose([iv.estimate, iv.low, iv.high],
                               [slopes.mean(), slopes.mean() - half, slopes.mean() + half], rtol=1e-12)


def test_group_slopes_interval_level_uses_its_quantile():
    x, y, labels = _balanced(np.random.default_rng(1))
    wide, narrow = stats.group_slopes_interval(x, y, labels, 0.99), stats.group_slopes_interval(x, y, labels, 0.8)
    ratio = (wide.high - wide.low) / (narrow.high - narrow.low)
    assert ratio == pytest.approx(sstats.t.ppf(0.995, 4) / sstats.t.ppf(0.9, 4), rel=1e-12)


@given(st.integers(2, 8), st.integers(0, 2**32 - 1))
def test_on_a_balanced_design_the_mean_slope_is_the_pooled_least_squares_slope(groups, seed):
    x, y, labels = _balanced(np.random.default_rng(seed), groups)
    iv = stats.group_slopes_interval(x, y, labels)
    assert iv.estimate == pytest.approx(stats.linear_fit(x, y).slope.estimate, rel=1e-10, abs=1e-12)


def test_group_labels_may_be_any_hashable_in_any_order():
    x, y, labels = _balanced(np.random.default_rng(2))
    order = np.random.default_rng(3).permutation(x.size)
    named = np.array([f"seed-{g}" for g in labels])
    a = stats.group_slopes_interval(x, y, labels)
    b = stats.group_slopes_interval(x[order], y[order], named[order])
    assert (a.low, a.high) == pytest.approx((b.low, b.high), rel=1e-12)


@pytest.mark.parametrize(("x", "y", "groups", "message"), [
    ([1, 2, 1, 2], [1, 2, 3], [0, 0, 1, 1], "same length"),
    ([1, 2, 1, 2], [1, np.nan, 3, 4], [0, 0, 1, 1], "finite"),
    ([1, 1, 1, 2], [1, 2, 3, 4], [0, 0, 1, 1], "distinct x"),
    ([1, 2, 3], [1, 2, 3], [0, 0, 0], "at least 2"),
])
def test_group_slopes_interval_says_what_is_wrong(x, y, groups, message):
    with pytest.raises(ValueError, match=message):
        stats.group_slopes_interval(x, y, groups)


def test_geometric_mean_interval_is_mean_interval_of_the_logs_mapped_back():
    v = np.exp(np.random.default_rng(4).normal(0.1, 0.5, 8))
    logs = sstats.t.interval(0.95, 7, loc=np.log(v).mean(), scale=sstats.sem(np.log(v)))
    iv = stats.geometric_mean_interval(v)
    assert iv.n == 8 and iv.estimate == pytest.approx(sstats.gmean(v), rel=1e-12)
    np.testing.assert_allclose([iv.low, iv.high], np.exp(logs), rtol=1e-12)


def test_geometric_mean_interval_scales_with_the_values():
    v = np.array([0.8, 1.1, 1.3, 0.9])
    a, b = stats.geometric_mean_interval(v, 0.9), stats.geometric_mean_interval(3 * v, 0.9)
    assert (b.estimate, b.low, b.high) == pytest.approx((3 * a.estimate, 3 * a.low, 3 * a.high), rel=1e-12)


@pytest.mark.parametrize("values", [[1.0, -1.0, 2.0], [1.0, 0.0], [1.0, np.inf]])
def test_geometric_mean_interval_needs_positive_finite_values(values):
    with pytest.raises(ValueError, match="> 0"):
        stats.geometric_mean_interval(values)


def _control_draws(rng, n):
    x = rng.standard_normal(n)
    z = rng.standard_normal(n)
    return 2.0 + x + 0.5 * z + 0.1 * rng.standard_normal(n), np.column_stack([z, z * z - 1])


def test_control_variate_interval_is_mean_interval_of_the_draws_adjusted_by_the_pilots_coefficients():
    rng = np.random.default_rng(5)
    y0, c0 = _control_draws(rng, 500)
    y, c = _control_draws(rng, 2000)
    beta = np.linalg.lstsq(np.column_stack([np.ones(500), c0]), y0, rcond=None)[0][1:]  # intercept = centring
    adjusted = y - c @ beta
    low, high = sstats.t.interval(0.95, adjusted.size - 1, loc=adjusted.mean(), scale=sstats.sem(adjusted))
    iv = stats.control_variate_interval(y, c, y0, c0)
    np.testing.assert_allclose([iv.estimate, iv.low, iv.high], [adjusted.mean(), low, high], rtol=1e-10)
    assert iv.n == 2000 and beta == pytest.approx([0.5, 0.0], abs=0.05)


def test_control_variates_narrow_the_interval_and_keep_its_centre():
    rng = np.random.default_rng(6)
    y0, c0 = _control_draws(rng, 500)
    y, c = _control_draws(rng, 4000)
    plain, adjusted = stats.mean_interval(y), stats.control_variate_interval(y, c, y0, c0)
    assert adjusted.high - adjusted.low < plain.high - plain.low
    assert adjusted.low < 2.0 < adjusted.high  # the mean is 2; both intervals hold it on this seed


@pytest.mark.parametrize(("shapes", "message"), [
    (((10,), (10,), (30,), (30, 2)), "2-D"),
    (((10,), (9, 2), (30,), (30, 2)), "expected controls"),
    (((10,), (10, 2), (3,), (3, 2)), "more than p"),
])
def test_control_variate_interval_says_what_is_wrong(shapes, message):
    arrays = [np.ones(shape) for shape in shapes]
    with pytest.raises(ValueError, match=message):
        stats.control_variate_interval(*arrays)

