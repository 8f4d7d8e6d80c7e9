r"""Exact Gaussian-kernel sums on a GPU: fused Triton kernels, O(N) memory.

The same sums as :mod:`attneb.numerics.kernels` (queries :math:`q_m`, keys :math:`k_j`, logits
:math:`\ell_{mj} = -\lVert q_m - k_j\rVert^2/(2h_2)`):

* :func:`kernel_logsumexp`: :math:`\log \sum_j e^{\ell_{mj}}`,
* :func:`kernel_mean`: :math:`\sum_j \mathrm{softmax}_j(\ell_{mj})\, k_j`.

How they are computed. Queries and keys are centred on the key mean and divided by
:math:`\sqrt{2h_2}` in float64 on the host (:math:`u = (x - \bar k)/\sqrt{2h_2}`, so that the
rounding error is relative to the spread of the data, not to its distance from the origin), and
copied to the GPU in the chosen precision. Logits are in base 2 (:math:`c = \log_2 e`, so that the
exponentials are ``exp2``) and never stored: the memory is that of the inputs and outputs,
:math:`O((M + N) d)`. Two kernels, chosen by ``d`` (:data:`_DIRECT`):

* the **direct kernel** (``d <= 4``): each program owns ``BLOCK_M`` queries and streams over the
  keys in blocks of ``BLOCK_N``; each element of the tile gets its logit
  :math:`c(2u_q \cdot u_k - \lVert u_k\rVert^2) - s_q` by ``d + 1`` fused multiply-adds on the
  CUDA cores, its weight by one ``exp2``, and adds it and its weighted key into accumulators of its
  own; the rows are reduced once, after the loop (no reduction, maximum or rescaling inside it:
  about 10 instructions per pair in d = 3). The shift :math:`s_q` is the row's largest logit, so
  that no weight exceeds about 1 and the sum is at least about 1: where the queries are the keys
  (the same array, as in every Stage-1 layer), a query's own key gives it, :math:`s_q = c\lVert
  u_q\rVert^2`; otherwise a first pass of the same arithmetic finds it. The exponents' rounding
  error is at most about :math:`8(d + 6)\,\epsilon\, c\max\lVert u\rVert^2` (``d + 1`` roundings
  of terms up to :math:`4c\max\lVert u\rVert^2`, the inputs' own roundings, twice where a first
  pass found the shift); where that could pass 60 (in float32, points more than about
  :math:`4000\sqrt{h_2}` from the keys' mean), a weight could overflow or a row's sum underflow, and the
  matrix-product kernel, whose running maximum is taken from the rounded logits themselves, serves
  instead;
* the **matrix-product kernel** (larger ``d``): the logits of a block are one matrix product of
  augmented operands, :math:`c\,[2u_q, -\lVert u_q\rVert^2, -1] \cdot [u_k, 1, \lVert
  u_k\rVert^2] = -c\lVert u_q - u_k\rVert^2`, and an online log-sum-exp keeps a running maximum
  :math:`m`, the sum :math:`l = \sum_j 2^{\ell_{mj} - m}` and the weighted key sum (a second matrix
  product, which also gives the sum where a column of ones fits in the keys' padding to a power of
  two), rescaled by :math:`2^{m_{old} - m_{new}}` whenever the maximum grows (Flash-attention
  style). Logits that round above 0 need no clipping: no weight exceeds :math:`2^0` once the
  running maximum is subtracted.

Both kernels' logits cancel: a logit carries an absolute error of about :math:`\epsilon
\lVert u\rVert^2` (:math:`\epsilon` the unit roundoff of the precision), small for queries among
the keys, growing with the square of a query's distance from them.

Precision (``precision``):

* ``"float64"``: every operation in float64 (the exponential from libdevice); agrees with the
  numpy path to 1e-13 of the data scale on N = 10^6 standard normal tokens, to 6e-15 by the direct
  kernel (tested to 1e-10);
* ``"float32"``: the direct kernel's arithmetic in float32 (``exp2`` by the hardware's
  approximation, about 2 ulp), the products of the other kernel on tensor cores in three passes
  of TF32 (``tf32x3``, about float32's accuracy); agrees with the numpy path to about 2e-6 of the
  data scale on well-spread data (tested to :data:`FLOAT32_TOLERANCE`), the log-sums to a small
  multiple of the logits' cancellation error (:data:`FLOAT32_LSE_FACTOR`).

Measured on one H200 (``bash benchmarks/gpu.sh``; copies to and from the GPU included): one layer
of N = 10^6 tokens takes, in d = 3, 0.70 s in float32 and 3.2 s in float64 (1.4 T and 0.31 T pairs
a second; the matrix-product kernel took 1.69 s and 3.04 s), in d = 1 0.33 s and 1.67 s, and in
d = 16 2.8 s in float32.

Why Triton through torch: it is the optional GPU stack researchers already install, its
kernels are written and checked in Python, and it runs the same kernel on the CPU under its
interpreter (``TRITON_INTERPRET=1``), where this module is tested without a GPU. KeOps was the
other candidate; version 2.3 crashed while generating its first kernel under CUDA 13 (issue 12).

:func:`available` says whether the path can run here (torch with a CUDA device, and triton).
"""

