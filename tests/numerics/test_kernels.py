import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax
from scipy.stats import multivariate_normal

from attneb import numerics
from attneb.numerics import kernels
from tests.strategies import bandwidths, log_uniform, point_clouds, queries_and_keys, rotations


def naive_kernel_mean(q, k, h2):
    """Straightforward form: broadcast differences, then a softmax."""
    logits = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / (2 * h2)
    return softmax(logits, axis=1) @ k


@given(queries_and_keys(), bandwidths)
def test_kernel_mean_matches_naive_softmax(qk, h2):
    q, k = qk
    np.testing.assert_allclose(kernels.kernel_mean(q, k, h2), naive_kernel_mean(q, k, h2), atol=1e-10, rtol=0)


def test_log_kde_matches_scipy_gaussian_densities():
    rng = np.random.default_rng(0)
    q, k, h2 = rng.normal(size=(7, 3)), rng.normal(size=(11, 3)), 0.7
    dens = np.array([[multivariate_normal(kj, h2 * np.eye(3)).logpdf(qi) for kj in k] for qi in q])
    np.testing.assert_allclose(kernels.log_kde(q, k, h2), logsumexp(dens, axis=1) - np.log(len(k)), rtol=1e-12)


def test_kde_score_matches_finite_differences_of_log_kde():
    rng = np.random.default_rng(1)
    q, k, h2, step = rng.normal(size=(5, 2)), rng.normal(size=(9, 2)), 0.4, 1e-5
    fd = np.stack(
        [(kernels.log_kde(q + step * e, k, h2) - kernels.log_kde(q - step * e, k, h2)) / (2 * step) for e in np.eye(2)],
        axis=1,
    )
    np.testing.assert_allclose(kernels.kde_score(q, k, h2), fd, atol=1e-7)


@pytest.mark.parametrize("budget", [64, 1024, 10_000])
def test_blocked_sums_equal_unblocked(budget):
    rng = np.random.default_rng(2)
    q, k, h2 = rng.normal(size=(37, 2)), rng.normal(size=(53, 2)), 0.3
    big = kernels.DEFAULT_BUDGET_BYTES
    np.testing.assert_allclose(
        kernels.kernel_mean(q, k, h2, budget_bytes=budget), kernels.kernel_mean(q, k, h2, budget_bytes=big), atol=1e-13
    )
    np.testing.assert_allclose(
        kernels.log_kde(q, k, h2, budget_bytes=budget), kernels.log_kde(q, k, h2, budget_bytes=big), atol=1e-12
    )


def test_tiles_respect_budget():
    for m, n, budget in [(10**6, 10**6, 2**20), (5, 10**9, 2**20), (10**4, 3, 2**28), (7, 9, 64), (7, 9, 8)]:
        rows, cols = kernels._tile_shape(m, n, budget)
        assert 1 <= rows <= m and 1 <= cols <= n
        assert rows * cols * 8 <= max(budget // 2, 8)


@given(queries_and_keys(), bandwidths, st.randoms(use_true_random=False))
def test_invariant_to_key_order_and_equivariant_to_query_order(qk, h2, random):
    q, k = qk
    pk, pq = list(range(len(k))), list(range(len(q)))
    random.shuffle(pk)
    random.shuffle(pq)
    base = kernels.kernel_mean(q, k, h2)
    np.testing.assert_allclose(kernels.kernel_mean(q[pq], k[pk], h2), base[pq], atol=1e-11)
    np.testing.assert_allclose(kernels.log_kde(q, k[pk], h2), kernels.log_kde(q, k, h2), atol=1e-11)


@given(queries_and_keys(), bandwidths, st.data())
def test_translation_and_rotation_equivariance(qk, h2, data):
    q, k = qk
    d = q.shape[1]
    shift = data.draw(point_clouds(min_n=1, max_n=1, d=d))[0]
    rot = data.draw(rotations(d))
    base = kernels.kernel_mean(q, k, h2)
    np.testing.assert_allclose(kernels.kernel_mean(q + shift, k + shift, h2), base + shift, atol=1e-9)
    np.testing.assert_allclose(kernels.kernel_mean(q @ rot.T, k @ rot.T, h2), base @ rot.T, atol=1e-9)
    np.testing.assert_allclose(kernels.log_kde(q @ rot.T + shift, k @ rot.T + shift, h2), kernels.log_kde(q, k, h2), atol=1e-9)


@given(queries_and_keys(), st.floats(1e-3, 1e3), st.data())
def test_kernel_mean_lies_in_convex_hull_of_keys(qk, h2, data):
    q, k = qk
    out = kernels.kernel_mean(q, k, h2)
    directions = data.draw(point_clouds(min_n=4, max_n=4, d=q.shape[1]))
    for u in np.vstack([np.eye(q.shape[1]), directions]):
        proj_keys, proj_out = k @ u, out @ u
        slack = 1e-9 * (1 + np.abs(proj_keys).max())
        assert np.all(proj_out >= proj_keys.min() - slack) and np.all(proj_out <= proj_keys.max() + slack)


def test_small_bandwidth_limit_is_nearest_key():
    rng = np.random.default_rng(3)
    k = rng.normal(size=(50, 2))
    q = k[:10] + 1e-3 * rng.normal(size=(10, 2))
    for scale in (1.0, 1e3):
        out = kernels.kernel_mean(q * scale, k * scale, 1e-8 * scale**2)
        np.testing.assert_allclose(out, k[:10] * scale, rtol=0, atol=1e-12 * scale)


def test_large_bandwidth_limit_is_plain_mean():
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(10, 2)), rng.normal(size=(50, 2))
    out = kernels.kernel_mean(q, k, 1e8)
    # first-order correction is cov(k) (q - kbar) / h2, of size ~1e-8
    np.testing.assert_allclose(out, np.broadcast_to(k.mean(0), out.shape), atol=1e-7)
    lkde = kernels.log_kde(q, k, 1e8)
    np.testing.assert_allclose(lkde, -np.log(2 * np.pi * 1e8), atol=1e-7)


