import numpy as np
import pytest

from numerics import flow, meanfield


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
