"""One attention step is a kernel-weighted posterior mean; its residual is a score (C1, C2).

With key-query matrix :math:`\\beta I` and key-norm bias
:math:`-\\beta\\|x_j\\|^2/2`, the softmax attention output for a query ``q``
over keys = values :math:`x_1..x_N` is

.. math:: a(q) = \\sum_j \\operatorname{softmax}_j(\\beta q\\cdot x_j - \\beta\\|x_j\\|^2/2)\\, x_j
          = \\frac{\\sum_j K_{h2}(q - x_j) x_j}{\\sum_k K_{h2}(q - x_k)},
   \\qquad K_{h2}(u) = e^{-\\|u\\|^2/(2 h2)}, \\; h2 = 1/\\beta,

the posterior mean of ``x`` under the prior :math:`\\frac1N\\sum_j\\delta_{x_j}` and
the likelihood :math:`N(q; x, h2 I)`, and
:math:`a(q) - q = h2\\,\\nabla_q \\log \\frac1N \\sum_j \\varphi_{h2}(q - x_j)`.
General ``N`` and ``d`` through indexed sums (the score identity for general
``N`` in ``d = 1``); the integrals against the empirical prior and the gradient
explicitly for ``N = 3``, ``d = 2``. Results: ``E_N`` the posterior mean
(integration against Dirac masses by ``integrate``, checked by sifting),
``r_N`` :math:`= h_2 \\nabla_q \\log` KDE (``diff``, checked by ``mpmath.diff``).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from .derivation import ClaimedForm, Derivation, Step

__all__ = ["derivation"]

beta, h2 = sp.symbols("beta h2", positive=True)
N, d = sp.symbols("N d", integer=True, positive=True)
i, j, k = sp.symbols("i j k", integer=True)
x = sp.IndexedBase("x", real=True)
q = sp.IndexedBase("q", real=True)
q1d = sp.Symbol("q", real=True)
EXPLICIT_N, EXPLICIT_D = 3, 2
POSTERIOR_MEAN, SCORE = sp.symbols("E_N r_N")


def _softmax(logits, index):
    """``exp(logit_index) / sum_k exp(logit_k)`` with the sum over ``k = 1..N``."""
    return sp.exp(logits) / sp.Sum(sp.exp(logits.subs(index, k)), (k, 1, N))


def _general_steps():
    sq_dist = sp.Sum((q[i] - x[j, i]) ** 2, (i, 1, d))
    logits = beta * sp.Sum(q[i] * x[j, i], (i, 1, d)) - beta / 2 * sp.Sum(x[j, i] ** 2, (i, 1, d))
    centred = -beta / 2 * sq_dist + beta / 2 * sp.Sum(q[i] ** 2, (i, 1, d))
    kernel = sp.exp(-sq_dist / (2 * h2))
    density = (2 * sp.pi * h2) ** (-d / 2) * kernel
    kernel_1d = sp.exp(-((q1d - x[j]) ** 2) / (2 * h2))
    return [
        Step(sp.Eq(logits, centred, evaluate=False),
             "complete the square: ||q - x_j||^2 = ||q||^2 - 2 q.x_j + ||x_j||^2"),
        Step(sp.Eq(_softmax(logits, j), _softmax(-beta / 2 * sq_dist, j), evaluate=False),
             "exp(beta ||q||^2 / 2) is common to every key and cancels in the softmax"),
        Step(sp.Eq(_softmax(-beta / 2 * sq_dist, j), kernel / sp.Sum(kernel.subs(j, k), (k, 1, N)), evaluate=False),
             "bandwidth h2 = 1/beta: the Nadaraya-Watson weights of the Gaussian kernel",
             given=(sp.Eq(beta, 1 / h2),)),
        Step(sp.Eq((density / N) / sp.Sum(density.subs(j, k) / N, (k, 1, N)),
                   kernel / sp.Sum(kernel.subs(j, k), (k, 1, N)), evaluate=False),
             "Bayes' rule, prior mass 1/N at each x_j, likelihood N(q; x_j, h2 I): the constants cancel"),
        Step(sp.Eq(sp.Sum(kernel_1d * x[j], (j, 1, N)) / sp.Sum(kernel_1d, (j, 1, N)) - q1d,
                   h2 * sp.Derivative(sp.log(sp.Sum(kernel_1d, (j, 1, N))), q1d), evaluate=False),
             "d = 1: h2 d/dq log of the KDE (1/N) sum_j phi_h2(q - x_j), whose constant 1/(N sqrt(2 pi h2)) "
             "d/dq log removes; d/dq exp(-(q - x_j)^2/(2 h2)) = -(q - x_j)/h2 exp(-(q - x_j)^2/(2 h2))"),
    ]


def _explicit():
    """Posterior mean by integration and h2 * grad log KDE by differentiation, N = 3, d = 2."""
    ys = sp.symbols(f"y1:{EXPLICIT_D + 1}", real=True)
    qs = [q[c] for c in range(1, EXPLICIT_D + 1)]
    keys = [[x[n, c] for c in range(1, EXPLICIT_D + 1)] for n in range(1, EXPLICIT_N + 1)]

    def sq(u, v):
        return sum((a - b) ** 2 for a, b in zip(u, v))

    normalisation = (2 * sp.pi * h2) ** sp.Rational(EXPLICIT_D, 2)
    prior = sum(sp.Mul(*(sp.DiracDelta(y - xc) for y, xc in zip(ys, key))) for key in keys) / EXPLICIT_N
    likelihood = sp.exp(-sq(qs, ys) / (2 * h2)) / normalisation
    limits = [(y, -sp.oo, sp.oo) for y in ys]
    normaliser = sp.Integral(prior * likelihood, *limits)
    mean_integrals = sp.ImmutableMatrix([sp.Integral(y * prior * likelihood, *limits) / normaliser for y in ys])
    posterior_mean = sp.ImmutableMatrix(
        [sp.integrate(sp.expand(y * prior * likelihood), *limits) for y in ys]
    ) / sp.integrate(sp.expand(prior * likelihood), *limits)

    kde = sum(sp.exp(-sq(qs, key) / (2 * h2)) for key in keys) / (EXPLICIT_N * normalisation)
    score_derivatives = sp.ImmutableMatrix([h2 * sp.Derivative(sp.log(kde), qc) for qc in qs])
    score = sp.ImmutableMatrix([h2 * sp.diff(sp.log(kde), qc) for qc in qs])

    logits = [beta * sum(a * b for a, b in zip(qs, key)) - beta * sq(key, [0] * EXPLICIT_D) / 2 for key in keys]
    weights = [sp.exp(lg) / sum(sp.exp(other) for other in logits) for lg in logits]
    attention = sp.ImmutableMatrix([sum(w * key[c] for w, key in zip(weights, keys)) for c in range(EXPLICIT_D)])
    on_bandwidth = (sp.Eq(beta, 1 / h2),)
    steps = [
        Step(sp.Eq(mean_integrals, posterior_mean, evaluate=False),
             "N = 3, d = 2: posterior mean = integral of y against prior x likelihood, normalised", route="sift"),
        Step(sp.Eq(score_derivatives, score, evaluate=False), "N = 3, d = 2: gradient of the log-KDE",
             route="mpmath"),
    ]
    claims = [
        ClaimedForm(sp.Eq(posterior_mean, attention, evaluate=False),
                    "softmax attention with beta = 1/h2 is the posterior mean under the empirical prior",
                    ref="C1", given=on_bandwidth, name=POSTERIOR_MEAN),
        ClaimedForm(sp.Eq(score, attention - sp.ImmutableMatrix(qs), evaluate=False),
                    "the attention residual a(q) - q is h2 times the score of the Gaussian KDE",
                    ref="C2", given=on_bandwidth, name=SCORE),
    ]
    results = [
        sp.Eq(POSTERIOR_MEAN, posterior_mean, evaluate=False),
        sp.Eq(SCORE, score, evaluate=False),
    ]
    return steps, results, claims


@cache
def derivation() -> Derivation:
    """Build the ``attention`` derivation (claims C1, C2)."""
    steps, results, claims = _explicit()
    return Derivation(
        "attention",
        "Attention step = Gaussian-kernel (Nadaraya-Watson) mean = empirical-Bayes posterior mean",
        [beta, h2, N, d, q1d],
        _general_steps() + steps,
        results,
        claims,
    )