@pytest.mark.parametrize("h2", [1e-8, 1e-4, 1.0, 1e4, 1e8])
@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_finite_for_extreme_bandwidths_and_far_queries(h2, offset):
    rng = np.random.default_rng(5)
    k = rng.normal(size=(30, 2))
    q = np.vstack([k[:3], k[:3] + 50.0, k[:3] + offset])
    for f in (kernels.kernel_mean, kernels.log_kde, kernels.kde_score, kernels.kernel_logsumexp):
        assert np.all(np.isfinite(f(q, k, h2)))


@given(queries_and_keys(), bandwidths, st.integers(0, 500))
def test_power_of_two_scaling_is_exact(qk, h2, e):
    """Points scaled by 2**e (with h2 by 4**e) give the kernel means scaled by 2**e, bit for bit."""
    q, k = qk
    assume(max(np.abs(q).max(), np.abs(k).max()) >= 1.0)  # then both are scaled to the same points
    big = dict(queries=np.ldexp(q, e), keys=np.ldexp(k, e), h2=np.ldexp(h2, 2 * e))
    np.testing.assert_array_equal(np.ldexp(kernels.kernel_mean(**big), -e), kernels.kernel_mean(q, k, h2))
    np.testing.assert_array_equal(kernels.kernel_logsumexp(**big), kernels.kernel_logsumexp(q, k, h2))


@pytest.mark.parametrize("e", [510, 520])
def test_coordinates_too_large_to_square_are_scaled(e):
    """Points near 1e155, whose squares overflow, give the results of the same points scaled down."""
    rng = np.random.default_rng(11)
    k = rng.uniform(-1, 1, size=(40, 2))
    q = np.vstack([k[:5], rng.uniform(-1, 1, size=(5, 2))])
    h2 = 2.0**-20
    for func, power in ((kernels.kernel_mean, e), (kernels.kde_score, -e), (kernels.kernel_logsumexp, 0)):
        big = func(np.ldexp(q, e), np.ldexp(k, e), np.ldexp(h2, 2 * e))
        np.testing.assert_array_equal(big, np.ldexp(func(q, k, h2), power))


@pytest.mark.parametrize("points,h2,msg", [
    (np.random.default_rng(12).normal(size=(20, 2)) * 1e155, 1.0, r"h2 == 1.0 is too small for coordinates up to \d\.\d+e\+155"),
    (np.random.default_rng(12).normal(size=(20, 2)), 1e-302, r"h2 == 1e-302 is too small for the spread .* 2\*\*1000"),
    (np.zeros((3, 2)), 5e-324, r"h2 == 5e-324 is too small .* smallest normal number"),
])
def test_distances_beyond_float_range_are_named(points, h2, msg):
    for func in (kernels.kernel_mean, kernels.log_kde, kernels.kde_score, kernels.kernel_logsumexp):
        with pytest.raises(ValueError, match=msg):
            func(points, points, h2)


