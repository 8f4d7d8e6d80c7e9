"""Claim M1: in 1-D, Stage 2 is nondecreasing in the noisy token.

Run it with::

    attneb verify --load examples/stage2_monotone.py --only M1 --quick --power
    attneb show M1 --load examples/stage2_monotone.py

Stage 2 in 1-D, ``xhat(xt) = sum_j w_j(xt) x_j`` with ``w_j = softmax_j(-(xt - x_j)^2 / (2 sigma2))``,
is the posterior mean of ``x`` under the empirical prior of the tokens. Differentiating the weights,
``d w_j / d xt = w_j (x_j - E_w[x]) / sigma2``, so ``d xhat / d xt = (E_w[x^2] - E_w[x]^2) / sigma2
= Var_w(x) / sigma2 >= 0``. The module

1. registers the claim M1,
2. derives the slope with sympy (three symbolic tokens) and claims both the closed form and the
   inequality ``d xhat / d xt >= 0`` (:func:`stage2_monotone_derivation`),
3. checks the real implementation :func:`attneb.numerics.estimators.stage_two` numerically against
   the slope formula and for monotonicity on a fine grid, with the wrong theories it must reject.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from attneb.numerics import estimators
from attneb.proofs_check import Context, Evidence, alternative, check, claim, register_derivation, swap
from attneb.theory import ClaimedForm, Derivation, Step

claim("M1", "Stage 2 is nondecreasing in the noisy token (1-D)",
      "In 1-D, xhat(xt) = sum_j softmax_j(-(xt - x_j)^2 / (2 sigma2)) x_j has "
      "d xhat / d xt = Var_w(x) / sigma2 >= 0: the posterior variance of x under the empirical prior "
      "of the tokens x_j (weights w_j = softmax_j(-(xt - x_j)^2 / (2 sigma2))), divided by sigma2.",
      ("d = 1", "sigma2 > 0", "finitely many real tokens x_j"))


# --------------------------------------------------------------------------- derivation

@cache
def stage2_monotone_derivation() -> Derivation:
    """Three symbolic tokens: the slope of Stage 2 is the posterior variance over sigma2, hence >= 0."""
    xt = sp.Symbol("xt", real=True)
    sigma2 = sp.Symbol("sigma2", positive=True)
    xs = sp.symbols("x1:4", real=True)

    kernel = [sp.exp(-(xt - x) ** 2 / (2 * sigma2)) for x in xs]
    weights = [k / sum(kernel) for k in kernel]
    xhat = sum(w * x for w, x in zip(weights, xs))
    slope = sp.diff(xhat, xt)                                  # derived by sympy

    mean = sum(w * x for w, x in zip(weights, xs))             # E_w[x]
    second = sum(w * x**2 for w, x in zip(weights, xs))        # E_w[x^2]
    pairs = sum(weights[j] * weights[k] * (xs[j] - xs[k]) ** 2 for j in range(3) for k in range(j + 1, 3))

    steps = [
        Step(sp.Eq(sp.diff(kernel[0], xt), kernel[0] * (xs[0] - xt) / sigma2, evaluate=False),
             "the Gaussian kernel of token 1 differentiates to itself times (x_1 - xt) / sigma2"),
        Step(sp.Eq(second - mean**2, pairs, evaluate=False),
             "Var_w(x) = sum_{j<k} w_j w_k (x_j - x_k)^2, since the weights sum to 1"),
    ]
    name = sp.Symbol("d xhat/d xt")
    claims = [
        ClaimedForm(sp.Eq(slope, (second - mean**2) / sigma2, evaluate=False),
                    "d xhat / d xt = (E_w[x^2] - E_w[x]^2) / sigma2 = Var_w(x) / sigma2", ref="M1", name=name),
        ClaimedForm(sp.Ge(slope, 0, evaluate=False),
                    "d xhat / d xt >= 0: Stage 2 is nondecreasing in the noisy token", ref="M1", name=name),
    ]
    return Derivation("stage2_monotone", "Stage 2 is nondecreasing in the noisy token (1-D)",
                      [xt, sigma2, *xs], steps, [sp.Eq(name, slope, evaluate=False)], claims)


register_derivation("stage2_monotone", stage2_monotone_derivation, ["M1"], time_limit=10)  # the inequality: numeric


# --------------------------------------------------------------------------- numeric check

REL_TOL = 1e-6      # finite differences of the exact path agree to about 1e-8 relative
MONO_TOL = 1e-12    # allowed decrease between neighbouring grid points, relative to the token range


def posterior_variance(xt: np.ndarray, tokens: np.ndarray, sigma2: float) -> np.ndarray:
    """Var_w(x) at each query ``xt`` (1-D arrays), with w = softmax(-(xt - x_j)^2 / (2 sigma2))."""
    logits = -(xt[:, None] - tokens[None, :]) ** 2 / (2 * sigma2)
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(axis=1, keepdims=True)
    mean = w @ tokens
    return np.maximum(w @ tokens**2 - mean**2, 0.0)


def slope_formula(variance: np.ndarray, sigma2: float) -> np.ndarray:
    """The claimed slope of Stage 2: Var_w(x) / sigma2."""
    return variance / sigma2


def _stage_two_1d(queries: np.ndarray, tokens: np.ndarray, sigma2: float) -> np.ndarray:
    return estimators.stage_two(queries[:, None], tokens[:, None], sigma2)[:, 0]


def _double_bandwidth(real):
    return lambda queries, tokens, sigma2, **kw: real(queries, tokens, 2 * sigma2, **kw)


def _reversed_output(real):
    return lambda queries, tokens, sigma2, **kw: real(queries, tokens, sigma2, **kw)[::-1]


@check("M1", "Stage 2 in 1-D: finite-difference slope equals Var_w(x)/sigma2, output nondecreasing on a grid",
       criterion=f"over 40 random tokens (two clusters) and sigma2 ~ U(0.2, 0.6) drawn afresh in every replicate: "
       f"(a) at 200 random queries, the central difference of estimators.stage_two (step 1e-4 sqrt(sigma2)) "
       f"matches Var_w(x)/sigma2 within |fd - slope| <= {REL_TOL:g} (|slope| + 1e-6); "
       f"(b) on a sorted grid of 2001 queries spanning the tokens +- 3 sqrt(sigma2), every increment of "
       f"the output is >= -{MONO_TOL:g} times the token range",
       replication="seeds",
       alternatives=[
           alternative("bandwidth 2 sigma2", "Stage 2 run with bandwidth 2 sigma2 instead of sigma2 "
                       "(its slope is Var_w'(x) / (2 sigma2), off the formula by about a factor 2)",
                       swap("attneb.numerics.estimators:stage_two", _double_bandwidth), kind="implementation"),
           alternative("slope without 1/sigma2", "the slope formula Var_w(x), without the division by sigma2",
                       swap(f"{__name__}:slope_formula", lambda real: (lambda variance, sigma2: variance))),
           alternative("reversed output", "a Stage 2 whose outputs come out in reverse query order "
                       "(not monotone)",
                       swap("attneb.numerics.estimators:stage_two", _reversed_output), kind="implementation"),
       ],
       covers=("attneb.numerics.estimators:stage_two",))
def stage2_monotone_check(ctx: Context) -> Evidence:
    [seed] = ctx.fresh_seeds([0])
    rng = np.random.default_rng(seed)
    sigma2 = float(rng.uniform(0.2, 0.6))
    tokens = np.concatenate([rng.normal(-2.0, 0.5, 20), rng.normal(1.5, 0.7, 20)])
    lo, hi = tokens.min() - 3 * np.sqrt(sigma2), tokens.max() + 3 * np.sqrt(sigma2)

    # (a) slope at random queries
    queries = rng.uniform(lo, hi, 200)
    step = 1e-4 * np.sqrt(sigma2)
    fd = (_stage_two_1d(queries + step, tokens, sigma2) - _stage_two_1d(queries - step, tokens, sigma2)) / (2 * step)
    slope = slope_formula(posterior_variance(queries, tokens, sigma2), sigma2)
    slope_excess = float(np.max(np.abs(fd - slope) / (REL_TOL * (np.abs(slope) + 1e-6))))

    # (b) monotone on a sorted grid
    grid = np.linspace(lo, hi, 2001)
    increments = np.diff(_stage_two_1d(grid, tokens, sigma2))
    worst_decrease = float(-increments.min() / (tokens.max() - tokens.min()))

    slope_ok, mono_ok = slope_excess <= 1.0, worst_decrease <= MONO_TOL
    return Evidence(
        passed=slope_ok and mono_ok, kind="identity",
        summary=(f"sigma2 = {sigma2:.3f}: max |fd - Var_w/sigma2| / tolerance = {slope_excess:.2g} "
                 f"({'ok' if slope_ok else 'FAIL'}); slope in [{slope.min():.3g}, {slope.max():.3g}]; "
                 f"worst grid step (decrease / token range) {worst_decrease:.1e}, negative = increasing "
                 f"(allowed <= {MONO_TOL:g}; {'ok' if mono_ok else 'FAIL'})"),
        data={"seed": int(seed), "sigma2": sigma2, "slope_excess": slope_excess,
              "slope_min": float(slope.min()), "slope_max": float(slope.max()),
              "worst_relative_decrease": worst_decrease})
