"""The depth ODE is the gradient flow of a log-sum-exp energy, token by token (C4).

The velocity of a token at ``z`` is :math:`a_t(z) - z = -\\nabla E_t(z)` with

.. math:: E_t(z) = -h_2 \\log \\sum_j e^{-\\|z - x_j(t)\\|^2 / (2 h_2)}
               = \\tfrac12\\|z\\|^2 - h_2 \\log \\sum_j e^{(z\\cdot x_j - \\|x_j\\|^2/2)/h_2},

exactly (no extra quadratic term; the second form is the dense-associative-
memory energy). The energy is derived by integrating the velocity (``d = 1``,
``N = 2``) and checked for general ``N`` (``d = 1``) and for ``N = 3``, ``d = 2``.
It is a *per-token* energy with the context frozen: the joint field of the
tokens is a gradient for ``N = 2`` but not for ``N = 3`` (nonzero curl). The
``integrate`` result is checked by differentiating it, the ``diff`` value of the
curl by ``mpmath.diff``.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from .derivation import ClaimedForm, Derivation, Step

__all__ = ["derivation"]

h2 = sp.Symbol("h2", positive=True)
N = sp.Symbol("N", integer=True, positive=True)
j = sp.Symbol("j", integer=True)
z = sp.Symbol("z", real=True)
x = sp.IndexedBase("x", real=True)
CURL_POINT = {"positions": (0, 1, 3), "h2": 1}
ENERGY = sp.Function("E_t")
CURL = sp.Symbol("curl_3")


def _kernel(u, v):
    return sp.exp(-sum((a - b) ** 2 for a, b in zip(u, v)) / (2 * h2))


def _velocity(point, tokens):
    """Softmax-weighted mean of the tokens minus the point (one attention residual)."""
    weights = [_kernel(point, tok) for tok in tokens]
    return [sum(w * tok[c] for w, tok in zip(weights, tokens)) / sum(weights) - point[c] for c in range(len(point))]


def _energy(point, tokens):
    """The paper's E_t (docs/theory.md), typed in as the claim."""
    return -h2 * sp.log(sum(_kernel(point, tok) for tok in tokens))


def _general_steps():
    kernel = sp.exp(-((z - x[j]) ** 2) / (2 * h2))
    energy = -h2 * sp.log(sp.Sum(kernel, (j, 1, N)))
    memory_form = z**2 / 2 - h2 * sp.log(sp.Sum(sp.exp((z * x[j] - x[j] ** 2 / 2) / h2), (j, 1, N)))
    velocity = sp.Sum(kernel * x[j], (j, 1, N)) / sp.Sum(kernel, (j, 1, N)) - z
    return [
        Step(sp.Eq(-sp.Derivative(energy, z), velocity, evaluate=False),
             "d = 1, any N: -dE/dz is the softmax-weighted mean of the tokens minus z"),
        Step(sp.Eq(energy, memory_form, evaluate=False),
             "exp(-z^2/(2 h2)) factors out of the sum: the dense-associative-memory form", how="split_logs"),
    ]


def _derived_energy():
    """Energy of two tokens in d = 1 by integrating minus the velocity."""
    tokens = [(x[1],), (x[2],)]
    (velocity,) = _velocity((z,), tokens)
    energy = -sp.integrate(velocity, z)
    step = Step(sp.Eq(-sp.Integral(velocity, z), energy, evaluate=False),
                "d = 1, N = 2: integrate minus the velocity (integration constant 0)", route="antiderivative")
    claim = ClaimedForm(sp.Eq(energy, _energy((z,), tokens), evaluate=False),
                        "the energy is E_t(z) = -h2 log sum_j exp(-|z - x_j|^2 / (2 h2)), no extra term", ref="C4",
                        name=ENERGY(z))
    return step, energy, claim


def _gradient_claim():
    point = sp.symbols("z1 z2", real=True)
    tokens = [tuple(x[n, c] for c in (1, 2)) for n in (1, 2, 3)]
    energy = _energy(point, tokens)
    minus_gradient = sp.ImmutableMatrix([-sp.Derivative(energy, zc) for zc in point])
    return ClaimedForm(sp.Eq(minus_gradient, sp.ImmutableMatrix(_velocity(point, tokens)), evaluate=False),
                       "N = 3, d = 2: dz/dt = a_t(z) - z = -grad E_t(z)", ref="C4",
                       name=sp.ImmutableMatrix([-sp.Derivative(ENERGY(*point), zc) for zc in point]))


def _collective():
    """Curl of the joint field (d = 1): zero for N = 2, nonzero for N = 3."""
    positions = sp.symbols("y1:4", real=True)
    steps, curls = [], []
    for size in (2, 3):
        tokens = [(p,) for p in positions[:size]]
        field = [_velocity(tok, tokens)[0] for tok in tokens]
        curl = sp.Derivative(field[0], positions[1]) - sp.Derivative(field[1], positions[0])
        if size == 2:
            steps.append(Step(sp.Eq(curl, 0, evaluate=False),
                              "two tokens: d v_1/d y_2 = d v_2/d y_1, the joint field is a gradient"))
            continue
        at = dict(zip(positions, CURL_POINT["positions"])) | {h2: CURL_POINT["h2"]}
        value = sp.simplify(curl.doit().subs(at))
        steps.append(Step(sp.Eq(curl.subs(at), value, evaluate=False),
                          "three tokens at y = (0, 1, 3), h2 = 1: the curl d v_1/d y_2 - d v_2/d y_1 there",
                          route="mpmath"))
        curls.append(sp.Eq(CURL, value, evaluate=False))
    claim = ClaimedForm(sp.Eq(sp.sign(curls[0].rhs, evaluate=False), 1, evaluate=False),
                        "three tokens: the curl is nonzero, so E_t is a per-token energy with the context frozen, "
                        "not a potential for the joint dynamics", ref="C4", name=sp.sign(CURL))
    return steps, curls, claim


@cache
def derivation() -> Derivation:
    """Build the ``energy`` derivation (claim C4)."""
    integration, energy, energy_claim = _derived_energy()
    collective_steps, curls, curl_claim = _collective()
    return Derivation(
        "energy",
        "The depth ODE is -grad of the log-sum-exp energy E_t (context frozen)",
        [h2, N, z],
        _general_steps() + [integration] + collective_steps,
        [sp.Eq(ENERGY(z), energy, evaluate=False), *curls],
        [energy_claim, _gradient_claim(), curl_claim],
    )
