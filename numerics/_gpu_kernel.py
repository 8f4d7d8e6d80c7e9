"""The Triton kernel of :mod:`numerics.gpu` (imported only where triton is installed; see that module)."""

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
