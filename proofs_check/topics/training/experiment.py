r"""E6: minimal transformers trained by gradient descent, against the two-stage construction (T0-T3).

T0 is a claim of the toolkit about :mod:`attneb.numerics.training` (the network at the construction's
parameters is the paper's network; its backward pass is the gradient of its loss). T1-T3 are
*questions* (:class:`attneb.proofs_check.engine.registry.Claim`): what does training find? Their criteria are
those issue 10 proposed, fixed here before any E6 run; an answer "no" is a finding about the
theory, reported with its numbers.

The runs: for each prior (a Gaussian :math:`N(2\cdot\mathbf 1, I_d)` off the origin, and two
clusters :math:`\tfrac12 N(-0.5\cdot\mathbf 1, 0.25 I) + \tfrac12 N(2.5\cdot\mathbf 1, 0.25 I)`), each
``d``, each ``sigma2`` and each seed, :func:`attneb.numerics.training.fit_transformer` trains the scalar
network (``N = 64`` tokens, ``L = 4`` layers, 16 contexts a step, Adam from 0.03 on a cosine
schedule) from a random initialisation: Stage-1 bandwidths within a factor ``e`` of ``sigma2``
(the construction's are ``sigma2/4``), Stage-2 bandwidth a factor 2 to 4 from ``sigma2``. Each
trained network is then scored on 128 fresh contexts beside the constructed network of the same
``L`` and ``N`` (:class:`attneb.numerics.transformer.TwoStageTransformer`, ``h2 = sigma2/4``,
``eta = T*/L``), that construction tuned over ``h2`` and ``eta`` on contexts of its own
(:func:`tuned_construction`; reported, not decided on), Stage 2 alone (``L = 0``), the NPMLE and the
Bayes posterior mean, all on the same contexts. One record per run goes into the report folder's store as it finishes (the training
itself checkpoints there every 500 steps), so an interrupted ``verify`` resumes.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from functools import lru_cache

import numpy as np
from scipy import stats as scipy_stats

from attneb.numerics import flow, stats
from attneb.numerics.estimators import StageTwoOnly
from attneb.numerics.npmle import NPMLE
from attneb.numerics.priors import Gaussian, GaussianMixture, Prior
from attneb.numerics.sweep import ResultStore
from attneb.numerics.training import TrainedTransformer, fit_transformer, init_params
from attneb.numerics.transformer import TwoStageTransformer
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.replication import plot_study
from attneb.proofs_check.engine.studies import computed, mode_name
from attneb.theory import depth_noise, gaussian

GAUSSIAN_MEAN, TAU2 = 2.0, 1.0


CLUSTER_CENTRES, CLUSTER_VAR = (-0.5, 2.5), 0.25


PRIORS = ("gaussian", "two-cluster")


N_TOKENS, N_LAYERS, BATCH, LR = 64, 4, 16, 0.03


EVAL_CONTEXTS = 128


EVAL_SEED = 20261126


CHECKPOINT_EVERY = 500


#: Training losses are stored as means over windows of this many steps.
CURVE_WINDOW = 20


ESTIMATORS = ("trained", "constructed", "tuned", "stage2_only", "npmle", "bayes")


#: The grid over which the construction is tuned (Stage-1 h2 / sigma2, step eta; Stage 2 stays at sigma2).
TUNING_H2 = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4)


TUNING_ETA = (1 / 8, 1 / 4, 1 / 2, 1)


TUNING_CONTEXTS = 32


# Criteria (issue 10's examples), fixed before the E6 runs.
#: T1: the mean over seeds of the learned Stage-2 bandwidth over the prediction lies in 1 +- this.
STAGE2_RTOL = 0.15


#: T2: the 95% interval of the depth budget's slope in sigma2 contains the prediction and is at most +- this wide.
SLOPE_HALF_WIDTH = 0.5


#: T3: the upper 95% bound of the trained risk's relative excess over the construction is at most this.
NONINFERIORITY_MARGIN = 0.01


LEVEL = 0.95


def make_prior(name: str, dim: int) -> Prior:
    """The prior ``name`` (one of :data:`PRIORS`) in dimension ``dim``."""
    if name == "gaussian":
        return Gaussian(np.full(dim, GAUSSIAN_MEAN), TAU2)
    if name == "two-cluster":
        return GaussianMixture(np.array([[c] * dim for c in CLUSTER_CENTRES]), var=CLUSTER_VAR)
    raise ValueError(f"prior == {name!r}; must be one of {PRIORS}")


def design(quick: bool) -> dict:
    """Priors, dimensions, noise levels, seeds per case and Adam steps of E6."""
    if quick:
        return {"priors": PRIORS, "dims": (1,), "sigma2": (0.5, 2.0), "seeds": 2, "steps": 400}
    return {"priors": PRIORS, "dims": (1, 2), "sigma2": (0.25, 0.5, 1.0, 2.0), "seeds": 4, "steps": 2000}


def construction_h2(sigma2: float) -> float:
    """Stage-1 bandwidth of the constructed network compared with: ``sigma2 / 4`` (``T* = 2``)."""
    return sigma2 / 4


def _training_seed(prior: str, dim: int, sigma2: float, seed: int) -> int:
    digest = hashlib.sha256(f"E6|{prior}|{dim}|{sigma2!r}|{seed}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def _contexts_of(prior: Prior, sigma2: float, count: int, rng) -> tuple[np.ndarray, np.ndarray]:
    clean = prior.sample(count * N_TOKENS, rng).reshape(count, N_TOKENS, prior.dim)
    return clean, clean + np.sqrt(sigma2) * rng.standard_normal(clean.shape)


@lru_cache(maxsize=None)
def tuned_construction(prior_name: str, dim: int, sigma2: float) -> tuple[float, float]:
    """The construction's Stage-1 ``(h2, eta)`` of least risk on :data:`TUNING_CONTEXTS` contexts of their own.

    Over ``h2 = sigma2 x`` :data:`TUNING_H2` and :data:`TUNING_ETA` at ``L = N_LAYERS``, Stage 2 at
    ``sigma2``; the tuning contexts come from a stream of their own (neither training nor evaluation), so the
    answer depends on the case alone and is computed once per case and process (every seed's run reads it).
    """
    prior = make_prior(prior_name, dim)
    clean, noisy = _contexts_of(prior, sigma2, TUNING_CONTEXTS,
                                np.random.default_rng([EVAL_SEED, 1, _training_seed(prior_name, dim, sigma2, -1)]))
    risks = {}
    for ratio in TUNING_H2:
        for eta in TUNING_ETA:
            network = TwoStageTransformer(h2=ratio * sigma2, sigma2=sigma2, n_layers=N_LAYERS, eta=eta)
            risks[(ratio * sigma2, eta)] = np.mean([np.mean((network(x) - c) ** 2) for x, c in zip(noisy, clean)])
    return min(risks, key=risks.get)


def run_key(prior: str, dim: int, sigma2: float, seed: int, steps: int) -> str:
    return f"{prior}-d{dim}-s{sigma2!r}-seed{seed}-steps{steps}"


def run_training(prior_name: str, dim: int, sigma2: float, seed: int, steps: int, store: str | None = None) -> dict:
    """Train one network and score it beside the construction, Stage 2 alone, NPMLE and Bayes.

    Returns the record stored for the run: the learned parameters (and the initial ones), the
    depth budget :math:`2\\sum_l \\eta_l h_{2,l}`, the variance of the refined tokens, the training
    curve (means over :data:`CURVE_WINDOW` steps) and each estimator's risk (mean squared error per
    coordinate) on every evaluation context.
    """
    prior = make_prior(prior_name, dim)
    train_seed = _training_seed(prior_name, dim, sigma2, seed)
    start = time.perf_counter()
    fit = fit_transformer(prior, sigma2, n_tokens=N_TOKENS, n_layers=N_LAYERS, steps=steps, batch=BATCH,
                          seed=train_seed, lr=LR, schedule="cosine", store=store, checkpoint_every=CHECKPOINT_EVERY)
    seconds = time.perf_counter() - start
    initial = TrainedTransformer(init_params(dim, N_LAYERS, sigma2, rng=np.random.default_rng(train_seed)))
    clean, noisy = _contexts_of(prior, sigma2, EVAL_CONTEXTS, np.random.default_rng([EVAL_SEED, train_seed]))
    h2 = construction_h2(sigma2)
    construction = TwoStageTransformer(h2=h2, sigma2=sigma2, n_layers=N_LAYERS,
                                       eta=min(flow.leading_horizon(sigma2, h2) / N_LAYERS, 1.0))
    tuned_h2, tuned_eta = tuned_construction(prior_name, dim, sigma2)
    tuned = TwoStageTransformer(h2=tuned_h2, sigma2=sigma2, n_layers=N_LAYERS, eta=tuned_eta)
    outputs = {
        "trained": fit.denoise(noisy),
        "constructed": np.stack([construction(context) for context in noisy]),
        "tuned": np.stack([tuned(context) for context in noisy]),
        "stage2_only": np.stack([StageTwoOnly(sigma2).fit_denoise(context) for context in noisy]),
        "npmle": np.stack([NPMLE(sigma2).fit_denoise(context) for context in noisy]),
        "bayes": prior.posterior_mean(noisy.reshape(-1, dim), sigma2).reshape(noisy.shape),
    }
    losses = fit.losses_
    windows = len(losses) // CURVE_WINDOW
    return {
        "prior": prior_name, "d": dim, "sigma2": sigma2, "seed": seed, "steps": steps, "train_seed": train_seed,
        "seconds": seconds,
        "stage1_h2": fit.stage1_h2_.tolist(), "stage1_eta": fit.stage1_eta_.tolist(),
        "stage2_h2": fit.stage2_h2_, "value_scales": fit.value_scales_.tolist(),
        "initial": {"stage1_h2": initial.stage1_h2_.tolist(), "stage1_eta": initial.stage1_eta_.tolist(),
                    "stage2_h2": initial.stage2_h2_},
        "tuned": {"h2": tuned_h2, "eta": tuned_eta},
        "budget": float(2 * np.sum(fit.stage1_eta_ * fit.stage1_h2_)),
        "refined_var": float(np.mean(fit.stage_one(noisy).var(axis=1, ddof=1))),
        "curve": losses[:windows * CURVE_WINDOW].reshape(windows, CURVE_WINDOW).mean(axis=1).tolist(),
        "risks": {name: np.mean((out - clean) ** 2, axis=(1, 2)).tolist() for name, out in outputs.items()},
    }


def wanted_runs(d: dict) -> list[tuple]:
    return [(p, dim, s2, seed, d["steps"]) for p in d["priors"] for dim in d["dims"] for s2 in d["sigma2"]
            for seed in range(d["seeds"])]


def trained_runs(ctx: Context) -> list[dict]:
    """The records of this mode's design: trained (in ``ctx.workers`` processes) where the store lacks them."""
    d = design(ctx.quick)
    cache_key = ("E6", ctx.quick, str(ctx.store_path))
    if cache_key not in ctx.cache:
        experiment = mode_name("E6", "runs", ctx.quick)
        with ResultStore(ctx.store_path) as store:
            done = store.record_keys(experiment)
            todo = [(*args, str(ctx.store_path)) for args in wanted_runs(d) if run_key(*args) not in done]
            for args, record in computed(todo, run_training, ctx.workers, experiment):
                store.add_record(experiment, run_key(*args[:5]), record)
            records = store.records(experiment)
        ctx.cache[cache_key] = [records[run_key(*args)] for args in wanted_runs(d)]
    return ctx.cache[cache_key]