BAD_ARRAYS = [
    (np.zeros(3), ValueError, "Reshape your data using array.reshape"),
    (np.array([[np.nan, 0.0]]), ValueError, "nan or inf"),
    (np.array([[np.inf, 0.0]]), ValueError, "nan or inf"),
    (np.zeros((0, 2)), ValueError, "empty"),
    (np.array([["a", "b"]]), TypeError, "real numbers"),
    (np.array([[1j, 0]]), TypeError, "complex"),
]


@pytest.mark.parametrize("func", [kernels.kernel_mean, kernels.log_kde, kernels.kde_score])
@pytest.mark.parametrize("bad,exc,msg", BAD_ARRAYS)
def test_bad_arrays_are_named(func, bad, exc, msg):
    good = np.zeros((2, 2))
    with pytest.raises(exc, match=msg) as info:
        func(bad, good, 1.0)
    assert "queries" in str(info.value)
    with pytest.raises(exc, match=msg) as info:
        func(good, bad, 1.0)
    assert "keys" in str(info.value)


@pytest.mark.parametrize("h2,exc", [(0.0, ValueError), (-1.0, ValueError), (np.nan, ValueError), (np.inf, ValueError), ("1", TypeError)])
def test_bad_bandwidth(h2, exc):
    with pytest.raises(exc, match="h2"):
        kernels.kernel_mean(np.zeros((1, 1)), np.zeros((1, 1)), h2)


def test_mismatched_dimensions():
    with pytest.raises(ValueError, match=r"queries has d == 2 .* keys has d == 3"):
        kernels.kernel_mean(np.zeros((1, 2)), np.zeros((4, 3)), 1.0)


# --- implementations and threads ---------------------------------------------------------


@pytest.fixture
def restore_kernel_config():
    accelerator, threads = kernels.get_accelerator(), kernels.get_num_threads()
    yield
    kernels.set_accelerator(accelerator)
    kernels.set_num_threads(threads)


def clouds_with_far_queries(d, m=150, n=230, seed=6):
    """Keys, and queries near them plus a few so far that the first pass underflows."""
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, d))
    queries = np.vstack([rng.normal(size=(m, d)), keys[:3] + 40.0])
    return queries, keys


def all_sums(q, k, h2, budget):
    return (
        kernels.kernel_mean(q, k, h2, budget_bytes=budget),
        kernels.log_kde(q, k, h2, budget_bytes=budget),
        kernels.kernel_logsumexp(q, k, h2, budget_bytes=budget),
        kernels.kde_score(q, k, h2, budget_bytes=budget),
    )


@pytest.mark.usefixtures("restore_kernel_config")
@pytest.mark.parametrize("d", [1, 2, 3, 16])
@pytest.mark.parametrize("h2", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("budget", [3000, kernels.DEFAULT_BUDGET_BYTES])
@pytest.mark.parametrize("self_attention", [False, True])
def test_numba_path_matches_numpy_path(d, h2, budget, self_attention):
    pytest.importorskip("numba")
    q, k = clouds_with_far_queries(d)
    if self_attention:
        q = k
    kernels.set_accelerator("numpy")
    expected = all_sums(q, k, h2, budget)
    kernels.set_accelerator("numba")
    got = all_sums(q, k, h2, budget)
    scale = np.abs(k).max()
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12, atol=1e-12 * scale)
    # log-sums: an absolute 1e-12 is a relative 1e-12 on the sums
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[3], expected[3], rtol=1e-12, atol=1e-12 * scale / h2)


def use(accelerator):
    if accelerator == "numba":
        pytest.importorskip("numba")
    kernels.set_accelerator(accelerator)


