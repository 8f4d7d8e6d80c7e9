"""The binned (grid + FFT) kernel sums against the exact blocked sums of numerics.kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.polynomial import hermite_e

from attneb.numerics import binned, estimators, flow, kernels
from attneb.numerics.priors import GaussianMixture
from tests.strategies import log_uniform, point_clouds


def mixture_batch(n, d, seed, sigma2=0.5):
    """Noisy two-cluster tokens ``x + sqrt(sigma2) z`` (clusters at -1.5 and +1.5 on every axis)."""
    rng = np.random.default_rng(seed)
    prior = GaussianMixture(np.array([[-1.5] * d, [1.5] * d]), var=0.3)
    return prior.sample(n, rng) + np.sqrt(sigma2) * rng.standard_normal((n, d))


def queries_for(keys, seed, n_far=20):
    """The keys themselves, points in their box, and points up to 3x beyond it."""
    rng = np.random.default_rng(seed)
    lo, hi = keys.min(axis=0), keys.max(axis=0)
    box = rng.uniform(lo, hi, size=(50, keys.shape[1]))
    far = rng.uniform(lo - 3 * (hi - lo), hi + 3 * (hi - lo), size=(n_far, keys.shape[1]))
    return np.concatenate([keys[:200], box, far])


def raw_mean_errors(queries, keys, h2, plan):
    """Raw grid kernel means (no fallback): errors against the exact path and their bounds, where finite."""
    sums = binned._grid_sums(queries, keys, plan, want_dev=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = queries + (sums.dev / sums.s0).T
        margin = sums.s0 - sums.err_s0
        bound = (sums.err_dev + np.abs(mean - queries).max(axis=1) * sums.err_s0) / margin
    valid = sums.inside & (margin > 0)
    error = np.abs(mean - kernels.kernel_mean(queries, keys, h2)).max(axis=1)
    return error[valid], bound[valid]


def check_mean(queries, keys, h2, tol):
    res = binned.kernel_mean(queries, keys, h2, tol=tol, full_output=True)
    error = np.abs(res.values - kernels.kernel_mean(queries, keys, h2)).max(axis=1)
    assert np.all(error <= res.error_bound + 1e-14 * res.plan.scale)
    assert res.error_bound.max() <= tol * res.plan.scale
    assert np.all(res.error_bound[res.exact] == 0)
    return res, error


# --- the constants and the majorants of the error bound ----------------------------------


@pytest.mark.parametrize("p", sorted(binned._LAGRANGE))
def test_lagrange_constants_and_weights(p):
    t = np.linspace(0.0, 1.0, 20001)
    nodes = np.arange(1 - p // 2, p // 2 + 1)
    weights = binned._lagrange(t, p, np.empty((p, len(t))))
    c_p, lam = binned._LAGRANGE[p]
    node_poly = np.abs(np.prod(t[None, :] - nodes[:, None], axis=0)).max()
    assert node_poly / np.prod(np.arange(1, p + 1)) == pytest.approx(c_p, rel=1e-12)
    assert np.abs(weights).sum(axis=0).max() == pytest.approx(lam, rel=1e-12)
    for degree in range(p):  # reproduces every polynomial of degree < p
        np.testing.assert_allclose(weights.T @ nodes.astype(float) ** degree, t**degree, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4, 5, 6, 7, 8, 9])
@pytest.mark.parametrize("tau", [0.0, 0.1, 0.5, 1.0])
def test_majorant_bounds_the_shifted_hermite_functions(n, tau):
    s = np.linspace(0.0, 30.0, 3001)[:, None]
    t = np.linspace(-tau, tau, 21)[None, :]
    he = np.abs(hermite_e.hermeval(s + t, [0] * n + [1]))
    value = (he * np.exp(-((s + t) ** 2) / 2 + s**2 / (2 * binned._ALPHA))).max()
    bound = binned._majorant(n, tau, binned._ALPHA)
    assert value <= bound
    assert bound < 1.05 * value  # and is tight


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("h2", [0.01, 1.0])
def test_one_key_grid_kernel_within_its_bound(d, h2):
    """The per-key inequality |K^(q, x) - K(q - x)| <= eps0 K_alpha(q - x) behind every bound."""
    rng = np.random.default_rng(0)
    key = rng.uniform(-1, 1, (1, d))
    reach = 6 if d < 3 else 4  # in 3-D a cube of side 12 sqrt(h2) would exceed MAX_GRID_CELLS
    queries = key + np.sqrt(h2) * rng.uniform(-reach, reach, (400, d))
    plan = binned._plan(d, h2, 1e-4, 4 * np.sqrt(h2), "mean")
    sums = binned._grid_sums(queries, key, plan, want_dev=True)
    v2 = ((queries - key) ** 2).sum(axis=1)
    error = np.abs(sums.s0 - np.exp(-v2 / (2 * h2)))[sums.inside]
    allowed = plan.sum_coef * np.exp(-v2 / (2 * binned._ALPHA * h2))[sums.inside] + 1e-15
    assert sums.inside.sum() > 300
    assert np.all(error <= allowed)
    assert error.max() > 1e-3 * allowed.max()  # the bound is within a factor 1000 somewhere


@pytest.mark.parametrize("d,h2,tol", [(1, 0.05, 1e-9), (2, 0.5, 1e-7), (3, 2.0, 1e-6)])
def test_node_coefficients_are_their_closed_forms(d, h2, tol):
    """``node_factor = exp(d delta^2 / (8 alpha eps h2))`` and
    ``node_coef = c_p sum_k lam^k M_p (delta^2 / (alpha' h2))^(p/2) + lam^d exp(-(w delta)^2 / (2 alpha' h2))``
    (alpha = 2, eps = 1/4, alpha' = 5/2), with ``M_p = max_s |He_p(s)| exp(-s^2/2)`` found on a fine grid here."""
    plan = binned.plan_grid(np.zeros((2, d)), h2, tol=tol, scale=8.0)
    p, delta, alpha_node = plan.order, plan.spacing, 2.5
    c_p, lam = binned._LAGRANGE[p]
    s = np.linspace(0.0, 30.0, 300_001)
    peak = np.max(np.abs(hermite_e.hermeval(s, [0] * p + [1])) * np.exp(-(s**2) / 2))
    spread = c_p * sum(lam**k for k in range(d)) * peak * (delta**2 / (alpha_node * h2)) ** (p / 2)
    cut = lam**d * np.exp(-((plan.half_width * delta) ** 2) / (2 * alpha_node * h2))
    assert plan.node_coef == pytest.approx(spread + cut, rel=1e-8)
    assert plan.node_factor == pytest.approx(np.exp(d * delta**2 / (8 * 2.0 * 0.25 * h2)), rel=1e-12)


@pytest.mark.parametrize("d,h2,tol", [(1, 0.05, 1e-9), (2, 0.5, 1e-7)])
def test_planned_grid_meets_its_tolerance(d, h2, tol):
    """The grid plan_grid chooses: spacing at most sqrt(h2)/8, and the grid sums alone within tol (no fallback)."""
    keys = mixture_batch(2000, d, seed=3)
    plan = binned.plan_grid(keys, h2, tol=tol)
    assert plan.spacing <= np.sqrt(h2) / 8 and plan.tol == tol and plan.dim == d
    assert plan.scale == pytest.approx(np.ptp(keys, axis=0).max())
    queries = queries_for(keys, seed=4, n_far=0)
    error, _ = raw_mean_errors(queries, keys, h2, plan)
    assert len(error) == len(queries) and error.max() <= tol * plan.scale


def test_spatial_order_sorts_points_by_grid_cell():
    points = np.random.default_rng(9).uniform(-2.0, 3.0, (300, 2))
    order = binned.spatial_order(points, 0.4)
    cells = [tuple(int(c) for c in np.floor((point - points.min(axis=0)) / 0.4)) for point in points]
    assert sorted(order.tolist()) == list(range(300))
    assert [cells[i] for i in order] == sorted(cells)


# --- accuracy against the exact path -------------------------------------------------------

CASES = [
    # d, h2 (data range ~ 8), tol
    (1, 0.002, 1e-6),
    (1, 0.002, 1e-10),
    (1, 0.05, 1e-9),
    (1, 1.0, 1e-12),
    (1, 50.0, 1e-9),
    (2, 0.05, 1e-6),
    (2, 0.5, 1e-9),
    (2, 20.0, 1e-10),
    (3, 2.0, 1e-6),
    pytest.param(3, 20.0, 1e-10, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("d,h2,tol", CASES)
def test_kernel_mean_within_tolerance(d, h2, tol):
    keys = mixture_batch(2000, d, seed=1)
    queries = queries_for(keys, seed=2)
    res, _ = check_mean(queries, keys, h2, tol)
    assert res.exact[-20:].sum() >= 1  # some far queries leave the grid
    assert not res.exact[:200].all()


@pytest.mark.parametrize("d,h2,tol", CASES)
def test_raw_grid_error_within_the_reported_bound(d, h2, tol):
    """Where the bound is finite, it holds: also in the tails, where it exceeds tol."""
    keys = mixture_batch(2000, d, seed=3)
    queries = queries_for(keys, seed=4)
    plan = binned._plan(d, h2, tol, binned._default_scale(keys, h2), "mean")
    error, bound = raw_mean_errors(queries, keys, h2, plan)
    assert len(error) > 200
    assert np.all(error <= bound)


@pytest.mark.parametrize(
    "d,h2,tol", [(1, 0.01, 1e-9), (1, 3.0, 1e-12), (2, 0.3, 1e-7), (2, 10.0, 1e-10), (3, 4.0, 1e-8)]
)
def test_log_kde_and_logsumexp_within_tolerance(d, h2, tol):
    keys = mixture_batch(1500, d, seed=5)
    queries = queries_for(keys, seed=6)
    res = binned.log_kde(queries, keys, h2, tol=tol, full_output=True)
    error = np.abs(res.values - kernels.log_kde(queries, keys, h2))
    assert np.all(error <= res.error_bound + 1e-13) and error.max() <= tol
    lse = binned.kernel_logsumexp(queries, keys, h2, tol=tol)
    assert np.abs(lse - kernels.kernel_logsumexp(queries, keys, h2)).max() <= tol


@pytest.mark.parametrize("d,h2", [(1, 0.02), (2, 0.4), pytest.param(3, 3.0, marks=pytest.mark.slow)])
def test_kde_score_within_tolerance(d, h2):
    keys = mixture_batch(1500, d, seed=7)
    queries = queries_for(keys, seed=8)
    res = binned.kde_score(queries, keys, h2, tol=1e-8, full_output=True)
    error = np.abs(res.values - kernels.kde_score(queries, keys, h2)).max(axis=1)
    assert np.all(error <= res.error_bound + 1e-14 * res.plan.scale / h2)
    assert error.max() <= 1e-8 * res.plan.scale / h2


@settings(max_examples=25)
@given(point_clouds(min_n=1, max_n=40, min_d=1, max_d=3), st.data())
def test_kernel_mean_property(keys, data):
    """Any bounded cloud, bandwidth and tolerance: within tol of exact, and translation equivariant.

    In 3-D the bandwidth starts at 4 (coordinates in [-5, 5]): the grid stays small.
    """
    d = keys.shape[1]
    h2 = data.draw(log_uniform(0.05 if d < 3 else 4.0, 20.0))
    tol = data.draw(st.sampled_from([1e-4, 1e-7]))
    queries = data.draw(point_clouds(min_n=1, max_n=10, d=d))
    res, _ = check_mean(queries, keys, h2, tol)
    shift = data.draw(point_clouds(min_n=1, max_n=1, d=d))[0]
    moved = binned.kernel_mean(queries + shift, keys + shift, h2, tol=tol)
    np.testing.assert_allclose(moved - shift, res.values, atol=2 * tol * res.plan.scale + 1e-12)


def test_self_attention_shares_the_stencil():
    keys = mixture_batch(3000, 2, seed=9)
    same = binned.kernel_mean(keys, keys, 0.1, tol=1e-8)
    copy = binned.kernel_mean(keys.copy(), keys, 0.1, tol=1e-8)
    np.testing.assert_allclose(same, copy, atol=1e-14 * np.ptp(keys))


def test_far_queries_use_the_exact_path():
    keys = mixture_batch(500, 1, seed=10)
    far = np.array([[1e3], [-50.0]])
    res = binned.kernel_mean(far, keys, 0.01, tol=1e-9, full_output=True)
    assert res.exact.all()
    np.testing.assert_array_equal(res.values, kernels.kernel_mean(far, keys, 0.01))


def contracted_tokens_and_noisy_queries(n, seed):
    """E2's Stage 2 in small: keys N(0, 0.25) (refined tokens), queries N(0, 0.75) (noisy tokens), h2 = sigma2 = 0.5."""
    rng = np.random.default_rng(seed)
    return 0.5 * rng.standard_normal((n, 1)), np.sqrt(0.75) * rng.standard_normal((n, 1))


@pytest.mark.parametrize("target", ["mean", "log"])
def test_tail_queries_are_computed_again_on_a_finer_grid(target):
    keys, queries = contracted_tokens_and_noisy_queries(16384, seed=21)
    h2, tol = 0.5, (1e-7 if target == "mean" else 1e-9)
    plan = binned._plan(1, h2, tol, binned._default_scale(keys, h2), target)
    grid_pass, limit = ((binned._mean_pass, tol * plan.scale) if target == "mean" else (binned._logsumexp_pass, tol))
    _, _, missed, _ = grid_pass(queries, keys, plan, limit)
    assert missed.sum() >= 100  # the first grid's bound misses the tolerance in the tails ...
    if target == "mean":
        res = binned.kernel_mean(queries, keys, h2, tol=tol, full_output=True)
        exact = kernels.kernel_mean(queries[missed], keys, h2)
        error = np.abs(res.values[missed] - exact).max(axis=1)
    else:
        res = binned.kernel_logsumexp(queries, keys, h2, tol=tol, full_output=True)
        error = np.abs(res.values[missed] - kernels.kernel_logsumexp(queries[missed], keys, h2))
    assert not res.exact.any()  # ... the finer grid meets it at every one of them
    assert np.all(res.error_bound[missed] > 0) and res.error_bound.max() <= limit
    assert np.all(error <= res.error_bound[missed] + 1e-14 * max(1.0, plan.scale))


def test_queries_the_finer_grid_cannot_meet_go_to_the_exact_path():
    rng = np.random.default_rng(23)
    keys = 0.5 * rng.standard_normal((65536, 1))
    far = np.concatenate([rng.uniform(2, 5, (40, 1)), -rng.uniform(2, 5, (40, 1))])  # 4 to 10 sd out
    h2, tol = 0.25, 1e-9
    res = binned.kernel_mean(far, keys, h2, tol=tol, full_output=True)
    refined = ~res.exact & (res.error_bound > 0)
    assert refined.any() and res.exact.any()  # some met on the finer grid, the farthest not
    error = np.abs(res.values - kernels.kernel_mean(far, keys, h2)).max(axis=1)
    assert np.all(error <= res.error_bound + 1e-14 * res.plan.scale) and res.error_bound.max() <= tol * res.plan.scale
    assert error[res.exact].max() <= 1e-14 * res.plan.scale


def test_the_finer_grid_is_taken_only_where_it_is_the_cheaper():
    keys, queries = contracted_tokens_and_noisy_queries(4096, seed=22)
    h2, tol = 0.5, 1e-7
    plan = binned._plan(1, h2, tol, binned._default_scale(keys, h2), "mean")
    _, _, missed, _ = binned._mean_pass(queries, keys, plan, tol * plan.scale)
    # too few pairs for the finer grid to be the cheaper: the exact path takes them
    assert missed.any() and not binned._grid_applies(missed.sum() * len(keys), keys, h2, tol * binned.REFINE_TOL,
                                                     plan.scale, "mean")
    res = binned.kernel_mean(queries, keys, h2, tol=tol, full_output=True)
    np.testing.assert_array_equal(res.exact, missed)
    np.testing.assert_array_equal(res.values[missed], kernels.kernel_mean(queries[missed], keys, h2))


# --- the tests can fail --------------------------------------------------------------------


@pytest.fixture
def fresh_plans():
    """Plans are cached; a test that patches how they are made must not see (or leave) cached ones."""
    caches = (binned._plan, binned._spacing_ratio)
    for cached in caches:
        cached.cache_clear()
    yield
    for cached in caches:
        cached.cache_clear()


def test_a_coarse_grid_exceeds_the_tolerance_and_is_caught(monkeypatch, fresh_plans):
    keys = mixture_batch(2000, 1, seed=11)
    h2, tol = 0.05, 1e-9
    fine = binned._plan(1, h2, tol, binned._default_scale(keys, h2), "mean")
    monkeypatch.setattr(binned, "_spacing_ratio", lambda *args: 12 * fine.spacing / np.sqrt(h2))
    binned._plan.cache_clear()
    coarse = binned._plan(1, h2, tol, fine.scale, "mean")
    error, _ = raw_mean_errors(keys, keys, h2, coarse)
    assert error.max() > tol * coarse.scale  # the grid alone misses the tolerance ...
    res, _ = check_mean(keys, keys, h2, tol)  # ... the bound sees it and the exact path repairs it
    assert res.exact.mean() > 0.5


def test_an_unsound_error_bound_is_detected(monkeypatch, fresh_plans):
    keys = mixture_batch(2000, 2, seed=12)
    h2, tol = 0.3, 1e-6
    real = binned._coefficients
    monkeypatch.setattr(binned, "_coefficients", lambda dim, ratio: tuple(c * 1e-5 for c in real(dim, ratio)))
    plan = binned._plan(2, h2, tol, binned._default_scale(keys, h2), "mean")
    error, bound = raw_mean_errors(queries_for(keys, seed=13), keys, h2, plan)
    assert np.any(error > bound)


# --- inputs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"keys": np.zeros((5, 4)), "queries": np.zeros((2, 4))}, "supports d <= 3"),
        ({"tol": 0.0}, "tol == 0.0"),
        ({"tol": 1.0}, "tol == 1.0"),
        ({"tol": np.nan}, "tol == nan"),
        ({"h2": -1.0}, "h2 == -1.0"),
        ({"scale": 0.0}, "scale == 0.0"),
        ({"queries": np.zeros(3)}, "reshape"),
        ({"queries": np.zeros((2, 2))}, "queries has d == 2"),
        ({"keys": np.array([[np.inf]])}, "keys contains nan or inf"),
        ({"keys": np.c_[np.arange(50.0), np.arange(50.0)], "queries": np.zeros((2, 2)), "h2": 1e-6}, "MAX_GRID_CELLS"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, match):
    args = {"queries": np.zeros((2, 1)), "keys": np.linspace(0, 10, 50)[:, None], "h2": 0.1} | kwargs
    with pytest.raises(ValueError, match=match):
        binned.kernel_mean(args.pop("queries"), args.pop("keys"), args.pop("h2"), **args)


def test_bad_plan_and_backend_options():
    with pytest.raises(ValueError, match="target == 'mode'"):
        binned.plan_grid(np.zeros((3, 1)), 0.1, target="mode")
    with pytest.raises(ValueError, match="backend == 'tpu'"):
        flow.velocity(np.zeros((3, 1)), 0.1, backend="tpu")
    with pytest.raises(ValueError, match="tol == 2.0"):
        flow.particle_flow(np.zeros((3, 1)), 0.1, 1.0, backend="binned", tol=2.0)
    with pytest.raises(ValueError, match="supports d <= 3"):
        flow.particle_flow(np.zeros((3, 4)), 0.1, 1.0, backend="binned")


def test_auto_backend_rule():
    rng = np.random.default_rng(0)
    small, large = np.zeros((100, 2)), rng.normal(size=(5000, 2))
    assert binned.resolve_backend("auto", 100, small, 0.1) == "exact"
    assert binned.resolve_backend("auto", 5000, large[:, :1], 0.1) == "binned"
    # in 2-D the grid costs about AUTO_PAIRS_PER_CELL exact pairs per cell: exact at 5000 tokens, binned at 40000
    assert binned.resolve_backend("auto", 5000, large, 0.1) == "exact"
    assert binned.resolve_backend("auto", 40000, rng.normal(size=(40000, 2)), 0.1) == "binned"
    assert binned.resolve_backend("auto", 5000, np.zeros((5000, 3)), 0.1) == "exact"
    assert binned.resolve_backend("auto", 5000, large, 1e-8, tol=1e-12) == "exact"  # grid too large
    assert binned.resolve_backend("exact", 5000, large, 0.1) == "exact"


def test_auto_takes_the_grid_from_1024_tokens_in_1d_and_4096_in_2d():
    """In 1-D the grid is cheaper than the exact sums from about 1000 tokens (AUTO_MIN_PAIRS_1D's measurements)."""
    rng = np.random.default_rng(1)
    line, plane = rng.normal(size=(4096, 1)), rng.normal(size=(4096, 2))
    assert binned.resolve_backend("auto", 1024, line[:1024], 0.1) == "binned"
    assert binned.resolve_backend("auto", 1023, line[:1024], 0.1) == "exact"
    assert binned.resolve_backend("auto", 2048, plane[:2048], 0.1) == "exact"
    assert binned.resolve_backend("auto", 4096, plane, 0.1) == "exact"  # the grid's cells cost more here


# --- the flow and the estimators ---------------------------------------------------------------


def test_binned_velocity_within_tolerance_of_exact():
    x = mixture_batch(3000, 2, seed=14)
    fast = flow.velocity(x, 0.05, backend="binned", tol=1e-7)
    assert np.abs(fast - flow.velocity(x, 0.05)).max() <= 1e-7 * np.ptp(x, axis=0).max()


def test_exact_backend_is_the_previous_flow_bit_for_bit():
    x = mixture_batch(300, 2, seed=15)
    tokens = x
    for _ in range(4):
        tokens = tokens + 0.25 * (kernels.kernel_mean(tokens, tokens, 0.2) - tokens)
    np.testing.assert_array_equal(flow.particle_flow(x, 0.2, 1.0, eta=0.25), tokens)
    np.testing.assert_array_equal(flow.particle_flow(x, 0.2, 1.0, eta=0.25, backend="auto"), tokens)


@pytest.mark.parametrize("d,h2,tol", [(1, 0.1, 1e-8), (2, 0.1, 1e-8), pytest.param(3, 4.0, 1e-6, marks=pytest.mark.slow)])
def test_binned_flow_is_the_layer_map_of_binned_sums(d, h2, tol):
    """Every layer uses the grid of depth 0 (same tolerance and scale) on tokens sorted by cell."""
    x = mixture_batch(1000, d, seed=16)
    scale = binned.plan_grid(x, h2, tol=tol).scale
    tokens = x
    for _ in range(10):
        tokens = tokens + 0.1 * (binned.kernel_mean(tokens, tokens, h2, tol=tol, scale=scale) - tokens)
    res = flow.particle_flow(x, h2, 1.0, eta=0.1, backend="binned", tol=tol, record=[0.0, 1.0])
    np.testing.assert_allclose(res.tokens, tokens, atol=1e-12 * scale)
    np.testing.assert_array_equal(res.trajectory[0], x)
    exact_energy = -h2 * kernels.kernel_logsumexp(res.tokens, res.tokens, h2)
    assert np.abs(res.energy[-1] - exact_energy).max() <= h2 * tol
    # the exact flow from the same start stays close (here: well inside 100 layers x tol)
    ref = flow.particle_flow(x, h2, 1.0, eta=0.1)
    assert np.abs(res.tokens - ref).max() <= 100 * tol * scale


def test_binned_ode_agrees_with_exact_ode():
    x = mixture_batch(400, 1, seed=17)
    kw = {"method": "ode", "rtol": 1e-9, "atol": 1e-11}
    fast = flow.particle_flow(x, 0.1, 1.0, backend="binned", tol=1e-12, **kw)
    np.testing.assert_allclose(fast, flow.particle_flow(x, 0.1, 1.0, **kw), atol=1e-7)


def test_estimators_on_the_binned_path():
    x = mixture_batch(2000, 2, seed=18)
    q = x[:100] + 0.1
    sigma2, h2, tol = 0.5, 0.1, 1e-8
    scale = np.ptp(x, axis=0).max()
    for make in (
        lambda b: estimators.StageTwoOnly(sigma2, backend=b, tol=tol),
        lambda b: estimators.TweedieKDE(sigma2, h2, backend=b, tol=tol),
    ):
        fast, exact = make("binned").fit(x).denoise(q), make("exact").fit(x).denoise(q)
        assert np.abs(fast - exact).max() <= sigma2 / min(sigma2, h2) * tol * scale
        np.testing.assert_array_equal(make("auto").fit(x).denoise(q), exact)  # 100 x 2000 < 4096**2
    two = estimators.TwoStageDenoiser(sigma2, h2, T=0.5, eta=0.1, backend="binned", tol=tol).fit(x)
    ref = estimators.TwoStageDenoiser(sigma2, h2, T=0.5, eta=0.1).fit(x)
    assert np.abs(two.particles_ - ref.particles_).max() <= 100 * tol * scale
    assert np.abs(two.denoise(q) - ref.denoise(q)).max() <= 100 * tol * scale


@pytest.mark.parametrize("est", [
    estimators.TwoStageDenoiser(0.5, 0.1, backend="grid"),
    estimators.StageTwoOnly(0.5, tol=0.0),
    estimators.TweedieKDE(0.5, 0.1, tol=-1.0),
])
def test_estimator_backend_options_are_checked_at_fit(est):
    with pytest.raises(ValueError, match="backend == 'grid'|tol == "):
        est.fit(mixture_batch(50, 1, seed=0))


@pytest.mark.slow
@pytest.mark.parametrize("d,h2,tol", [(1, 0.05, 1e-9), (2, 0.05, 1e-6), (3, 2.0, 1e-6)])
def test_large_self_attention_on_a_subsample(d, h2, tol):
    keys = mixture_batch(1_000_000, d, seed=19)
    res = binned.kernel_mean(keys, keys, h2, tol=tol, full_output=True)
    sample = np.random.default_rng(20).choice(len(keys), 2000, replace=False)
    error = np.abs(res.values[sample] - kernels.kernel_mean(keys[sample], keys, h2)).max(axis=1)
    assert np.all(error <= res.error_bound[sample] + 1e-14 * res.plan.scale)
    assert error.max() <= tol * res.plan.scale
