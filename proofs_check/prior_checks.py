"""Evidence about the reference priors: Tweedie's formula (C10) and their Bayes risks.

C10 says ``E[x | xt] = xt + sigma2 grad log p(xt)`` for every reference prior. The priors of the
estimator table (E4) and the 3-D sphere are built here from :mod:`numerics.priors`, and at seeded
points spread over the noisy density (plus far points) and two noise levels, ``sigma2 = 0.5`` and
``2`` (at ``sigma2 = 1``, ``sigma`` and ``sigma2`` agree and a ``sigma``-for-``sigma2`` slip is
invisible), three checks measure:

* **Tweedie, closed forms**: each prior's ``posterior_mean`` against ``xt + sigma2 * noisy_score``.
  The two come from separate formulas (the score is the derivative of the noisy density, the
  posterior mean its own routine; see each family's Notes), so the residual is rounding only.
* **Tweedie, finite differences**: the posterior mean against ``xt + sigma2`` times a 5-point
  gradient of ``noisy_logpdf``, the score not used at all. A ``log p`` off by 1% has a gradient off
  by 1% wherever ``log p`` is, even where ``log p`` is near 0: the residual is then
  ``0.01 |E[x | xt] - xt|``, which vanishes only where the score does (the modes), so the points
  are spread over the noisy density and the worst point decides.
* **Bayes risk**: ``prior.mmse(sigma2)`` against an independent Monte Carlo estimate of
  ``E||x - E[x | xt]||^2 / d`` from draws of ``(x, xt)``, sized so that a 1% error in ``mmse`` is
  rejected with power >= 0.95 at each noise level.

What a wrong theory changes is looked up at call time through module attributes
(:func:`tweedie_scale`, :func:`reference_risk`, :func:`risk_dimension`) and the priors' methods
through their classes, so that :mod:`proofs_check.power` can swap them. Measurements are cached
per replicate in ``ctx.cache``, so a theory alternative decides again on the same draws.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from numerics import priors

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Context, Evidence, alternative, check, swap

__all__ = ["REFERENCE_PRIORS", "SIGMA2S", "reference_risk", "risk_dimension", "tweedie_scale"]

#: Two noise levels on either side of 1 (at ``sigma2 = 1`` a ``sigma``-for-``sigma2`` slip is invisible).
SIGMA2S = (0.5, 2.0)
EPS = float(np.finfo(float).eps)

#: The six priors of the estimator table (``convergence_checks.TABLE_PRIORS``) and the 3-D sphere.
REFERENCE_PRIORS: dict[str, tuple[str, priors.Prior]] = {
    "gaussian": ("Gaussian N(0, 1)", priors.Gaussian(0.0, 1.0)),
    "clusters": ("two clusters at +-2, var 0.25", priors.GaussianMixture([[-2.0], [2.0]], var=0.25)),
    "discrete": ("three atoms -1.5, 0, 1.5", priors.Discrete([[-1.5], [0.0], [1.5]])),
    "sphere": ("uniform circle S^1 in R^2", priors.UniformSphere(2, 1.0)),
    "box": ("uniform box [-1.5, 1.5]^2", priors.UniformBox([-1.5, -1.5], [1.5, 1.5])),
    "laplace": ("Laplace, scale 1/sqrt(2)", priors.Laplace(0.5**0.5, 1)),
    "sphere-3d": ("uniform sphere S^2 in R^3", priors.UniformSphere(3, 1.0)),
}
PRIOR_COVERS = ("Gaussian", "GaussianMixture", "Discrete", "UniformSphere", "UniformBox", "Laplace")

# --- Tweedie ---------------------------------------------------------------------------------

#: Points per prior and noise level: draws of xt (where the noisy density lives) and far points.
POINTS = {"quick": (100, 10), "full": (400, 40)}
#: Far points lie at ||xt|| in [FAR[0], FAR[1]] x (scale + sqrt(sigma2)), in random directions.
FAR = (5.0, 20.0)
#: Closed-form Tweedie residual allowed, relative to the prior's scale. Both sides are closed forms
#: evaluated to ~10 eps relative to their size (measured <= 1e-14 on these priors); the sum
#: ``xt + sigma2 * score`` cancels at most log10(max ||xt|| / scale) ~ 2 digits at the farthest
#: points; 1e-10 leaves a margin of ~100 over that and sits 7 orders below the residual of any
#: alternative (>= 1e-3 scale).
TWEEDIE_TOL = 1e-10
#: Finite-difference step relative to sqrt(sigma2), and the rounding error of one ``noisy_logpdf``
#: value in units of ``eps (10 + |log p|)`` (a few roundings per operation of a log-sum-exp, a
#: special function or a series; measured <= 1 on these priors).
FD_STEP = 1e-3
LOGPDF_ROUNDING = 8.0
#: Safety factor on the truncation + rounding bound of the 5-point gradient.
FD_SAFETY = 10.0

# --- Bayes risk ------------------------------------------------------------------------------

#: Family-wise false-alarm rate of the risk comparisons (Bonferroni over priors x noise levels),
#: small so that a power analysis with 8 or 30 replicates sees no false alarm with probability
#: >= 0.96 (8) and at most one with probability >= 0.99 (30).
RISK_ALPHA = 0.005
#: Relative error in ``mmse`` that each comparison must detect, and with which power.
RISK_DETECT, RISK_POWER = 0.01, 0.95
#: Pilot draws (to size the main sample from the loss's spread), the smallest main sample, and the
#: factor on the designed size that covers the pilot's error in the standard deviation.
RISK_PILOT, RISK_MIN_DRAWS, RISK_MARGIN = 20_000, 20_000, 1.2


def tweedie_scale(sigma2: float) -> float:
    """The factor of the score in Tweedie's formula: ``sigma2`` (the noise variance)."""
    return sigma2


