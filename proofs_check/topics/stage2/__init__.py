"""Stage 2, the empirical-Bayes posterior mean, and what it recovers: C7, C8, C9, H1 and B1.

- C7 (:mod:`.empirical_bayes`): the final attention step over the refined tokens is the posterior
  mean under their empirical prior;
- C8 (:mod:`.recovery`, experiment E1): the gap to Bayes falls with ``N`` along the bandwidth
  schedules, and does not stall at a floor;
- C9 (:mod:`.estimator_table`, experiment E4): depth is necessary, Stage 2 alone is worse;
- H1 (question; :mod:`.recovery` and :mod:`.heavy_tails`): does recovery extend to Student-t priors?
- B1 (:mod:`.baselines`): the comparison estimators of E4 compute what their names say.

The derivations ``stage2`` (C7, C8, C9) and ``gaussian`` (C8) bear on them. Figures: :mod:`.figures`.
"""

from __future__ import annotations

from attneb.proofs_check.engine.derivations import register_derivation, theory_derivation
from attneb.proofs_check.engine.registry import claim

claim(
    "C7",
    "Stage 2 = empirical-Bayes posterior mean",
    "The final attention step with query xt (long skip) and bandwidth sigma2 over the refined tokens "
    "x_j(T) is the posterior mean of x under the prior (1/N) sum_j delta_{x_j(T)} and the Gaussian "
    "likelihood N(xt; x, sigma2 I).",
)
claim(
    "C8",
    "recovery of the Bayes posterior mean",
    "As N -> inf and h2 -> 0 with T = T*(h2), xhat(xt) -> E[x | xt]: the excess risk tends to 0.",
    ("well-behaved prior", "asymptotic regime"),
)
claim(
    "C9",
    "depth is necessary",
    "Stage 2 alone (L = 0, prior = noisy empirical measure) has strictly larger risk than the "
    "two-stage estimator at T = T*.",
    ("non-degenerate prior", "sigma2 not small relative to the prior's scale"),
)
claim(
    "H1",
    "recovery (C8) extends to heavy-tailed priors",
    "Along h2 = (4 sigma2/e)/log N with T = T*, the gap of the two-stage estimator to Bayes falls with N and "
    "does not stall at a floor on 1-D Student-t priors with 3 and 5 degrees of freedom, in-sample and on fresh "
    "noisy queries, as it does on the well-behaved priors of C8.",
    ("1-D Student-t priors, df 3 and 5, variance 1", "sigma2 = 0.5", "N <= 131072"),
    question=True,
)
claim(
    "B1",
    "the baselines are what they say",
    "The comparison estimators of the report compute what their names say: the NPMLE maximises the "
    "likelihood of the noisy batch over priors on its grid and denoises by the posterior mean of the fitted "
    "atoms; Tweedie-KDE is xt + sigma2 grad log KDE_h2(xt); linear shrinkage is the Bayes posterior mean "
    "under the Gaussian prior matching the batch's first two moments.",
    ("the baselines' own definitions (numerics.estimators, numerics.npmle)",),
)

register_derivation("stage2", theory_derivation("stage2"), ("C7", "C8", "C9"))
register_derivation("gaussian", theory_derivation("gaussian"), ("C8",))

# the modules that register their checks and studies
from . import baselines, empirical_bayes, estimator_table, figures, heavy_tails, recovery  # noqa: E402,F401