def predicted_stage2_bandwidth(sigma2: float) -> float:
    """The construction's Stage-2 bandwidth: the noise variance (C7)."""
    return sigma2


def predicted_family_bandwidth(refined_var: float, sigma2: float) -> float:
    """For the Gaussian prior, the Stage-2 bandwidth that is Bayes over tokens of variance ``refined_var``."""
    return gaussian.stage2_bandwidth_family(refined_var, sigma2, TAU2)


def predicted_depth_budget(sigma2: float) -> float:
    """The construction's depth budget :math:`2 h_2 T^*(h_2)`, which is ``sigma2`` whatever ``h2`` (C6)."""
    h2 = construction_h2(sigma2)
    return 2 * h2 * depth_noise.leading_horizon(sigma2, h2)


def risk_of(run: dict, estimator: str) -> np.ndarray:
    """Per-context risks of ``estimator`` in one run."""
    return np.asarray(run["risks"][estimator], dtype=float)


def _cases(runs: list[dict], prior: str) -> dict[tuple, list[dict]]:
    cases = defaultdict(list)
    for run in runs:
        if run["prior"] == prior:
            cases[(run["d"], run["sigma2"])].append(run)
    return dict(sorted(cases.items()))


def _ratio_decision(runs: list[dict], prior: str, ratio) -> dict:
    """Per case (d, sigma2): the seeds' ratios, their mean, and whether it is within 1 +- STAGE2_RTOL."""
    out = {}
    for (dim, s2), case in _cases(runs, prior).items():
        ratios = [ratio(run) for run in case]
        mean = float(np.mean(ratios))
        out[f"d={dim}, sigma2={s2:g}"] = {"ratios": ratios, "mean": mean, "passed": abs(mean - 1) <= STAGE2_RTOL}
    return out


