"""The Triton kernels of :mod:`attneb.numerics.gpu` (imported only where triton is installed; see that module)."""

import triton
import triton.language as tl


@triton.jit
def _key_block(q, ka_ptr, values_ptr, start, n, run_max, run_sum, acc, KP: tl.constexpr, VP: tl.constexpr,
               BLOCK_N: tl.constexpr, SUM_BY_DOT: tl.constexpr, DOT_QK: tl.constexpr, DOT_PV: tl.constexpr,
               MASKED: tl.constexpr):
    """One block of keys from ``start``: the running maximum, sum and accumulator, updated (online log-sum-exp)."""
    cols = start + tl.arange(0, BLOCK_N)
    aug = tl.arange(0, KP)
    width = tl.arange(0, VP)
    if MASKED:
        col_ok = cols < n
        k = tl.load(ka_ptr + cols[None, :] * KP + aug[:, None], mask=col_ok[None, :], other=0.0)
        values = tl.load(values_ptr + cols[:, None] * VP + width[None, :], mask=col_ok[:, None], other=0.0)
        logits = tl.where(col_ok[None, :], tl.dot(q, k, input_precision=DOT_QK), float("-inf"))
    else:
        k = tl.load(ka_ptr + cols[None, :] * KP + aug[:, None])
        values = tl.load(values_ptr + cols[:, None] * VP + width[None, :])
        logits = tl.dot(q, k, input_precision=DOT_QK)
    new_max = tl.maximum(run_max, tl.max(logits, axis=1))
    rescale = tl.exp2(run_max - new_max)
    weights = tl.exp2(logits - new_max[:, None])
    if not SUM_BY_DOT:
        run_sum = run_sum * rescale + tl.sum(weights, axis=1)
    acc = acc * rescale[:, None] + tl.dot(weights, values, input_precision=DOT_PV)
    return new_max, run_sum, acc


@triton.jit(do_not_specialize=["m", "n", "n_full"])
def kernel_sums(qa_ptr, ka_ptr, values_ptr, lse_ptr, mean_ptr, m, n, n_full, D: tl.constexpr, KP: tl.constexpr,
                VP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUM_BY_DOT: tl.constexpr,
                WANT_MEAN: tl.constexpr, DOT_QK: tl.constexpr, DOT_PV: tl.constexpr):
    """Per query row: ``lse = max + log2(sum of 2^(logit - max))`` (base 2) and the weighted mean of the keys.

    The values are the keys zero-padded to ``VP`` columns, led by a column of ones where ``SUM_BY_DOT`` (then one
    product gives the sum of the weights, in column 0, and the weighted sums of the keys together).
    """
    dtype = qa_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < m
    width = tl.arange(0, VP)
    q = tl.load(qa_ptr + rows[:, None] * KP + tl.arange(0, KP)[None, :], mask=row_ok[:, None], other=0.0)
    run_max = tl.full([BLOCK_M], float("-inf"), dtype)
    run_sum = tl.zeros([BLOCK_M], dtype)
    acc = tl.zeros([BLOCK_M, VP], dtype)
    for start in range(0, n_full, BLOCK_N):
        run_max, run_sum, acc = _key_block(q, ka_ptr, values_ptr, start, n, run_max, run_sum, acc, KP, VP, BLOCK_N,
                                           SUM_BY_DOT, DOT_QK, DOT_PV, False)
    if n_full < n:
        run_max, run_sum, acc = _key_block(q, ka_ptr, values_ptr, n_full, n, run_max, run_sum, acc, KP, VP, BLOCK_N,
                                           SUM_BY_DOT, DOT_QK, DOT_PV, True)
    if SUM_BY_DOT:
        run_sum = tl.sum(tl.where(width[None, :] == 0, acc, 0.0), axis=1)
    tl.store(lse_ptr + rows, run_max + tl.log2(run_sum), mask=row_ok)
    if WANT_MEAN:
        first = 1 if SUM_BY_DOT else 0
        out = acc / run_sum[:, None]
        tl.store(mean_ptr + rows[:, None] * D + (width[None, :] - first), out,
                 mask=row_ok[:, None] & (width[None, :] >= first) & (width[None, :] < D + first))


@triton.jit
def _coordinates(ptr, index, ok, stride, D: tl.constexpr):
    """Coordinates 0 .. 3 at ``index`` of a ``(D, stride)`` array at ``ptr`` (zeros past ``D``, and where not ``ok``):
    the query coefficients of a block of rows, or the key coordinates of a block of columns."""
    x0 = tl.load(ptr + index, mask=ok, other=0.0)
    x1 = tl.zeros_like(x0)
    x2 = tl.zeros_like(x0)
    x3 = tl.zeros_like(x0)
    if D > 1:
        x1 = tl.load(ptr + stride + index, mask=ok, other=0.0)
    if D > 2:
        x2 = tl.load(ptr + 2 * stride + index, mask=ok, other=0.0)
    if D > 3:
        x3 = tl.load(ptr + 3 * stride + index, mask=ok, other=0.0)
    return x0, x1, x2, x3


