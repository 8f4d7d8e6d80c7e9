"""The depth ODE as a gradient flow of the log-sum-exp energy: C4 (the derivation ``energy``)."""

from __future__ import annotations

from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import claim

claim(
    "C4",
    "the depth ODE is a gradient flow of the log-sum-exp energy",
    "dx_i/dt = a_t(x_i) - x_i = -grad E_t(x_i) with E_t(x) = -h2 log sum_j exp(-||x - x_j(t)||^2/(2 h2)).",
)

register_derivation("energy", theory_derivation("energy"), ("C4",))
