import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb.numerics import flow, kernels, stats
from tests.strategies import point_clouds, rotations


def two_blobs(n=24, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-1.0, 0.5, (n // 2, d)), rng.normal(1.0, 0.5, (n - n // 2, d))])


def test_euler_converges_to_ode_at_the_declared_order():
    x0 = two_blobs()
    ref = flow.particle_flow(x0, 0.3, 1.0, method="ode", rtol=1e-12, atol=1e-12)
    etas = np.array([0.2, 0.1, 0.05, 0.025])
    errors = [np.abs(flow.particle_flow(x0, 0.3, 1.0, eta=eta) - ref).max() for eta in etas]
    assert np.all(np.diff(errors) < 0)
    fit = stats.loglog_slope(etas, errors)
    assert abs(fit.slope.estimate - flow.SOLVERS["euler"].order) < 0.1


def test_layer_count_and_step():
    assert flow.n_layers(5.0, 0.05) == 100
    assert flow.n_layers(0.01, 0.05) == 1
    assert flow.n_layers(0.0, 0.05) == 1
    x0 = two_blobs()
    one = x0 + 0.4 * flow.velocity(x0, 0.3)
    np.testing.assert_allclose(flow.particle_flow(x0, 0.3, 0.4, eta=0.5), one, atol=1e-14)


def test_zero_depth_is_identity():
    x0 = two_blobs()
    for method in flow.SOLVERS:
        np.testing.assert_array_equal(flow.particle_flow(x0, 0.3, 0.0, method=method), x0)


@pytest.mark.parametrize("method", list(flow.SOLVERS))
def test_record_keeps_trajectory_and_energy(method):
    x0 = two_blobs()
    res = flow.particle_flow(x0, 0.3, 1.0, eta=0.1, method=method, record=[0.0, 0.3, 1.0])
    np.testing.assert_allclose(res.depths, [0.0, 0.3, 1.0], atol=1e-12)
    assert res.trajectory.shape == (3, len(x0), 2) and res.energy.shape == (3, len(x0))
    np.testing.assert_array_equal(res.trajectory[0], x0)
    np.testing.assert_allclose(res.trajectory[-1], res.tokens)
    expected = -0.3 * np.array([kernels.kernel_logsumexp(x, x, 0.3) for x in res.trajectory])
    np.testing.assert_allclose(res.energy, expected, rtol=1e-12)


def test_euler_record_snaps_to_layers():
    res = flow.particle_flow(two_blobs(), 0.3, 1.0, eta=0.25, record=[0.1, 0.6])
    np.testing.assert_allclose(res.depths, [0.0, 0.5])


def test_velocity_is_minus_energy_gradient():
    x0, h2, step = two_blobs(), 0.3, 1e-5
    pts = x0[:5] + 0.1
    fd = np.stack(
        [(flow.energy(pts + step * e, x0, h2) - flow.energy(pts - step * e, x0, h2)) / (2 * step) for e in np.eye(2)],
        axis=1,
    )
    np.testing.assert_allclose(kernels.kernel_mean(pts, x0, h2) - pts, -fd, atol=1e-8)


@settings(max_examples=20)
@given(point_clouds(min_n=2, max_n=10), st.data())
def test_stage_one_is_translation_rotation_permutation_equivariant(x, data):
    d = x.shape[1]
    shift = data.draw(point_clouds(min_n=1, max_n=1, d=d))[0]
    rot = data.draw(rotations(d))
    perm = data.draw(st.permutations(range(len(x))))
    run = lambda y: flow.particle_flow(y, 0.5, 1.0, eta=0.25)  # noqa: E731
    base = run(x)
    np.testing.assert_allclose(run(x @ rot.T + shift), base @ rot.T + shift, atol=1e-8)
    np.testing.assert_allclose(run(x[list(perm)]), base[list(perm)], atol=1e-10)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"eta": 0.0}, ValueError, "eta"),
        ({"eta": 1.01}, ValueError, "eta"),
        ({"T": -0.1}, ValueError, "T == -0.1"),
        ({"h2": 0.0}, ValueError, "h2 == 0.0"),
        ({"method": "rk4"}, ValueError, "method == 'rk4'"),
        ({"record": [0.5, 2.0]}, ValueError, "record"),
        ({"record": [0.5, 0.1]}, ValueError, "sorted"),
        ({"x0": np.zeros(4)}, ValueError, "reshape"),
        ({"x0": np.zeros((0, 2))}, ValueError, "x0 is empty"),
        ({"rtol": -1.0}, ValueError, "rtol"),
    ],
)
def test_bad_flow_inputs(kwargs, exc, match):
    params = {"x0": two_blobs(), "h2": 0.3, "T": 1.0} | kwargs
    x0, h2, T = params.pop("x0"), params.pop("h2"), params.pop("T")
    with pytest.raises(exc, match=match):
        flow.particle_flow(x0, h2, T, **params)


