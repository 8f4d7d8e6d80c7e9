"""The gap predicted term by term, against E1's particles: question G6, and its figure E9.

:mod:`attneb.theory.gap` (1-D mixtures) and :mod:`attneb.theory.gap_sphere` (the sphere in R^3) predict the
two-stage estimator's gap to Bayes with no constant fitted to data, as the sum of three terms:

- **bias**: Stage 2 over the mean field's refined tokens against Bayes, computed to all orders in ``h2`` through
  E1's Euler layers (the Gaussian's exactly, the mixtures' and the sphere's from tokens or shells at the noisy
  density's quantiles, with kernel sums of their own, not :mod:`attneb.numerics`);
- **variance**: Stage 2's Nadaraya-Watson variance over ``N`` independent tokens of the order-zero refined density;
- **fluctuation**: that variance's growth by Stage 1's linear instability (the gain of :func:`attneb.theory.gap.gain`).

The check holds the band that the theory's neglected orders put around that sum against the measured gap at
every ``N`` of E1's designs where the linear theory applies (``N >= 10 N_c``), in-sample and on fresh queries.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from matplotlib.figure import Figure

from attneb.numerics import stats
from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, claim, swap
from attneb.proofs_check.engine.replication import plot_study, run_pooled, stored_if_run
from attneb.proofs_check.engine.studies import mode_name, store_missing, study
from attneb.proofs_check.topics.designs import RECOVERY_PRIORS, REGIME, SIGMA2
from attneb.proofs_check.topics.stage2 import recovery
from attneb.theory import depth_noise, gap, gap_sphere, stability

claim(
    "G6",
    "the gap, predicted term by term",
    "With no constant fitted to data, the two-stage estimator's gap to Bayes at T = T* is the sum of Stage 2's "
    "bias over the mean field's refined tokens, Stage 2's Nadaraya-Watson variance over N independent tokens, and "
    "that variance's growth by Stage 1's linear instability; at every N of E1's designs with N >= 10 N_c, the "
    "95% intervals of the measured gap (in-sample and on fresh queries) meet the band that the theory's own "
    "neglected orders put around that sum.",
    ("N >= 10 N_c (linear fluctuations)", "T = T*", "the reference priors of E1", "sigma2 = 0.5"),
    question=True,
)

#: E1's priors for the theory: 1-D mixtures (weights, means, tau2s), or the radius of the sphere in R^3.
MIXTURES = {"gaussian": ([1.0], [0.0], [1.0]), "clusters": ([0.5, 0.5], [-2.0, 2.0], [0.25, 0.25])}
SPHERE_RADIUS = 1.0
#: Each prior's variance per coordinate, the tau2 of T_G = T* + (1/2) log(1 + sigma2/tau2) (C6).
PRIOR_VARIANCE = {"gaussian": 1.0, "clusters": 4.25, "sphere": SPHERE_RADIUS**2 / 3}
#: Exponent of the fluctuation band: the fastest growth rate max_k h2 k^2 exp(-h2 k^2/2) = 2/e (S1).
FASTEST_RATE = 2 / math.e


def prior_of(part: str) -> str:
    """``"clusters"`` of ``"clusters-log"``."""
    return part.rsplit("-", 1)[0]


def in_domain(n: int, h2: float) -> bool:
    """Whether ``N >= 10 N_c`` (``N_c = exp(2 sigma2/(e h2))``, S1): the fluctuations' linear regime."""
    return n >= REGIME * stability.token_scaling(SIGMA2, h2)


def bias_depth(prior: str, T: float) -> float:
    """The depth the bias is computed at: E1's own ``T`` (a wrong theory swaps in ``T_G``)."""
    return T


