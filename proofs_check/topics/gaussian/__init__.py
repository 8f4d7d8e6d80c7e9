"""The exact Gaussian prior: its horizon T_G (G1) and the layer count of the discrete variance map (G2).

- G1 (:mod:`.horizon`): the mean-field token variance returns to ``tau2`` at
  ``T_G = sigma2/(2 h2) + (1/2) log(1 + sigma2/tau2)``, at every ``h2``; particles follow it;
- G2 (:mod:`.layers`, :mod:`.blurring`): one Euler layer maps the variance ``s`` to
  ``(1 - eta h2/(s + h2))^2 s``; particles need the map's number of layers (step 1/2, and step 1:
  Gaussian blurring mean shift);
- the evaluators of :mod:`attneb.theory.depth_noise` against numerics that share nothing with the
  derivation (:mod:`.evaluators`).

The derivation ``gaussian`` bears on G1.
"""

from __future__ import annotations

from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import claim

claim(
    "G1",
    "exact Gaussian horizon",
    "For a Gaussian prior N(m, tau2) the mean-field token variance obeys ds/dt = -2 h2 s/(s + h2) and "
    "returns to tau2 at T_G = sigma2/(2 h2) + (1/2) log(1 + sigma2/tau2), at every finite h2; a finite "
    "particle system follows it.",
    ("Gaussian prior", "mean field (N large enough for the stability bound S1)"),
)
claim(
    "G2",
    "layer count of the discrete variance map",
    "One Euler layer of step eta maps the variance s to (1 - eta h2/(s + h2))^2 s; the number of layers "
    "taking tau2 + sigma2 down to tau2 is what a finite particle system needs.",
    ("Gaussian prior", "mean field"),
)

register_derivation("gaussian", theory_derivation("gaussian"), ("G1",))

# the modules that register their checks
from . import blurring, evaluators, horizon, layers  # noqa: E402,F401