def _ratio_evidence(decision: dict, what: str) -> Evidence:
    failed = [case for case, c in decision.items() if not c["passed"]]
    text = "; ".join(f"{case}: {c['mean']:.3f} ({', '.join(f'{r:.2f}' for r in c['ratios'])})"
                     for case, c in decision.items())
    summary = (f"{what}, mean over seeds per case (passes within 1 +- {STAGE2_RTOL:g}): {text}"
               + (f". Outside: {', '.join(failed)}" if failed else ""))
    return Evidence(passed=not failed, kind="interval", summary=summary, data={"cases": decision})


def _bandwidth_alternatives(target: str, factors) -> list:
    return [alternative(f"prediction x {f:g}", f"the predicted Stage-2 bandwidth times {f:g}",
                        swap(target, lambda real, f=f: lambda *a: f * real(*a))) for f in factors]


_LEARNED_TIMES_13 = alternative(
    "learned bandwidths x 1.3", "every learned Stage-2 bandwidth (and nothing else) times 1.3",
    swap("attneb.proofs_check.topics.training.experiment:_stage2_h2", lambda real: lambda run: 1.3 * real(run)), kind="data")


#: Beside every question's check: what its power analysis measures.
E6_POWER_NOTE = ("its power analysis decides once under each theory on the stored runs (replication 'none': fresh seeds "
                 "would mean training again, minutes per replicate): size and power are those of the decision on "
                 "these data, not over seeds; tests/proofs_check/topics/test_training.py shows on synthetic records "
                 "that it passes where its hypothesis holds and fails where each wrong theory holds")


