"""The GPU path against the numpy path. Skipped where no GPU (or Triton's interpreter) is at hand.

Both kernels are tested wherever both apply: the matrix-product kernel (every d) and the direct kernel (d <= 4).
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax

from attneb.numerics import binned, estimators, flow, gpu, kernels

needs_gpu = pytest.mark.skipif(not gpu.available(), reason="needs torch with a CUDA device and triton")
pytestmark = pytest.mark.gpu

FLOAT64_TOLERANCE = 1e-10
KERNELS = ("product", "direct")
use_kernel = gpu._forced_kernel


def _scale(keys):
    return float(np.ptp(keys, axis=0).max())


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=15, deadline=None)
@given(
    d=st.sampled_from([1, 2, 3, 4, 16]),
    m=st.integers(1, 200),
    n=st.integers(1, 300),
    log_h2=st.floats(-4.0, 4.0),
    offset=st.floats(-1e3, 1e3),
    seed=st.integers(0, 2**32 - 1),
)
def test_float64_sums_equal_the_numpy_path(kernel, d, m, n, log_h2, offset, seed):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, d)) + offset
    queries = np.concatenate([keys[: m // 2], rng.normal(scale=3.0, size=(m - m // 2, d)) + offset])
    h2 = 10.0**log_h2
    scale = max(_scale(keys), np.sqrt(h2))
    # the keys attending to themselves: log-sums near 0, so their tolerance is the logits' cancellation (module
    # docstring of numerics.gpu), eps |u|^2 with u the centred keys / sqrt(2 h2), for both paths
    centred = keys - keys.mean(axis=0)
    cancellation = np.finfo(float).eps * (centred**2).sum(axis=1).max() / (2 * h2)
    with use_kernel(kernel):
        for q, lse_atol in ((queries, 0.0), (keys, 8 * cancellation)):
            mean = gpu.kernel_mean(q, keys, h2)
            assert np.abs(mean - kernels.kernel_mean(q, keys, h2)).max() <= FLOAT64_TOLERANCE * scale
            lse = gpu.kernel_logsumexp(q, keys, h2)
            reference = kernels.kernel_logsumexp(q, keys, h2)
            assert np.abs(lse - reference).max() <= FLOAT64_TOLERANCE * (1.0 + np.abs(reference).max()) + lse_atol


def float32_cases(d):
    """The float32 tests' data: 500 keys offset by 50, attending to themselves and queried from 0.5 away, at
    h2 = 0.05, 1, 20: ``(queries, keys, h2)``."""
    rng = np.random.default_rng(d)
    keys = rng.normal(size=(500, d)) + 50.0
    queries = keys + rng.normal(scale=0.5, size=keys.shape)
    return [(q, keys, h2) for h2 in (0.05, 1.0, 20.0) for q in (queries, keys)]


def float32_errors(d, sums=None):
    """Largest error of the float32 kernel mean, / data scale, against the numpy path on :func:`float32_cases`.
    ``sums(queries, keys, h2)`` replaces ``gpu.kernel_mean``'s computation (to test a broken one)."""
    sums = sums or (lambda q, k, h2: gpu.kernel_mean(q, k, h2, precision="float32"))
    return max(np.abs(sums(q, keys, h2) - kernels.kernel_mean(q, keys, h2)).max() / _scale(keys)
               for q, keys, h2 in float32_cases(d))


def float32_lse_errors(d):
    """Largest error of the float32 log-sums against the numpy path on :func:`float32_cases`, in units of
    eps32 (1 + max|u|^2) (``gpu.FLOAT32_LSE_FACTOR``)."""
    eps = np.finfo(np.float32).epsneg
    return max(np.abs(gpu.kernel_logsumexp(q, keys, h2, precision="float32") - kernels.kernel_logsumexp(q, keys, h2))
               .max() / (eps * (1.0 + gpu._logit_scale(q, keys, h2))) for q, keys, h2 in float32_cases(d))


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3, 4, 16])
def test_float32_sums_within_the_stated_tolerance(kernel, d):
    with use_kernel(kernel):
        assert float32_errors(d) <= gpu.FLOAT32_TOLERANCE
        assert float32_lse_errors(d) <= gpu.FLOAT32_LSE_FACTOR


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_without_centring_breaks_the_tolerance(kernel):
    """The float32 test can fail: the same sums on coordinates not centred on the keys' mean (50 from the origin)
    lose the logits to cancellation, in either kernel."""

    def uncentred(queries, keys, h2):
        return gpu._sums(queries, keys, h2, "float32", want_mean=True)[1]

    with use_kernel(kernel):
        assert float32_errors(3, uncentred) > gpu.FLOAT32_TOLERANCE


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", [1, 31, 32, 33, 63, 64, 65, 128, 200])
@pytest.mark.parametrize("d", [2, 3])
def test_key_counts_around_the_block_width(kernel, n, d):
    """The product kernel runs full blocks without masks and the last partial one with them (counts around BLOCK_N =
    32, 64 or 128), the weights' sum by a column of ones in the product (d = 3) or by a reduction (d = 2, no room in
    the padding); the direct kernel masks every block's loads, and its query rows (70) end inside a block."""
    rng = np.random.default_rng(n)
    keys = rng.normal(size=(n, d))
    queries = rng.normal(size=(70, d))
    with use_kernel(kernel):
        np.testing.assert_allclose(gpu.kernel_mean(queries, keys, 0.2), kernels.kernel_mean(queries, keys, 0.2),
                                   rtol=0, atol=FLOAT64_TOLERANCE)
        np.testing.assert_allclose(gpu.kernel_logsumexp(queries, keys, 0.2),
                                   kernels.kernel_logsumexp(queries, keys, 0.2), rtol=FLOAT64_TOLERANCE, atol=0)


