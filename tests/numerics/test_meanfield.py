import numpy as np
import pytest

from numerics import meanfield


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


def test_mode_growth_bad_input():
    with pytest.raises(ValueError, match="margin"):
        meanfield.mode_growth_rate(1.0, 1.0, length=10.0, margin=6.0)
    with pytest.raises(ValueError, match="n_times"):
        meanfield.mode_growth_rate(1.0, 1.0, n_times=2)