def _stage2_h2(run: dict) -> float:
    return run["stage2_h2"]


def _figures(ctx: Context) -> tuple[str, ...]:
    if not ctx.power:
        trained_runs(ctx)
    return plot_study("E6", ctx)


@check("T1", "E6: learned Stage-2 bandwidth within 15% of sigma2 (two-cluster prior)",
       criterion=f"in every case (d, sigma2) of the design the mean over seeds of 1/(beta_s sigma2) lies in "
                 f"[{1 - STAGE2_RTOL:g}, {1 + STAGE2_RTOL:g}] (issue 10's criterion)",
       alternatives=_bandwidth_alternatives("attneb.proofs_check.topics.training.experiment:predicted_stage2_bandwidth",
                                            (2.0, 0.5, 1.3)) + [_LEARNED_TIMES_13],
       note=E6_POWER_NOTE)
def stage2_bandwidth_two_cluster(ctx: Context) -> Evidence:
    runs = trained_runs(ctx)
    decision = _ratio_decision(runs, "two-cluster",
                               lambda run: _stage2_h2(run) / predicted_stage2_bandwidth(run["sigma2"]))
    evidence = _ratio_evidence(decision, "two-cluster prior: learned Stage-2 bandwidth / sigma2")
    return Evidence(evidence.passed, evidence.kind, evidence.summary, evidence.data, figures=_figures(ctx),
                    markdown="" if ctx.power else run_table(runs))