def mean_field_bias(prior: str, h2: float, T: float, eta: float) -> dict[str, float]:
    """The bias record of one point: ``bias``, ``bias_half`` (half the quantile tokens; the Gaussian's is exact,
    the same) and the tokens' within-component variance at depth 0 and ``T`` (``spread_start``, ``spread_end``)."""
    if prior == "gaussian":
        (weights, means, tau2s) = MIXTURES[prior]
        layers = max(1, int(round(T / eta)))
        s = depth_noise.gaussian_variance_map(tau2s[0] + SIGMA2, h2, T / layers, layers)[-1]
        bias = gap.gaussian_bias(tau2s[0], SIGMA2, h2, T, eta)
        return {"bias": bias, "bias_half": bias, "spread_start": tau2s[0] + SIGMA2, "spread_end": float(s)}
    if prior == "sphere":
        return gap_sphere.mean_field_bias(SPHERE_RADIUS, SIGMA2, h2, T, eta)
    return gap.mean_field_bias(*MIXTURES[prior], SIGMA2, h2, T, eta)


def _bias_key(prior, h2, T, eta):
    return f"{prior}/h2={h2!r}/T={T!r}/eta={eta!r}"


def mean_field_biases(ctx: Context, wanted: list[tuple[str, float, float, float]]) -> dict[tuple, dict]:
    """The bias records of ``(prior, h2, T, eta)``, computed where the store lacks them and stored as they finish."""
    experiment = mode_name("E9", "mean-field", ctx.quick)
    cache = ctx.cache.setdefault(("G6", ctx.quick, str(ctx.store_path)), {})
    missing = [args for args in dict.fromkeys(wanted) if args not in cache]
    if missing:
        with ResultStore(ctx.store_path) as store:
            store_missing(store, experiment, missing, mean_field_bias, _bias_key, ctx.workers)
            records = store.records(experiment)
        cache.update({args: records[_bias_key(*args)] for args in missing})
    return {args: cache[args] for args in wanted}


def predicted_terms(prior: str, h2: float, T: float, eta: float, n: int, record: dict) -> dict[str, float]:
    """The predicted gap's terms at one point, and the neglected orders' sizes.

    Returns ``bias``, ``variance``, ``fluctuation`` (amplified variance - variance), ``gap`` (their sum),
    ``bias_error`` (``|bias - bias_half| / bias``), ``variance_error`` (the mean inverse effective number of
    Stage-2 tokens) and ``fluctuation_factor``
    ``F = (spread_start/spread_end)^(2/e) (1 + sqrt(N_c/N))``.
    """
    if prior == "sphere":
        v = gap_sphere.variance(SPHERE_RADIUS, SIGMA2, h2, T, eta, n)
        variance, amplified, inverse = v["variance"], v["amplified"], v["inverse_effective_tokens"]
    else:
        variance, amplified = gap.variance(*MIXTURES[prior], SIGMA2, h2, T, eta, n)
        inverse = gap.inverse_effective_tokens(*MIXTURES[prior], SIGMA2, h2, T, n)
    bias = record["bias"]
    n_c = stability.token_scaling(SIGMA2, h2)
    factor = (record["spread_start"] / record["spread_end"]) ** FASTEST_RATE * (1 + math.sqrt(n_c / n))
    return {"bias": bias, "variance": variance, "fluctuation": amplified - variance,
            "gap": bias + amplified, "bias_error": abs(bias - record["bias_half"]) / bias,
            "variance_error": inverse, "fluctuation_factor": factor}


def band(terms: dict[str, float]) -> tuple[float, float]:
    """``[G_lo, G_hi]``: each term moved by its neglected order, bias and variance by ``1 -+ error``, the
    fluctuation divided and multiplied by its factor."""
    b, v, f = terms["bias"], terms["variance"], terms["fluctuation"]
    rb, rv, factor = terms["bias_error"], terms["variance_error"], terms["fluctuation_factor"]
    return (b * (1 - rb) + v * (1 - rv) + f / factor, b * (1 + rb) + v * (1 + rv) + f * factor)


def points(rows_by_part: dict[str, list[dict]]) -> list[dict]:
    """One point per (part, N) of the two-stage rows: its ``h2, T, eta`` and the seeds' in-sample and fresh gaps."""
    out = []
    for part, rows in rows_by_part.items():
        by_n = defaultdict(list)
        for r in rows:
            if r["estimator"] == "two-stage":
                by_n[r["n"]].append(r)
        for n in sorted(by_n):
            first = by_n[n][0]
            out.append({"part": part, "prior": prior_of(part), "n": n, "h2": first["h2"], "T": first["T"],
                        "eta": first["eta"], "decided": in_domain(n, first["h2"]),
                        "gap": [r["gap"] for r in by_n[n]], "oos_gap": [r["oos_gap"] for r in by_n[n]]})
    return out


