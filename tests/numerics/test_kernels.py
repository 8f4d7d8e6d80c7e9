import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax
from scipy.stats import multivariate_normal

from numerics import kernels
from tests.strategies import bandwidths, point_clouds, queries_and_keys, rotations


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


def test_block_sizes_respect_budget():
    for m, n, budget in [(10**6, 10**6, 2**20), (5, 10**9, 2**20), (10**4, 3, 2**28)]:
        rows, cols = kernels._block_sizes(m, n, budget)
        assert rows >= 1 and cols >= 1
        assert rows * cols * kernels._TEMPORARIES_PER_ENTRY <= max(budget, kernels._TEMPORARIES_PER_ENTRY)


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
