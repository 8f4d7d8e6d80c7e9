"""The risk experiments' shared design: noise level, bandwidth schedules, reference priors, kernel path.

E1 and E4 (:mod:`~attneb.proofs_check.topics.stage2`), E2 (:mod:`~attneb.proofs_check.topics.depth_noise`),
E5 (:mod:`~attneb.proofs_check.topics.attention`), H1's depth check and E7
(:mod:`~attneb.proofs_check.topics.schedules`) read these, so that every experiment runs on the same
priors and schedules.
"""

from __future__ import annotations

import math

#: The noise variance of every risk experiment.
SIGMA2 = 0.5

#: Bandwidth schedules along which N grows (T = T*(h2) = sigma2 / (2 h2) throughout).
#: "log" keeps N far above the stability bound (S1): N_c = exp(2 sigma2 / (e h2)) = N^(1/2);
#: "power" shrinks h2 like N^(-1/4), so N_c overtakes N (at N ~ 4.5e4 here: N_c = 2.0e4 at N = 32768, 1.3e5 at 65536).
SCHEDULES = {
    "log": ("h2 = (4 sigma2 / e) / log N", {"rule": "log", "scale": round(4 * SIGMA2 / math.e, 4)}),
    "power": ("h2 = 0.5 N^(-1/4)", {"rule": "power", "scale": 0.5, "exponent": 0.25}),
}


#: Kernel path of the estimators that take one: binned (grid and FFT) where d <= 2 and it is the cheaper.
FAST = {"backend": "auto", "tol": 1e-7}


def fast_options(estimators) -> dict:
    """Sweep ``options`` putting every estimator of ``estimators`` that has a kernel path on :data:`FAST`."""
    return {name: FAST for name in estimators if name in ("two-stage", "stage-two-only", "tweedie-kde", "clean-context")}


#: The asymptotic regime of the stability bound S1, with margin: N >= REGIME * N_c.
REGIME = 10.0

#: The three priors of E1 (recovery) and E5 (clean context).
RECOVERY_PRIORS = {
    "gaussian": ("Gaussian N(0, 1)", {"family": "Gaussian", "mean": [0.0], "var": 1.0}),
    "clusters": ("two clusters at +-2, var 0.25", {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25}),
    "sphere": ("uniform sphere S^2 in R^3", {"family": "UniformSphere", "dim": 3, "radius": 1.0}),
}


#: The six reference priors of the estimator table (d <= 2).
TABLE_PRIORS = {
    "gaussian": ("Gaussian N(0, 1)", {"family": "Gaussian", "mean": [0.0], "var": 1.0}),
    "clusters": ("two clusters at +-2, var 0.25", {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25}),
    "discrete": ("three atoms -1.5, 0, 1.5", {"family": "Discrete", "atoms": [[-1.5], [0.0], [1.5]]}),
    "sphere": ("uniform circle S^1 in R^2", {"family": "UniformSphere", "dim": 2, "radius": 1.0}),
    "box": ("uniform box [-1.5, 1.5]^2", {"family": "UniformBox", "low": [-1.5, -1.5], "high": [1.5, 1.5]}),
    "laplace": ("Laplace, scale 1/sqrt(2)", {"family": "Laplace", "scale": 0.5 ** 0.5, "dim": 1}),
}


#: Heavy-tailed priors of E1 and E4: one Student-t coordinate, df 3 (no fourth moment) and df 5, at scale
#: sqrt((df - 2)/df), so variance 1 like the Gaussian N(0, 1) of both experiments: linear shrinkage has the same
#: risk on the three, and what differs is the tails.
STUDENT_T_PRIORS = {
    f"student-t{df}": (f"Student-t, df {df}, variance 1",
                       {"family": "StudentT", "df": float(df), "scale": math.sqrt((df - 2) / df), "dim": 1})
    for df in (3, 5)
}


TABLE_ESTIMATORS = ("two-stage", "stage-two-only", "tweedie-kde", "linear", "npmle", "oracle")


def labelled(rows_by_part: dict[str, list[dict]], priors: dict) -> dict[str, list[dict]]:
    """The rows of each part under its prior's label (``priors[part][0]``), for a figure's legend."""
    return {priors[part][0]: rows for part, rows in rows_by_part.items()}
