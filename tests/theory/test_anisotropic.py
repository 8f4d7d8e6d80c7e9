"""The anisotropic Gaussian prior: ``depth_noise.anisotropic_depth`` and its evaluators against an independent route.

The independent route shares nothing with :mod:`theory`: the variance ODE of each direction,
ds/dt = -2 h2 s/(s + h2) from tau2 + sigma2, integrated by ``scipy.integrate.solve_ivp``, and the
risk of the linear Stage 2 m + a (xt - m), a = s/(s + sigma2), typed here,
(1 - a)^2 tau2 + a^2 sigma2, minus the Bayes risk tau2 sigma2/(tau2 + sigma2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from attneb.theory import anisotropic
from attneb.theory.depth_noise import anisotropic_depth, gaussian_horizon, leading_horizon

variance = st.floats(min_value=0.05, max_value=5.0, allow_nan=False, allow_infinity=False)
bandwidth = st.floats(min_value=0.05, max_value=2.0, allow_nan=False, allow_infinity=False)
tau2_lists = st.lists(variance, min_size=1, max_size=4)
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)
#: Points of the brute-force grid of depths, and how far beyond the per-direction horizons it reaches.
GRID_POINTS, GRID_MARGIN = 20001, 1.0
#: Tolerances of solve_ivp (DOP853) in the independent route.
IVP_RTOL, IVP_ATOL = 1e-12, 1e-14


def independent_variances(tau2s, sigma2, h2, depths):
    """Token variance of each direction at ``depths`` (rows: directions), by solve_ivp."""
    depths = np.atleast_1d(np.asarray(depths, dtype=float))
    rows = []
    for tau2 in tau2s:
        sol = solve_ivp(lambda _t, y: -2 * h2 * y / (y + h2), (0.0, float(depths.max())), [tau2 + sigma2],
                        method="DOP853", rtol=IVP_RTOL, atol=IVP_ATOL, dense_output=True)
        rows.append(sol.sol(depths)[0])
    return np.array(rows)


def independent_excess(tau2s, sigma2, h2, depths):
    """Total excess over Bayes at ``depths``: the risk of the linear Stage 2, typed here, summed over directions."""
    total = 0.0
    for tau2, s in zip(tau2s, independent_variances(tau2s, sigma2, h2, depths)):
        a = s / (s + sigma2)
        total = total + (1 - a) ** 2 * tau2 + a**2 * sigma2 - tau2 * sigma2 / (tau2 + sigma2)
    return total


def leading_coefficient(tau2s, sigma2):
    """lim E(T_best)/h2^2 as h2 -> 0: 4 sigma2^2 (sum w c^2 - (sum w c)^2 / sum w), w = (tau2 + sigma2)^-3,
    c = log(1 + sigma2/tau2)/2 (the quadratic form of the small-h2 excess, minimised over the offset)."""
    w = np.array([(tau2 + sigma2) ** -3 for tau2 in tau2s])
    c = np.array([0.5 * math.log1p(sigma2 / tau2) for tau2 in tau2s])
    return 4 * sigma2**2 * (w @ c**2 - (w @ c) ** 2 / w.sum()), float(w @ c / w.sum())


@SETTINGS
@given(variance, st.integers(1, 4), variance, bandwidth)
def test_equal_variances_give_the_gaussian_horizon_and_no_excess(tau2, d, sigma2, h2):
    depth, excess = anisotropic_depth([tau2] * d, sigma2, h2)
    assert depth == pytest.approx(gaussian_horizon(sigma2, tau2, h2), rel=1e-14)
    assert 0 <= excess <= 1e-24 * d * (tau2 + sigma2)


@SETTINGS
@given(tau2_lists, variance, bandwidth)
def test_best_depth_lies_between_the_per_direction_horizons(tau2s, sigma2, h2):
    depth, excess = anisotropic_depth(tau2s, sigma2, h2)
    horizons = [gaussian_horizon(sigma2, tau2, h2) for tau2 in tau2s]
    assert min(horizons) <= depth <= max(horizons)
    assert excess >= 0
    assert excess == pytest.approx(anisotropic.excess_at_depth(tau2s, sigma2, h2, depth), rel=1e-15)


@pytest.mark.slow  # about 11 s
@SETTINGS
@given(tau2_lists.filter(lambda v: max(v) > 1.05 * min(v)), variance, bandwidth)
def test_best_depth_agrees_with_a_brute_force_grid_of_the_independent_route(tau2s, sigma2, h2):
    """Grid argmin of the independent excess within two grid steps; the minima agree to the grid's resolution."""
    horizons = [gaussian_horizon(sigma2, tau2, h2) for tau2 in tau2s]
    grid = np.linspace(min(horizons) - GRID_MARGIN, max(horizons) + GRID_MARGIN, GRID_POINTS)
    curve = independent_excess(tau2s, sigma2, h2, grid)
    i = int(np.argmin(curve))
    depth, excess = anisotropic_depth(tau2s, sigma2, h2)
    assert abs(depth - grid[i]) <= 2 * (grid[1] - grid[0])
    # the minimum is no higher than the grid's lowest point and agrees with the independent route at the depth
    assert excess <= curve[i] * (1 + 1e-9) + 1e-15
    assert excess == pytest.approx(float(independent_excess(tau2s, sigma2, h2, [depth])[0]), rel=1e-8, abs=1e-15)


