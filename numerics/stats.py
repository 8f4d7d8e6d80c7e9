"""Uncertainty for statistical claims: intervals over seeds and fitted rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Interval", "SlopeFit", "linear_fit", "loglog_slope", "mean_interval"]


@dataclass(frozen=True)
class Interval:
    """An estimate with a two-sided confidence interval ``[low, high]`` at ``level``."""

    estimate: float
    low: float
    high: float
    level: float
    n: int

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] ({self.level:.0%}, n={self.n})"


@dataclass(frozen=True)
class SlopeFit:
    """Least-squares line ``y = intercept + slope * x`` with a t-interval on the slope."""

    slope: Interval
    intercept: float
    residual_std: float


def mean_interval(values, level: float = 0.95) -> Interval:
    r"""Student-t interval for the mean of i.i.d. values (e.g. one per seed).

    :math:`\bar v \pm t_{n-1,(1+\ell)/2}\, s/\sqrt n`; needs at least two values.
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size < 2:
        raise ValueError(f"values has {v.size} entries; an interval needs at least 2")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"values contains nan or inf: {v}")
    mean = float(v.mean())
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, level, int(v.size))


def linear_fit(x, y, level: float = 0.95) -> SlopeFit:
    r"""Least-squares line :math:`y = c + p x` with a Student-t interval on the slope :math:`p`.

    Needs at least three finite points so that the interval has a degree of freedom.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size < 3:
        raise ValueError(f"x and y must have the same length >= 3, got {x.size} and {y.size}")
    if not np.all(np.isfinite(np.r_[x, y])):
        raise ValueError(f"x and y must be finite, got x={x}, y={y}")
    fit = stats.linregress(x, y)
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 2) * fit.stderr)
    resid = y - (fit.intercept + fit.slope * x)
    return SlopeFit(
        slope=Interval(float(fit.slope), float(fit.slope) - half, float(fit.slope) + half, level, int(x.size)),
        intercept=float(fit.intercept),
        residual_std=float(resid.std(ddof=2)),
    )


def loglog_slope(x, y, level: float = 0.95) -> SlopeFit:
    r"""Fit :math:`\log y = c + p \log x` (:func:`linear_fit` on logs); ``x`` and ``y`` must be > 0."""
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError(f"x and y must be > 0 for a log-log fit, got x={x}, y={y}")
    return linear_fit(np.log(x), np.log(y), level)
