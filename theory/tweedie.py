"""Tweedie's formula and the posterior means of closed-form priors (C10).

For a prior :math:`p_0` on the line and :math:`y = x + \\sigma z`, the noisy
density is :math:`p_\\sigma(y) = \\int p_0(x)\\varphi_{\\sigma^2}(y - x)\\,dx` and,
differentiating under the integral sign,

.. math:: \\mathbb E[x \\mid y] = y + \\sigma^2 \\partial_y \\log p_\\sigma(y).

The Gaussian prior :math:`N(m, \\tau^2)` and the two-component mixture
:math:`w N(m_1, \\tau_1) + (1 - w) N(m_2, \\tau_2)` get their posterior means from
the formula (noisy density by ``gaussian_integral``, then ``diff``), checked
against the direct conditional expectation
:math:`\\int x\\,p_0\\varphi / \\int p_0\\varphi`; the integrals and the derivative
are checked by ``mpmath.quad`` and ``mpmath.diff``.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from . import _calculus
from ._calculus import gaussian_density
from .derivation import ClaimedForm, Derivation, Step

__all__ = ["derivation"]

x, y, m, m1, m2 = sp.symbols("x y m m1 m2", real=True)
sigma2, tau2, tau_1, tau_2, w = sp.symbols("sigma2 tau2 tau_1 tau_2 w", positive=True)
p0 = sp.Function("p0")
POSTERIOR_MEAN = sp.Function("E")(y)
GAUSSIAN_MEAN, MIXTURE_MEAN = sp.symbols("E_gauss E_mix")
LINE = (x, -sp.oo, sp.oo)


def _likelihood():
    return gaussian_density(y - x, sigma2)


def _general():
    noisy = sp.Integral(p0(x) * _likelihood(), LINE)
    posterior_mean = sp.Integral(x * p0(x) * _likelihood(), LINE) / noisy
    tweedie = y + sigma2 * sp.Derivative(sp.log(noisy), y)
    steps = [
        Step(sp.Eq(sp.Derivative(noisy, y), sp.Integral(p0(x) * (x - y) / sigma2 * _likelihood(), LINE),
                   evaluate=False),
             "differentiate under the integral sign: d/dy phi(y - x) = (x - y)/sigma2 phi(y - x)", how="integrals"),
        Step(sp.Eq(tweedie, posterior_mean, evaluate=False),
             "Bayes: the posterior is p0(x) phi(y - x) / p_sigma(y); its mean is Tweedie's formula", how="integrals"),
    ]
    return steps, y + sigma2 * sp.diff(sp.log(noisy), y)


def _closed_form(prior):
    """Noisy density, Tweedie mean and direct mean of a prior made of Gaussians."""
    noisy = _calculus.gaussian_integral(prior * _likelihood(), x)
    first_moment = _calculus.gaussian_integral(x * prior * _likelihood(), x)
    tweedie = y + sigma2 * sp.diff(sp.log(noisy), y)
    return noisy, first_moment, tweedie


def _gaussian():
    prior = gaussian_density(x - m, tau2)
    noisy, first_moment, tweedie = _closed_form(prior)
    tweedie = sp.simplify(tweedie)
    direct = sp.simplify(first_moment / noisy)
    steps = [
        Step(sp.Eq(sp.Integral(prior * _likelihood(), LINE), noisy, evaluate=False),
             "Gaussian prior N(m, tau2): noisy density", route="mpmath"),
        Step(sp.Eq(y + sigma2 * sp.Derivative(sp.log(noisy), y), tweedie, evaluate=False),
             "Tweedie's formula", route="mpmath"),
        Step(sp.Eq(sp.Integral(x * prior * _likelihood(), LINE) / sp.Integral(prior * _likelihood(), LINE), direct,
                   evaluate=False),
             "direct conditional expectation", route="mpmath"),
    ]
    claims = [
        ClaimedForm(sp.Eq(tweedie, direct, evaluate=False),
                    "Gaussian prior: Tweedie's formula = direct posterior mean", ref="C10", name=GAUSSIAN_MEAN),
        ClaimedForm(sp.Eq(tweedie, (tau2 * y + sigma2 * m) / (tau2 + sigma2), evaluate=False),
                    "Gaussian prior: E[x | y] = (tau2 y + sigma2 m) / (tau2 + sigma2)", ref="C10", name=GAUSSIAN_MEAN),
    ]
    return steps, tweedie, claims


def _mixture():
    components = [(w, m1, tau_1), (1 - w, m2, tau_2)]
    prior = sum(weight * gaussian_density(x - mean, var) for weight, mean, var in components)
    noisy, first_moment, tweedie = _closed_form(prior)
    typed_noisy = sum(weight * gaussian_density(y - mean, var + sigma2) for weight, mean, var in components)
    typed = sum(weight * gaussian_density(y - mean, var + sigma2) * (var * y + sigma2 * mean) / (var + sigma2)
                for weight, mean, var in components)
    steps = [
        Step(sp.Eq(sp.Integral(prior * _likelihood(), LINE), noisy, evaluate=False),
             "two-component Gaussian mixture prior: noisy density", route="mpmath"),
        Step(sp.Eq(sp.Integral(x * prior * _likelihood(), LINE) / sp.Integral(prior * _likelihood(), LINE),
                   first_moment / noisy, evaluate=False),
             "direct conditional expectation", route="mpmath"),
    ]
    claims = [
        ClaimedForm(sp.Eq(tweedie, first_moment / noisy, evaluate=False),
                    "mixture prior: Tweedie's formula = direct posterior mean", ref="C10", name=MIXTURE_MEAN),
        ClaimedForm(sp.Eq(tweedie, typed / typed_noisy, evaluate=False),
                    "mixture prior: E[x | y] = sum_k r_k(y) (tau_k y + sigma2 m_k) / (tau_k + sigma2), "
                    "r_k = w_k N(y; m_k, tau_k + sigma2) / p_sigma(y)", ref="C10", name=MIXTURE_MEAN),
    ]
    return steps, tweedie, claims


@cache
def derivation() -> Derivation:
    """Build the ``tweedie`` derivation (claim C10)."""
    general_steps, general = _general()
    gaussian_steps, gaussian_mean, gaussian_claims = _gaussian()
    mixture_steps, mixture_mean, mixture_claims = _mixture()
    return Derivation(
        "tweedie",
        "Tweedie's formula E[x | y] = y + sigma2 d/dy log p_sigma(y); Gaussian and mixture priors",
        [x, y, m, m1, m2, sigma2, tau2, tau_1, tau_2, w],
        general_steps + gaussian_steps + mixture_steps,
        [sp.Eq(POSTERIOR_MEAN, general, evaluate=False),
         sp.Eq(GAUSSIAN_MEAN, gaussian_mean, evaluate=False),
         sp.Eq(MIXTURE_MEAN, mixture_mean, evaluate=False)],
        gaussian_claims + mixture_claims,
    )
