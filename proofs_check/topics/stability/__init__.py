"""Linear stability of the mean-field PDE, and what it implies for finite N: S1.

Around a uniform density a Fourier mode of wavenumber ``k`` grows at ``h2 k^2 exp(-h2 k^2/2)``, the
fastest at ``2/e`` whatever ``h2``, so finite-``N`` fluctuations grow by ``exp(2 sigma2/(e h2))`` over
``T*``: ``N`` must grow like ``N_c = exp(2 sigma2/(e h2))``. Its evidence:

- the derivation ``stability``;
- :mod:`.linear`: the evaluators of :mod:`attneb.theory.stability` against a numeric maximum, and
  the growth of one Fourier mode on a token lattice;
- :mod:`.onset` (experiment E3): the onset of finite-``N`` fluctuations against the ``N_c`` law, and
  the scale of the clumps;
- :mod:`.dimension`: the threshold ``N_c(d)`` in ``d = 1, 2, 3`` (its Laplace form against the
  fluctuation integral, and particles at twice it).

Figure: :mod:`.figures` (E3).
"""

from __future__ import annotations

from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import claim

claim(
    "S1",
    "linear stability of the mean-field PDE",
    "Around a uniform density a Fourier mode of wavenumber k grows at lambda(k) = h2 k^2 exp(-h2 k^2/2): every "
    "mode grows, the fastest (k* = sqrt(2/h2)) at 2/e whatever h2, so finite-N fluctuations are amplified "
    "by exp(2 sigma2/(e h2)) over T*: N must grow like exp(2 sigma2/(e h2)).",
    ("uniform background density", "linearisation (small perturbation)"),
)

register_derivation("stability", theory_derivation("stability"), ("S1",))

# the modules that register their checks and studies
from . import dimension, figures, linear, onset  # noqa: E402,F401
