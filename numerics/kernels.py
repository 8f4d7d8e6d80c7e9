r"""Gaussian-kernel sums: the computation inside one attention step.

For queries :math:`q_m` and keys :math:`k_j` (:math:`j = 1..N`) in :math:`\mathbb{R}^d`
and bandwidth :math:`h_2 > 0`, write the logits
:math:`\ell_{mj} = -\lVert q_m - k_j\rVert^2 / (2 h_2)`. Then

* ``kernel_mean``: :math:`a(q_m) = \sum_j \mathrm{softmax}_j(\ell_{mj})\, k_j`
  (Nadaraya-Watson mean; the posterior mean of :math:`x` given :math:`q \sim N(x, h_2 I)`
  under the empirical prior on the keys),
* ``log_kde``: :math:`\log \frac1N \sum_j \varphi_{h_2}(q_m - k_j)`,
* ``kde_score``: :math:`\nabla_q \log \mathrm{KDE}(q_m) = (a(q_m) - q_m)/h_2`.

How the sums are computed
-------------------------
Queries and keys are first centred on the key mean (the sums are translation invariant,
and centring keeps the cancellation error relative to the spread of the data rather than
its distance from the origin). The logits then come from one matrix product of augmented
operands, :math:`\ell_{mj} = [q_m/h_2,\, -\lVert q_m\rVert^2/(2h_2),\, 1] \cdot
[k_j,\, 1,\, -\lVert k_j\rVert^2/(2h_2)]`, and are clipped at 0 (distances at 0) wherever
their rounding error could pass ``2**-20``.

Large coordinates. Before centring, points with a coordinate of magnitude 1 or more are
divided by the power of two ``2**e`` that brings every coordinate below 1, and ``h2`` by
``4**e``; the results are multiplied back (kernel means, scores) or unchanged (log-sums).
Scaling by a power of two is exact, so the results are bit for bit those of the unscaled
computation wherever that computation neither overflows nor rounds to subnormal numbers, and
points up to float64's largest values are accepted. A ``ValueError`` names ``h2`` when, once
scaled, it falls under float64's smallest normal number or the distances over it pass
``2**1000`` (the weights of all but the nearest keys would then underflow, and the logits'
operands overflow).

Log-sum-exp in two passes. A logit is at most 0, so the first pass sums
:math:`e^{\min(\ell_{mj}, 0)}` with no shift and no running maximum: nothing overflows, and
for every query within about :math:`30\sqrt{h_2}` of a key (every token of a layer, whose
own key is at distance 0) the sum is at least 1e-200, so the weights that underflow are
negligible. The rows whose sum falls below that are computed again as a streaming
log-sum-exp over column blocks with a running maximum (Flash-attention style), whose
largest weight is exactly 1: the results stay finite for bandwidths from 1e-8 to 1e8
times the data scale and queries arbitrarily far from the keys.

Implementations (:func:`set_accelerator`, or the environment variable ``ATTNEB_ACCELERATOR``):

* ``"numpy"``: tiles of at most ``2**17`` logits (1 MiB, resident in a core's cache);
  per tile one matrix product for the logits, the clipping and the exponentials in place,
  and one matrix product ``W @ [1, k]`` for the sum of the weights and the weighted sum of
  the keys together.
* ``"numba"`` (optional dependency, extra ``fast``): the kernels of :mod:`attneb.numerics._accel`,
  which fuse logits, clipping, exponentials and sums over tiles of 512 keys, with a
  vectorised exponential (within 1 ulp); they agree with the numpy path to about 1e-13
  relative (the logits are rounded in a different order). A kernel compiled in one process
  and loaded from numba's cache by another gives the same bits (tested), on the same CPU:
  the compiled code depends on the CPU's vector instructions. LLVM's tuning for AVX-512 CPUs
  keeps numba's vectors at 256 bits; setting ``NUMBA_CPU_FEATURES`` to the host's features
  (``llvmlite.binding.get_host_cpu_features().flatten()``) plus ``,-prefer-256-bit`` before
  numba is imported widens them to 512 (a layer of 16384 tokens in 2-D: 0.98 to 0.70 of one
  core's ``numpy.exp`` of its N^2 values on one thread, 0.52 to 0.39 on two; 2-core Xeon VM).
* ``"auto"``: numba for ``d <= 8`` when it can be imported, where it is faster; numpy otherwise.

The default is ``"numpy"``, whose results are bit-identical in every process and for every
number of threads; choose ``"auto"`` or ``"numba"`` for speed where that does not matter.

Tokens attending to themselves (queries equal to keys, as in every Stage-1 layer): the
kernel is symmetric, so each weight is computed once, on a tile on or above the diagonal,
and added to the sums of both its row and its column. One task per block row of tiles
returns its sums, and the tasks' sums are added in the order of the block rows.

The work is spread over a pool of threads (:func:`set_num_threads`; numpy's exponential,
BLAS and the numba kernels release the GIL), with BLAS limited to one thread
(:func:`attneb.numerics.base.single_blas_thread`) since its products have an inner dimension of
only ``d + 2``. How the work is cut (the tiles, the tasks, the order of the sums) depends on
``budget_bytes`` and the shapes only, never on the number of threads, so neither do the
results. The temporaries never exceed ``budget_bytes`` (fewer tasks run at once when it is
small), besides arrays of ``O((M + N) d)`` floats like the inputs and outputs.

Threads and the GIL. The numba kernels hold no lock for a whole task and scale with the
cores: 10.0x from 1 to 16 threads for a layer of 32768 tokens in 3 dimensions (1.02 s to
0.101 s on the 16 cores of an H200 machine's host, ``benchmarks/layer.py``; 10.3x on an H100's). The
numpy path calls numpy four times a tile, and between calls each thread waits for the GIL: on
that machine it reached 3.7x at 8 threads (0.87 s to 0.236 s) and 2.1x at 16 (0.409 s), where the
threads waited more than they computed; larger tiles, which wait less, leave the core's cache
(tiles of 2 MiB took 2.2x as long on one thread).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from math import isqrt

import numpy as np

from .base import single_blas_thread
from .validation import check_array, check_option, check_positive, check_positive_int, check_same_dim

__all__ = [
    "ACCELERATORS",
    "DEFAULT_BUDGET_BYTES",
    "get_accelerator",
    "get_num_threads",
    "kde_score",
    "kernel_logsumexp",
    "kernel_mean",
    "log_kde",
    "set_accelerator",
    "set_num_threads",
]

DEFAULT_BUDGET_BYTES = 256 * 2**20
#: Names accepted by :func:`set_accelerator` and by the environment variable ``ATTNEB_ACCELERATOR``.
ACCELERATORS = ("auto", "numpy", "numba")
#: ``"auto"`` uses numba up to this dimension; above it the numpy path's matrix products win
#: (the fused kernel's work per logit grows with ``d``).
_AUTO_NUMBA_MAX_DIM = 8
#: Largest tile of logits of the numpy path: 1 MiB of float64, which its passes (product,
#: clipping, exponential, sums) reuse from the core's cache (see "Threads and the GIL").
_TILE_ENTRIES = 2**17
#: Widest tile of the general path (queries other than the keys).
_TILE_COLS = 4096
#: Keys per tile of the numba kernels: their temporary and the tile's rows of keys and sums stay in L1 cache
#: (1024 took 10-15% longer on one thread at N = 16384, d = 2 and N = 32768, d = 3).
_ACCEL_TILE = 512
#: Below this many logits the sums run in the calling thread.
_MIN_PARALLEL_ENTRIES = 2**18
#: Tasks submitted ahead of the one whose result is consumed next, per thread.
_TASKS_AHEAD_PER_THREAD = 2
#: First-pass sums below this are recomputed with a running maximum (see the module docstring).
_MIN_SUM = 1e-200
#: Largest operand of the logits (centred coordinates and their squares over h2, after scaling),
#: as a power of two (see "Large coordinates").
_MAX_LOG2_OPERAND = 1000
_TINY = np.finfo(np.float64).tiny

_accelerator = check_option(os.environ.get("ATTNEB_ACCELERATOR", "numpy"), "ATTNEB_ACCELERATOR", ACCELERATORS)
_num_threads = 1
_executor: ThreadPoolExecutor | None = None


def _numba_kernels():
    """The :mod:`attneb.numerics._accel` module, or ``None`` when numba cannot be imported."""
    try:
        from . import _accel
    except ImportError:
        return None
    return _accel


def set_accelerator(name: str) -> None:
    """Choose the implementation of the kernel sums.

    The initial choice is read from the environment variable ``ATTNEB_ACCELERATOR``
    (default ``"auto"``).

    Parameters
    ----------
    name : {"auto", "numpy", "numba"}
        ``"numpy"``: numpy and BLAS only. ``"numba"``: the fused numba kernel for every
        dimension (raises ``ImportError`` if numba is not installed). ``"auto"``: numba for
        ``d <= 8`` when it can be imported, numpy otherwise.
    """
    global _accelerator
    name = check_option(name, "name", ACCELERATORS)
    if name == "numba" and _numba_kernels() is None:
        raise ImportError(
            "set_accelerator('numba') needs numba, which cannot be imported; install it "
            "(pip install numba) or use set_accelerator('auto'), which falls back to numpy"
        )
    _accelerator = name


def get_accelerator() -> str:
    """The current choice of :func:`set_accelerator`: ``"auto"``, ``"numpy"`` or ``"numba"``."""
    return _accelerator


def _accelerator_for(d: int):
    """The :mod:`attneb.numerics._accel` module if its kernels compute the sums in dimension ``d``, else ``None``."""
    if _accelerator == "numpy" or (_accelerator == "auto" and d > _AUTO_NUMBA_MAX_DIM):
        return None
    accel = _numba_kernels()
    if accel is None and _accelerator == "numba":
        raise ImportError("the 'numba' accelerator is selected but numba cannot be imported")
    return accel


def _default_num_threads() -> int:
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def set_num_threads(n: int | None = None) -> None:
    """Set the number of threads that compute the kernel sums.

    Parameters
    ----------
    n : int or None
        Number of threads, >= 1. ``None`` restores the default: ``OMP_NUM_THREADS`` when it
        is set (the sweep's worker processes set it to 1), else the number of cores this
        process may run on.
    """
    global _num_threads, _executor
    n = _default_num_threads() if n is None else check_positive_int(n, "n")
    if _executor is not None:
        _executor.shutdown()
        _executor = None
    _num_threads = n


def get_num_threads() -> int:
    """The number of threads that compute the kernel sums (see :func:`set_num_threads`)."""
    return _num_threads


def _forget_executor() -> None:
    global _executor
    _executor = None


set_num_threads()
# A forked child inherits the pool object but not its threads.
os.register_at_fork(after_in_child=_forget_executor)


def _in_order(func, items, consume, *, entries: int, task_bytes: int, budget_bytes: int) -> None:
    """``consume(item, func(item))`` for every item, in the order of ``items``.

    ``func`` runs on the thread pool when ``entries`` logits are worth sharing, with at most
    ``_TASKS_AHEAD_PER_THREAD`` tasks per thread and as many as half the budget holds (``task_bytes``
    each) submitted and not yet consumed; ``consume`` runs in the calling thread. Results are
    consumed in the same order whatever the number of threads, so sums built by ``consume`` do
    not depend on it.
    """
    global _executor
    items = list(items)
    ahead = min(_TASKS_AHEAD_PER_THREAD * _num_threads, budget_bytes // 2 // max(1, task_bytes))
    if _num_threads == 1 or entries < _MIN_PARALLEL_ENTRIES or len(items) == 1 or ahead <= 1:
        for item in items:
            consume(item, func(item))
        return
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=_num_threads, thread_name_prefix="attneb-kernels")
    pending = deque((item, _executor.submit(func, item)) for item in items[:ahead])
    later = iter(items[ahead:])
    try:
        while pending:
            item, future = pending.popleft()
            consume(item, future.result())
            following = next(later, None)
            if following is not None:
                pending.append((following, _executor.submit(func, following)))
    finally:
        for _, future in pending:
            future.cancel()


def _tile_entries(budget_bytes: int) -> int:
    """Logits per tile: ``_TILE_ENTRIES``, or half the budget if that is less (never the number of threads)."""
    return max(1, min(_TILE_ENTRIES, budget_bytes // 16))


def _tile_shape(m: int, n: int, budget_bytes: int) -> tuple[int, int]:
    """Rows and columns of the general path's tiles: at most :func:`_tile_entries` logits."""
    entries = _tile_entries(budget_bytes)
    cols = min(n, _TILE_COLS, entries)
    return max(1, min(m, entries // cols)), cols


def _weights(a_rows, bt_cols, zeros, out):
    """``out[:] = exp(min(a_rows @ bt_cols, 0))`` in place; without the clipping when ``zeros`` is ``None``."""
    np.matmul(a_rows, bt_cols, out=out)
    if zeros is not None:
        # about twice as fast against an array of zeros as against the scalar 0
        np.minimum(out, zeros[: out.size].reshape(out.shape), out=out)
    np.exp(out, out=out)


def _must_clip(a, bt) -> bool:
    """Whether a logit ``a @ bt``, at most 0 exactly, may round above ``2**-20``.

    Each logit's rounding error is below ``(d + 3) u sum_c max|a[:, c]| max|bt[c]|`` (the
    product's and the operands' roundings, ``u = 2**-53``). Below ``2**-20``, no weight exceeds
    ``1 + 2**-19`` unclipped and the numpy path leaves the clipping out: the weights carry
    their logits' rounding error either way (clipping only moves the positive ones to 0).
    """
    terms = np.abs(a).max(axis=0) @ np.abs(bt).max(axis=1)
    return (a.shape[1] + 1) * 2.0**-53 * terms > 2.0**-20


def _numpy_rows(a, bt, values, acc, rows, cols, clip, r0):
    """``acc[i] = sum_j exp(min(l_ij, 0)) values[j]`` for the ``rows`` queries from ``r0``, with ``l = a @ bt``."""
    n = bt.shape[1]
    r1 = min(r0 + rows, a.shape[0])
    out = acc[r0:r1]
    out[:] = 0.0
    a_rows = a[r0:r1]
    block = np.empty((r1 - r0) * min(cols, n))
    zeros = np.zeros(block.size) if clip else None
    for c0 in range(0, n, cols):
        c1 = min(c0 + cols, n)
        weights = block[: (r1 - r0) * (c1 - c0)].reshape(r1 - r0, c1 - c0)
        _weights(a_rows, bt[:, c0:c1], zeros, weights)
        out += weights @ values[c0:c1]


def _general_sums(a, bt, values, budget_bytes, *, clip=True):
    """``acc[i] = sum_j exp(min(l_ij, 0)) values[j]`` for every query, by blocks of rows."""
    m, n = a.shape[0], bt.shape[1]
    rows, cols = _tile_shape(m, n, budget_bytes)
    acc = np.empty((m, values.shape[1]))
    accel = _accelerator_for(a.shape[1] - 2)
    if accel is None:
        task = partial(_numpy_rows, a, bt, values, acc, rows, cols, clip)
    else:
        tile = min(cols, _ACCEL_TILE)

        def task(r0):
            accel.kernel_sums(a, bt, tile, r0, min(r0 + rows, m), acc)

    _in_order(task, range(0, m, rows), lambda r0, _: None, entries=m * n, task_bytes=8 * rows * cols,
              budget_bytes=budget_bytes)
    return acc


def _symmetric_row(a, bt, values, size, clip, r0):
    """The sums that the tiles of one block row contribute, queries = keys (numpy path).

    The tiles are those of the rows ``r0 <= i < r0 + size`` and the columns ``j >= r0``: each
    weight off the diagonal tile is added to the sums of its row and of its column, since the
    kernel is symmetric. Returns them for the points ``r0, ..., N - 1``, shape ``(N - r0, 1 + p)``.
    Four numpy calls a tile (each a wait for the GIL when many threads run): the products write
    the column sums in place and the row sums side by side, added once at the end.
    """
    n = bt.shape[1]
    r1 = min(r0 + size, n)
    starts = range(r0, n, size)
    part = np.empty((n - r0, values.shape[1]))
    row_sums = np.empty((len(starts), r1 - r0, values.shape[1]))
    a_rows, v_rows = a[r0:r1], values[r0:r1]
    block = np.empty((r1 - r0) * size)
    zeros = np.zeros(block.size) if clip else None
    for t, c0 in enumerate(starts):
        c1 = min(c0 + size, n)
        weights = block[: (r1 - r0) * (c1 - c0)].reshape(r1 - r0, c1 - c0)
        _weights(a_rows, bt[:, c0:c1], zeros, weights)
        np.matmul(weights, values[c0:c1], out=row_sums[t])
        if c0 != r0:
            np.matmul(weights.T, v_rows, out=part[c0 - r0 : c1 - r0])
    np.sum(row_sums, axis=0, out=part[: r1 - r0])
    return part


def _symmetric_sums(a, bt, values, budget_bytes, *, clip=True):
    """As :func:`_general_sums` when queries and keys are the same points: each weight is computed once.

    One task per block row (:func:`_symmetric_row`); their sums are added in the order of the
    block rows, so that the result does not depend on the number of threads.
    """
    n, width = values.shape
    entries = _tile_entries(budget_bytes)
    accel = _accelerator_for(a.shape[1] - 2)
    acc = np.zeros((n, width))
    if accel is None:
        size = min(n, isqrt(entries))
        task = partial(_symmetric_row, a, bt, values, size, clip)
        tile_bytes = 8 * size * size

        def add(r0, part):
            acc[r0:] += part
    else:
        size = min(n, _ACCEL_TILE, entries)
        tile_bytes = 8 * size

        def task(r0):
            part = np.zeros((width, n - r0))
            accel.symmetric_row_sums(a, bt, size, r0, part)
            return part

        def add(r0, part):
            acc[r0:] += part.T

    _in_order(task, range(0, n, size), add, entries=n * n // 2, task_bytes=tile_bytes + 8 * n * width,
              budget_bytes=budget_bytes)
    return acc


def _shifted_rows(a, bt, values, acc, shift, rows, cols, r0):
    """As :func:`_numpy_rows`, with the weights of row ``i`` divided by ``exp(shift[i])``, its largest.

    A streaming log-sum-exp: ``shift`` is the running maximum of the clipped logits over the
    column blocks, and the partial sums are rescaled whenever it grows.
    """
    n = bt.shape[1]
    r1 = min(r0 + rows, a.shape[0])
    out = acc[r0:r1]
    out[:] = 0.0
    a_rows = a[r0:r1]
    block = np.empty((r1 - r0) * min(cols, n))
    zeros = np.zeros(block.size)
    run_max = np.full(r1 - r0, -np.inf)
    for c0 in range(0, n, cols):
        c1 = min(c0 + cols, n)
        logits = block[: (r1 - r0) * (c1 - c0)].reshape(r1 - r0, c1 - c0)
        np.matmul(a_rows, bt[:, c0:c1], out=logits)
        new_max = np.maximum(run_max, np.minimum(logits.max(axis=1), 0.0))
        logits -= new_max[:, None]
        np.minimum(logits, zeros[: logits.size].reshape(logits.shape), out=logits)
        np.exp(logits, out=logits)
        out *= np.exp(run_max - new_max)[:, None]
        out += logits @ values[c0:c1]
        run_max = new_max
    shift[r0:r1] = run_max


def _underflow_shift(a, bt, values, acc, budget_bytes):
    """Recompute with a running maximum the rows of ``acc`` whose sum is below ``_MIN_SUM``.

    Returns each row's shift: the logarithm of the factor its sums were divided by (0 for the others).
    """
    m, n = a.shape[0], bt.shape[1]
    shift = np.zeros(m)
    low = np.flatnonzero(acc[:, 0] < _MIN_SUM)
    if low.size == 0:
        return shift
    rows, cols = _tile_shape(low.size, n, budget_bytes)
    low_acc = np.empty((low.size, values.shape[1]))
    low_shift = np.empty(low.size)
    task = partial(_shifted_rows, a[low], bt, values, low_acc, low_shift, rows, cols)
    _in_order(task, range(0, low.size, rows), lambda r0, _: None, entries=low.size * n,
              task_bytes=8 * rows * cols, budget_bytes=budget_bytes)
    acc[low] = low_acc
    shift[low] = low_shift
    return shift


def _operands(queries, keys, h2, p):
    """Augmented operands: the logits are ``a @ bt``, and ``values = [1, k[:, :p]]`` are what the weights sum."""
    m, d = queries.shape
    n = keys.shape[0]
    a = np.empty((m, d + 2))
    np.divide(queries, h2, out=a[:, :d])
    a[:, d] = -0.5 / h2 * np.einsum("ij,ij->i", queries, queries)
    a[:, d + 1] = 1.0
    bt = np.empty((d + 2, n))
    bt[:d] = keys.T
    bt[d] = 1.0
    bt[d + 1] = -0.5 / h2 * np.einsum("ij,ij->i", keys, keys)
    values = np.ascontiguousarray(bt[[d, *range(p)]].T)
    return a, bt, values


def _streaming_kernel_sums(queries, keys, h2, budget_bytes, *, want_mean):
    """Return ``(lse, mean)`` for validated, centred inputs.

    ``lse[m] = logsumexp_j(-||q_m - k_j||^2 / (2 h2))`` and, if ``want_mean``,
    ``mean[m] = sum_j softmax_j(...) k_j`` (else ``None``).
    """
    a, bt, values = _operands(queries, keys, h2, queries.shape[1] if want_mean else 0)
    symmetric = queries.shape == keys.shape and np.array_equal(queries, keys)
    with single_blas_thread():
        acc = (_symmetric_sums if symmetric else _general_sums)(a, bt, values, budget_bytes, clip=_must_clip(a, bt))
        shift = _underflow_shift(a, bt, values, acc, budget_bytes)
    lse = shift + np.log(acc[:, 0])
    mean = acc[:, 1:] / acc[:, :1] if want_mean else None
    return lse, mean


def _prepare(queries, keys, h2, budget_bytes):
    """Validate; scale by a power of two and centre on the keys' mean (see "Large coordinates").

    Returns ``(q, k, centre, shift, h2 / 4**shift, budget_bytes)``: ``q`` and ``k`` are the
    queries and keys over ``2**shift``, minus ``centre``, the keys' mean over ``2**shift``.
    """
    queries = check_array(queries, "queries")
    keys = check_array(keys, "keys")
    check_same_dim(queries, "queries", keys, "keys")
    h2 = check_positive(h2, "h2")
    budget_bytes = check_positive_int(budget_bytes, "budget_bytes")
    peak = max(np.abs(queries).max(), np.abs(keys).max())
    shift = max(0, int(np.frexp(peak)[1]))
    queries, keys = np.ldexp(queries, -shift), np.ldexp(keys, -shift)
    scaled_h2 = float(np.ldexp(h2, -2 * shift))
    centre = keys.mean(axis=0)
    q, k = queries - centre, keys - centre
    spread = max(np.abs(q).max(), np.abs(k).max())
    if scaled_h2 < _TINY:
        raise ValueError(
            f"h2 == {h2} is too small for coordinates up to {peak:.3g}: h2 / 4**{shift}, the bandwidth once "
            f"the points are scaled below 1, falls under float64's smallest normal number; rescale the points"
        )
    # the logits' operands: coordinates over h2 and squared norms over h2 (the spread is below 2)
    if np.ldexp(max(spread, spread * spread), -_MAX_LOG2_OPERAND) > scaled_h2:
        raise ValueError(
            f"h2 == {h2} is too small for the spread of the queries and keys (up to 2**{np.log2(spread) + shift:.1f} "
            f"from the keys' mean): the distances over h2 would pass 2**{_MAX_LOG2_OPERAND} and overflow float64; "
            f"rescale the points or increase h2"
        )
    return q, k, centre, shift, scaled_h2, budget_bytes


def kernel_logsumexp(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Log of the unnormalised kernel sum, :math:`\log \sum_j e^{-\lVert q_m - k_j\rVert^2/(2 h_2)}`.

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M,)
    """
    q, k, _, _, scaled_h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    return _streaming_kernel_sums(q, k, scaled_h2, budget_bytes, want_mean=False)[0]


def kernel_mean(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Gaussian-kernel (Nadaraya-Watson) mean of the keys seen from each query.

    .. math:: a(q_m) = \sum_{j=1}^N \frac{e^{-\lVert q_m - k_j\rVert^2/(2h_2)}}
              {\sum_{i} e^{-\lVert q_m - k_i\rVert^2/(2h_2)}}\, k_j

    As ``h2 -> 0`` it tends to the nearest key; as ``h2 -> inf`` to the plain mean of the keys.

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        Keys, which are also the values.
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M, d)
    """
    q, k, centre, shift, scaled_h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    mean = _streaming_kernel_sums(q, k, scaled_h2, budget_bytes, want_mean=True)[1]
    return np.ldexp(mean + centre, shift)


def log_kde(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Log of the Gaussian kernel density estimate at each query.

    .. math:: \log \frac1N \sum_{j=1}^N (2\pi h_2)^{-d/2} e^{-\lVert q_m - k_j\rVert^2/(2h_2)}

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M,)
    """
    q, k, _, _, scaled_h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    lse = _streaming_kernel_sums(q, k, scaled_h2, budget_bytes, want_mean=False)[0]
    n, d = k.shape
    return lse - np.log(n) - 0.5 * d * np.log(2.0 * np.pi * h2)


def kde_score(queries, keys, h2, *, budget_bytes=DEFAULT_BUDGET_BYTES) -> np.ndarray:
    r"""Gradient of the log kernel density estimate (Tweedie's identity for the empirical prior).

    .. math:: \nabla_q \log \mathrm{KDE}(q_m) = \frac{a(q_m) - q_m}{h_2}

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    budget_bytes : int
        Upper bound on the bytes of temporaries held at once.

    Returns
    -------
    ndarray, shape (M, d)
    """
    q, k, _, shift, scaled_h2, budget_bytes = _prepare(queries, keys, h2, budget_bytes)
    mean = _streaming_kernel_sums(q, k, scaled_h2, budget_bytes, want_mean=True)[1]
    return np.ldexp(mean - q, shift) / h2