def predictions(ctx: Context, pts: list[dict]) -> list[dict]:
    """Each point with its terms, band and measured intervals; ``passed`` where decided (both intervals meet the
    band)."""
    wanted = [(p["prior"], p["h2"], bias_depth(p["prior"], p["T"]), p["eta"]) for p in pts]
    records = mean_field_biases(ctx, wanted)
    out = []
    for p, key in zip(pts, wanted):
        terms = predicted_terms(p["prior"], p["h2"], p["T"], p["eta"], p["n"], records[key])
        low, high = band(terms)
        measured = {"measured": stats.mean_interval(p["gap"]), "fresh": stats.mean_interval(p["oos_gap"])}
        meets = {col: iv.high >= low and iv.low <= high for col, iv in measured.items()}
        out.append({**{k: v for k, v in p.items() if k not in ("gap", "oos_gap")}, **terms, "low": low, "high": high,
                    **{col: [iv.estimate, iv.low, iv.high] for col, iv in measured.items()},
                    "meets": meets, "passed": all(meets.values()) if p["decided"] else None})
    return out


def _half_rate(real):
    """``growth_rate`` at half S1's rate: N_c = exp(sigma2/(e h2)), the square root of S1's."""
    return lambda k, h2: 0.5 * real(k, h2)


def _root_token_scaling(real):
    """``token_scaling`` at rate 1/e: ``exp(sigma2/(e h2))``, the square root of S1's."""
    return lambda sigma2, h2: math.sqrt(real(sigma2, h2))


def _scaled_terms(bias: float = 1.0, spread: float = 1.0, blur_power: int = 0):
    """``predicted_terms`` with the bias times ``bias`` (and times ``(h2/spread_end)^blur_power``) and the variance
    and fluctuation times ``spread``."""
    def make(real):
        def terms(prior, h2, T, eta, n, record):
            out = dict(real(prior, h2, T, eta, n, record))
            out["bias"] *= bias * (h2 / record["spread_end"]) ** blur_power
            out["variance"] *= spread
            out["fluctuation"] *= spread
            out["gap"] = out["bias"] + out["variance"] + out["fluctuation"]
            return out
        return terms
    return make


def _depth_t_g(real):
    return lambda prior, T: T + 0.5 * math.log(1 + SIGMA2 / PRIOR_VARIANCE[prior])


_TERMS = f"{__name__}:predicted_terms"


