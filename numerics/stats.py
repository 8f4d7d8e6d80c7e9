"""Uncertainty for statistical claims: intervals over seeds and fitted rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Interval",
    "SlopeFit",
    "control_variate_interval",
    "geometric_mean_interval",
    "group_slopes_interval",
    "linear_fit",
    "loglog_slope",
    "mean_interval",
]


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


def group_slopes_interval(x, y, groups, level: float = 0.95) -> Interval:
    r"""Student-t interval for the mean of least-squares slopes fitted within each group (e.g. each seed).

    For every group :math:`g` (the points sharing a label of ``groups``) the slope
    :math:`p_g = \sum_{i \in g} (x_i - \bar x_g)(y_i - \bar y_g) / \sum_{i \in g} (x_i - \bar x_g)^2`, and the
    interval of their mean over the :math:`G` groups (:func:`mean_interval`, :math:`G - 1` degrees of freedom):

    .. math::

        \bar p \pm t_{G-1,\,(1+\ell)/2}\, s_p/\sqrt G.

    Where every group has the same ``x`` values, :math:`\bar p` is the slope of :func:`linear_fit` over all the
    points; its interval differs: it needs only the groups to be independent and alike, not the points
    (:func:`linear_fit`'s interval assumes independent points of equal variance, and covers 0.82-0.85 at a
    nominal 0.95 on E6's depth budgets, whose spread over seeds changes by a factor 1000 across ``sigma2``:
    ``benchmarks/calibration.py``).

    Parameters
    ----------
    x, y : array_like, shape (n,)
        Finite points.
    groups : array_like, shape (n,)
        Group label of every point (any hashable values); every group needs two distinct ``x``.
    level : float
        Two-sided level.

    Returns
    -------
    Interval
        ``estimate`` the mean slope, ``n`` the number of groups (at least two).
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    labels = np.asarray(groups).ravel()
    if not (x.shape == y.shape == labels.shape):
        raise ValueError(f"x, y and groups must have the same length, got {x.size}, {y.size} and {labels.size}")
    if not np.all(np.isfinite(np.r_[x, y])):
        raise ValueError(f"x and y must be finite, got x={x}, y={y}")
    slopes = []
    for label in dict.fromkeys(labels.tolist()):
        mine = labels == label
        xs, ys = x[mine], y[mine]
        if np.unique(xs).size < 2:
            raise ValueError(f"group {label!r} has {np.unique(xs).size} distinct x; a slope needs at least 2")
        dx = xs - xs.mean()
        slopes.append(float(dx @ (ys - ys.mean()) / (dx @ dx)))
    if len(slopes) < 2:
        raise ValueError(f"groups has {len(slopes)} group(s); an interval needs at least 2")
    return mean_interval(slopes, level)


def geometric_mean_interval(values, level: float = 0.95) -> Interval:
    r"""Student-t interval for the geometric mean of positive i.i.d. values (e.g. a ratio per seed), on the log scale.

    .. math::

        \exp\Bigl(\overline{\log v} \pm t_{n-1,(1+\ell)/2}\, s_{\log v}/\sqrt n\Bigr),

    :func:`mean_interval` of :math:`\log v` mapped back by :math:`\exp`; ``estimate`` is the geometric mean
    :math:`\exp(\overline{\log v})`. Exact for lognormal values. For positive, right-skewed values (ratios that
    scatter by tens of percent) :func:`mean_interval` of the values themselves undercovers their mean (0.91 at a
    nominal 0.95 for 8 lognormal values of log-sd 0.6: ``benchmarks/calibration.py``); this interval targets the
    geometric mean instead, the median of a lognormal law, which a band around 1 for a ratio may decide as well.

    Parameters
    ----------
    values : array_like
        At least two finite values, all > 0.
    level : float
        Two-sided level.
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size and (not np.all(np.isfinite(v)) or np.any(v <= 0)):
        raise ValueError(f"values must be finite and > 0 for a geometric mean, got {v}")
    iv = mean_interval(np.log(v), level)
    return Interval(float(np.exp(iv.estimate)), float(np.exp(iv.low)), float(np.exp(iv.high)), level, iv.n)


def control_variate_interval(values, controls, pilot_values, pilot_controls, level: float = 0.95) -> Interval:
    r"""Monte Carlo mean with control variates of known mean 0, their coefficients fitted on an independent pilot.

    With :math:`\hat\beta` the least-squares coefficients of the pilot's values on its controls (both centred),

    .. math::

        \hat\beta = \arg\min_\beta \sum_j \bigl((y^0_j - \bar y^0) - (c^0_j - \bar c^0)\,\beta\bigr)^2,
        \qquad a_i = y_i - c_i\,\hat\beta,

    the interval is :func:`mean_interval` of the adjusted draws :math:`a_i` (the controls' known mean, 0, is
    subtracted, not their sample mean): :math:`\bar a \pm t_{n-1,(1+\ell)/2}\, s_a/\sqrt n`. The adjusted draws are
    i.i.d. given the pilot, so the standard error is the plain one, with no leverage of the fitted coefficients on
    the draws it is computed from: where the controls are heavy-tailed (``x^2 He_k(z)`` under a Student-t prior of
    few degrees of freedom) coefficients fitted on the draws themselves shrink their residuals and the standard error
    with them (C10's estimator: Monte Carlo errors about 1.1x their stated standard error on the 2-D Student-t,
    df 5, prior; ``benchmarks/calibration.py``).

    Parameters
    ----------
    values : array_like, shape (n,)
        The quantity whose mean is estimated, one value per draw.
    controls : array_like, shape (n, p)
        Control variates of the same draws, each of known mean 0.
    pilot_values, pilot_controls : array_like, shapes (m,) and (m, p)
        Independent draws of the same law, for the coefficients only (``m > p + 1``).
    level : float
        Two-sided level.

    Returns
    -------
    Interval
        Of the mean of ``values``; ``n`` the number of draws.
    """
    y = np.asarray(values, dtype=float).ravel()
    c = np.asarray(controls, dtype=float)
    y0 = np.asarray(pilot_values, dtype=float).ravel()
    c0 = np.asarray(pilot_controls, dtype=float)
    if c.ndim != 2 or c0.ndim != 2:
        raise ValueError(f"controls must be 2-D (draws, p), got shapes {c.shape} and {c0.shape}; reshape a single "
                         "control with array.reshape(-1, 1)")
    if c.shape != (y.size, c0.shape[1]) or c0.shape[0] != y0.size:
        raise ValueError(f"expected controls (n, p) = ({y.size}, p) and pilot controls (m, p) = ({y0.size}, p), got "
                         f"{c.shape} and {c0.shape}")
    if y0.size <= c0.shape[1] + 1:
        raise ValueError(f"pilot has {y0.size} draws for {c0.shape[1]} controls; it needs more than p + 1")
    if not all(np.all(np.isfinite(a)) for a in (y, c, y0, c0)):
        raise ValueError("values and controls must be finite")
    centred = c0 - c0.mean(axis=0)
    beta = np.linalg.lstsq(centred, y0 - y0.mean(), rcond=None)[0]
    return mean_interval(y - c @ beta, level)

