"""Input validation shared by every public function of :mod:`numerics`.

Modelled on scikit-learn's ``utils/validation.py``: each checker returns the
cleaned value (``float`` or a C-contiguous float64 array) and raises a
``TypeError`` or ``ValueError`` whose message names the argument, says what
was expected, what was received and, where it helps, how to fix it.
Validate once, at the public boundary; private helpers trust their inputs.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

__all__ = [
    "NotFittedError",
    "check_array",
    "check_fitted",
    "check_interval",
    "check_nonnegative",
    "check_nonnegative_int",
    "check_option",
    "check_positive",
    "check_positive_int",
    "check_rng",
    "check_same_dim",
]


class NotFittedError(ValueError, AttributeError):
    """Raised when an estimator is used before ``fit``."""


def _check_real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} == {value}, must be finite")
    return value


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float, or raise if it is not a finite number > 0."""
    value = _check_real(value, name)
    if value <= 0:
        raise ValueError(f"{name} == {value}, must be > 0")
    return value


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as a float, or raise if it is not a finite number >= 0."""
    value = _check_real(value, name)
    if value < 0:
        raise ValueError(f"{name} == {value}, must be >= 0")
    return value


def check_interval(value, name: str, low: float, high: float, *, closed: str = "right") -> float:
    """Return ``value`` as a float, or raise if it lies outside the interval.

    ``closed`` is one of ``"right"`` ``(low, high]``, ``"left"`` ``[low, high)``,
    ``"both"`` ``[low, high]`` or ``"neither"`` ``(low, high)``.
    """
    value = _check_real(value, name)
    lo_ok = value >= low if closed in ("left", "both") else value > low
    hi_ok = value <= high if closed in ("right", "both") else value < high
    if not (lo_ok and hi_ok):
        left = "[" if closed in ("left", "both") else "("
        right = "]" if closed in ("right", "both") else ")"
        raise ValueError(f"{name} == {value}, must lie in {left}{low}, {high}{right}")
    return value


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} == {value}, must be >= {low}")
    return int(value)


def check_positive_int(value, name: str) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    return _check_int(value, name, 1)


def check_nonnegative_int(value, name: str) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 0."""
    return _check_int(value, name, 0)


def check_option(value, name: str, options: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``options``, else raise ``ValueError``."""
    options = tuple(options)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} == {value!r} is not a known option; expected one of {options}")
    return value


def check_array(x, name: str, *, ndim: int = 2, allow_empty: bool = False) -> np.ndarray:
    """Return ``x`` as a finite, C-contiguous float64 array of ``ndim`` dimensions.

    Parameters
    ----------
    x : array_like
        Real numbers. Arrays of points are ``(n, d)``: one row per point.
    name : str
        The argument's name, used in error messages.
    ndim : int
        Required number of dimensions (1 or 2).
    allow_empty : bool
        Whether an array with no rows (or no entries when 1-D) is accepted.
    """
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    if arr.ndim != ndim:
        if ndim == 2 and arr.ndim == 1:
            raise ValueError(
                f"Expected 2D array for {name}, got 1D array instead: {name}.shape == {arr.shape}. "
                f"Reshape your data using array.reshape(-1, 1) if it holds one-dimensional points, "
                f"or array.reshape(1, -1) if it holds a single point."
            )
        if ndim == 2 and arr.ndim == 0:
            raise ValueError(
                f"Expected 2D array for {name}, got scalar {arr!r} instead. "
                f"Reshape your data using np.array([[value]])."
            )
        raise ValueError(f"Expected {ndim}D array for {name}, got {arr.ndim}D array of shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one point is required")
    if ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} has shape {arr.shape}: points must have at least one coordinate")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains nan or inf (first at index {tuple(int(i) for i in bad)}: "
            f"{arr[tuple(bad)]}); all entries must be finite"
        )
    return arr


def check_same_dim(a: np.ndarray, a_name: str, b: np.ndarray, b_name: str) -> None:
    """Raise ``ValueError`` unless two ``(n, d)`` arrays have the same ``d``."""
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{a_name} has d == {a.shape[1]} coordinates per point but {b_name} has d == {b.shape[1]}; "
            f"they must match"
        )


def check_rng(rng) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a Generator, an int seed or ``None``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None, got {rng!r}")


def check_fitted(estimator, attribute: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has ``attribute`` (set by ``fit``)."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. "
            f"Call 'fit' with a noisy batch before using this method."
        )
