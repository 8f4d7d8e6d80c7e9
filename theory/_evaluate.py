"""Evaluate a derived expression at numbers (float out), arrays (ndarray out) or sympy expressions (expression out).

The numeric function of an expression is built once (``sympy.lambdify``, cached per expression and argument
list) and reused by every later call, scalar or array.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np
import sympy as sp

__all__ = ["check_count", "check_positive", "check_real", "check_step", "evaluate"]


def check_real(value, name: str) -> float:
    """Return ``value`` as a float, or raise if it is not a finite real number."""
    if isinstance(value, sp.Basic) and value.is_number:
        if not value.is_real:
            raise ValueError(f"{name} == {value}, must be a real number")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} == {value}, must be finite")
    return value


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float, or raise if it is not a finite number > 0."""
    value = check_real(value, name)
    if value <= 0:
        raise ValueError(f"{name} == {value}, must be > 0")
    return value


def check_step(value, name: str = "eta") -> float:
    """Return ``value`` as a float, or raise ``ValueError`` naming it unless it is a finite step in (0, 1]."""
    if not np.isfinite(value) or not 0 < value <= 1:
        raise ValueError(f"{name} == {value!r} must lie in (0, 1]")
    return float(value)


def check_count(value, name: str, least: int) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming it unless it is an integer >= ``least``."""
    if int(value) != value or value < least:
        raise ValueError(f"{name} == {value!r} must be an integer >= {least}")
    return int(value)


def _is_symbolic(value) -> bool:
    return isinstance(value, sp.Basic) and not value.is_number


def _is_array(value) -> bool:
    return isinstance(value, (np.ndarray, list, tuple))


def _check_array(value, name: str, positive: bool) -> np.ndarray:
    """``value`` as a float64 array, or raise naming ``name`` and the first offending entry."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be real numbers, got {value!r}") from None
    bad = ~np.isfinite(array) | (array <= 0 if positive else False)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        rule = "finite and > 0" if positive else "finite"
        raise ValueError(f"{name}[{', '.join(map(str, index))}] == {array[index]}, every entry must be {rule}")
    return array


@lru_cache(maxsize=512)
def _scalar_function(expr, symbols):
    return sp.lambdify(symbols, expr, "math")


@lru_cache(maxsize=512)
def _array_function(expr, symbols):
    return sp.lambdify(symbols, expr, ["scipy", "numpy"])


def _evaluate_arrays(expr, symbols, values, names):
    try:
        shape = np.broadcast_shapes(*(np.shape(v) for v in values))
    except ValueError:
        shapes = ", ".join(f"{name}: {np.shape(v)}" for name, v in zip(names, values))
        raise ValueError(f"the arguments' shapes do not broadcast ({shapes})") from None
    with np.errstate(all="ignore"):
        result = np.broadcast_to(np.asarray(_array_function(expr, symbols)(*values), dtype=np.float64), shape)
    bad = ~np.isfinite(result)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        at = ", ".join(f"{name} = {np.broadcast_to(v, shape)[index]}" for name, v in zip(names, values))
        raise ValueError(f"{expr} is {result[index]} at {at} (entry {index}): not finite in float64")
    return np.array(result)


def evaluate(expr, arguments, *, positive=()):
    """Evaluate ``expr`` at ``arguments = {symbol: (value, name)}``.

    When every value is a number, each is validated (finite; > 0 for the
    symbols in ``positive``) and the result returned as a ``float``. When
    some values are arrays (``numpy.ndarray``, list or tuple; the others
    numbers), every entry is validated the same way and the result is a
    float64 array of the arguments' broadcast shape. When any value is a sympy
    expression, the numbers are still validated and the values substituted
    (floats as exact rationals); the result is a sympy expression.

    The numeric function is built once per ``expr`` and argument list.
    """
    if any(_is_symbolic(value) for value, _ in arguments.values()):
        values = {symbol: value if _is_symbolic(value)
                  else check_positive(value, name) if symbol in positive else check_real(value, name)
                  for symbol, (value, name) in arguments.items()}
        return expr.subs({k: sp.nsimplify(v) if isinstance(v, float) else v for k, v in values.items()})
    symbols = tuple(arguments)
    if any(_is_array(value) for value, _ in arguments.values()):
        values = [_check_array(value, name, symbol in positive) if _is_array(value)
                  else check_positive(value, name) if symbol in positive else check_real(value, name)
                  for symbol, (value, name) in arguments.items()]
        return _evaluate_arrays(expr, symbols, values, [name for _, name in arguments.values()])
    values = [check_positive(value, name) if symbol in positive else check_real(value, name)
              for symbol, (value, name) in arguments.items()]
    return float(_scalar_function(expr, symbols)(*values))