from __future__ import annotations

import contextlib
import functools
import os

import numpy as np

from .validation import check_array, check_option, check_positive, check_same_dim

__all__ = ["FLOAT32_TOLERANCE", "PRECISIONS", "available", "kernel_logsumexp", "kernel_mean", "require"]

PRECISIONS = ("float64", "float32")

#: Largest difference of the float32 kernel means from the float64 numpy path, relative to the data scale (the
#: largest coordinate range of the keys), that the tests allow on well-spread data (measured on an H200 on the tests'
#: data: 4.4e-7 by the direct kernel, 8.7e-7 by the product kernel; a weighted sum in one pass of TF32 gave 3.7e-5).
FLOAT32_TOLERANCE = 1e-5
#: Largest difference of the float32 log-sums from the numpy path that the tests allow, in units of
#: :math:`\epsilon_{32} (1 + \max \lVert u\rVert^2)`: the logits' cancellation (:func:`_logit_scale`) and the
#: rounding of the exponentials and the sum.
FLOAT32_LSE_FACTOR = 64

_LOG2_E, _LN_2 = 1.0 / np.log(2.0), np.log(2.0)
#: Largest element offset the kernels compute (int32).
_MAX_OFFSET = 2**31 - 1

_MISSING = "backend 'gpu' needs torch with a CUDA device and triton (pip install 'attneb[gpu]')"


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def _modules():
    """``(torch, kernel)``, or ``None`` where torch or triton cannot be imported."""
    try:
        import torch

        from . import _gpu_kernel
    except ImportError:
        return None
    return torch, _gpu_kernel


@functools.cache
def available() -> bool:
    """Whether the GPU path runs here: torch and triton import, and torch sees a CUDA device."""
    found = _modules()
    return found is not None and (found[0].cuda.is_available() or _interpreted())


def require() -> None:
    """Raise ``RuntimeError`` saying what is missing where the GPU path cannot run here."""
    if not available():
        raise RuntimeError(_MISSING)