@check(
    "G6", "E9: E1's gap at every N with N >= 10 N_c within the neglected orders' band around the predicted gap",
    criterion="at every (prior, schedule, N) of E1's design (Gaussian, two clusters, sphere in R^3; both bandwidth "
    "schedules; T = T*) with N >= 10 N_c (N_c = exp(2 sigma2/(e h2)), S1), the predicted gap G = B + V + F_amp is "
    "computed with no constant from the data at E1's h2, T and Euler step: B Stage 2's bias over the mean field's "
    "refined tokens (the Gaussian's exact through the layers; the mixtures' from 1024 quantile tokens, the sphere's "
    "from 512 quantile shells, exact kernel sums), V Stage 2's Nadaraya-Watson variance over N independent tokens "
    "of the order-zero refined density, F_amp its excess under Stage 1's linear gain. The band: [B(1 - r_B) + V(1 - "
    "r_V) + F_amp/F, B(1 + r_B) + V(1 + r_V) + F_amp F], with r_B = |B - B from half the tokens|/B (0 for the "
    "Gaussian), r_V the mean inverse effective number of Stage-2 tokens (the delta method's next order), and F = "
    "(v_0/v_T)^(2/e) (1 + sqrt(N_c/N)): v_0 and v_T the mean-field tokens' variance about their component (the "
    "sphere: radial) at depth 0 and T (a growth rate off by a relative h2/v(t) over the depth, at the fastest rate "
    "2/e, moves the log-gain by (2/e) log(v_0/v_T)) and sqrt(N_c/N) the size of the neglected nonlinear "
    "fluctuations. Passes when, at every such point, the 95% Student-t interval over seeds of the in-sample gap and "
    "that of the fresh-query gap both meet the band. Not in the band: the in-sample query's attention to its own "
    "token and the correlation of bias and fluctuation",
    replication="subsample",
    note="a question about the toolkit's own theory (issue 26), not the paper's. Its criterion was written after "
    "the 1-D priors' predicted terms had been compared with E1's full-mode gaps (docs/gap.md; the sphere's measured "
    "means were also seen), so only the band's construction, from the neglected orders, is fixed in advance of "
    "data; the estimates of the neglected orders carry coefficient 1 (orders of magnitude, not bounds). 'T in "
    "place of T_G' read literally (no residual blur at T*: no bias) is the wrong theory 'variance terms alone'. What "
    "it cannot tell apart (a referee's scratch runs on the stored quick and full 1-D points, each term rescaled and "
    "its band rebuilt): the fluctuation term x0.8 to x1.5, the Stage-2 variance x0.25 to x1.3 and the bias x0.9 to "
    "x1.1, each alone, give the derived terms' outcome (full 1 of 18 points out, quick 0 of 16); combinations such "
    "as bias x1.1, variance x0.7, fluctuation x1.3 meet every 1-D point in both modes. The clusters' points do not "
    "see the variance and fluctuation terms (the fluctuation x0 still meets them, quick), the Gaussian's not the "
    "bias (x0.5 to x2). The rule asks each 95% interval over 4-6 seeds only to meet the band, so a wide interval "
    "(quick, Gaussian N = 4096 in-sample: [1.0e-5, 1.6e-3]) cannot miss it. 'Risk quartic in the blur' and 'T_G in "
    "place of T' shrink the Gaussian's bias to about 0, near 'variance terms alone'. N_c is S1's 1-D formula for "
    "the sphere too: with the 3-D threshold (stability.fluctuation_threshold, 2.4-5.1 times larger there) the "
    "sphere's power-schedule points and N = 256, 512 leave the domain, and N = 1024-4096 (log) stay and miss the "
    "band by about 2 times: the answer is the same",
    alternatives=[
        alternative("bias term alone", "G = B: no Stage-2 variance, no amplified fluctuations",
                    swap(_TERMS, _scaled_terms(spread=0.0))),
        alternative("variance terms alone", "G = V + F_amp: no bias (as if Stage 1 ended bias-free at T*)",
                    swap(_TERMS, _scaled_terms(bias=0.0))),
        alternative("fluctuations at rate 1/e: N_c = exp(sigma2/(e h2))",
                    "attneb.theory.stability.growth_rate halved (the gain's exponent halved) and token_scaling "
                    "= exp(sigma2/(e h2)), the square root of S1's (the decided points and the band's sqrt(N_c/N))",
                    swap("attneb.theory.stability:growth_rate", _half_rate),
                    swap("attneb.theory.stability:token_scaling", _root_token_scaling)),
        alternative("risk quartic in the blur", "B x (h2/v_T)^2: Stage 2's error quadratic in the residual blur "
                    "(of order h2), where the derivation's is linear",
                    swap(_TERMS, _scaled_terms(blur_power=2))),
        alternative("T_G in place of T", "the bias computed at depth T_G = T* + (1/2) log(1 + sigma2/tau2) (C6; "
                    "tau2 the prior's variance per coordinate), where E1 runs at T*",
                    swap(f"{__name__}:bias_depth", _depth_t_g)),
    ],
)
def predicted_gap_against_particles(ctx: Context) -> Evidence:
    rows = recovery.recovery_data(run_pooled(recovery.recovery_configs(ctx.quick), ctx))
    result = predictions(ctx, points(rows))
    figures = plot_study("E9", ctx)
    decided = [p for p in result if p["decided"]]

    def text(p):
        marks = "/".join("in" if p["meets"][col] else "OUT" for col in ("measured", "fresh"))
        return (f"N={p['n']}: G {p['gap']:.3g} [{p['low']:.3g}, {p['high']:.3g}] (B {p['bias']:.2g}, V "
                f"{p['variance']:.2g}, F_amp {p['fluctuation']:.2g}), measured {_interval(p['measured'])}, fresh "
                f"{_interval(p['fresh'])} ({marks}{'' if p['decided'] else '; N < 10 N_c: reported, not decided'})")

    by_part = defaultdict(list)
    for p in result:
        by_part[p["part"]].append(p)
    summary = "; ".join(f"{part}: " + ", ".join(text(p) for p in ps) for part, ps in by_part.items())
    missed = [f"{p['part']} N={p['n']}" for p in decided if not p["passed"]]
    return Evidence(
        passed=bool(decided) and not missed,
        kind="numeric",
        summary=f"{summary} (passes when every decided point's in-sample and fresh intervals meet the band; "
        f"outside it: {', '.join(missed) if missed else 'none'})",
        data={"points": result},
        figures=figures,
    )