@check("T1", "E6: learned Stage-2 bandwidth within 15% of sigma2 (Gaussian prior)",
       criterion=f"as for the two-cluster prior: in every case the mean over seeds of 1/(beta_s sigma2) lies in "
                 f"[{1 - STAGE2_RTOL:g}, {1 + STAGE2_RTOL:g}]",
       alternatives=_bandwidth_alternatives("attneb.proofs_check.topics.training.experiment:predicted_stage2_bandwidth",
                                            (2.0, 0.5, 1.3)) + [_LEARNED_TIMES_13],
       gating=False,
       note="superseded by 'E6: learned Stage-2 bandwidth on the Bayes family h = s sigma2/tau2 (Gaussian prior)' "
            "(issue 24): its question is ill-posed, so it does not gate T1. "
            "Ill-posed for a Gaussian prior, as theory.gaussian.stage2_bandwidth_family shows (derived before the "
            "runs): Stage 2 over tokens of variance s is Bayes at h = s sigma2/tau2 for every s, so sigma2 is one "
            "point of a family of optima; the next check tests the family. " + E6_POWER_NOTE)
def stage2_bandwidth_gaussian(ctx: Context) -> Evidence:
    decision = _ratio_decision(trained_runs(ctx), "gaussian",
                               lambda run: _stage2_h2(run) / predicted_stage2_bandwidth(run["sigma2"]))
    return _ratio_evidence(decision, "Gaussian prior: learned Stage-2 bandwidth / sigma2")


@check("T1", "E6: learned Stage-2 bandwidth on the Bayes family h = s sigma2/tau2 (Gaussian prior)",
       criterion=f"in every case the mean over seeds of 1/beta_s over h(s) = s sigma2/tau2, with s the measured "
                 f"variance of the refined tokens (per coordinate, within contexts), lies in "
                 f"[{1 - STAGE2_RTOL:g}, {1 + STAGE2_RTOL:g}]",
       alternatives=_bandwidth_alternatives(f"{__name__}:predicted_family_bandwidth", (1.3, 0.7)) + [
           alternative("h = sigma2 whatever s", "the family replaced by the construction's point h = sigma2",
                       swap(f"{__name__}:predicted_family_bandwidth",
                            lambda real: lambda s, sigma2: sigma2)),
           _LEARNED_TIMES_13],
       note=E6_POWER_NOTE)
def stage2_bandwidth_family(ctx: Context) -> Evidence:
    runs = [run for run in trained_runs(ctx) if run["prior"] == "gaussian"]
    decision = _ratio_decision(runs, "gaussian", lambda run: _stage2_h2(run) / predicted_family_bandwidth(
        run["refined_var"], run["sigma2"]))
    evidence = _ratio_evidence(decision, "Gaussian prior: learned Stage-2 bandwidth / (s sigma2/tau2)")
    spread = [run["refined_var"] / (TAU2 + run["sigma2"]) for run in runs]
    direction = (f". Reported, not decided on: the refined tokens' variance over the noisy tokens' (tau2 + sigma2) is "
                 f"{min(spread):.2f} to {max(spread):.2f}, above 1 (Stage 1 spreads the tokens) in "
                 f"{sum(v > 1 for v in spread)} of {len(spread)} runs; a negative step in "
                 f"{sum(min(run['stage1_eta']) < 0 for run in runs)} of {len(runs)}")
    return Evidence(evidence.passed, evidence.kind, evidence.summary + direction,
                    {**evidence.data, "refined_over_noisy_variance": spread})


def budget_slope(runs: list[dict], prior: str = "two-cluster") -> stats.SlopeFit:
    """Least-squares slope of the depth budget in ``sigma2`` over every run of ``prior`` (seeds and d pooled)."""
    chosen = [run for run in runs if run["prior"] == prior]
    return stats.linear_fit([run["sigma2"] for run in chosen], [_budget(run) for run in chosen], level=LEVEL)