@pytest.mark.skipif(not gpu.available() or gpu._interpreted(), reason="needs a CUDA device: the interpreter ignores "
                    "the products' input precision")
def test_float32_logits_in_one_pass_of_tf32_break_the_tolerance(monkeypatch):
    """The float32 test can fail: with the logits' product in plain TF32 (10-bit mantissa) the error passes it."""
    block_m, block_n, warps, stages, _, dot_pv = gpu._CONFIG["float32"]
    monkeypatch.setitem(gpu._CONFIG, "float32", (block_m, block_n, warps, stages, "tf32", dot_pv))
    with use_kernel("product"):
        assert max(float32_errors(d) for d in (1, 3, 16)) > gpu.FLOAT32_TOLERANCE


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_queries_far_from_every_key_and_other_arrays_of_the_keys_shape(kernel, d):
    """A query at the keys' mean between two clusters 200 apart (every logit about -10^4: the shift must be its
    row's largest logit, not 0 or a key's own), and queries of the keys' shape that are not the keys (1e3 away)."""
    rng = np.random.default_rng(d)
    keys = np.concatenate([rng.normal(size=(40, d)) + 100.0, rng.normal(size=(40, d)) - 100.0])
    centre = keys.mean(axis=0, keepdims=True)
    for precision, atol in (("float64", FLOAT64_TOLERANCE), ("float32", gpu.FLOAT32_TOLERANCE)):
        with use_kernel(kernel):
            for queries, h2 in ((centre, 0.5), (keys + 1e3, 200.0)):
                scale = _scale(keys)
                np.testing.assert_allclose(gpu.kernel_mean(queries, keys, h2, precision=precision),
                                           kernels.kernel_mean(queries, keys, h2), rtol=0, atol=atol * scale)
                np.testing.assert_allclose(gpu.kernel_logsumexp(queries, keys, h2, precision=precision),
                                           kernels.kernel_logsumexp(queries, keys, h2), rtol=atol, atol=0)


@needs_gpu
def test_tokens_attending_to_themselves_skip_the_first_pass(monkeypatch):
    """Where the queries are the keys (the same array), each row's shift is its own logit: no first pass runs."""
    keys = np.random.default_rng(0).normal(size=(100, 3))

    class Refused:
        def __getitem__(self, grid):
            raise AssertionError("the first pass ran")

    with use_kernel("direct"):
        monkeypatch.setattr(gpu._modules()[1], "direct_max", Refused())
        np.testing.assert_allclose(gpu.kernel_mean(keys, keys, 0.3), kernels.kernel_mean(keys, keys, 0.3),
                                   rtol=0, atol=FLOAT64_TOLERANCE)
        with pytest.raises(AssertionError, match="the first pass ran"):
            gpu.kernel_mean(keys.copy(), keys, 0.3)


@needs_gpu
@pytest.mark.parametrize("precision, h2",
                         [("float32", 1e-9), ("float32", 1e-12), ("float64", 1e-18), ("float64", 1e-20)])
