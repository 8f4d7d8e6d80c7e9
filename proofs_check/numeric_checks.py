"""Numeric evidence for C1, C2, C3, C7 and C9.

Each check calls the implementation through its module (``kernels.kernel_mean``,
not a name imported from it), so that a test can swap in a broken implementation
and see the check fail.
"""

from __future__ import annotations

import numpy as np

from numerics import estimators, experiments, flow, kernels, priors, stats, transformer

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Context, Evidence, check

IDENTITY_TOL = 1e-10
#: Five-point finite differences with step 1e-3 on O(1) data: truncation ~1e-12 * f^(5), rounding ~1e-13.
FD_TOL = 1e-7
FD_STEP = 1e-3
#: How far the fitted order of Euler layers may sit from the declared order.
ORDER_TOL = 0.1

BANDWIDTHS = (0.05, 0.5, 5.0)


def _context(seed: int, n: int = 40, m: int = 25, d: int = 3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, d)) * 1.5, rng.normal(size=(n, d))


def _identity(residuals: dict[str, float], tol: float, what: str) -> Evidence:
    worst = max(residuals.values())
    return Evidence(
        passed=bool(worst <= tol),
        kind="identity",
        summary=f"{what}: max residual {worst:.2e} (tolerance {tol:.0e})",
        data={"residuals": residuals, "tolerance": tol},
    )


@check("C1", "attention head = kernel mean = empirical posterior mean")
def attention_is_posterior_mean(ctx: Context) -> Evidence:
    queries, keys = _context(seed=1)
    residuals = {}
    for h2 in BANDWIDTHS:
        head = transformer.AttentionHead.gaussian(keys.shape[1], h2)(queries, keys)
        mean = kernels.kernel_mean(queries, keys, h2)
        post = priors.Discrete(keys).posterior_mean(queries, h2)
        residuals[f"head-kernel h2={h2}"] = float(np.abs(head - mean).max())
        residuals[f"kernel-posterior h2={h2}"] = float(np.abs(mean - post).max())
    return _identity(residuals, IDENTITY_TOL, "attention vs kernel mean vs Discrete.posterior_mean")


def _five_point_gradient(f, x: np.ndarray, step: float) -> np.ndarray:
    grad = np.empty_like(x)
    for i in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[i] = step
        grad[:, i] = (-f(x + 2 * e) + 8 * f(x + e) - 8 * f(x - e) + f(x - 2 * e)) / (12 * step)
    return grad


@check("C2", "kernel-mean residual = h2 x empirical-prior score")
def residual_is_score(ctx: Context) -> Evidence:
    queries, keys = _context(seed=2)
    residuals = {}
    for h2 in BANDWIDTHS:
        residual = kernels.kernel_mean(queries, keys, h2) - queries
        score = priors.Discrete(keys).noisy_score(queries, h2)
        residuals[f"h2={h2}"] = float(np.abs(residual - h2 * score).max())
    return _identity(residuals, IDENTITY_TOL, "a(q) - q vs h2 * Discrete.noisy_score")


@check("C2", "kernel-mean residual = h2 x finite-difference gradient of log_kde")
def residual_is_gradient_of_log_kde(ctx: Context) -> Evidence:
    queries, keys = _context(seed=3)
    residuals = {}
    for h2 in (0.5, 5.0):
        residual = kernels.kernel_mean(queries, keys, h2) - queries
        grad = _five_point_gradient(lambda x: kernels.log_kde(x, keys, h2), queries, FD_STEP)
        residuals[f"h2={h2}"] = float(np.abs(residual - h2 * grad).max())
    return _identity(residuals, FD_TOL, "a(q) - q vs h2 * 5-point FD of log_kde (numeric)")


@check("C7", "Stage 2 = posterior mean under the refined empirical prior")
def stage_two_is_empirical_bayes(ctx: Context) -> Evidence:
    rng = np.random.default_rng(7)
    prior = priors.GaussianMixture(np.array([[-2.0, 0.0], [2.0, 1.0]]), var=0.25)
    sigma2, h2, eta = 0.5, 0.25, 0.1
    noisy = prior.sample(60, rng) + np.sqrt(sigma2) * rng.standard_normal((60, 2))
    queries = noisy[:20] + 0.3 * rng.standard_normal((20, 2))
    model = estimators.TwoStageDenoiser(sigma2, h2, eta=eta).fit(noisy)
    ours = model.denoise(queries)
    post = priors.Discrete(model.particles_).posterior_mean(queries, sigma2)
    net = transformer.TwoStageTransformer(h2, sigma2, model.n_layers_, model.T_ / model.n_layers_)
    residuals = {
        "denoise-posterior": float(np.abs(ours - post).max()),
        "denoise-transformer": float(np.abs(ours - net(noisy, queries)).max()),
    }
    return _identity(residuals, IDENTITY_TOL, f"Stage 2 vs Discrete(particles).posterior_mean and the {model.n_layers_}-layer transformer")


@check("C3", "fitted order of Euler layers against the ODE")
def euler_order(ctx: Context) -> Evidence:
    rng = np.random.default_rng(3)
    x0 = np.concatenate([rng.normal(-1.0, 0.6, (32, 2)), rng.normal(1.0, 0.6, (32, 2))])
    h2, T = 0.2, 1.0
    reference = flow.particle_flow(x0, h2, T, method="ode", rtol=1e-12, atol=1e-12)
    etas = np.array([0.2, 0.1, 0.05, 0.025] + ([] if ctx.quick else [0.0125, 0.00625]))
    errors = np.array([np.abs(flow.particle_flow(x0, h2, T, eta=eta) - reference).max() for eta in etas])
    fit = stats.loglog_slope(etas, errors)
    declared = flow.SOLVERS["euler"].order
    return Evidence(
        passed=bool(abs(fit.slope.estimate - declared) <= ORDER_TOL),
        kind="rate",
        summary=f"max error ~ eta^p with p = {fit.slope} (declared order {declared}, accepted within +-{ORDER_TOL})",
        data={
            "etas": etas.tolist(),
            "errors": errors.tolist(),
            "slope": fit.slope.estimate,
            "slope_ci": [fit.slope.low, fit.slope.high],
            "declared_order": declared,
            "tolerance": ORDER_TOL,
        },
    )


@check("C9", "Stage 2 alone has larger MSE than the two-stage estimator at T*")
def depth_is_necessary(ctx: Context) -> Evidence:
    prior = priors.GaussianMixture(np.array([[-2.0], [2.0]]), var=0.25)
    sigma2, h2 = 0.5, 0.05
    n, seeds = (1024, range(5)) if ctx.quick else (4096, range(8))
    records = experiments.risk_records(
        {"two-stage": estimators.TwoStageDenoiser(sigma2, h2), "L=0": estimators.StageTwoOnly(sigma2)},
        prior, sigma2, n, list(seeds),
    )
    mse = {name: np.array([r.mse for r in records if r.estimator == name]) for name in ("two-stage", "L=0")}
    diff = stats.mean_interval(mse["L=0"] - mse["two-stage"])
    return Evidence(
        passed=bool(diff.low > 0),
        kind="interval",
        summary=f"MSE(L=0) - MSE(two-stage) = {diff} over seeds; N={n}, sigma2={sigma2}, h2={h2}",
        data={
            "difference": diff.estimate,
            "ci": [diff.low, diff.high],
            "level": diff.level,
            "mse_two_stage": mse["two-stage"].tolist(),
            "mse_stage_two_only": mse["L=0"].tolist(),
            "n": n,
        },
    )