#: The matrix-product kernel, per precision: (BLOCK_M, BLOCK_N, num_warps, num_stages, the input precision of the
#: logits' product, that of the weighted sum's). Chosen by ``benchmarks/gpu.py --choose`` on an H200: the fastest of
#: the shapes tried on N = 262144 in d = 3 plus N = 65536 in d = 16 (float64 0.350 s against 0.362-0.405 s, float32
#: 0.209 s against 0.239-0.254 s). A weighted sum in one pass of TF32 with the keys split in two took 1.35 s at
#: N = 10^6, d = 3, against 1.72 s (H100), but was 40 times less accurate (3.7e-5 of the data scale on the float32
#: test's data, against 8.7e-7): left out.
_CONFIG = {"float64": (64, 32, 4, 2, "ieee", "ieee"), "float32": (128, 64, 4, 2, "tf32x3", "tf32x3")}
#: The direct kernel, per precision: (BLOCK_M, BLOCK_N, num_warps) and the largest d it serves (at most 4, the
#: kernel's accumulators). Chosen by ``benchmarks/gpu.py --choose`` on an H200: the fastest shape on N = 262144 in
#: d = 3 (float64 0.224 s against 0.238 s; float32 0.075 s against 0.080-0.099 s), then the direct kernel for every
#: d up to 4 where it was the faster there (float64 0.125-0.234 s against 0.246-0.291 s; float32 0.028-0.087 s
#: against 0.129-0.178 s). At N = 10^6 in d = 3 float64 is the exception: 3.23 s against 3.04 s (6% slower, and 30
#: times more accurate).
_DIRECT = {"float64": (32, 32, 4, 4), "float32": (32, 64, 8, 4)}
#: The largest d the direct kernel can serve (its four accumulators).
_DIRECT_MAX_DIM = 4


@contextlib.contextmanager
def _forced_kernel(name):
    """Within the block, route every d of both precisions to one kernel: ``"direct"`` (up to :data:`_DIRECT_MAX_DIM`;
    the product kernel above) or ``"product"``; :data:`_DIRECT` is restored on leaving (tests and benchmarks)."""
    saved = dict(_DIRECT)
    for precision, config in saved.items():
        _DIRECT[precision] = config[:3] + (_DIRECT_MAX_DIM if name == "direct" else 0,)
    try:
        yield
    finally:
        _DIRECT.update(saved)


def _logit_scale(queries, keys, h2):
    r""":math:`\max \lVert u\rVert^2` over the queries and keys, :math:`u = (x - \bar k)/\sqrt{2h_2}`: times the unit
    roundoff, the scale of the logits' cancellation error (module docstring)."""
    centre = np.mean(keys, axis=0)
    return max(float(((points - centre) ** 2).sum(axis=1).max()) for points in (queries, keys)) / (2.0 * h2)


def _augmented_width(d):
    """Columns of :func:`_augmented`'s operands (the widest row of any kernel's arrays)."""
    return max(16, 1 << (d + 1).bit_length())


def _augmented(points, squares, query):
    """Operands whose products are the logits in base 2: ``c [2u, -|u|^2, -1] . [u, 1, |u|^2] = -c |u_q - u_k|^2``
    with ``c = log2(e)`` on the queries' side, zero-padded to a width of at least 16 (the smallest inner dimension of
    a matrix product in Triton); ``squares`` are the points' ``|u|^2``."""
    m, d = points.shape
    out = np.zeros((m, _augmented_width(d)))
    if query:
        out[:, :d] = 2.0 * points
        out[:, d] = -squares
        out[:, d + 1] = -1.0
        out *= _LOG2_E
    else:
        out[:, :d] = points
        out[:, d] = 1.0
        out[:, d + 1] = squares
    return out


def _upload(torch, array, dtype):
    device = "cpu" if _interpreted() else "cuda"
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def _download(torch, tensor):
    return tensor.to(torch.float64).cpu().numpy()


def _sums(queries, keys, h2, precision, want_mean):
    r"""``(lse, mean)`` for validated, centred float64 inputs (``mean`` is ``None`` unless wanted).

    The kernels see the coordinates :math:`u = x / \sqrt{2 h_2}` (divided in float64, before any
    cast), so that their logits are minus plain squared distances and no scalar crosses to them in float32.
    Queries that are the keys (the same array: tokens attending to themselves) are scaled once, and each
    row's largest logit is its own.
    """
    require()
    self_attention = queries is keys
    unit = np.sqrt(2.0 * h2)
    k = keys / unit
    q = k if self_attention else queries / unit
    k_squares = np.einsum("ij,ij->i", k, k)
    q_squares = k_squares if self_attention else np.einsum("ij,ij->i", q, q)
    if q.shape[1] <= _DIRECT[precision][3] and _direct_fits(q_squares, k_squares, q.shape[1], precision):
        lse, mean = _direct_sums(q, k, q_squares, k_squares, precision, want_mean, self_attention)
    else:
        lse, mean = _product_sums(q, k, q_squares, k_squares, precision, want_mean)
    return _LN_2 * lse, unit * mean if want_mean else None


