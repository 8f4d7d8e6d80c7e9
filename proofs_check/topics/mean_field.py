"""The mean-field PDE and its small-bandwidth limit, the backward heat equation: C5.

The derivations ``mean_field`` (the PDE and its limit) and ``depth_noise`` (noise variance removed at
rate ``2 h2``) bear on it.
"""

from __future__ import annotations

from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import claim

claim(
    "C5",
    "mean field = reverse diffusion for small bandwidth",
    "The token density obeys d rho/dt = -div(rho h2 grad log(rho * phi_h2)), and as h2 -> 0 "
    "d rho/dt = -h2 Laplacian(rho) + O(h2^2): the backward heat equation.",
    ("N -> inf", "h2 -> 0"),
)

register_derivation("mean_field", theory_derivation("mean_field"), ("C5",))
register_derivation("depth_noise", theory_derivation("depth_noise"), ("C5",))