@pytest.mark.usefixtures("restore_kernel_config")
@pytest.mark.parametrize("accelerator", ["numpy", "numba"])
def test_threads_do_not_change_results(accelerator):
    use(accelerator)
    rng = np.random.default_rng(7)
    x = rng.normal(size=(1100, 2))
    assert x.shape[0] ** 2 >= kernels._MIN_PARALLEL_ENTRIES

    def sums():
        return (
            kernels.kernel_mean(x, x, 0.05),  # tokens attending to themselves
            kernels.kernel_mean(x[:900], x, 0.05),
            kernels.log_kde(x + 30.0, x, 0.05),  # recomputed with a running maximum
        )

    kernels.set_num_threads(1)
    single = sums()
    kernels.set_num_threads(3)
    for a, b in zip(single, sums()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("restore_kernel_config")
@pytest.mark.parametrize("accelerator", ["numpy", "numba"])
@pytest.mark.parametrize("budget", [3000, 300_000, kernels.DEFAULT_BUDGET_BYTES])
def test_symmetric_sums_match_general_sums(accelerator, budget):
    use(accelerator)
    x = np.random.default_rng(9).normal(size=(700, 3))
    a, bt, values = kernels._operands(x, x, 0.3, 3)
    general = kernels._general_sums(a, bt, values, budget)
    symmetric = kernels._symmetric_sums(a, bt, values, budget)
    np.testing.assert_allclose(symmetric[:, 0], general[:, 0], rtol=1e-12)
    means = [sums[:, 1:] / sums[:, :1] for sums in (symmetric, general)]
    np.testing.assert_allclose(*means, rtol=0, atol=1e-12 * np.abs(x).max())


@given(point_clouds(max_n=40), log_uniform(1e-12, 1e3))
def test_clipping_is_left_out_only_where_no_logit_rounds_up(x, h2):
    a, bt, values = kernels._operands(x, x, h2, x.shape[1])
    if kernels._must_clip(a, bt):
        return
    assert (a @ bt).max() <= 2.0**-20
    clipped = kernels._symmetric_sums(a, bt, values, 3000, clip=True)
    unclipped = kernels._symmetric_sums(a, bt, values, 3000, clip=False)
    # a weight moves by a factor of at most exp(2**-20) without the clipping
    assert np.all(np.abs(unclipped - clipped) <= 2.0**-19 * clipped[:, :1] * np.abs(values).max())


@pytest.mark.usefixtures("restore_kernel_config")
@pytest.mark.parametrize("accelerator", ["numpy", "numba"])
def test_tokens_attending_to_themselves_match_naive_softmax(accelerator):
    use(accelerator)
    x = np.random.default_rng(10).normal(size=(500, 2))
    got = kernels.kernel_mean(x, x.copy(), 0.2, budget_bytes=5000)
    np.testing.assert_allclose(got, naive_kernel_mean(x, x, 0.2), rtol=0, atol=1e-13)


@pytest.mark.usefixtures("restore_kernel_config")
@pytest.mark.parametrize("accelerator", ["numpy", "numba"])
def test_underflowing_rows_are_recomputed_exactly(accelerator):
    use(accelerator)
    rng = np.random.default_rng(8)
    k = rng.normal(size=(40, 2))
    q = np.vstack([k[:2], k[:5] + 6.0])
    h2 = 1e-3
    logits = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / (2 * h2)
    assert np.all(logsumexp(logits[2:], axis=1) < np.log(kernels._MIN_SUM))
    np.testing.assert_allclose(kernels.kernel_logsumexp(q, k, h2), logsumexp(logits, axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernels.kernel_mean(q, k, h2), softmax(logits, axis=1) @ k, rtol=0, atol=1e-12)


@pytest.mark.usefixtures("restore_kernel_config")
def test_auto_falls_back_to_numpy_without_numba(monkeypatch):
    q, k = clouds_with_far_queries(2)
    kernels.set_accelerator("numpy")
    expected = all_sums(q, k, 0.5, kernels.DEFAULT_BUDGET_BYTES)
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.delitem(sys.modules, "attneb.numerics._accel", raising=False)
    monkeypatch.delattr(numerics, "_accel", raising=False)
    kernels.set_accelerator("auto")
    assert kernels._accelerator_for(2) is None
    for got, want in zip(all_sums(q, k, 0.5, kernels.DEFAULT_BUDGET_BYTES), expected):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ImportError, match="pip install numba"):
        kernels.set_accelerator("numba")
    assert kernels.get_accelerator() == "auto"


@pytest.mark.usefixtures("restore_kernel_config")
def test_auto_uses_numba_for_small_dimensions_only():
    pytest.importorskip("numba")
    kernels.set_accelerator("auto")
    assert kernels._accelerator_for(kernels._AUTO_NUMBA_MAX_DIM) is not None
    assert kernels._accelerator_for(kernels._AUTO_NUMBA_MAX_DIM + 1) is None


@pytest.mark.usefixtures("restore_kernel_config")
def test_default_threads_follow_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    kernels.set_num_threads()
    assert kernels.get_num_threads() == 1


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="'cuda' is not a known option"):
        kernels.set_accelerator("cuda")
    with pytest.raises(ValueError, match="n == 0"):
        kernels.set_num_threads(0)