@triton.jit
def _direct_cols(ks_ptr, cols, col_ok, n, D: tl.constexpr):
    """The keys' terms ``b_j`` (``-inf`` past ``n``) and coordinates ``k_j0 .. k_j3`` of a block of columns (``D + 1``
    rows of ``n`` in ``ks_ptr``, ``b`` last; zeros past ``D``)."""
    b = tl.load(ks_ptr + D * n + cols, mask=col_ok, other=float("-inf"))
    k0, k1, k2, k3 = _coordinates(ks_ptr, cols, col_ok, n, D)
    return b, k0, k1, k2, k3


@triton.jit
def _direct_logits(shift, a0, a1, a2, a3, b, k0, k1, k2, k3, D: tl.constexpr):
    """The tile ``shift_m + b_j + sum_i a_mi k_ji`` by ``D`` fused multiply-adds an element."""
    logits = shift[:, None] + b[None, :]
    logits += a0[:, None] * k0[None, :]
    if D > 1:
        logits += a1[:, None] * k1[None, :]
    if D > 2:
        logits += a2[:, None] * k2[None, :]
    if D > 3:
        logits += a3[:, None] * k3[None, :]
    return logits


@triton.jit(do_not_specialize=["m", "n"])
def direct_max(qs_ptr, ks_ptr, max_ptr, m, n, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per query row, the largest logit ``max_j (b_j + a_m . k_j)`` (the first pass of :func:`direct_sums` where the
    queries are not the keys). The maxima are kept per tile element and reduced once, after the loop."""
    dtype = qs_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < m
    a0, a1, a2, a3 = _coordinates(qs_ptr, rows, row_ok, m, D)
    zero = tl.zeros([BLOCK_M], dtype)
    best = tl.full([BLOCK_M, BLOCK_N], float("-inf"), dtype)
    for start in range(0, n, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        b, k0, k1, k2, k3 = _direct_cols(ks_ptr, cols, cols < n, n, D)
        best = tl.maximum(best, _direct_logits(zero, a0, a1, a2, a3, b, k0, k1, k2, k3, D))
    tl.store(max_ptr + rows, tl.max(best, axis=1), mask=row_ok)


@triton.jit(do_not_specialize=["m", "n"])
def direct_sums(qs_ptr, ks_ptr, shift_ptr, sum_ptr, mean_ptr, m, n, D: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, WANT_MEAN: tl.constexpr):
    """Per query row, ``s = sum_j 2^(b_j + a_m . k_j - shift_m)`` and the weighted mean of the keys' coordinates.

    ``shift_m`` is at least about the row's largest logit (no weight overflows) and at most a few units above it (the
    sum does not underflow). The sums are kept per tile element and reduced once, after the loop: no reduction and no
    rescaling inside it. Up to ``D = 4`` coordinates (one accumulator each).
    """
    dtype = qs_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < m
    a0, a1, a2, a3 = _coordinates(qs_ptr, rows, row_ok, m, D)
    minus_shift = -tl.load(shift_ptr + rows, mask=row_ok, other=0.0)
    total = tl.zeros([BLOCK_M, BLOCK_N], dtype)
    acc0 = tl.zeros([BLOCK_M, BLOCK_N], dtype)
    acc1 = tl.zeros([BLOCK_M, BLOCK_N], dtype)
    acc2 = tl.zeros([BLOCK_M, BLOCK_N], dtype)
    acc3 = tl.zeros([BLOCK_M, BLOCK_N], dtype)
    for start in range(0, n, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        b, k0, k1, k2, k3 = _direct_cols(ks_ptr, cols, cols < n, n, D)
        weights = tl.exp2(_direct_logits(minus_shift, a0, a1, a2, a3, b, k0, k1, k2, k3, D))
        total += weights
        if WANT_MEAN:
            acc0 += weights * k0[None, :]
            if D > 1:
                acc1 += weights * k1[None, :]
            if D > 2:
                acc2 += weights * k2[None, :]
            if D > 3:
                acc3 += weights * k3[None, :]
    row_sum = tl.sum(total, axis=1)
    tl.store(sum_ptr + rows, row_sum, mask=row_ok)
    row_sum = tl.where(row_ok, row_sum, 1.0)  # rows past m: no 0 / 0
    if WANT_MEAN:
        tl.store(mean_ptr + rows, tl.sum(acc0, axis=1) / row_sum, mask=row_ok)
        if D > 1:
            tl.store(mean_ptr + m + rows, tl.sum(acc1, axis=1) / row_sum, mask=row_ok)
        if D > 2:
            tl.store(mean_ptr + 2 * m + rows, tl.sum(acc2, axis=1) / row_sum, mask=row_ok)
        if D > 3:
            tl.store(mean_ptr + 3 * m + rows, tl.sum(acc3, axis=1) / row_sum, mask=row_ok)
