"""Finite-difference gradients: the checks' route to a score that does not come from the code it checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["five_point_gradient"]


def five_point_gradient(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, step: float) -> np.ndarray:
    """``grad f`` at the rows of ``x`` by the fourth-order central stencil, one coordinate at a time.

    ``d f / d x_i ~ (-f(x + 2h e_i) + 8 f(x + h e_i) - 8 f(x - h e_i) + f(x - 2h e_i)) / (12 h)``,
    with truncation error ``h^4 |d^5 f / d x_i^5| / 30``.

    Parameters
    ----------
    f : callable
        Maps ``(M, d)`` points to ``(M,)`` values.
    x : ndarray, shape (M, d)
        The points.
    step : float
        The step ``h``.
    """
    grad = np.empty_like(x)
    for i in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[i] = step
        grad[:, i] = (-f(x + 2 * e) + 8 * f(x + e) - 8 * f(x - e) + f(x - 2 * e)) / (12 * step)
    return grad