def predicted_budget_slope(runs: list[dict]) -> float:
    """Slope of the predicted depth budget between the smallest and largest ``sigma2`` of ``runs``."""
    s_values = sorted({run["sigma2"] for run in runs})
    return (predicted_depth_budget(s_values[-1]) - predicted_depth_budget(s_values[0])) / (s_values[-1] - s_values[0])


def _budget(run: dict) -> float:
    return run["budget"]


#: The wrong theories of the T2 slope checks (the per-seed one and the superseded pooled one).
BUDGET_SLOPE_ALTERNATIVES = [
    alternative("budget 2 sigma2", "predicted budget 2 sigma2 (slope 2)",
                swap(f"{__name__}:predicted_depth_budget", lambda real: lambda s: 2 * real(s))),
    alternative("budget sigma2/2", "predicted budget sigma2/2 (slope 1/2)",
                swap(f"{__name__}:predicted_depth_budget", lambda real: lambda s: real(s) / 2)),
    alternative("Stage 1 unused", "predicted budget 0 at every sigma2 (slope 0)",
                swap(f"{__name__}:predicted_depth_budget", lambda real: lambda s: 0.0)),
    alternative("budgets x 2", "every measured budget doubled",
                swap(f"{__name__}:_budget", lambda real: lambda run: 2 * real(run)),
                kind="data"),
]


@check("T2", "E6: slope of the depth budget 2 sum eta_l h2_l in sigma2 (two-cluster prior)",
       criterion=f"the {LEVEL:.0%} t-interval of the least-squares slope of the budget against sigma2 (every run "
                 f"of the two-cluster prior, seeds and d pooled) contains the slope of the prediction 2 h2 T* "
                 f"(= sigma2: 1) and is at most +-{SLOPE_HALF_WIDTH:g} wide",
       gating=False,
       alternatives=BUDGET_SLOPE_ALTERNATIVES,
       note="superseded by 'E6: slope of the depth budget in sigma2, slopes per seed and d (two-cluster prior)' (issue 24): "
            "its interval assumes independent points of equal variance, while the budgets' spread over seeds changes "
            "by a factor 1000 across sigma2; on data shaped like E6's it covers 0.85 (quick) and 0.82 (full) at a "
            "nominal 0.95 (benchmarks/calibration.py, rows linear-fit-T2-*). " + E6_POWER_NOTE)
def depth_budget_slope(ctx: Context) -> Evidence:
    runs = trained_runs(ctx)
    fit = budget_slope(runs)
    predicted = predicted_budget_slope(runs)
    half = (fit.slope.high - fit.slope.low) / 2
    contains = fit.slope.low <= predicted <= fit.slope.high
    passed = contains and half <= SLOPE_HALF_WIDTH
    chosen = [r for r in runs if r["prior"] == "two-cluster"]
    s_values = sorted({run["sigma2"] for run in runs})
    medians = {f"{s:g}": float(np.median([_budget(r) for r in chosen if r["sigma2"] == s])) for s in s_values}
    robust = scipy_stats.theilslopes([_budget(r) for r in chosen], [r["sigma2"] for r in chosen], alpha=LEVEL)
    forward = [r for r in chosen if all(0 < e <= 1 for e in r["stage1_eta"])]
    forward_ratio = {f"{s:g}": float(np.median([_budget(r) / s for r in forward if r["sigma2"] == s]))
                     for s in s_values if any(r["sigma2"] == s for r in forward)}
    summary = (f"two-cluster prior: slope {fit.slope} against the prediction's {predicted:.4g} "
               f"({'inside' if contains else 'outside'}; half-width {half:.3g}, passes at <= {SLOPE_HALF_WIDTH:g}), "
               f"intercept {fit.intercept:.3g}. Reported, not decided on: median budget per sigma2 {_fmt(medians)}; "
               f"Theil-Sen slope {robust.slope:.3g} [{robust.low_slope:.3g}, {robust.high_slope:.3g}]; "
               f"{len(forward)} of {len(chosen)} runs have every step in (0, 1] (only there is 2 sum eta h2 a depth "
               f"budget), their budget / sigma2 {_fmt(forward_ratio)} (medians)")
    return Evidence(passed=passed, kind="rate", summary=summary,
                    data={"slope": fit.slope.__dict__, "intercept": fit.intercept, "predicted_slope": predicted,
                          "median_budget": medians, "theil_sen": [robust.slope, robust.low_slope, robust.high_slope],
                          "forward_runs": len(forward), "forward_budget_over_sigma2": forward_ratio})


