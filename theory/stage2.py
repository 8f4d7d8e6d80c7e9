"""Stage 2: the final attention step is the empirical-Bayes posterior mean (C7, C8, C9).

The noisy token ``xt`` queries the refined tokens ``z_j = x_j(T)`` with bandwidth
``sigma2``:

.. math:: \\hat x(x_t) = \\sum_j \\operatorname{softmax}_j\\big(-\\|x_t - z_j\\|^2/(2\\sigma^2)\\big) z_j
          = \\mathbb E\\big[x \\mid x_t\\big], \\quad x \\sim \\tfrac1N\\textstyle\\sum_j \\delta_{z_j},\\;
          x_t \\mid x \\sim N(x, \\sigma^2 I).

With clean context tokens :math:`x_j \\sim \\rho_0` the same step converges, as
:math:`N \\to \\infty`, to the Bayes posterior mean (the predecessor's one-layer
result). Population-level consequences for the Gaussian prior :math:`N(m, \\tau^2)`:
without Stage 1 (``L = 0``) the context is the noisy measure :math:`N(m, \\tau^2 + \\sigma^2)`
and the excess risk is :math:`\\sigma^8 / ((\\tau^2 + 2\\sigma^2)^2(\\tau^2 + \\sigma^2)) > 0`;
after Stage 1 up to :math:`T^*` the excess risk is :math:`O(h_2^2)`.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import gaussian
from . import _calculus
from ._calculus import gaussian_density
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["derivation"]

xt, x, m, c = sp.symbols("xt x m c", real=True)
u, v = sp.symbols("u v", real=True)
sigma2, tau2, h2 = gaussian.sigma2, gaussian.tau2, gaussian.h2
s = gaussian.s
N, d = sp.symbols("N d", integer=True, positive=True)
i, j, k = sp.symbols("i j k", integer=True)
z = sp.IndexedBase("z", real=True)
q = sp.IndexedBase("xt", real=True)
EXPLICIT_N = 3
LINE = (x, -sp.oo, sp.oo)
EXCESS_L0, EXCESS_T_STAR = sp.symbols("excess_L0 excess_Tstar")


def _empirical_bayes_steps():
    """Softmax with bandwidth sigma2 = Bayes posterior weights under the refined empirical prior."""
    sq_dist = sp.Sum((q[i] - z[j, i]) ** 2, (i, 1, d))
    kernel = sp.exp(-sq_dist / (2 * sigma2))
    likelihood = (2 * sp.pi * sigma2) ** (-d / 2) * kernel
    weights = (likelihood / N) / sp.Sum(likelihood.subs(j, k) / N, (k, 1, N))
    softmax = kernel / sp.Sum(kernel.subs(j, k), (k, 1, N))

    tokens = [z[n] for n in range(1, EXPLICIT_N + 1)]
    prior = sum(sp.DiracDelta(x - zj) for zj in tokens) / EXPLICIT_N
    lik = gaussian_density(xt - x, sigma2)
    posterior_mean = sp.integrate(sp.expand(x * prior * lik), LINE) / sp.integrate(sp.expand(prior * lik), LINE)
    logits = [-((xt - zj) ** 2) / (2 * sigma2) for zj in tokens]
    attention = sum(sp.exp(lg) * zj for lg, zj in zip(logits, tokens)) / sum(sp.exp(lg) for lg in logits)
    steps = [
        Step(sp.Eq(weights, softmax, evaluate=False),
             "Bayes' rule, prior mass 1/N at each refined token z_j, likelihood N(xt; z_j, sigma2 I)"),
        Step(sp.Eq(sp.Integral(x * prior * lik, LINE) / sp.Integral(prior * lik, LINE), posterior_mean,
                   evaluate=False),
             f"N = {EXPLICIT_N}, d = 1: posterior mean under the refined empirical prior", route="sift"),
    ]
    claim = ClaimedForm(sp.Eq(posterior_mean, attention, evaluate=False),
                        "Stage 2 (bandwidth sigma2, refined tokens) is the empirical-Bayes posterior mean", ref="C7",
                        name=sp.Function("E_N")(xt))
    return steps, claim


def _population_mean(prior_variance):
    """Posterior mean of x given xt when the prior is N(m, prior_variance), by integration."""
    prior = gaussian_density(x - m, prior_variance)
    lik = gaussian_density(xt - x, sigma2)
    ratio = sp.Integral(x * prior * lik, LINE) / sp.Integral(prior * lik, LINE)
    mean = _calculus.gaussian_integral(x * prior * lik, x) / _calculus.gaussian_integral(prior * lik, x)
    return ratio, sp.simplify(mean)


def _risk_steps():
    """Risks of the population-level estimators for the Gaussian prior N(m, tau2)."""
    marginal = sp.Integral(gaussian_density(x - m, tau2) * gaussian_density(xt - x, sigma2), LINE)
    bayes_integral, bayes = _population_mean(tau2)
    noisy_integral, noisy_context = _population_mean(tau2 + sigma2)
    refined_integral, refined = _population_mean(s)
    # x = m + sqrt(tau2) u, xt = x + sqrt(sigma2) v with u, v ~ N(0, 1)
    error = (c * (m + sp.sqrt(tau2) * u + sp.sqrt(sigma2) * v) + (1 - c) * m) - (m + sp.sqrt(tau2) * u)
    mse = sp.expand(_calculus.gaussian_expectation(error**2, [u, v], 1))

    def shrinkage(mean):
        return sp.diff(mean, xt)

    def excess(mean):
        return sp.factor(mse.subs(c, shrinkage(mean)) - mse.subs(c, shrinkage(bayes)))

    def risk_gap(mean):
        return mse.subs(c, shrinkage(mean)) - mse.subs(c, shrinkage(bayes))

    excess_noisy = excess(noisy_context)
    left = gaussian.derivation().result_of(gaussian.VARIANCE_AT_T_STAR).removeO()
    excess_t_star = sp.series(excess(refined).subs(s, left), h2, 0, 3)
    steps = [
        Step(sp.Eq(marginal, sp.simplify(_calculus.gaussian_integral(marginal.function, x)), evaluate=False),
             "the law of a noisy token xt = x + sqrt(sigma2) z, x ~ rho0 = N(m, tau2): rho0 * phi_sigma2",
             route="mpmath"),
        Step(sp.Eq(bayes_integral, bayes, evaluate=False),
             "clean context x_j ~ rho0 = N(m, tau2): as N -> oo the empirical sums tend to their expectations "
             "and one step with bandwidth sigma2 tends to the Bayes posterior mean (predecessor's result)",
             route="mpmath"),
        Step(sp.Eq(noisy_integral, noisy_context, evaluate=False),
             "L = 0, all tokens noisy: the context measure tends to rho0 * phi_sigma2 = N(m, tau2 + sigma2)",
             route="mpmath"),
        Step(sp.Eq(refined_integral, refined, evaluate=False), "after Stage 1 the context is N(m, s)", route="mpmath"),
        Step(sp.Eq(sp.Integral(error**2 * gaussian_density(u, 1) * gaussian_density(v, 1),
                               (u, -sp.oo, sp.oo), (v, -sp.oo, sp.oo)), mse, evaluate=False),
             "MSE of the linear estimator c xt + (1 - c) m", route="mpmath"),
        Step(sp.Eq(risk_gap(refined), (tau2 + sigma2) * (s / (s + sigma2) - tau2 / (tau2 + sigma2)) ** 2,
                   evaluate=False),
             "excess risk with a refined context of variance s: (tau2 + sigma2) (c_s - c_Bayes)^2, "
             "c_v = v / (v + sigma2)"),
        Step(sp.Eq(excess(refined).subs(s, left),
                   sigma2**2 * sp.log(1 + sigma2 / tau2) ** 2 / (tau2 + sigma2) ** 3 * h2**2 + sp.O(h2**3),
                   evaluate=False),
             "at T* = sigma2/(2 h2), s = tau2 + h2 log(1 + sigma2/tau2) + O(h2^2) (theory.gaussian): "
             "excess risk sigma2^2 log(1 + sigma2/tau2)^2 h2^2 / (tau2 + sigma2)^3 + O(h2^3)"),
    ]
    claims = [
        ClaimedForm(sp.Eq(risk_gap(noisy_context), sigma2**4 / ((tau2 + 2 * sigma2) ** 2 * (tau2 + sigma2)),
                          evaluate=False),
                    "without Stage 1 the estimator shrinks too little: excess risk "
                    "sigma2^4 / ((tau2 + 2 sigma2)^2 (tau2 + sigma2)) (Gaussian prior)", ref="C9", name=EXCESS_L0),
        ClaimedForm(sp.Eq(sp.sign(excess_noisy, evaluate=False), 1, evaluate=False),
                    "depth is necessary: without Stage 1 the excess risk is strictly positive (Gaussian prior)",
                    ref="C9", name=sp.sign(EXCESS_L0)),
        ClaimedForm(sp.Eq(excess_t_star, sp.O(h2**2), evaluate=False),
                    "Stage 2 after Stage 1 at T*: excess risk O(h2^2) -> 0 as h2 -> 0 (Gaussian prior, N -> oo)",
                    ref="C8", name=EXCESS_T_STAR),
    ]
    results = [sp.Eq(EXCESS_L0, excess_noisy, evaluate=False),
               sp.Eq(EXCESS_T_STAR, excess_t_star, evaluate=False),
               sp.Eq(sp.Symbol("mse"), mse, evaluate=False)]
    return steps, claims, results


@cache
def derivation() -> Derivation:
    """Build the ``stage2`` derivation (claims C7, C8 and C9 for the Gaussian prior)."""
    eb_steps, eb_claim = _empirical_bayes_steps()
    risk_steps, risk_claims, results = _risk_steps()
    return Derivation(
        "stage2",
        "Stage 2 = empirical-Bayes posterior mean; depth is necessary (Gaussian prior)",
        [xt, x, m, c, u, v, sigma2, tau2, h2, s, N, d],
        eb_steps + risk_steps,
        results,
        [eb_claim, *risk_claims],
    )