def _interval(values) -> str:
    return f"{values[0]:.3g} [{values[1]:.3g}, {values[2]:.3g}]"


@study("E9", "E1's gap against the gap predicted term by term, with the neglected orders' band (G6)",
       claims=("G6",), files=("E9_predicted_gap",))
def draw_predicted_gap(store: ResultStore, quick: bool) -> tuple[Figure]:
    rows = stored_if_run(recovery.recovery_configs(quick), store)
    if not rows:
        raise LookupError(f"{store.path} holds no E1 runs of the {'quick' if quick else 'full'} mode; run "
                          "'attneb verify' to compute them")
    ctx = Context(quick=quick, out=store.path.parent, workers=1)
    return (plot_predicted_gap(predictions(ctx, points(rows))),)


def plot_predicted_gap(result: list[dict]) -> Figure:
    """Per prior and schedule: the measured gaps (in-sample and fresh, 95% intervals), the predicted gap with its
    band (shaded at every N), and each term; the points with N < 10 N_c, not decided, on a tinted background."""
    parts = list(dict.fromkeys(p["part"] for p in result))
    cols = 2
    fig = Figure(figsize=(6.5 * cols, 4.2 * -(-len(parts) // cols)))
    axes = fig.subplots(-(-len(parts) // cols), cols, squeeze=False).ravel()
    for ax, part in zip(axes, parts):
        ps = [p for p in result if p["part"] == part]
        n = np.array([p["n"] for p in ps], dtype=float)
        ax.fill_between(n, [p["low"] for p in ps], [p["high"] for p in ps], color="0.85", label="band (neglected orders)")
        for key, style, label in (("gap", "k-", "predicted G"), ("bias", "C0--", "bias"),
                                  ("variance", "C1:", "Stage-2 variance"), ("fluctuation", "C2-.", "amplified fluctuations")):
            ax.loglog(n, [max(p[key], 1e-12) for p in ps], style, label=label)
        for key, marker, shift, label in (("measured", "o", 0.97, "measured, in-sample"),
                                          ("fresh", "s", 1.03, "measured, fresh queries")):
            mean = np.array([p[key][0] for p in ps])
            err = np.array([[m - p[key][1], p[key][2] - m] for m, p in zip(mean, ps)]).T
            ax.errorbar(n * shift, mean, yerr=np.maximum(err, 0), fmt=marker, ms=4, capsize=2, mfc="none", label=label)
        undecided = [p["n"] for p in ps if not p["decided"]]
        if undecided:
            ax.axvspan(min(undecided) / 1.4, max(undecided) * 1.4, color="C3", alpha=0.08, label="N < 10 N_c (not decided)")
        ax.set_xlabel("N")
        ax.set_ylabel("gap to Bayes (per coordinate)")
        ax.set_title(f"E1, {RECOVERY_PRIORS[prior_of(part)][0]}, {part.rsplit('-', 1)[1]} schedule", fontsize=9)
    for ax in axes[len(parts):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.suptitle("G6: E1's gap against the gap predicted term by term (no fitted constant)")
    fig.tight_layout()
    return fig