def test_the_direct_kernel_hands_over_where_its_exponents_could_overflow(monkeypatch, precision, h2):
    """Points spread over far more than sqrt(h2) (here 1 against 3e-5 to 1e-10): the direct kernel's exponents could
    round past 2^127 (inf / inf), so the product kernel serves, and the sums stay finite; at h2 = 1 the direct one."""
    rng = np.random.default_rng(0)
    keys = rng.uniform(size=(60, 2))
    queries = keys[:6] + 1e-3

    def refuse(*args):
        raise AssertionError("the wrong kernel ran")

    with use_kernel("direct"):
        monkeypatch.setattr(gpu, "_direct_sums", refuse)
        for q in (keys, queries):
            assert np.all(np.isfinite(gpu.kernel_mean(q, keys, h2, precision=precision)))
            assert np.all(np.isfinite(gpu.kernel_logsumexp(q, keys, h2, precision=precision)))
        monkeypatch.undo()
        monkeypatch.setattr(gpu, "_product_sums", refuse)
        assert np.all(np.isfinite(gpu.kernel_mean(keys, keys, 1.0, precision=precision)))


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_far_queries_stay_finite_and_lose_at_most_the_products_cancellation(kernel):
    keys = np.random.default_rng(0).normal(size=(64, 2))
    far, h2 = keys[:5] + 1e4, 1e-3
    logits = -((far[:, None, :] - keys[None, :, :]) ** 2).sum(axis=2) / (2 * h2)
    reference = softmax(logits, axis=1) @ keys
    centred = far - keys.mean(axis=0)
    cancellation = np.finfo(float).eps * (centred**2).sum(axis=1).max() / (2 * h2)
    with use_kernel(kernel):
        mean = gpu.kernel_mean(far, keys, h2)
        assert np.all(np.isfinite(mean))
        np.testing.assert_allclose(mean, reference, rtol=0, atol=8 * cancellation)
        np.testing.assert_allclose(gpu.kernel_logsumexp(far, keys, h2), logsumexp(logits, axis=1), rtol=1e-13)


@needs_gpu
def test_flow_and_estimators_on_the_gpu_equal_the_exact_path():
    rng = np.random.default_rng(3)
    noisy = rng.normal(size=(300, 3))
    np.testing.assert_allclose(flow.particle_flow(noisy, 0.3, 1.0, eta=0.25, backend="gpu"),
                               flow.particle_flow(noisy, 0.3, 1.0, eta=0.25, backend="exact"), rtol=0, atol=1e-10)
    np.testing.assert_allclose(flow.energy(noisy[:20], noisy, 0.3, backend="gpu"),
                               flow.energy(noisy[:20], noisy, 0.3, backend="exact"), rtol=1e-12, atol=0)
    queries = rng.normal(size=(50, 3))
    for make in (lambda b: estimators.TwoStageDenoiser(0.5, 0.3, eta=0.25, backend=b),
                 lambda b: estimators.StageTwoOnly(0.5, backend=b),
                 lambda b: estimators.TweedieKDE(0.5, 0.3, backend=b)):
        np.testing.assert_allclose(make("gpu").fit(noisy).denoise(queries), make("exact").fit(noisy).denoise(queries),
                                   rtol=0, atol=1e-10)


def test_precision_and_inputs_are_validated_before_any_gpu_work(monkeypatch):
    with pytest.raises(ValueError, match="precision == 'float16'"):
        gpu.kernel_mean(np.zeros((2, 1)), np.zeros((3, 1)), 1.0, precision="float16")
    with pytest.raises(ValueError, match="h2"):
        gpu.kernel_logsumexp(np.zeros((2, 1)), np.zeros((3, 1)), 0.0)
    with pytest.raises(ValueError, match="nan or inf"):
        gpu.kernel_mean(np.full((2, 1), np.nan), np.zeros((3, 1)), 1.0)
    with pytest.raises(ValueError, match="overflow float64"):
        gpu.kernel_mean(np.array([[1e160]]), np.array([[0.0], [1.0]]), 1.0)
    monkeypatch.setattr(gpu, "_MAX_OFFSET", 80)  # 5 points of 16 columns (d = 3); int32's limit: 2**31 - 1
    with pytest.raises(ValueError, match="6 points in d == 3: .* 32-bit offsets, which reach 5 points"):
        gpu.kernel_mean(np.zeros((6, 3)), np.zeros((3, 3)), 1.0)
    with pytest.raises(ValueError, match="overflow float32"):
        gpu.kernel_logsumexp(np.array([[1e20]]), np.array([[0.0], [1.0]]), 1.0, precision="float32")


def test_auto_takes_the_gpu_only_where_one_is_present_and_the_grid_does_not_apply(monkeypatch):
    rng = np.random.default_rng(0)
    three_d, two_d = rng.normal(size=(1024, 3)), rng.normal(size=(40000, 2))
    for present in (False, True):
        monkeypatch.setattr(gpu, "available", lambda present=present: present)
        assert binned.resolve_backend("auto", 1024, three_d, 0.1) == ("gpu" if present else "exact")
        assert binned.resolve_backend("auto", 40000, two_d, 0.1) == "binned"
        assert binned.resolve_backend("auto", 100, three_d[:100], 0.1) == "exact"


def test_available_says_whether_torch_cuda_and_triton_are_there():
    try:
        import torch
        import triton  # noqa: F401
    except ImportError:
        expected = False
    else:
        expected = torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    assert gpu.available() is expected
    if not expected:
        with pytest.raises(RuntimeError, match="torch with a CUDA device and triton"):
            gpu.require()
