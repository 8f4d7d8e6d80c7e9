"""Euler layers and the continuous-depth ODE: C3.

``L`` residual layers of step ``eta = T/L`` converge to the depth ODE ``dx/dt = a_t(x) - x`` at depth
``T`` with error ``O(eta)``: the derivation ``depth_ode`` and a measured order of convergence against a
high-order reference solution. The order the theory asserts is read through :func:`euler_order`, so
that a wrong theory can be swapped in.
"""

from __future__ import annotations

import numpy as np
from scipy import integrate

from attneb.numerics import flow, kernels, stats, transformer
from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, claim, swap
from attneb.proofs_check.topics.attention import IDENTITY_TOL

claim(
    "C3",
    "Euler layers converge to the depth ODE, first order",
    "L residual layers x <- x + eta (a_l(x) - x) of step eta = T/L converge to the solution of "
    "dx/dt = a_t(x) - x at depth T with global error O(eta).",
    ("T fixed", "eta -> 0", "tokens updated together"),
)

register_derivation("depth_ode", theory_derivation("depth_ode"), ("C3",))


#: How far the fitted order of Euler layers may sit from the declared order.
ORDER_TOL = 0.1


def euler_order() -> int:
    """The order of Euler layers that C3 asserts (the solver's declared order)."""
    return flow.SOLVERS["euler"].order


def _order_two(real):
    return lambda: 2


def _frozen_keys(real):
    def frozen(x0, h2, T, eta, depths, budget_bytes, plan=None):
        layers = flow.n_layers(T, eta)
        tokens = x0
        for _ in range(layers):
            tokens = tokens + (T / layers) * (kernels.kernel_mean(tokens, x0, h2) - tokens)
        return tokens, []
    return frozen


def _midpoint_layers(real):
    def midpoint(x0, h2, T, eta, depths, budget_bytes, plan=None):
        layers = flow.n_layers(T, eta)
        step, tokens = T / layers, x0
        for _ in range(layers):
            half = tokens + step / 2 * flow.velocity(tokens, h2)
            tokens = tokens + step * flow.velocity(half, h2)
        return tokens, []
    return midpoint


def _one_layer_short(real):
    def short(x0, h2, T, eta, depths, budget_bytes, plan=None):
        layers = flow.n_layers(T, eta)
        return real(x0, h2, T * (layers - 1) / layers, eta * (layers - 1) / layers, depths, budget_bytes)
    return short


def _depth_one(real):
    return lambda x0, h2, T, eta, depths, budget_bytes, grid=None: real(x0, h2, 1.0, eta, depths, budget_bytes)


#: C3's problem: depth 1.3 (not 1, so that a flow ignoring T shows), steps that do not divide it.
C3_H2, C3_T = 0.2, 1.3


def reference_flow(x0: np.ndarray, h2: float, T: float) -> np.ndarray:
    r"""The depth ODE :math:`\dot x_i = a(x_i) - x_i` solved by DOP853 (rtol 1e-12) with the field of the softmax head.

    The field is :class:`attneb.numerics.transformer.AttentionHead` (scipy's softmax), not the kernel
    code of :mod:`attneb.numerics.kernels` that :mod:`attneb.numerics.flow` uses.
    """
    head = transformer.AttentionHead.gaussian(x0.shape[1], h2)

    def field(_t, y):
        x = y.reshape(x0.shape)
        return (head(x, x) - x).ravel()

    sol = integrate.solve_ivp(field, (0.0, T), x0.ravel(), method="DOP853", rtol=1e-12, atol=1e-12)
    return sol.y[:, -1].reshape(x0.shape)


@check(
    "C3", "fitted order of Euler layers against the ODE",
    criterion=f"the log-log slope of the max error at depth T = {C3_T} (h2 = {C3_H2}) against the step T/L (L = "
    "round(T/eta), eta = 0.2 .. 0.025, to 0.00625 in full mode) lies within "
    f"+-{ORDER_TOL} of the order C3 asserts (1), the reference being the ODE of the softmax head's field "
    f"(DOP853, rtol 1e-12); and at the largest step (eta = 0.2, L = {round(C3_T / 0.2)}) particle_flow's L layers equal the "
    f"transformer's L layers of step T/L to {IDENTITY_TOL:g}",
    alternatives=[
        alternative("Euler error of order 2", "the asserted order of the layers is 2",
                    swap(f"{__name__}:euler_order", _order_two)),
        alternative("layers attend to the initial tokens", "every layer's keys are the tokens at depth 0",
                    swap("attneb.numerics.flow:_euler", _frozen_keys), kind="implementation"),
        alternative("second-order (midpoint) layers", "each layer is a midpoint step of the ODE",
                    swap("attneb.numerics.flow:_euler", _midpoint_layers), kind="implementation"),
        alternative("velocity 2 (a - x)", "depth time scaled by 2",
                    swap("attneb.numerics.flow:_velocity", lambda real: (lambda *a: 2 * real(*a))), kind="implementation"),
        alternative("velocity x - a", "the field with its sign flipped",
                    swap("attneb.numerics.flow:_velocity", lambda real: (lambda *a: -real(*a))), kind="implementation"),
        alternative("field at bandwidth 2 h2", "the layers' kernel twice as wide",
                    swap("attneb.numerics.flow:_velocity", lambda real: (lambda t, h2, *a: real(t, 2 * h2, *a))),
                    kind="implementation"),
        alternative("one layer short", "the flow stops one layer before T",
                    swap("attneb.numerics.flow:_euler", _one_layer_short), kind="implementation"),
        alternative("horizon ignored (depth 1)", "the layers run to depth 1 whatever T",
                    swap("attneb.numerics.flow:_euler", _depth_one), kind="implementation"),
    ],
    covers=("attneb.numerics.flow:particle_flow",),
)
def euler_order_check(ctx: Context) -> Evidence:
    rng = np.random.default_rng(3)
    x0 = np.concatenate([rng.normal(-1.0, 0.6, (32, 2)), rng.normal(1.0, 0.6, (32, 2))])
    h2, T = C3_H2, C3_T
    reference = reference_flow(x0, h2, T)
    etas = np.array([0.2, 0.1, 0.05, 0.025] + ([] if ctx.quick else [0.0125, 0.00625]))
    layers = np.maximum(1, np.round(T / etas)).astype(int)
    errors = np.array([np.abs(flow.particle_flow(x0, h2, T, eta=eta) - reference).max() for eta in etas])
    fit = stats.loglog_slope(T / layers, errors)
    declared = euler_order()
    net = transformer.TwoStageTransformer(h2, 1.0, int(layers[0]), T / layers[0])
    identity = float(np.abs(flow.particle_flow(x0, h2, T, eta=etas[0]) - net.stage_one(x0)).max())
    return Evidence(
        passed=bool(abs(fit.slope.estimate - declared) <= ORDER_TOL and identity <= IDENTITY_TOL),
        kind="rate",
        summary=f"max error ~ step^p with p = {fit.slope} (asserted order {declared}, accepted within +-{ORDER_TOL}); "
        f"particle_flow vs the {layers[0]}-layer transformer: {identity:.1e}",
        data={
            "steps": (T / layers).tolist(),
            "errors": errors.tolist(),
            "slope": fit.slope.estimate,
            "slope_ci": [fit.slope.low, fit.slope.high],
            "declared_order": declared,
            "tolerance": ORDER_TOL,
            "transformer_residual": identity,
        },
    )