def test_long_flows_show_progress_on_a_terminal_only(monkeypatch):
    shown = []

    def recording_tqdm(iterable, disable, **kwargs):
        shown.append(disable)
        return iterable

    monkeypatch.setattr(flow, "tqdm", recording_tqdm)
    x0 = np.random.default_rng(0).normal(size=(20, 1))
    flow.particle_flow(x0, 0.5, 0.2, eta=0.1)
    monkeypatch.setattr(flow, "PROGRESS_MIN_TERMS", 20**2)
    flow.particle_flow(x0, 0.5, 0.2, eta=0.1)
    assert shown == [True, None]  # None: tqdm shows the bar where stderr is a terminal


def test_velocity_is_the_attention_step_written_out():
    x = two_blobs(n=40)
    logits = -((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2) / (2 * 0.3)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected = weights / weights.sum(axis=1, keepdims=True) @ x - x
    np.testing.assert_allclose(flow.velocity(x, 0.3), expected, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- several depths, shared paths


@pytest.mark.parametrize("backend, n, d", [("exact", 300, 2), ("binned", 5000, 1)])
def test_particle_flow_at_equals_each_depths_own_flow_bit_for_bit(backend, n, d):
    x0 = np.random.default_rng(4).standard_normal((n, d)) * 1.3
    # 1.15 and 1.2 take a step one ulp below 0.05, 1.1, 1.25 and 1.3 exactly 0.05; 0.37 a step of its own
    depths = [1.3, 1.1, 1.15, 0.0, 1.2, 1.25, 1.1, 0.37]
    shared = flow.particle_flow_at(x0, 0.25, depths, eta=0.05, backend=backend, tol=1e-7)
    for T, tokens in zip(depths, shared):
        assert np.array_equal(tokens, flow.particle_flow(x0, 0.25, T, eta=0.05, backend=backend, tol=1e-7)), T


def test_particle_flow_at_runs_one_path_per_distinct_step(monkeypatch):
    layers = []
    real = flow._euler
    monkeypatch.setattr(flow, "_euler", lambda x0, h2, T, eta, depths, *a, **k: layers.append(flow.n_layers(T, eta))
                        or real(x0, h2, T, eta, depths, *a, **k))
    x0 = np.random.default_rng(0).standard_normal((50, 1))
    flow.particle_flow_at(x0, 0.25, [1.1, 1.15, 1.2, 1.25, 1.3], eta=0.05, backend="exact")
    assert sorted(layers) == [24, 26]  # two paths (steps 0.05 and its neighbour below) instead of 5 flows of 22-26


def test_particle_flow_at_rejects_bad_depths():
    x0 = np.zeros((4, 1))
    with pytest.raises(ValueError, match="depths == \\[\\] must name at least one depth"):
        flow.particle_flow_at(x0, 0.25, [])
    with pytest.raises(ValueError, match=r"depths\[1\]"):
        flow.particle_flow_at(x0, 0.25, [1.0, -0.5])


def test_particle_flow_at_runs_the_stage_one_in_force(monkeypatch):
    """A wrong theory swapped in for particle_flow (as verify's power analysis does) reaches every depth."""
    x0 = np.random.default_rng(1).standard_normal((40, 1))
    depths = [1.1, 1.25, 1.3]
    real = flow.particle_flow
    monkeypatch.setattr(flow, "particle_flow", lambda x0, h2, T, **kw: real(x0, h2 / 2, T, **kw))
    halved = flow.particle_flow_at(x0, 0.25, depths, backend="exact")
    assert all(np.array_equal(a, real(x0, 0.125, T, backend="exact")) for a, T in zip(halved, depths))
    monkeypatch.setattr(flow, "particle_flow", lambda x0, *args, **kwargs: np.asarray(x0, dtype=float))
    assert all(np.array_equal(a, x0) for a in flow.particle_flow_at(x0, 0.25, depths, backend="exact"))


def test_record_energy_false_leaves_the_energies_out():
    x0 = np.random.default_rng(1).standard_normal((30, 1))
    with_energy = flow.particle_flow(x0, 0.25, 0.5, eta=0.05, record=[0.2, 0.5], backend="exact")
    without = flow.particle_flow(x0, 0.25, 0.5, eta=0.05, record=[0.2, 0.5], backend="exact", record_energy=False)
    assert without.energy is None and with_energy.energy.shape == (2, 30)
    assert np.array_equal(without.trajectory, with_energy.trajectory)
