r"""Numba kernels of the Gaussian-kernel sums: the optional accelerator of :mod:`numerics.kernels`.

Importing this module requires numba; :mod:`numerics.kernels` falls back to its numpy path
when the import fails. The kernels read the same augmented operands as the numpy path and
fuse, for each query and a tile of keys, the logits, their clipping at zero, the
exponentials and the sums, so that no ``M x N`` temporary passes through memory:
:func:`kernel_sums` for any queries, :func:`symmetric_row_sums` for tokens attending to
themselves, where each weight is computed once for its row and its column.

Numba's ``math.exp`` is a call to the C library, one value at a time (about 5 ns a value
here against 0.9 ns for numpy's SIMD exponential); :func:`exp_nonpositive` is written out
so that LLVM vectorises it with the loop around it.
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
#: Taylor coefficients of exp, highest degree first: degree 12 leaves a relative error
#: below 2e-16 on the reduced interval ``|r| <= ln(2)/2``.
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(12, -1, -1))
#: Arguments are clamped here, where exp is 3.3e-308 and 2**k still a normal number.
_EXP_MIN = -708.0
_FAST = {"reassoc", "contract", "nsz"}


# Only "contract" (FMA): reassociation would undo the shifter's rounding and merge the two
# halves of ln 2.
@numba.njit(fastmath={"contract"}, cache=True)
def exp_nonpositive(x: float) -> float:
    """``exp(max(x, -708))`` for ``x <= 0``, to within 2 ulp.

    ``x = k ln 2 + r`` with ``|r| <= ln(2)/2``; ``exp(r)`` by its Taylor polynomial and
    ``2**k`` by writing the exponent bits. Below -708 it returns ``exp(-708)``, 3.3e-308:
    the kernel sums that weights this small could matter to are recomputed by
    :mod:`numerics.kernels` with a shift.
    """
    z = max(x, _EXP_MIN)
    shifted = z * _LOG2E + _SHIFTER
    k = shifted - _SHIFTER
    r = (z - k * _LN2_HI) - k * _LN2_LO
    p = 0.0
    for c in _TAYLOR:
        p = p * r + c
    two_k = np.int64((np.float64(shifted).view(np.int64) + 1023) << 52).view(np.float64)
    return p * two_k


@numba.njit(fastmath=_FAST, cache=True)
def _weights(a, bt, i, t0, t1, w):
    """Fill ``w[:t1 - t0]`` with ``exp(min(a[i] @ bt[:, j], 0))`` for ``t0 <= j < t1``; return their sum."""
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
    total = 0.0
    for j in range(t1 - t0):
        e = exp_nonpositive(min(w[j], 0.0))
        w[j] = e
        total += e
    return total


@numba.njit(fastmath=_FAST, cache=True)
def _dot(w, row):
    total = 0.0
    for j in range(row.size):
        total += w[j] * row[j]
    return total


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
            acc[i, 0] += _weights(a, bt, i, t0, t1, w)
            for c in range(p):
                acc[i, 1 + c] += _dot(w, bt[c, t0:t1])


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
            # on the diagonal tile, only the columns j >= i; the weight w_ii counts once
            t0 = i if c0 == r0 else c0
            skip = 1 if c0 == r0 else 0
            part[0, i - r0] += _weights(a, bt, i, t0, c1, w)
            for c in range(p):
                part[1 + c, i - r0] += _dot(w, bt[c, t0:c1])
            col = part[0, t0 + skip - r0 : c1 - r0]
            for j in range(c1 - t0 - skip):
                col[j] += w[skip + j]
            for c in range(p):
                coord = bt[c, i]
                col = part[1 + c, t0 + skip - r0 : c1 - r0]
                for j in range(c1 - t0 - skip):
                    col[j] += w[skip + j] * coord