def budget_group_slopes(runs: list[dict], prior: str = "two-cluster") -> stats.Interval:
    """Slope of the depth budget in ``sigma2`` fitted within each (seed, d) of ``prior``, and the t-interval of their
    mean (:func:`attneb.numerics.stats.group_slopes_interval`)."""
    chosen = [run for run in runs if run["prior"] == prior]
    return stats.group_slopes_interval([run["sigma2"] for run in chosen], [_budget(run) for run in chosen],
                                       [f"seed {run['seed']}, d = {run['d']}" for run in chosen], level=LEVEL)


@check("T2", "E6: slope of the depth budget in sigma2, slopes per seed and d (two-cluster prior)",
       criterion=f"the slope of the budget 2 sum eta_l h2_l against sigma2 is fitted within each (seed, d) of the "
                 f"two-cluster prior alone, and the {LEVEL:.0%} Student-t interval of their mean over the G groups "
                 f"(G - 1 degrees of freedom) contains the slope of the prediction 2 h2 T* (= sigma2: 1) and is at "
                 f"most +-{SLOPE_HALF_WIDTH:g} wide",
       alternatives=BUDGET_SLOPE_ALTERNATIVES,
       note="replaces the pooled least-squares check (issue 24); criterion fixed before its first run. On data shaped "
            "like E6's its interval covers 0.946 (quick) and 0.947 (full) at a nominal 0.95 "
            "(benchmarks/calibration.py, rows group-slopes-T2-*). Quick mode has 2 groups (1 degree of freedom, "
            "t = 12.7), so its width rarely meets the +-0.5 bound there. " + E6_POWER_NOTE)
def depth_budget_group_slope(ctx: Context) -> Evidence:
    runs = trained_runs(ctx)
    interval = budget_group_slopes(runs)
    predicted = predicted_budget_slope(runs)
    half = (interval.high - interval.low) / 2
    contains = interval.low <= predicted <= interval.high
    pooled = budget_slope(runs)
    summary = (f"two-cluster prior: mean of the per-(seed, d) slopes {interval} against the prediction's "
               f"{predicted:.4g} ({'inside' if contains else 'outside'}; half-width {half:.3g}, passes at <= "
               f"{SLOPE_HALF_WIDTH:g}). Reported, not decided on: the pooled least-squares slope {pooled.slope}")
    return Evidence(passed=contains and half <= SLOPE_HALF_WIDTH, kind="rate", summary=summary,
                    data={"slope": [interval.estimate, interval.low, interval.high], "groups": interval.n,
                          "predicted_slope": predicted, "pooled_slope": pooled.slope.__dict__})


def _fmt(values: dict) -> str:
    return "{" + ", ".join(f"{k}: {v:.3g}" for k, v in values.items()) + "}"


def relative_excess(case: list[dict], against: str = "constructed") -> stats.Interval:
    """Per seed, trained risk / ``against``'s risk - 1 (same contexts); their t-interval."""
    return stats.mean_interval([risk_of(run, "trained").mean() / risk_of(run, against).mean() - 1
                                for run in case], level=LEVEL)


@check("T3", "E6: trained risk no worse than the construction (non-inferiority, every case)",
       criterion=f"in every case (prior, d, sigma2) the upper end of the two-sided {LEVEL:.0%} t-interval over "
                 f"seeds (a one-sided {1 - (1 - LEVEL) / 2:.1%} bound) of trained risk / constructed risk - 1 (same "
                 f"evaluation contexts) is <= {NONINFERIORITY_MARGIN:g}",
       alternatives=[
           alternative(f"trained = construction x {factor:g}", f"every trained risk replaced by the construction's "
                       f"risk on the same context times {factor:g}",
                       swap(f"{__name__}:risk_of",
                            lambda real, factor=factor: lambda run, est: factor * real(run, "constructed")
                            if est == "trained" else real(run, est)), kind="data")
           for factor in (1.02, 1.05)],
       note=E6_POWER_NOTE)
