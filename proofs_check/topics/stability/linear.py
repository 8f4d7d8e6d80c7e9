"""S1's linear analysis against numerics: the evaluators by a numeric maximum, one mode on a lattice.

The evaluators of :mod:`attneb.theory.stability` (``growth_rate``, ``fastest_mode``,
``token_scaling``) are checked against a numeric maximisation of ``growth_rate`` (a consistency check
of the three with one another), and ``growth_rate`` itself against the growth of a sinusoidal
perturbation of a token lattice (deterministic).
"""

from __future__ import annotations

import math

from scipy import optimize

from attneb.numerics import meanfield
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.theory import stability

#: Bandwidths and noise levels the evaluators are compared at (no value is 1).
#: Relative tolerance of the comparisons: the maximisation (xatol 1e-12 on k h2^(1/2)) is exact to ~1e-10 relative.
RTOL = 1e-8

H2S = (0.05, 0.3, 2.0)


SIGMA2S = (0.5, 2.0)


def _argmax_rate(h2: float) -> tuple[float, float]:
    """``(k, lambda(k))`` at the maximum of ``stability.growth_rate(., h2)``, by bounded scalar minimisation."""
    scale = h2**-0.5
    res = optimize.minimize_scalar(lambda u: -stability.growth_rate(u * scale, h2), bounds=(0.05, 20.0),
                                   method="bounded", options={"xatol": 1e-12})
    return res.x * scale, -res.fun


@check("S1", "fastest mode and token scaling = the numeric maximum of the growth rate",
       criterion=f"at h2 in {H2S}: fastest_mode(h2) equals the argmax and the maximum of growth_rate(., h2) found by "
       f"bounded scalar minimisation within {RTOL:g} (relative; the argmax to 1e-5, the maximum being flat), and, at "
       f"sigma2 in {SIGMA2S}, log token_scaling(sigma2, h2) equals 2 max_k growth_rate(k, h2) x sigma2 / (2 h2) "
       f"within {RTOL:g}",
       alternatives=[
           alternative("fastest mode at k = 1/sqrt(h2)", "k* of the rate exp(-h2 k^2) h2 k^2 taken as 1/sqrt(h2)",
                       swap("attneb.theory.stability:fastest_mode",
                            lambda real: lambda h2: (h2**-0.5, real(h2)[1]))),
           alternative("N_c = exp(sigma2 / (e h2))", "the token scaling with the rate 1/e",
                       swap("attneb.theory.stability:token_scaling",
                            lambda real: lambda s2, h2: math.exp(s2 / (math.e * h2)))),
       ],
       covers=("attneb.theory.stability:fastest_mode", "attneb.theory.stability:token_scaling"))
def evaluators_of_the_stability_analysis(ctx: Context) -> Evidence:
    residuals = {}
    for h2 in H2S:
        k_num, rate_num = _argmax_rate(h2)
        k_star, rate_star = stability.fastest_mode(h2)
        residuals[f"k* h2={h2}"] = abs(k_star / k_num - 1) * RTOL / 1e-5
        residuals[f"lambda* h2={h2}"] = abs(rate_star / rate_num - 1)
        for sigma2 in SIGMA2S:
            predicted = 2 * rate_num * sigma2 / (2 * h2)
            residuals[f"log N_c sigma2={sigma2} h2={h2}"] = abs(math.log(stability.token_scaling(sigma2, h2))
                                                                / predicted - 1)
    worst = max(residuals.values())
    return Evidence(passed=worst <= RTOL, kind="numeric",
                    summary=f"fastest_mode and token_scaling vs the numeric maximum of growth_rate: worst relative "
                    f"residual {worst:.1e} (tolerance {RTOL:g}; the k* residual scaled by {RTOL / 1e-5:g})",
                    data={"residuals": residuals, "tolerance": RTOL})


#: Relative tolerance of a measured growth rate: linearisation error O(amplitude k) ~ 1e-4,
#: lattice sums exact to exp(-(2 pi)^2 h2 / (2 spacing^2)), ODE tolerance 1e-10.
GROWTH_RTOL = 1e-3


def _rate_peaking_at_one_over_e(real):
    return lambda k, h2: h2 * k**2 * math.exp(-h2 * k**2)


@check("S1", "growth of a sinusoidal perturbation of a token lattice (N = 2000) = lambda(k)",
       criterion="Tokens on the lattice 0.1 Z in [0, 200) displaced by 1e-4 sin(k x), h2 = 1, depth ODE to T = 2 "
                 "(rtol 1e-10); the log amplitude of the displacement in [40, 160] fitted linearly in depth. Passes "
                 "when at k* (quick) or at k*/2, k*, 2 k* (full), k* from stability.fastest_mode, the fitted rate is "
                 "within 1e-3 (relative) of stability.growth_rate(k, h2).",
       replication="none",
       alternatives=[
           alternative("rate peaking at 1/e", "lambda(k) = h2 k^2 exp(-h2 k^2), fastest mode (1/sqrt(h2), 1/e)",
                       swap("attneb.theory.stability:growth_rate", _rate_peaking_at_one_over_e),
                       swap("attneb.theory.stability:fastest_mode", lambda real: lambda h2: (1 / math.sqrt(h2), 1 / math.e))),
           alternative("no kernel damping", "lambda(k) = h2 k^2 (the backward heat equation)",
                       swap("attneb.theory.stability:growth_rate", lambda real: lambda k, h2: h2 * k**2)),
           alternative("rate 2 lambda", "every rate doubled (the rate of the structure factor, not of the amplitude)",
                       swap("attneb.theory.stability:growth_rate", lambda real: lambda k, h2: 2 * real(k, h2))),
       ],
       covers=("attneb.theory.stability:growth_rate",))
def mode_growth_matches_linear_stability(ctx: Context) -> Evidence:
    h2 = 1.0
    k_star, rate_star = stability.fastest_mode(h2)
    ks = [k_star] if ctx.quick else [0.5 * k_star, k_star, 2.0 * k_star]
    key = ("S1", "lattice", ctx.quick, tuple(float(k) for k in ks))
    if key not in ctx.cache:  # the measurement, reused when a theory alternative decides again
        ctx.cache[key] = [meanfield.mode_growth_rate(h2, k, spacing=0.1, length=200.0) for k in ks]
    rows = []
    for k, fit in zip(ks, ctx.cache[key]):
        predicted = stability.growth_rate(k, h2)
        rel = abs(fit.slope.estimate - predicted) / predicted
        rows.append({
            "k": k, "measured": fit.slope.estimate, "ci": [fit.slope.low, fit.slope.high],
            "predicted": predicted, "relative_error": rel, "passed": rel <= GROWTH_RTOL,
        })
    text = "; ".join(f"k={r['k']:.3f}: {r['measured']:.5f} vs {r['predicted']:.5f}" for r in rows)
    return Evidence(
        passed=all(r["passed"] for r in rows),
        kind="rate",
        summary=f"h2={h2}, fastest mode k*={k_star:.4f} (rate {rate_star:.4f}); measured vs lambda(k): {text} "
        f"(relative tolerance {GROWTH_RTOL:g})",
        data={"h2": h2, "modes": rows, "tolerance": GROWTH_RTOL},
    )
