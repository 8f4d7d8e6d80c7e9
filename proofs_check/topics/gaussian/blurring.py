r"""The step :math:`\eta = 1`: Stage 1 as Gaussian blurring mean shift, against the exact layer map (G2).

At :math:`\eta = 1` a residual layer replaces every token by its kernel mean. For a Gaussian prior
the exact one-layer map of :mod:`attneb.theory.gaussian` then sends the standard deviation to
:math:`\varsigma^3/(\varsigma^2 + h_2)` (a step of that derivation): about :math:`1 - h_2/\varsigma^2`
per layer while :math:`\varsigma^2 \gg h_2`, cubically once :math:`\varsigma^2 \ll h_2`. Particles
(``N = 65536`` tokens of a 1-D Gaussian prior plus noise, several seeds, in the mean-field regime
``N >> N_c``) run layers of step 1 until their variance reaches ``tau2``; the check compares the
first layer's variance ratio and the layer count with the map. Later layers depart from the map by
a finite-``N`` error that grows with depth (0.3-0.9% by the last layer at ``N = 65536`` in a pilot of
4 seeds, against 0.02-0.13% at the first, a finite-``N`` bias about 4 times larger at ``N = 16384``):
it is reported, not decided on. Below ``N_c`` the map
does not describe the particles at all: at ``(sigma2, tau2, h2) = (1, 1, 0.05)`` (``N_c = 2.4e6``) the
pilot's runs needed 25 to 1564 layers where the map needs 11. Beside it, reported and not decided on: the layers step 1 needs against the
depths ``T*`` and ``T_G`` (the depth-noise relation at ``eta = 1``), and the two-stage denoiser's gap
to Bayes after those layers against the small-step flow (``eta = 0.05``) to ``T_G``.
"""

from __future__ import annotations

import math

import numpy as np

from attneb.numerics import meanfield, stats
from attneb.numerics.estimators import TwoStageDenoiser
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Gaussian
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.theory import depth_noise

#: ``(sigma2, tau2, h2)``, all with ``N_c = exp(2 sigma2/(e h2)) <= 360``: two with ``sd^2 > h2`` all the
#: way and one reaching ``sd^2 << h2`` (``tau2 = 1e-4``: the cubic collapse).
BLURRING_CASES = ((2.0, 1.0, 0.25), (1.0, 1.0, 0.5), (1.0, 1e-4, 0.5))


#: The 95% t-interval over seeds of the first layer's ratio error must lie within +-this (as G2 at
#: eta = 1/2). The continuous-depth alternative is 0.7% and 3% off at the first layer of the first two
#: cases; the variance-cubic misreading 14% and more.
RATIO_RTOL = 0.003


#: Small step of the comparison flow (reported only).
SMALL_ETA = 0.05


CRITERION = (
    "Three cases (sigma2, tau2, h2) = (2, 1, 0.25), (1, 1, 0.5), (1, 1e-4, 0.5) at eta = 1. Per seed and case, "
    "N = 65536 tokens drawn from N(0, tau2) plus noise (8 seeds) run layers of step 1 until their "
    "variance is <= tau2. The ratio error of layer l is the measured s_{l+1}/s_l over theory's ratio at the "
    "measured s_l (depth_noise.gaussian_variance_map(s_l, h2, 1, 1)[1] / s_l, through proofs_check.topics.gaussian.blurring."
    "blurring_ratio), minus 1. Passes when in every case (i) the 95% t-interval over seeds of the first layer's "
    "ratio error lies within +-0.3%, and (ii) every seed's layer count equals depth_noise.gaussian_layers(sigma2, "
    "tau2, h2, 1). (Set after a 4-seed pilot in which later layers departed by up to 0.9%: reported, not decided.)"
)


