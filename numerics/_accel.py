r"""Numba kernels of the Gaussian-kernel sums: the optional accelerator of :mod:`attneb.numerics.kernels`.

Importing this module requires numba; :mod:`attneb.numerics.kernels` falls back to its numpy path
when the import fails. The kernels read the same augmented operands as the numpy path and
fuse, for each query and a tile of keys, the logits, their clipping at zero, the
exponentials and the sums, so that no ``M x N`` temporary passes through memory:
:func:`kernel_sums` for any queries, :func:`symmetric_row_sums` for tokens attending to
themselves, where each weight is computed once for its row and its column.

Numba's ``math.exp`` is a call to the C library, one value at a time (about 5 ns a value
here against 0.9 ns for numpy's SIMD exponential); :func:`exp_nonpositive` is written out
so that LLVM vectorises it with the loop around it.

Reproducibility. The kernels call no other compiled function when they run: their helpers are
inlined by numba (``inline="always"``) and :func:`exp_nonpositive` by LLVM. A call left in
would bind, in a process that had compiled or loaded the callee on its own, to that
compilation of it, and otherwise to the kernel's own copy, compiled differently: the results
then differed in the last bits between a process that compiled the kernels and one that
loaded them from numba's cache.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["exp_nonpositive", "kernel_sums", "symmetric_row_sums"]

_LOG2E = 1.0 / math.log(2.0)
#: ln 2 split in two (fdlibm): the low 21 bits of ``_LN2_HI`` are zero, so ``k * _LN2_HI`` is exact.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: Adding 1.5 * 2**52 rounds to an integer k and leaves k in the low bits of the mantissa.
_SHIFTER = 1.5 * 2.0**52
#: Coefficients of a polynomial of degree 11 close to exp on the reduced interval
#: ``|r| <= ln(2)/2``, highest degree first: the Chebyshev fit ``mpmath.chebyfit(mpmath.exp,
#: [-ln(2)/2, ln(2)/2], 12)``, relative error 3.2e-18, 1.7e-17 once the coefficients are rounded
#: to float64 (Taylor's degree 12, one term more, leaves 1.7e-16: 1.5 ulp below 1).
_EXP_POLY = (
    2.5110037605963777e-08, 2.763263963904103e-07, 2.755724091857897e-06, 2.4801485482328494e-05,
    0.00019841269890047113, 0.0013888888952314775, 0.008333333333319601, 0.0416666666664881,
    0.1666666666666668, 0.5000000000000019, 1.0, 1.0,
)
#: Arguments are clamped here, where exp is 3.3e-308 and 2**k still a normal number.
_EXP_MIN = -708.0
_FAST = {"reassoc", "contract", "nsz"}


# Only "contract" (FMA): reassociation would undo the shifter's rounding and merge the two
# halves of ln 2.
@numba.njit(fastmath={"contract"}, cache=True)
def exp_nonpositive(x: float) -> float:
    """``exp(max(x, -708))`` for ``x <= 0``, to within 1 ulp.

    ``x = k ln 2 + r`` with ``|r| <= ln(2)/2``; ``exp(r)`` by a polynomial of degree 11 and
    ``2**k`` by writing the exponent bits. Below -708 it returns ``exp(-708)``, 3.3e-308:
    the kernel sums that weights this small could matter to are recomputed by
    :mod:`attneb.numerics.kernels` with a shift.
    """
    z = max(x, _EXP_MIN)
    shifted = z * _LOG2E + _SHIFTER
    k = shifted - _SHIFTER
    r = (z - k * _LN2_HI) - k * _LN2_LO
    p = 0.0
    for c in _EXP_POLY:
        p = p * r + c
    two_k = np.int64((np.float64(shifted).view(np.int64) + 1023) << 52).view(np.float64)
    return p * two_k


@numba.njit(fastmath=_FAST, inline="always")
def _logits(a, bt, i, t0, t1, w):
    """Fill ``w[:t1 - t0]`` with the logits ``a[i] @ bt[:, j]`` for ``t0 <= j < t1``."""
    d = a.shape[1] - 2
    a0 = a[i, 0]
    ai = a[i, d]
    k0 = bt[0, t0:t1]
    kn = bt[d + 1, t0:t1]
    for j in range(t1 - t0):
        w[j] = ai + kn[j] + a0 * k0[j]
    for c in range(1, d):
        ac = a[i, c]
        kc = bt[c, t0:t1]
        for j in range(t1 - t0):
            w[j] += ac * kc[j]


@numba.njit(nogil=True, fastmath=_FAST, cache=True)
def kernel_sums(a, bt, tile, start, stop, acc):
    """Sums of clipped kernel weights for the queries ``start <= i < stop``.

    With ``d = a.shape[1] - 2`` and ``p = acc.shape[1] - 1`` (0 or ``d``), the weights are
    ``w_ij = exp(min(a[i] @ bt[:, j], 0))`` and the result is
    ``acc[i, 0] = sum_j w_ij`` and ``acc[i, 1 + c] = sum_j w_ij * bt[c, j]`` for ``c < p``.

    Parameters
    ----------
    a : ndarray, shape (M, d + 2)
        Augmented queries ``[q / h2, -|q|^2 / (2 h2), 1]``.
    bt : ndarray, shape (d + 2, N)
        Augmented keys ``[k, 1, -|k|^2 / (2 h2)]``, transposed.
    tile : int
        Keys processed at once; the kernel's only temporary holds ``tile`` floats.
    start, stop : int
        The rows of ``a`` and ``acc`` to compute.
    acc : ndarray, shape (M, 1 + p)
        Output; rows outside ``[start, stop)`` are left untouched.
    """
    n = bt.shape[1]
    p = acc.shape[1] - 1
    w = np.empty(tile)
    for i in range(start, stop):
        acc[i, :] = 0.0
        for t0 in range(0, n, tile):
            t1 = min(n, t0 + tile)
            _logits(a, bt, i, t0, t1, w)
            total = 0.0
            for j in range(t1 - t0):
                e = exp_nonpositive(min(w[j], 0.0))
                w[j] = e
                total += e
            acc[i, 0] += total
            for c in range(p):
                coord = bt[c, t0:t1]
                total = 0.0
                for j in range(t1 - t0):
                    total += w[j] * coord[j]
                acc[i, 1 + c] += total


@numba.njit(nogil=True, fastmath=_FAST, cache=True)
def symmetric_row_sums(a, bt, size, r0, part):
    """The sums of :func:`kernel_sums` that one block row of tiles contributes, queries = keys.

    The tiles are those of the rows ``r0 <= i < r0 + size`` and the columns ``j >= r0`` (on the
    diagonal tile, the weights ``w_ij`` with ``j >= i``). Each weight is computed once and added
    to the sums of its row and of its column (the kernel is symmetric), so the block rows'
    sums add up to those of :func:`kernel_sums`.

    Parameters
    ----------
    a, bt : ndarray
        As in :func:`kernel_sums`, both of the same ``N`` points.
    size : int
        Block size; the kernel's only temporary holds ``size`` floats.
    r0 : int
        First row of the block row.
    part : ndarray, shape (1 + p, N - r0)
        Output, zeros on entry; the sums of the points ``r0, ..., N - 1``, transposed:
        ``part[0]`` weights and ``part[1 + c]`` weighted coordinates.
    """
    n = bt.shape[1]
    p = part.shape[0] - 1
    w = np.empty(size)
    r1 = min(n, r0 + size)
    for c0 in range(r0, n, size):
        c1 = min(n, c0 + size)
        for i in range(r0, r1):
            if c0 == r0:
                # the weight w_ii, in the sums of its row only; then the columns j > i
                _logits(a, bt, i, i, i + 1, w)
                e = exp_nonpositive(min(w[0], 0.0))
                for c in range(p + 1):
                    part[c, i - r0] += e * (1.0 if c == 0 else bt[c - 1, i])
            t0 = i + 1 if c0 == r0 else c0
            _logits(a, bt, i, t0, c1, w)
            col = part[0, t0 - r0 : c1 - r0]
            total = 0.0
            for j in range(c1 - t0):
                e = exp_nonpositive(min(w[j], 0.0))
                w[j] = e
                total += e
                col[j] += e
            part[0, i - r0] += total
            for c in range(p):
                coord = bt[c, t0:c1]
                xi = bt[c, i]
                col = part[1 + c, t0 - r0 : c1 - r0]
                total = 0.0
                for j in range(c1 - t0):
                    total += w[j] * coord[j]
                    col[j] += w[j] * xi
                part[1 + c, i - r0] += total