def _direct_fits(q_squares, k_squares, d, precision):
    r"""Whether the direct kernel's exponents stay within :math:`2^{\pm 60}`, where no weight overflows and no row's
    sum underflows: their rounding error, at most :math:`8 (d + 6)\, \epsilon\, c \max \lVert u\rVert^2`, is at most
    60 (module docstring)."""
    largest = max(float(squares.max(initial=0.0)) for squares in (q_squares, k_squares))
    return 8 * (d + 6) * np.finfo(precision).epsneg * _LOG2_E * largest <= 60


def _product_sums(q, k, q_squares, k_squares, precision, want_mean):
    """The base-2 log-sums and the means (``u`` units) by the matrix-product kernel (module docstring)."""
    torch, kernels = _modules()
    dtype = getattr(torch, precision)
    block_m, block_n, warps, stages, dot_qk, dot_pv = _CONFIG[precision]
    (m, d), n = q.shape, k.shape[0]
    columns = d if want_mean else 0
    padded = max(2, 1 << (columns - 1).bit_length())
    sum_by_dot = columns < padded  # a column of ones fits in the padding: the weights' sum comes with the product
    first = int(sum_by_dot)
    values = np.zeros((n, padded))
    values[:, 0] = first
    values[:, first : first + columns] = k[:, :columns]
    qa, ka, values = (_upload(torch, array, dtype)
                      for array in (_augmented(q, q_squares, True), _augmented(k, k_squares, False), values))
    lse = torch.empty(m, device=qa.device, dtype=dtype)
    mean = torch.empty((m, d), device=qa.device, dtype=dtype) if want_mean else lse
    kernels.kernel_sums[(-(-m // block_m),)](
        qa, ka, values, lse, mean, m, n, n - n % block_n, D=d, KP=qa.shape[1], VP=padded, BLOCK_M=block_m,
        BLOCK_N=block_n, SUM_BY_DOT=sum_by_dot, WANT_MEAN=want_mean, DOT_QK=dot_qk, DOT_PV=dot_pv, num_warps=warps,
        num_stages=stages)
    return _download(torch, lse), _download(torch, mean) if want_mean else None


def _direct_sums(q, k, q_squares, k_squares, precision, want_mean, self_attention):
    r"""The base-2 log-sums and the means (``u`` units) by the direct kernel (module docstring).

    Logits :math:`c(2 u_q \cdot u_k - \lVert u_k\rVert^2) - s_q`, with :math:`c = \log_2 e` and the shift
    :math:`s_q` the row's largest logit: :math:`c \lVert u_q\rVert^2` where the queries are the keys (its own key),
    else from a first pass of the kernel; the log-sum adds back :math:`s_q - c\lVert u_q\rVert^2`.
    """
    torch, kernels = _modules()
    dtype = getattr(torch, precision)
    block_m, block_n, warps, _ = _DIRECT[precision]
    (m, d), n = q.shape, k.shape[0]
    self_logits = _LOG2_E * q_squares
    qs = _upload(torch, (2.0 * _LOG2_E) * q.T, dtype)
    ks = _upload(torch, np.vstack([k.T, -_LOG2_E * k_squares]), dtype)
    grid = (-(-m // block_m),)
    if self_attention:
        shift = _upload(torch, self_logits, dtype)
    else:
        shift = torch.empty(m, device=qs.device, dtype=dtype)
        kernels.direct_max[grid](qs, ks, shift, m, n, D=d, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    sums = torch.empty(m, device=qs.device, dtype=dtype)
    mean = torch.empty((d, m), device=qs.device, dtype=dtype) if want_mean else sums
    kernels.direct_sums[grid](qs, ks, shift, sums, mean, m, n, D=d, BLOCK_M=block_m, BLOCK_N=block_n,
                              WANT_MEAN=want_mean, num_warps=warps)
    lse = _download(torch, shift) + np.log2(_download(torch, sums)) - self_logits
    return lse, _download(torch, mean).T if want_mean else None


def _prepare(queries, keys, h2, precision):
    """Validated, centred float64 points, their centre, ``h2`` and ``precision``; queries that are the keys (the same
    array) stay the same array, prepared once."""
    same = queries is keys
    queries = check_array(queries, "queries")
    keys = queries if same else check_array(keys, "keys")
    check_same_dim(queries, "queries", keys, "keys")
    h2 = check_positive(h2, "h2")
    precision = check_option(precision, "precision", PRECISIONS)
    most = max(len(queries), len(keys))
    if most * _augmented_width(queries.shape[1]) > _MAX_OFFSET:
        raise ValueError(f"{most} points in d == {queries.shape[1]}: the GPU kernels address their arrays with 32-bit "
                         f"offsets, which reach {_MAX_OFFSET // _augmented_width(queries.shape[1])} points in this d")
    centre = keys.mean(axis=0)
    keys = keys - centre
    queries = keys if same else queries - centre
    extent = float(np.abs(keys).max(initial=0.0))
    if not same:
        extent = max(extent, float(np.abs(queries).max(initial=0.0)))
    limit = np.finfo(precision).max
    if extent > 0 and 2 * np.log(extent) + np.log(queries.shape[1]) - np.log(2 * h2) > np.log(limit) - 1:
        raise ValueError(f"coordinates up to {extent:.3g} from the keys' mean with h2 == {h2!r}: the squared "
                         f"distances / (2 h2) overflow {precision} on the GPU path; rescale the data and h2 together")
    return queries, keys, centre, h2, precision


def kernel_logsumexp(queries, keys, h2, *, precision="float64") -> np.ndarray:
    r"""Log of the unnormalised kernel sum on the GPU, :math:`\log \sum_j e^{-\lVert q_m - k_j\rVert^2/(2 h_2)}`.

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
    h2 : float
        Kernel bandwidth (variance), > 0.
    precision : {"float64", "float32"}
        Arithmetic on the GPU (module docstring).

    Returns
    -------
    ndarray, shape (M,), float64

    Raises
    ------
    RuntimeError
        Where torch with a CUDA device or triton is missing.
    """
    q, k, _, h2, precision = _prepare(queries, keys, h2, precision)
    return _sums(q, k, h2, precision, want_mean=False)[0]


def kernel_mean(queries, keys, h2, *, precision="float64") -> np.ndarray:
    r"""Gaussian-kernel (Nadaraya-Watson) mean of the keys seen from each query, on the GPU.

    .. math:: a(q_m) = \sum_{j=1}^N \frac{e^{-\lVert q_m - k_j\rVert^2/(2h_2)}}
              {\sum_{i} e^{-\lVert q_m - k_i\rVert^2/(2h_2)}}\, k_j

    Parameters
    ----------
    queries : array_like, shape (M, d)
    keys : array_like, shape (N, d)
        Keys, which are also the values.
    h2 : float
        Kernel bandwidth (variance), > 0.
    precision : {"float64", "float32"}
        Arithmetic on the GPU (module docstring).

    Returns
    -------
    ndarray, shape (M, d), float64

    Raises
    ------
    RuntimeError
        Where torch with a CUDA device or triton is missing.
    """
    q, k, centre, h2, precision = _prepare(queries, keys, h2, precision)
    return _sums(q, k, h2, precision, want_mean=True)[1] + centre