def reference_risk(prior: priors.Prior, sigma2: float) -> priors.RiskEstimate:
    """The Bayes risk per coordinate the prior reports: ``prior.mmse(sigma2)``."""
    return prior.mmse(sigma2)


def risk_dimension(prior: priors.Prior) -> int:
    """What the total squared error is divided by to give the risk per coordinate: ``d``."""
    return prior.dim


def prior_scale(prior: priors.Prior) -> float:
    """``max_i |E x_i| + max_i sd(x_i)``: the length scale residuals are measured in."""
    mean, var = prior.moments()
    return float(np.max(np.abs(mean)) + np.sqrt(np.max(var)))


def posterior_width(prior: priors.Prior, sigma2: float) -> float:
    """``W`` with ``|kappa_5(x_i | xt)| <= 11 W^5``, so ``|d^5 log p / dxt_i^5| <= 11 W^5 / sigma2^5``.

    The ``k``-th derivative of ``log p`` along a coordinate is the ``k``-th cumulant of that
    coordinate's posterior over ``sigma2^k`` (``k >= 2``). A posterior within an interval of
    length ``D`` has ``|mu_k| <= D^k`` and ``kappa_5 = mu_5 - 10 mu_3 mu_2``, so ``W = D``, the
    support's extent (atoms, sphere, box). A mixture's posterior is that over the component means
    plus an independent Gaussian: ``W`` = the means' extent; a Gaussian's ``kappa_5`` is 0. The
    Laplace posterior is strongly log-concave (curvature ``>= 1 / sigma2``), sub-Gaussian with
    variance proxy ``sigma2``: ``|kappa_5| <= 113 sd^5 <= 11 (2 sd)^5``.
    """
    if isinstance(prior, priors.Discrete):
        return float(np.max(np.ptp(prior.atoms, axis=0)))
    if isinstance(prior, priors.GaussianMixture):
        return float(np.max(np.ptp(prior.means, axis=0)))
    if isinstance(prior, priors.UniformSphere):
        return 2 * prior.radius
    if isinstance(prior, priors.UniformBox):
        return float(np.max(prior.high - prior.low))
    if isinstance(prior, priors.Laplace):
        return 2 * float(np.sqrt(sigma2))
    if isinstance(prior, priors.Gaussian):
        return 0.0
    raise TypeError(f"no posterior width for {type(prior).__name__}")