def blurring_design(quick: bool) -> dict:
    """Tokens per run, seeds per case, and the tokens of the reported risk comparison.

    Eight seeds in both modes: with four (the first quick design), the first layer's interval at
    (1, 1e-4, 0.5) exceeded +-0.3% in 7 of 20 power replicates under the true map (size 0.35); with
    eight, in 0 of 12.
    """
    return {"n": 65536, "seeds": 8, "risk_n": 4096 if quick else 16384, "risk_seeds": 2 if quick else 3}


def blurring_ratio(s: float, h2: float) -> float:
    """Theory's variance ratio ``s_{l+1}/s_l`` of one layer of step 1 at variance ``s``."""
    return float(depth_noise.gaussian_variance_map(float(s), h2, 1.0, 1)[1]) / float(s)


def _runs(ctx: Context) -> list[list[dict]]:
    design = blurring_design(ctx.quick)
    seeds = ctx.fresh_seeds(range(design["seeds"]))
    key = ("G2 blurring", ctx.replicate, ctx.quick, tuple(seeds))
    if key not in ctx.cache:
        per_case = []
        for j, (sigma2, tau2, h2) in enumerate(BLURRING_CASES):
            runs = []
            for seed in seeds:
                _, noisy = draw_batch(Gaussian([0.0], tau2), sigma2, design["n"], [seed, 100 + j])
                result = meanfield.variance_horizon(noisy, h2, tau2, eta=1.0, backend="auto")
                runs.append({"layers": result.layers, "variances": list(result.variances)})
            per_case.append(runs)
        ctx.cache[key] = per_case
    return ctx.cache[key]


def decide(per_case: list[list[dict]]) -> list[dict]:
    """Per case: the ratio errors' intervals per layer, the layer counts, and the two criteria."""
    rows = []
    for (sigma2, tau2, h2), runs in zip(BLURRING_CASES, per_case):
        common = min(len(r["variances"]) for r in runs) - 1
        errors = np.array([[r["variances"][l + 1] / r["variances"][l] / blurring_ratio(r["variances"][l], h2) - 1
                            for l in range(common)] for r in runs])
        per_layer = [stats.mean_interval(errors[:, l]) for l in range(common)]
        first = max(abs(per_layer[0].low), abs(per_layer[0].high))
        worst = max(max(abs(iv.low), abs(iv.high)) for iv in per_layer)
        predicted = depth_noise.gaussian_layers(sigma2, tau2, h2, 1.0)
        counts = sorted({int(r["layers"]) for r in runs})
        rows.append({"case": (sigma2, tau2, h2), "first": first, "worst": worst, "per_layer": per_layer,
                     "predicted": predicted, "counts": counts, "ratios_pass": first <= RATIO_RTOL,
                     "counts_pass": all(int(r["layers"]) == predicted for r in runs)})
    return rows


def _gap(sigma2: float, tau2: float, h2: float, T: float, eta: float, n: int, seed: int) -> float:
    prior = Gaussian([0.0], tau2)
    _, noisy = draw_batch(prior, sigma2, n, [seed, 200])
    denoised = TwoStageDenoiser(sigma2, h2, T=T, eta=eta, backend="auto").fit_denoise(noisy)
    return float(np.mean((denoised - prior.posterior_mean(noisy, sigma2)) ** 2))


