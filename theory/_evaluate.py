"""Evaluate a derived expression at numbers (float out) or at sympy expressions (expression out)."""

from __future__ import annotations

import math
import numbers

import sympy as sp

__all__ = ["check_positive", "check_real", "evaluate"]


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


def _is_symbolic(value) -> bool:
    return isinstance(value, sp.Basic) and not value.is_number


def evaluate(expr, arguments, *, positive=()):
    """Evaluate ``expr`` at ``arguments = {symbol: (value, name)}``.

    When every value is a number, each is validated (finite; > 0 for the
    symbols in ``positive``), substituted, and the result returned as a
    ``float``. When any value is a sympy expression, the numbers are still
    validated and the values substituted (floats as exact rationals); the
    result is a sympy expression.
    """
    values = {}
    for symbol, (value, name) in arguments.items():
        if _is_symbolic(value):
            values[symbol] = value
        elif symbol in positive:
            values[symbol] = check_positive(value, name)
        else:
            values[symbol] = check_real(value, name)
    if any(_is_symbolic(value) for value in values.values()):
        return expr.subs({k: sp.nsimplify(v) if isinstance(v, float) else v for k, v in values.items()})
    return float(sp.lambdify(list(values), expr, "math")(*values.values()))