@SETTINGS
@given(tau2_lists, variance, bandwidth, st.floats(min_value=0.0, max_value=1.5))
def test_evaluators_agree_with_the_independent_route(tau2s, sigma2, h2, fraction):
    depth = fraction * gaussian_horizon(sigma2, max(tau2s), h2)
    assert np.allclose(anisotropic.variances_at_depth(tau2s, sigma2, h2, depth),
                       independent_variances(tau2s, sigma2, h2, [max(depth, 1e-12)])[:, 0], rtol=1e-9, atol=0)
    expected = float(independent_excess(tau2s, sigma2, h2, [max(depth, 1e-12)])[0])
    assert anisotropic.excess_at_depth(tau2s, sigma2, h2, depth) == pytest.approx(expected, rel=1e-7, abs=1e-14)
    step = 1e-5
    slope = (independent_excess(tau2s, sigma2, h2, [depth + 2 * step])[0]
             - independent_excess(tau2s, sigma2, h2, [depth + step])[0]) / step  # one-sided: depth may be 0
    assert anisotropic.excess_slope_at_depth(tau2s, sigma2, h2, depth + 1.5 * step) == pytest.approx(
        slope, rel=1e-4, abs=1e-10)


@pytest.mark.parametrize("tau2s, sigma2", [((0.25, 2.0), 1.0), ((0.5, 1.0, 4.0), 0.5), ((1.0, 3.0), 2.0)])
def test_excess_at_the_best_depth_falls_to_zero_like_h2_squared(tau2s, sigma2):
    """E(T_best)/h2^2 -> the leading coefficient, with an error O(h2) (halving h2 halves it, to +-25%);
    the best depth -> T* + the weighted mean offset, also at O(h2)."""
    coefficient, offset = leading_coefficient(tau2s, sigma2)
    bandwidths = (0.04, 0.02, 0.01, 0.005)
    best = [anisotropic_depth(tau2s, sigma2, h2) for h2 in bandwidths]
    excesses = [excess for _, excess in best]
    assert all(later < earlier for earlier, later in zip(excesses, excesses[1:]))
    ratio_errors = [excess / h2**2 - coefficient for (_, excess), h2 in zip(best, bandwidths)]
    depth_errors = [depth - leading_horizon(sigma2, h2) - offset for (depth, _), h2 in zip(best, bandwidths)]
    for errors in (ratio_errors, depth_errors):
        for coarse, fine in zip(errors, errors[1:]):
            assert 1.5 < coarse / fine < 2.5


@pytest.mark.parametrize("tau2s, error, match", [
    ([], ValueError, "tau2s is empty"),
    ((1.0, -1.0), ValueError, r"^tau2s\[1\] == -1.0, must be > 0"),
    ((1.0, math.nan), ValueError, r"^tau2s\[1\] == nan"),
    ((0.0,), ValueError, r"^tau2s\[0\] == 0.0"),
    (1.0, TypeError, "tau2s must be a sequence"),
    ("1.0", TypeError, "tau2s must be a sequence"),
    ((1.0, "2"), TypeError, r"tau2s\[1\] must be a real number"),
])
def test_bad_prior_variances_raise_naming_the_entry(tau2s, error, match):
    with pytest.raises(error, match=match):
        anisotropic_depth(tau2s, 1.0, 0.1)
    with pytest.raises(error, match=match):
        anisotropic.excess_at_depth(tau2s, 1.0, 0.1, 1.0)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf])
def test_bad_numbers_raise_value_error_naming_the_argument(bad):
    with pytest.raises(ValueError, match=r"^sigma2 == "):
        anisotropic_depth((0.25, 2.0), bad, 0.1)
    with pytest.raises(ValueError, match=r"^h2 == "):
        anisotropic_depth((0.25, 2.0), 1.0, bad)
    with pytest.raises(ValueError, match=r"^h2 == "):
        anisotropic.variances_at_depth((0.25, 2.0), 1.0, bad, 1.0)
    with pytest.raises(ValueError, match=r"^T == -1.0, must be >= 0"):
        anisotropic.excess_at_depth((0.25, 2.0), 1.0, 0.1, -1.0)


def test_numbers_in_float_out():
    depth, excess = anisotropic_depth(np.array([0.25, 2.0]), 1, 0.1)
    assert isinstance(depth, float) and isinstance(excess, float)
    assert all(isinstance(v, float) for v in anisotropic.variances_at_depth([0.25, 2.0], 1, 0.1, depth))


def test_argument_checks_return_valid_values_unchanged():
    assert anisotropic.check_tau2s([0.25, 2, np.float64(1.5)]) == (0.25, 2.0, 1.5)
    assert all(type(v) is float for v in anisotropic.check_tau2s([1, 2]))
    assert anisotropic.check_depth(0.37) == 0.37 and anisotropic.check_depth(0) == 0.0
    with pytest.raises(ValueError, match="T"):
        anisotropic.check_depth(-1.0)
