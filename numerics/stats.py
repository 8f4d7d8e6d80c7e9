"""Uncertainty for statistical claims: intervals over seeds and fitted rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Interval", "SlopeFit", "loglog_slope", "mean_interval"]


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
    """Least-squares fit ``log y = intercept + slope * log x`` with a t-interval on the slope."""

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


def loglog_slope(x, y, level: float = 0.95) -> SlopeFit:
    r"""Fit :math:`\log y = c + p \log x` by least squares; t-interval on :math:`p`.

    Needs at least three positive points so that the interval has a degree of freedom.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size < 3:
        raise ValueError(f"x and y must have the same length >= 3, got {x.size} and {y.size}")
    if np.any(x <= 0) or np.any(y <= 0) or not np.all(np.isfinite(np.r_[x, y])):
        raise ValueError(f"x and y must be finite and > 0 for a log-log fit, got x={x}, y={y}")
    fit = stats.linregress(np.log(x), np.log(y))
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 2) * fit.stderr)
    resid = np.log(y) - (fit.intercept + fit.slope * np.log(x))
    return SlopeFit(
        slope=Interval(float(fit.slope), float(fit.slope) - half, float(fit.slope) + half, level, int(x.size)),
        intercept=float(fit.intercept),
        residual_std=float(resid.std(ddof=2)) if x.size > 2 else 0.0,
    )
