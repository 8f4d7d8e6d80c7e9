"""Residual layers are Euler steps of the depth ODE; local error O(eta^2), global O(eta) (C3).

The layer :math:`x \\mapsto x + \\eta\\,(a_t(x) - x)` is the explicit Euler step
of :math:`dx/dt = v(x, t) = a_t(x) - x` at depth :math:`t = l\\eta`. Taylor
expansion (``series`` in ``eta``) of the exact flow gives the local error

.. math:: X(t + \\eta) - \\big(X(t) + \\eta v\\big)
          = \\frac{\\eta^2}{2}\\,\\big(J_v v + \\partial_t v\\big) + O(\\eta^3),

derived for a generic smooth field in ``d = 2``; on the scalar example
:math:`v = -c x`, ``rsolve`` and ``dsolve`` give the layers and the flow in
closed form (each put back into its equation) and the global error at depth
``T`` is :math:`-\\tfrac{c^2 T}{2} x_0 e^{-cT}\\,\\eta + O(\\eta^2)`, with a nonzero
coefficient: exactly first order. The series, ``diff`` and ``limit`` results are
checked against these typed formulas (Taylor's formula, the chain rule
:math:`X'' = J_v v + \\partial_t v`, the global error). Results: ``delta_local``,
``delta_global`` and ``delta_rate`` (the limit of ``delta_global / eta``).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from .derivation import ClaimedForm, Derivation, Step

__all__ = ["derivation"]

t = sp.Symbol("t", real=True)
eta, c, T, x0 = sp.symbols("eta c T x0", positive=True)
n = sp.Symbol("n", integer=True, nonnegative=True)
xs = sp.symbols("x1 x2", real=True)
X = [sp.Function(f"X{i}")(t) for i in (1, 2)]
a = [sp.Function(f"a{i}") for i in (1, 2)]
v = [sp.Function(f"v{i}") for i in (1, 2)]
LOCAL_ERROR, GLOBAL_ERROR, ERROR_RATE = sp.symbols("delta_local delta_global delta_rate")


def _generic():
    """Euler step and local error for a generic velocity field in d = 2."""
    at_state = [vc(*xs, t) for vc in v]
    velocity_is_residual = tuple(sp.Eq(vc(*xs, t), ac(*xs, t) - xc) for vc, ac, xc in zip(v, a, xs))
    layer = sp.ImmutableMatrix([xc + eta * (ac(*xs, t) - xc) for ac, xc in zip(a, xs)])
    euler = sp.ImmutableMatrix([xc + eta * vc for xc, vc in zip(xs, at_state)])

    along = [vc(*X, t) for vc in v]
    ode = tuple(sp.Eq(sp.Derivative(Xc, t), Vc) for Xc, Vc in zip(X, along))
    taylor = [Xc.func(t + eta).series(eta, 0, 3).doit() for Xc in X]
    acceleration = [sp.diff(Vc, t).subs([(e.lhs, e.rhs) for e in ode]) for Vc in along]
    on_flow = [(sp.Derivative(Xc, (t, 2)), acc) for Xc, acc in zip(X, acceleration)]
    on_flow += [(e.lhs, e.rhs) for e in ode]
    local_error = sp.ImmutableMatrix(
        [sp.expand(tc.subs(on_flow) - (Xc + eta * Vc)) for tc, Xc, Vc in zip(taylor, X, along)]
    )
    at_x = {Xc: xc for Xc, xc in zip(X, xs)}
    local_error_x = local_error.subs(at_x).doit()

    # the textbook formulas that the series and diff above must reproduce
    taylor_formula = sp.ImmutableMatrix(
        [Xc + eta * sp.Derivative(Xc, t) + eta**2 / 2 * sp.Derivative(Xc, (t, 2)) + sp.O(eta**3) for Xc in X]
    )
    jacobian = sp.ImmutableMatrix(at_state).jacobian(xs)
    chain_rule = jacobian * sp.ImmutableMatrix(at_state) + sp.ImmutableMatrix(at_state).diff(t)
    tau = sp.Dummy("tau")
    chain_rule_on_flow = sp.ImmutableMatrix(
        [sum(sp.Derivative(Vi, Xj) * Vj for Xj, Vj in zip(X, along)) + sp.Subs(sp.Derivative(vi(*X, tau), tau), tau, t)
         for vi, Vi in zip(v, along)]
    )
    second_derivatives = sp.ImmutableMatrix([sp.Derivative(Xc, (t, 2)) for Xc in X])
    typed = sp.ImmutableMatrix([eta**2 / 2 * entry + sp.O(eta**3) for entry in chain_rule])
    steps = [
        Step(sp.Eq(layer, euler, evaluate=False),
             "the residual layer is the Euler step, size eta, of dx/dt = v(x, t) := a_t(x) - x",
             given=velocity_is_residual),
        Step(sp.Eq(sp.ImmutableMatrix([Xc.func(t + eta) for Xc in X]), taylor_formula, evaluate=False),
             "Taylor's formula in eta for the exact flow X through X(t): X + eta X' + (eta^2/2) X'' + O(eta^3)"),
        Step(sp.Eq(second_derivatives, chain_rule_on_flow, evaluate=False),
             "chain rule along the flow: X'' = J_v v + d_t v", given=ode),
        Step(sp.Eq(taylor_formula - sp.ImmutableMatrix([Xc + eta * Vc for Xc, Vc in zip(X, along)]),
                   sp.ImmutableMatrix([eta**2 / 2 * entry + sp.O(eta**3) for entry in second_derivatives]),
                   evaluate=False),
             "exact minus Euler: the O(1) and O(eta) terms cancel, (eta^2/2) X'' is left", given=ode),
    ]
    claim = ClaimedForm(sp.Eq(local_error_x, typed, evaluate=False),
                        "local error of one layer = eta^2/2 (J v + d_t v) + O(eta^3)", ref="C3", name=LOCAL_ERROR)
    return steps, local_error_x, claim


def _scalar():
    """Global error on v = -c x, flow by dsolve, layers by rsolve."""
    y = sp.Function("y")

    def velocity(z):
        return -c * z

    flow = sp.dsolve(sp.Eq(y(t).diff(t), velocity(y(t))), y(t), ics={y(0): x0}).rhs
    layers = sp.rsolve(y(n + 1) - (y(n) + eta * velocity(y(n))), y(n), {y(0): x0})
    error = layers.subs(n, T / eta) - flow.subs(t, T)
    error_series = sp.series(error, eta, 0, 2)
    rate = sp.limit(error / eta, eta, 0)
    steps = [
        Step(sp.Eq(sp.ImmutableMatrix([sp.Derivative(y(t), t), y(0)]), sp.ImmutableMatrix([velocity(y(t)), x0]),
                   evaluate=False),
             "dsolve: the flow of dx/dt = -c x from x0", given=(sp.Eq(y(t), flow),), route="substitute"),
        Step(sp.Eq(sp.ImmutableMatrix([y(n + 1), y(0)]), sp.ImmutableMatrix([y(n) + eta * velocity(y(n)), x0]),
                   evaluate=False),
             "rsolve: L Euler layers x_{l+1} = x_l + eta (-c x_l) from x0", given=(sp.Eq(y(n), layers),),
             route="substitute"),
    ]
    claims = [
        ClaimedForm(sp.Eq(error, -(c**2 * T / 2) * x0 * sp.exp(-c * T) * eta + sp.O(eta**2), evaluate=False),
                    "Euler layers converge to the depth ODE at first order in eta: on dx/dt = -c x the global error "
                    "at depth T = L eta is -(c^2 T / 2) x0 exp(-c T) eta + O(eta^2)", ref="C3", name=GLOBAL_ERROR),
        ClaimedForm(sp.Eq(sp.sign(rate, evaluate=False), -1, evaluate=False),
                    "the first-order coefficient lim_{eta -> 0} error / eta is nonzero (negative): exactly first order",
                    ref="C3", name=sp.sign(ERROR_RATE)),
    ]
    return steps, error_series, rate, claims


@cache
def derivation() -> Derivation:
    """Build the ``depth_ode`` derivation (claim C3)."""
    generic_steps, local_error, local_claim = _generic()
    scalar_steps, global_error, rate, global_claims = _scalar()
    return Derivation(
        "depth_ode",
        "Residual layers = Euler steps of dx/dt = a_t(x) - x: local error O(eta^2), global O(eta)",
        [t, eta, c, T, x0, *xs],
        generic_steps + scalar_steps,
        [
            sp.Eq(LOCAL_ERROR, local_error, evaluate=False),
            sp.Eq(GLOBAL_ERROR, global_error, evaluate=False),
            sp.Eq(ERROR_RATE, rate, evaluate=False),
        ],
        [local_claim, *global_claims],
    )