def ulps_from_exp(got, x):
    """``|got - exp(x)|`` in units of the last place of ``exp(x)``, against mpmath at 120 bits."""
    import mpmath

    with mpmath.workprec(120):
        exact = mpmath.exp(mpmath.mpf(float(x)))
        return float(abs(mpmath.mpf(float(got)) - exact)) / np.spacing(float(exact))


def test_vectorised_exponential_is_within_1_ulp_on_a_grid():
    pytest.importorskip("numba")
    from attneb.numerics._accel import exp_nonpositive

    # the reduced argument sweeps [-ln(2)/2, ln(2)/2] many times; tiny arguments; exactly 0
    x = np.concatenate([np.linspace(-708.0, 0.0, 20001), -np.geomspace(1e-300, 1.0, 2001), [0.0, -0.0]])
    assert max(ulps_from_exp(exp_nonpositive(v), v) for v in x) <= 1.0
    assert exp_nonpositive(-708.5) == exp_nonpositive(-1e300) == exp_nonpositive(-708.0)


@given(st.floats(-708.0, 0.0))
def test_vectorised_exponential_is_within_1_ulp(x):
    pytest.importorskip("numba")
    from attneb.numerics._accel import exp_nonpositive

    assert ulps_from_exp(exp_nonpositive(x), x) <= 1.0


def test_numba_path_is_bit_identical_between_a_fresh_compile_and_numba_cache(tmp_path):
    """A second process that loads the kernels from numba's cache gives the bits of the first,
    which compiled them; even after loading a kernel's callee on its own first, which bound the
    calls of kernels that called other jitted functions to another compilation of the callee."""
    pytest.importorskip("numba")
    import subprocess

    code = ("import numpy as np, sys; from numerics import kernels, _accel; "
            "sys.argv[1] == 'callee-first' and _accel.exp_nonpositive(-1.0); "
            "x = np.random.default_rng(0).normal(size=(1100, 2)); q = np.random.default_rng(1).normal(size=(50, 2)); "
            "sys.stdout.write(np.concatenate([kernels.kernel_mean(x, x, 0.5).ravel(), "
            "kernels.kernel_mean(q, x, 0.5).ravel(), kernels.log_kde(x + 20.0, x, 0.5)]).tobytes().hex())")
    env = dict(os.environ, ATTNEB_ACCELERATOR="numba", NUMBA_CACHE_DIR=str(tmp_path))

    def run(mode):
        return subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True,
                              env=env).stdout

    fresh = run("plain")
    assert any(tmp_path.rglob("*symmetric_row_sums*.nbi")), "the first process saved no cache"
    assert run("callee-first") == fresh


def test_default_path_is_bit_identical_in_a_fresh_process():
    """The default accelerator gives the same bits in another process (sweep rows depend on it)."""
    import subprocess

    code = ("import numpy as np, sys; from numerics import kernels; "
            "x = np.random.default_rng(0).normal(size=(300, 2)); q = np.random.default_rng(1).normal(size=(50, 2)); "
            "sys.stdout.write(np.concatenate([kernels.kernel_mean(x, x, 0.5).ravel(), "
            "kernels.kernel_mean(q, x, 0.5).ravel(), kernels.log_kde(q, x, 0.5)]).tobytes().hex())")
    env = {k: v for k, v in os.environ.items() if k != "ATTNEB_ACCELERATOR"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
            for _ in range(2)]
    x = np.random.default_rng(0).normal(size=(300, 2))
    q = np.random.default_rng(1).normal(size=(50, 2))
    here = np.concatenate([kernels.kernel_mean(x, x, 0.5).ravel(), kernels.kernel_mean(q, x, 0.5).ravel(),
                           kernels.log_kde(q, x, 0.5)]).tobytes().hex()
    assert kernels.get_accelerator() == "numpy"
    assert runs[0] == runs[1] == here


@given(queries_and_keys(), bandwidths)
def test_kernel_logsumexp_matches_scipy_logsumexp(qk, h2):
    q, k = qk
    logits = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / (2 * h2)
    expected = logsumexp(logits, axis=1)
    np.testing.assert_allclose(kernels.kernel_logsumexp(q, k, h2), expected, rtol=1e-10,
                               atol=1e-10 * (1 + np.abs(logits).max()))