def trained_against_construction(ctx: Context) -> Evidence:
    runs = trained_runs(ctx)
    rows, tuned, failed = {}, {}, []
    for prior in PRIORS:
        for (dim, s2), case in _cases(runs, prior).items():
            interval = relative_excess(case)
            name = f"{prior} d={dim} sigma2={s2:g}"
            rows[name] = interval.__dict__
            tuned[name] = relative_excess(case, "tuned").__dict__
            if interval.high > NONINFERIORITY_MARGIN:
                failed.append(name)

    def text(table):
        return "; ".join(f"{name}: {r['estimate']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]" for name, r in table.items())

    summary = (f"trained / constructed risk - 1 per case, mean over seeds [{LEVEL:.0%} t-interval] (passes with "
               f"upper bound <= {NONINFERIORITY_MARGIN:g}): {text(rows)}" + (f". Non-inferiority not shown (upper bound above {NONINFERIORITY_MARGIN:g}), so failing: "
                                      f"{', '.join(failed)}" if failed else "")
               + f". Reported, not decided on: trained / construction tuned over h2 and eta - 1: {text(tuned)}")
    return Evidence(passed=not failed, kind="interval", summary=summary, data={"cases": rows, "against_tuned": tuned},
                    markdown="" if ctx.power else risk_table(runs))


def risk_table(runs: list[dict]) -> str:
    """Per case, each estimator's risk (mean over seeds of the mean over evaluation contexts) and its excess over Bayes."""
    head = "| prior | d | sigma2 | " + " | ".join(
        ("trained", "constructed", "tuned construction (h2/sigma2, eta)", "L = 0", "NPMLE", "Bayes")) + \
        " | trained / Bayes - 1 | constructed / Bayes - 1 |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for prior in PRIORS:
        for (dim, s2), case in _cases(runs, prior).items():
            risks = {name: float(np.mean([risk_of(run, name).mean() for run in case])) for name in ESTIMATORS}
            cells = {name: f"{risks[name]:.4f}" for name in ESTIMATORS}
            cells["tuned"] += f" ({case[0]['tuned']['h2'] / s2:g}, {case[0]['tuned']['eta']:g})"
            lines.append(f"| {prior} | {dim} | {s2:g} | " + " | ".join(cells[name] for name in ESTIMATORS)
                         + f" | {risks['trained'] / risks['bayes'] - 1:+.3f} | "
                           f"{risks['constructed'] / risks['bayes'] - 1:+.3f} |")
    return "\n".join(lines)


def run_table(runs: list[dict]) -> str:
    """The E6 table: one row per run, learned parameters and the risks of every estimator."""
    head = ("| prior | d | sigma2 | seed | h2_s/sigma2 (init) | h2_l/sigma2 | eta_l | v_l, v_s | budget/sigma2 | "
            "s_T | trained | constructed | tuned | L=0 | NPMLE | Bayes |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for run in runs:
        s2 = run["sigma2"]
        risks = {name: risk_of(run, name).mean() for name in ESTIMATORS}
        lines.append(
            f"| {run['prior']} | {run['d']} | {s2:g} | {run['seed']} | {run['stage2_h2'] / s2:.3f} "
            f"({run['initial']['stage2_h2'] / s2:.2f}) | {' '.join(f'{h / s2:.3g}' for h in run['stage1_h2'])} | "
            f"{' '.join(f'{e:.2f}' for e in run['stage1_eta'])} | {' '.join(f'{v:.2f}' for v in run['value_scales'])} "
            f"| {run['budget'] / s2:.3g} | {run['refined_var']:.3g} | "
            + " | ".join(f"{risks[name]:.4f}" for name in ESTIMATORS) + " |")
    return "\n".join(lines)