def _depth_and_risk(ctx: Context) -> list[str]:
    """Reported: layers at eta = 1 against T*, T_G and the layers at eta = 1/2; gaps to Bayes (step 1 vs small step)."""
    design = blurring_design(ctx.quick)
    lines = []
    for sigma2, tau2, h2 in BLURRING_CASES:
        layers = depth_noise.gaussian_layers(sigma2, tau2, h2, 1.0)
        fractional = float(depth_noise.gaussian_layers_fractional(sigma2, tau2, h2, 1.0))
        t_star, t_g = float(depth_noise.leading_horizon(sigma2, h2)), float(depth_noise.gaussian_horizon(sigma2, tau2, h2))
        line = (f"({sigma2:g}, {tau2:g}, {h2:g}): {layers} layers at eta = 1 (fractional {fractional:.3f}) against "
                f"T* = {t_star:.3f}, T_G = {t_g:.3f}")
        if tau2 >= 0.1:
            gaps = np.array([[_gap(sigma2, tau2, h2, float(layers), 1.0, design["risk_n"], seed),
                              _gap(sigma2, tau2, h2, t_g, SMALL_ETA, design["risk_n"], seed)]
                             for seed in range(design["risk_seeds"])])
            line += (f"; gap to Bayes (N = {design['risk_n']}, {design['risk_seeds']} seeds, mean) after them "
                     f"{gaps[:, 0].mean():.2e}, after the eta = {SMALL_ETA:g} flow to T_G {gaps[:, 1].mean():.2e}")
        lines.append(line)
    return lines


def _variance_maps_cubically(real):
    """The misreading s -> s^3/(s^2 + h2) of the variance s (the map is cubic in the standard deviation)."""
    return lambda s, h2: s * s / (s * s + h2)


def _ode_over_one_layer(real):
    """The continuous-depth flow over depth 1 per layer: s1 + h2 log s1 = s + h2 log s - 2 h2."""
    from scipy import optimize

    def ratio(s, h2):
        target = s + h2 * math.log(s) - 2 * h2
        return optimize.brentq(lambda x: x + h2 * math.log(x) - target, 1e-300, s, xtol=1e-300, rtol=1e-15) / s
    return ratio


@check("G2", "layers of step 1 (Gaussian blurring mean shift): the first layer's variance ratio and the layer count "
             "follow the exact map",
       criterion=CRITERION,
       replication="seeds",
       alternatives=[
           alternative("variance (not sd) maps cubically", "s -> s^3/(s^2 + h2) for the variance s",
                       swap(f"{__name__}:blurring_ratio", _variance_maps_cubically)),
           alternative("continuous depth per layer", "each layer is the depth ODE over depth 1",
                       swap(f"{__name__}:blurring_ratio", _ode_over_one_layer)),
           alternative("layers = ceil(T_G)", "the layer count of step 1 is ceil(T_G)",
                       swap("attneb.theory.depth_noise:gaussian_layers", lambda real: lambda s2, t2, h2, eta: math.ceil(
                           depth_noise.gaussian_horizon(s2, t2, h2) / eta))),
       ],
       note="the layers needed and the gap to Bayes beside it are reported, not decided on")
def blurring_mean_shift(ctx: Context) -> Evidence:
    rows = decide(_runs(ctx))
    parts = []
    for r in rows:
        failed = [name for name, ok in (("ratios", r["ratios_pass"]), ("layer count", r["counts_pass"])) if not ok]
        parts.append(f"({r['case'][0]:g}, {r['case'][1]:g}, {r['case'][2]:g}): first layer's ratio error, interval "
                     f"bound {100 * r['first']:.3f}% (passes within +-{100 * RATIO_RTOL:g}%; over all "
                     f"{len(r['per_layer'])} layers, reported: {100 * r['worst']:.3f}%); layers {r['counts']} vs map "
                     f"{r['predicted']}" + (f" FAILED: {', '.join(failed)}" if failed else ""))
    reported = [] if ctx.power else _depth_and_risk(ctx)
    design = blurring_design(ctx.quick)
    summary = (f"layers of step 1 until the variance reaches tau2 (N = {design['n']}, {design['seeds']} seeds): "
               + "; ".join(parts) + (". Reported, not decided on: " + "; ".join(reported) if reported else ""))
    return Evidence(passed=all(r["ratios_pass"] and r["counts_pass"] for r in rows), kind="interval", summary=summary,
                    data={"cases": [{"case": list(r["case"]), "first": r["first"], "worst": r["worst"], "predicted": int(r["predicted"]),
                                     "counts": r["counts"]} for r in rows], "reported": reported})