def _points(prior: priors.Prior, sigma2: float, seed: int, quick: bool) -> np.ndarray:
    """Noisy draws ``x + sqrt(sigma2) z`` and far points, ``(M, d)``."""
    rng = np.random.default_rng(seed)
    n_near, n_far = POINTS["quick" if quick else "full"]
    near = prior.sample(n_near, rng) + np.sqrt(sigma2) * rng.standard_normal((n_near, prior.dim))
    directions = rng.standard_normal((n_far, prior.dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radii = rng.uniform(*FAR, size=(n_far, 1)) * (prior_scale(prior) + np.sqrt(sigma2))
    return np.concatenate([near, radii * directions])


def _five_point_gradient(f, x: np.ndarray, step: float) -> np.ndarray:
    grad = np.empty_like(x)
    for i in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[i] = step
        grad[:, i] = (-f(x + 2 * e) + 8 * f(x + e) - 8 * f(x - e) + f(x - 2 * e)) / (12 * step)
    return grad


def _measured(ctx: Context, what: str) -> dict:
    """Per ``(prior, sigma2)``: points, posterior mean and ``what`` (``"score"`` or ``"fd"``); cached per replicate."""
    key = ("C10 tweedie", ctx.replicate, ctx.quick, what)
    if key in ctx.cache:
        return ctx.cache[key]
    seeds = ctx.fresh_seeds([1000 + i for i in range(len(REFERENCE_PRIORS) * len(SIGMA2S))])
    out = {}
    for i, (name, (_, prior)) in enumerate(REFERENCE_PRIORS.items()):
        for j, sigma2 in enumerate(SIGMA2S):
            xt = _points(prior, sigma2, seeds[i * len(SIGMA2S) + j], ctx.quick)
            entry = {"xt": xt, "posterior_mean": prior.posterior_mean(xt, sigma2)}
            if what == "score":
                entry["score"] = prior.noisy_score(xt, sigma2)
            else:
                step = FD_STEP * np.sqrt(sigma2)
                entry["score"] = _five_point_gradient(lambda x: prior.noisy_logpdf(x, sigma2), xt, step)
                entry["logp"] = prior.noisy_logpdf(xt, sigma2)
                entry["step"] = step
            out[name, sigma2] = entry
    ctx.cache[key] = out
    return out


def _fd_tolerance(prior: priors.Prior, sigma2: float, step: float, logp: np.ndarray) -> np.ndarray:
    """Per point, relative to the scale: the 5-point gradient's error bound times ``sigma2``, plus ``TWEEDIE_TOL``.

    ``FD_SAFETY sigma2 (h^4 11 W^5 / (30 sigma2^5) + 1.5 LOGPDF_ROUNDING eps (10 + |log p|) / h)``:
    the stencil's truncation ``h^4 |f^(5)| / 30`` with the bound of :func:`posterior_width`, and its
    rounding (coefficients ``(1 + 8 + 8 + 1) / 12``), both times ``sigma2`` as the gradient enters
    Tweedie's formula; ``TWEEDIE_TOL`` is the closed forms' rounding.
    """
    truncation = step**4 * 11 * posterior_width(prior, sigma2) ** 5 / sigma2**5 / 30
    rounding = 1.5 * LOGPDF_ROUNDING * EPS * (10 + np.abs(logp)) / step
    return FD_SAFETY * sigma2 * (truncation + rounding) / prior_scale(prior) + TWEEDIE_TOL


def _tweedie_evidence(measured: dict, tolerance, what: str) -> Evidence:
    rows, worst_ratio = {}, 0.0
    for (name, sigma2), m in measured.items():
        prior = REFERENCE_PRIORS[name][1]
        scale = prior_scale(prior)
        predicted = m["xt"] + tweedie_scale(sigma2) * m["score"]
        residual = np.max(np.abs(m["posterior_mean"] - predicted), axis=1) / scale
        tol = np.broadcast_to(tolerance(prior, sigma2, m), residual.shape)
        ratio = residual / tol
        ratio[~np.isfinite(ratio)] = np.inf  # a nan anywhere fails
        k = int(np.argmax(ratio))
        rows[f"{name} sigma2={sigma2}"] = {
            "worst_residual": float(residual[k]), "tolerance": float(tol[k]), "ratio": float(ratio[k]),
            "max_residual": float(np.max(residual)), "points": int(residual.size),
        }
        worst_ratio = max(worst_ratio, float(ratio[k]))
    worst = max(rows, key=lambda r: rows[r]["ratio"])
    passed = bool(worst_ratio <= 1)
    return Evidence(
        passed=passed,
        kind="identity",
        summary=(f"{what}: worst residual / tolerance {worst_ratio:.2g} at {worst} (residual "
                 f"{rows[worst]['worst_residual']:.2e} x scale, tolerance {rows[worst]['tolerance']:.2e}); "
                 f"{len(REFERENCE_PRIORS)} priors x sigma2 in {SIGMA2S}"),
        data={"per_prior": rows, "worst_ratio": worst_ratio, "sigma2": list(SIGMA2S),
              "tweedie_tolerance": TWEEDIE_TOL, "fd_step": FD_STEP, "logpdf_rounding": LOGPDF_ROUNDING},
    )


def _bandwidth_doubled(real):
    return lambda self, xt, sigma2: real(self, xt, 2 * sigma2)


def _tweedie_alternatives():
    return [
        alternative("Tweedie with sigma for sigma2", "posterior mean compared with xt + sqrt(sigma2) * score",
                    swap("proofs_check.prior_checks:tweedie_scale", lambda real: (lambda s2: s2**0.5))),
        alternative("Tweedie with the score's sign flipped", "posterior mean compared with xt - sigma2 * score",
                    swap("proofs_check.prior_checks:tweedie_scale", lambda real: (lambda s2: -s2))),
        alternative("Tweedie with 2 sigma2", "posterior mean compared with xt + 2 sigma2 * score",
                    swap("proofs_check.prior_checks:tweedie_scale", lambda real: (lambda s2: 2 * s2))),
        alternative("discrete posterior mean at bandwidth 2 sigma2",
                    "Discrete.posterior_mean (the attention step) computed at noise 2 sigma2",
                    swap("numerics.priors:Discrete._posterior_mean", _bandwidth_doubled), kind="implementation"),
    ]


_PRIOR_LIST = ", ".join(label for label, _ in REFERENCE_PRIORS.values())


@check(
    "C10", "Tweedie's formula for all six reference priors (and the 3-D sphere), closed forms",
    criterion=(f"at {POINTS['quick'][0]} (quick; {POINTS['full'][0]} full) draws of xt and "
               f"{POINTS['quick'][1]} ({POINTS['full'][1]}) far points (||xt|| = {FAR[0]:g}-{FAR[1]:g} x "
               f"(scale + sigma)) per prior and sigma2 in {SIGMA2S}, for each of {_PRIOR_LIST}: "
               f"max_i |posterior_mean - (xt + sigma2 * noisy_score)|_i <= {TWEEDIE_TOL:g} x the prior's scale "
               "(max |E x_i| + max sd x_i); the two sides are separate closed forms, so this bounds their "
               "rounding (<= ~1e-14 expected, cancellation of at most 2 digits at the far points)"),
    replication="seeds",
    alternatives=_tweedie_alternatives(),
    covers=tuple(f"numerics.priors:{cls}.{method}" for cls in PRIOR_COVERS
                 for method in ("posterior_mean", "noisy_score")),
)
def tweedie_all_priors(ctx: Context) -> Evidence:
    return _tweedie_evidence(_measured(ctx, "score"), lambda prior, sigma2, m: TWEEDIE_TOL,
                             "|E[x|xt] - xt - sigma2 * score| / scale")


@check(
    "C10", "Tweedie's formula for all six reference priors (and the 3-D sphere), finite-difference score",
    criterion=(f"at the points of the closed-form check, for each prior and sigma2 in "
               f"{SIGMA2S}: |posterior_mean - (xt + sigma2 * G)|_i / scale <= {FD_SAFETY:g} sigma2 (h^4 11 W^5 / "
               f"(30 sigma2^5) + 1.5 x {LOGPDF_ROUNDING:g} eps (10 + |log p|) / h) / scale + {TWEEDIE_TOL:g} at every "
               f"point, G the 5-point gradient of noisy_logpdf with step h = {FD_STEP:g} sqrt(sigma2): the "
               "stencil's truncation h^4 |d^5 log p| / 30 with |d^5 log p| <= 11 W^5 / sigma2^5 (W the "
               "posterior's width: support extent, means' extent, 2 sd for Laplace, 0 for the Gaussian), its "
               "rounding, and the closed forms' rounding"),
    replication="seeds",
    alternatives=_tweedie_alternatives(),
    covers=tuple(f"numerics.priors:{cls}.{method}" for cls in PRIOR_COVERS
                 for method in ("posterior_mean", "noisy_logpdf")),
)
def tweedie_finite_differences(ctx: Context) -> Evidence:
    def tolerance(prior, sigma2, m):
        return _fd_tolerance(prior, sigma2, m["step"], m["logp"])

    return _tweedie_evidence(_measured(ctx, "fd"), tolerance, "|E[x|xt] - xt - sigma2 * FD5(log p)| / scale")


# --- Bayes risk ------------------------------------------------------------------------------


def _control_variates(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``mean_i h(x_i) He_k(z_i)``, ``h in (1, x, x^2)``, ``k = 1, 2, 3``: mean 0, ``z`` being independent of ``x``."""
    out = np.empty((x.shape[0], 9))
    hermite = (z, z * z - 1, z * (z * z - 3))
    for i, h in enumerate((None, x, x * x)):
        for k, g in enumerate(hermite):
            out[:, 3 * i + k] = np.mean(g if h is None else h * g, axis=1)
    return out


def _loss_estimate(prior: priors.Prior, sigma2: float, n: int, rng: np.random.Generator) -> tuple[float, float]:
    """Mean of ``||x - E[x | xt]||^2`` over ``n`` draws with control variates, and its standard error.

    The control variates have known mean 0 whatever the prior (functions of the noise ``z``
    with mean 0, times functions of ``x``), so the regression-adjusted mean ``mean(loss - C beta)``
    is unbiased up to ``O(1/n)`` and its standard error is the residuals' standard deviation over
    ``sqrt(n)``; ``beta`` is the least-squares fit (normal equations, minimum norm if singular).
    """
    x = prior.sample(n, rng)
    z = rng.standard_normal(x.shape)
    loss = np.sum((x - prior.posterior_mean(x + np.sqrt(sigma2) * z, sigma2)) ** 2, axis=1)
    cv = _control_variates(x, z)
    centred = cv - cv.mean(axis=0)
    beta = np.linalg.lstsq(centred.T @ centred, centred.T @ (loss - loss.mean()), rcond=None)[0]
    adjusted = loss - cv @ beta  # the control variates' known mean, 0, not their sample mean
    dof = n - cv.shape[1] - 1
    return float(adjusted.mean()), float(np.sqrt(np.sum((adjusted - adjusted.mean()) ** 2) / dof / n))


def _risk_z(count: int) -> tuple[float, float]:
    """Two-sided Bonferroni critical value over ``count`` comparisons, and the power quantile."""
    return float(special.ndtri(1 - RISK_ALPHA / (2 * count))), float(special.ndtri(RISK_POWER))


def _risk_measured(ctx: Context) -> dict:
    """Per ``(prior, sigma2)``: the Monte Carlo total loss, its standard error and the draws, cached per replicate."""
    key = ("C10 risk", ctx.replicate)
    if key in ctx.cache:
        return ctx.cache[key]
    z_alpha, z_power = _risk_z(len(REFERENCE_PRIORS) * len(SIGMA2S))
    seeds = ctx.fresh_seeds([2000 + i for i in range(2 * len(REFERENCE_PRIORS) * len(SIGMA2S))])
    out = {}
    for i, (name, (_, prior)) in enumerate(REFERENCE_PRIORS.items()):
        for j, sigma2 in enumerate(SIGMA2S):
            k = 2 * (i * len(SIGMA2S) + j)
            pilot_mean, pilot_se = _loss_estimate(prior, sigma2, RISK_PILOT, np.random.default_rng(seeds[k]))
            # a shift of RISK_DETECT * risk must be >= (z_alpha + z_power) standard errors
            sd = pilot_se * np.sqrt(RISK_PILOT)
            designed = RISK_MARGIN * ((z_alpha + z_power) * sd / (RISK_DETECT * pilot_mean)) ** 2
            n = int(max(RISK_MIN_DRAWS, np.ceil(designed)))
            mean, se = _loss_estimate(prior, sigma2, n, np.random.default_rng(seeds[k + 1]))
            out[name, sigma2] = {"total_loss": mean, "se_total": se, "draws": n}
    ctx.cache[key] = out
    return out


@check(
    "C10", "Bayes risk of every reference prior against Monte Carlo",
    criterion=(f"for each prior of the Tweedie checks and sigma2 in {SIGMA2S}: |L - mmse| <= z se + err, L the "
               "Monte Carlo mean of ||x - posterior_mean(xt)||^2 / d over fresh draws of (x, xt) (regression-"
               "adjusted by 9 control variates of known mean 0: h(x_i) He_k(z_i), h in 1, x, x^2, k = 1..3), se its "
               f"standard error, err mmse's own error bound (95% half-width / 1.96 x z if Monte Carlo), z = "
               f"Phi^-1(1 - {RISK_ALPHA:g} / (2 x 14)) (Bonferroni, family-wise false-alarm rate {RISK_ALPHA:g}); the "
               f"number of draws is set from a {RISK_PILOT}-draw pilot so that a {RISK_DETECT:.0%} error in mmse is "
               f"rejected with power >= {RISK_POWER:g} at each sigma2 (1% of the risk >= (z + 1.645) se, x "
               f"{RISK_MARGIN:g}, at least {RISK_MIN_DRAWS})"),
    replication="seeds",
    alternatives=[
        alternative("MMSE is the linear (Gaussian) MMSE",
                    "reference risk tau2 sigma2 / (tau2 + sigma2) per coordinate from the prior's variances, "
                    "as if every prior were Gaussian",
                    swap("proofs_check.prior_checks:reference_risk", lambda real: _linear_risk)),
        alternative("MMSE at sigma for sigma2", "reference risk prior.mmse(sqrt(sigma2))",
                    swap("proofs_check.prior_checks:reference_risk",
                         lambda real: (lambda prior, s2: real(prior, s2**0.5)))),
        alternative("risk not per coordinate", "Monte Carlo risk E||x - E[x|xt]||^2 not divided by d",
                    swap("proofs_check.prior_checks:risk_dimension", lambda real: (lambda prior: 1))),
    ],
    covers=tuple(f"numerics.priors:{cls}.mmse" for cls in PRIOR_COVERS),
)
def bayes_risk_all_priors(ctx: Context) -> Evidence:
    measured = _risk_measured(ctx)
    z_alpha, z_power = _risk_z(len(measured))
    rows, passed = {}, True
    for (name, sigma2), m in measured.items():
        prior = REFERENCE_PRIORS[name][1]
        est = reference_risk(prior, sigma2)
        d = risk_dimension(prior)
        mc, se = m["total_loss"] / d, m["se_total"] / d
        if est.method == "monte-carlo":  # its error is a 95% half-width: combine the two standard errors
            tol = z_alpha * float(np.hypot(se, est.error / 1.96))
        else:
            tol = z_alpha * se + est.error
        ok = bool(abs(mc - est.value) <= tol)
        passed &= ok
        rows[f"{name} sigma2={sigma2}"] = {
            "mmse": est.value, "mmse_error": est.error, "method": est.method, "monte_carlo": mc, "se": se,
            "difference": mc - est.value, "tolerance": tol, "draws": m["draws"], "passed": ok,
            "detectable_relative_error": (z_alpha + z_power) * se / est.value if est.value else float("inf"),
        }
    worst = max(rows, key=lambda r: abs(rows[r]["difference"]) / rows[r]["tolerance"])
    w = rows[worst]
    return Evidence(
        passed=bool(passed),
        kind="interval",
        summary=(f"mmse vs Monte Carlo on {len(REFERENCE_PRIORS)} priors x sigma2 in {SIGMA2S}: worst at {worst}, "
                 f"|{w['monte_carlo']:.5g} - {w['mmse']:.5g}| = {abs(w['difference']):.2g} vs tolerance "
                 f"{w['tolerance']:.2g} (z = {z_alpha:.2f}); {sum(r['draws'] for r in rows.values()):,} draws, "
                 f"each comparison detects a {max(r['detectable_relative_error'] for r in rows.values()):.2%} "
                 f"error with power {RISK_POWER:g}"),
        data={"per_prior": rows, "z": z_alpha, "alpha": RISK_ALPHA, "power": RISK_POWER,
              "detect": RISK_DETECT, "pilot_draws": RISK_PILOT},
    )


def _linear_risk(prior: priors.Prior, sigma2: float) -> priors.RiskEstimate:
    """The wrong theory "every prior's MMSE is the linear one": ``mean_i tau2_i sigma2 / (tau2_i + sigma2)``."""
    _, var = prior.moments()
    return priors.RiskEstimate(float(np.mean(var * sigma2 / (var + sigma2))), 0.0, "exact", "linear MMSE")
