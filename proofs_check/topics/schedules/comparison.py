r"""E7: the fixed bandwidth against explicit-schedule comparators at equal depth (claim A1).

Three Stage 1s with the same number of layers ``L`` over the same ``N`` noisy tokens, each
followed by the same Stage 2 (attention of bandwidth :math:`\sigma^2` over the refined tokens,
queried by the original noisy tokens, :class:`attneb.numerics.estimators.StageTwoOnly` fitted on them):

* **fixed**: the paper's layers (:class:`attneb.numerics.estimators.TwoStageDenoiser`), bandwidth
  :math:`h_2` in every layer, horizon :math:`T^* = \sigma^2/(2h_2)`, step :math:`\eta = T^*/L \le 1`
  (so :math:`h_2 \ge \sigma^2/(2L)`); at the paper's schedule :math:`h_2 = (4\sigma^2/e)/\log N`
  (E1's), and at its best :math:`h_2` on the grid :data:`FIXED_RATIOS` (times :math:`\sigma^2`);
* **annealed**: :func:`attneb.numerics.schedules.annealed_flow`, bandwidth :math:`h_l = c\,s_l`
  shrinking with the noise still to remove, at its best :math:`c` on :data:`ANNEALED_RATIOS`;
* **oracle**: :func:`attneb.numerics.schedules.oracle_reverse_flow`, the reverse flow with the prior's
  exact posterior mean at the remaining level: the ideal Stage 1 at this depth.

The best :math:`h_2` and :math:`c` of a case (prior, ``N``, ``L``) are those of least mean gap
over :math:`S_{sel}` *selection* contexts of their own (another random stream), so no selection is
scored on its own data. The two are not held to the same steps: the annealed flow's last layers
step by :math:`1/(c(L-l))`, above 1 for :math:`c < 1` (Tweedie's extrapolation), while the paper's
layers keep :math:`\eta \le 1`. A pilot (4 contexts per case, ``N`` 1024 and 4096) ran the fixed
bandwidth with steps above 1 too (:math:`h_2/\sigma^2` = 1/16, 1/32, 1/64 at ``L = 4``): each was
worse than 1/8 in every case, so the limit costs the fixed bandwidth nothing there; the check reports
how the annealed flow fares with its steps held to at most 1 (:math:`c \ge 1`).

Every scored context also gets Stage 2 over its clean tokens (**ideal**):
the law of the oracle's tokens as ``L`` grows (``N`` draws of the prior, module docstring of
:mod:`attneb.numerics.schedules`), so the ideal Stage 1's gap is this one, not 0.

Score: the in-sample gap to Bayes :math:`\frac{1}{Nd}\sum_i\lVert\hat x_i - E[x\mid\tilde x_i]\rVert^2`
(the excess risk over the Bayes risk, in expectation). Comparisons are paired (same contexts):
per seed :math:`\log(\mathrm{gap}_a/\mathrm{gap}_b)`, with a 95% t-interval over seeds. Every run is
one record in the report folder's store as it finishes (an interrupted ``verify`` resumes); the
figure is drawn from the store.
"""

from __future__ import annotations

import math

import numpy as np

from attneb.numerics import flow, schedules, stats
from attneb.numerics.estimators import StageTwoOnly, TwoStageDenoiser
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Discrete, Gaussian, GaussianMixture
from attneb.numerics.sweep import H2Schedule, ResultStore
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.replication import plot_study
from attneb.proofs_check.engine.studies import computed, mode_name
from attneb.proofs_check.topics.designs import FAST, SCHEDULES

SIGMA2 = 0.5


#: N(0, 1), two clusters at +-2 (var 0.25, E1's) and three atoms -1.5, 0, 1.5 (E4's).
PRIORS = {
    "gaussian": Gaussian([0.0], 1.0),
    "two-cluster": GaussianMixture([[-2.0], [2.0]], var=0.25),
    "three-atom": Discrete([[-1.5], [0.0], [1.5]]),
}


LAYERS = (4, 16)


#: Grid of the fixed bandwidth, h2 / sigma2 (those with a step T*/L <= 1, i.e. >= 1/(2L)).
FIXED_RATIOS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0)


#: Grid of the annealed flow, c = h_l / s_l.
ANNEALED_RATIOS = (1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0)


#: First entropy word of every E7 context; the second says whose it is.
STREAM, SCORED, SELECTION = 0xE7, 0, 1


ESTIMATORS = ("paper", "fixed", "annealed", "oracle", "ideal")


def design(quick: bool) -> dict:
    """Priors, token counts, depths, scored seeds per case and selection seeds per case of E7."""
    if quick:
        return {"priors": tuple(PRIORS), "n": (256, 1024), "layers": LAYERS, "seeds": 6, "selection_seeds": 2}
    return {"priors": tuple(PRIORS), "n": (256, 1024, 4096, 16384), "layers": LAYERS, "seeds": 8, "selection_seeds": 3}


def paper_h2(n: int) -> float:
    """The paper's fixed bandwidth at ``n`` tokens: E1's schedule ``(4 sigma2 / e) / log N``."""
    return H2Schedule.parse(SCHEDULES["log"][1]).at(n)[0]


def fixed_ratios(n_layers: int) -> tuple[float, ...]:
    """The grid's ``h2 / sigma2`` whose step ``T*/L = sigma2 / (2 h2 L)`` is at most 1."""
    return tuple(r for r in FIXED_RATIOS if r >= 1 / (2 * n_layers))


def _contexts(prior_name: str, n: int, role: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return draw_batch(PRIORS[prior_name], SIGMA2, n, [STREAM, role, list(PRIORS).index(prior_name), n, seed])


def _fixed(noisy: np.ndarray, h2: float, n_layers: int) -> np.ndarray:
    T = flow.leading_horizon(SIGMA2, h2)
    return TwoStageDenoiser(SIGMA2, h2, T=T, eta=T / n_layers, **FAST).fit_denoise(noisy)


def _stage_two(noisy: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Stage 2 over ``tokens``, queried by the noisy tokens: StageTwoOnly fitted on the refined tokens."""
    return StageTwoOnly(SIGMA2, **FAST).fit(tokens).denoise(noisy)


def _annealed(noisy: np.ndarray, ratio: float, n_layers: int) -> np.ndarray:
    return _stage_two(noisy, schedules.annealed_flow(noisy, SIGMA2, n_layers, ratio, **FAST))


def _gap(denoised: np.ndarray, bayes: np.ndarray) -> float:
    return float(np.mean((denoised - bayes) ** 2))


def run_selection(prior_name: str, n: int, n_layers: int, seed: int) -> dict:
    """Gaps of the fixed flow at every ``h2 / sigma2`` of its grid and of the annealed flow at every ``c``."""
    _, noisy = _contexts(prior_name, n, SELECTION, seed)
    bayes = PRIORS[prior_name].posterior_mean(noisy, SIGMA2)
    return {"fixed": [[r, _gap(_fixed(noisy, r * SIGMA2, n_layers), bayes)] for r in fixed_ratios(n_layers)],
            "annealed": [[c, _gap(_annealed(noisy, c, n_layers), bayes)] for c in ANNEALED_RATIOS]}


def run_scored(prior_name: str, n: int, n_layers: int, seed: int, fixed_ratio: float, annealed_ratio: float) -> dict:
    """Gaps of the paper's fixed flow, the fixed flow at ``fixed_ratio``, the annealed flow at ``annealed_ratio``,
    the oracle and Stage 2 over the clean tokens (ideal), on one scored context."""
    prior = PRIORS[prior_name]
    clean, noisy = _contexts(prior_name, n, SCORED, seed)
    bayes = prior.posterior_mean(noisy, SIGMA2)
    gaps = {
        "paper": _gap(_fixed(noisy, paper_h2(n), n_layers), bayes),
        "fixed": _gap(_fixed(noisy, fixed_ratio * SIGMA2, n_layers), bayes),
        "annealed": _gap(_annealed(noisy, annealed_ratio, n_layers), bayes),
        "oracle": _gap(_stage_two(noisy, schedules.oracle_reverse_flow(noisy, prior, SIGMA2, n_layers)), bayes),
        "ideal": _gap(_stage_two(noisy, clean), bayes),
    }
    return {"gaps": gaps, "paper_h2": paper_h2(n), "fixed_ratio": fixed_ratio, "annealed_ratio": annealed_ratio}


def _cases(d: dict) -> list[tuple[str, int, int]]:
    return [(p, n, L) for p in d["priors"] for n in d["n"] for L in d["layers"]]


def _case_key(prior: str, n: int, n_layers: int) -> str:
    return f"{prior}-N{n}-L{n_layers}"


def _selection_key(case: tuple, seed: int) -> str:
    return f"{_case_key(*case)}-seed{seed}"


def _scored_key(case: tuple, seed: int, fixed_ratio: float, annealed_ratio: float) -> str:
    return f"{_case_key(*case)}-seed{seed}-h{fixed_ratio:g}-c{annealed_ratio:g}"


def best_ratios(selection: list[dict]) -> tuple[float, float]:
    """The ``h2 / sigma2`` and the ``c`` of least mean gap over the selection records of one case."""
    return tuple(float(selection[0][part][int(np.argmin(_selection_means(selection, part)))][0])
                 for part in ("fixed", "annealed"))


def e7_runs(ctx: Context) -> dict:
    """Case -> its selection records, chosen ratios and scored records by seed (the pool's seeds), computed where
    the store lacks them (in ``ctx.workers`` processes)."""
    d = design(ctx.quick)
    cache_key = ("E7", ctx.quick, str(ctx.store_path), ctx.pool)
    if cache_key in ctx.cache:
        return ctx.cache[cache_key]
    cases, seeds = _cases(d), ctx.pool_seeds(d["seeds"])
    selection_name, scored_name = mode_name("E7", "selection", ctx.quick), mode_name("E7", "scored", ctx.quick)
    with ResultStore(ctx.store_path) as store:
        done = store.record_keys(selection_name)
        todo = [(*case, s) for case in cases for s in range(d["selection_seeds"])
                if _selection_key(case, s) not in done]
        for args, record in computed(todo, run_selection, ctx.workers, selection_name):
            store.add_record(selection_name, _selection_key(args[:3], args[3]), record)
        stored = store.records(selection_name)
        chosen = {case: best_ratios([stored[_selection_key(case, s)] for s in range(d["selection_seeds"])])
                  for case in cases}
        done = store.record_keys(scored_name)
        todo = [(*case, s, *chosen[case]) for case in cases for s in seeds
                if _scored_key(case, s, *chosen[case]) not in done]
        for args, record in computed(todo, run_scored, ctx.workers, scored_name):
            store.add_record(scored_name, _scored_key(args[:3], *args[3:]), record)
        scored = store.records(scored_name)
    ctx.cache[cache_key] = {case: {"selection": [stored[_selection_key(case, s)] for s in range(d["selection_seeds"])],
                                   "chosen": chosen[case],
                                   "runs": {s: scored[_scored_key(case, s, *chosen[case])] for s in seeds}}
                            for case in cases}
    return ctx.cache[cache_key]


def gap_of(run: dict, estimator: str) -> float:
    """The stored gap of ``estimator`` in one scored run (the data every decision sees)."""
    return run["gaps"][estimator]


def log_ratio(runs: list[dict], a: str, b: str) -> stats.Interval:
    """Mean over seeds of ``log(gap_a / gap_b)`` (paired: same contexts), with its 95% t-interval."""
    return stats.mean_interval([math.log(gap_of(run, a) / gap_of(run, b)) for run in runs])


def _pooled(cases: dict, n: int, seeds: list[int]) -> stats.Interval:
    """Per seed, the mean over the cases (priors and depths) at ``n`` of log(annealed / fixed); its t-interval."""
    chosen = [case for case in cases if case[1] == n]
    return stats.mean_interval([np.mean([math.log(gap_of(cases[c]["runs"][s], "annealed")
                                                  / gap_of(cases[c]["runs"][s], "fixed")) for c in chosen])
                                for s in seeds])


def decide(cases: dict, seeds: list[int]) -> dict:
    """The A1 decision on the scored runs of ``seeds``: per case the paired log-ratios, pooled per ``N``, the two
    criteria (:data:`CRITERION`) and, reported, whether the annealed flow with steps <= 1 (``c >= 1``) beats the
    fixed bandwidth on the selection contexts."""
    rows = {}
    for case, data in cases.items():
        runs = [data["runs"][s] for s in seeds]
        means = {name: stats.mean_interval([gap_of(run, name) for run in runs]) for name in ESTIMATORS}
        rows[case] = {"chosen": data["chosen"], "means": means,
                      "annealed_vs_fixed": log_ratio(runs, "annealed", "fixed"),
                      "oracle_vs_fixed": log_ratio(runs, "oracle", "fixed"),
                      "paper_vs_fixed": log_ratio(runs, "paper", "fixed")}
    ns = sorted({n for _, n, _ in cases})
    pooled = {n: _pooled(cases, n, seeds) for n in ns}
    gains = [case for case, row in rows.items() if row["annealed_vs_fixed"].low > math.log(1 + GAIN_MARGIN)]
    small_steps = {case: _selection_means(data["selection"], "annealed", lambda c: c >= 1).min()
                   < _selection_means(data["selection"], "fixed").min() for case, data in cases.items()}
    checks = {"no case where the fixed bandwidth gains more than 10%": not gains,
              f"the schedule wins on average at N = {ns[-1]}": pooled[ns[-1]].high < 0}
    return {"rows": rows, "pooled": pooled, "gains": gains, "small_steps": small_steps, "checks": checks,
            "passed": all(checks.values())}


def _selection_means(selection: list[dict], part: str, keep=lambda ratio: True) -> np.ndarray:
    """Mean gap over the selection contexts of every ratio of ``part``'s grid that ``keep`` keeps."""
    ratios = [r for r, _ in selection[0][part]]
    means = np.mean([[g for _, g in record[part]] for record in selection], axis=0)
    return np.array([m for r, m in zip(ratios, means) if keep(r)])


def _ratio_text(interval: stats.Interval) -> str:
    return f"{math.exp(interval.estimate):.3g} [{math.exp(interval.low):.3g}, {math.exp(interval.high):.3g}]"


def table(decision: dict) -> str:
    """The E7 table: per case the mean gaps (95% half-widths) and the paired ratios annealed / fixed, oracle / fixed
    (geometric means over seeds, 95% t-intervals)."""
    head = ("| prior | N | L | paper's h2 | best h2/sigma2 | best c | gap (mean ± 95%): paper | fixed (best h2) | "
            "annealed (best c) | oracle | ideal (clean tokens) | annealed / fixed | oracle / fixed |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (prior, n, L), row in decision["rows"].items():
        m = row["means"]
        cells = " | ".join(f"{m[name].estimate:.2e} ± {m[name].high - m[name].estimate:.1e}" for name in ESTIMATORS)
        lines.append(f"| {prior} | {n} | {L} | {paper_h2(n):.3g} | {row['chosen'][0]:g} | {row['chosen'][1]:g} | "
                     f"{cells} | {_ratio_text(row['annealed_vs_fixed'])} | {_ratio_text(row['oracle_vs_fixed'])} |")
    return "\n".join(lines)


#: The fixed bandwidth "gains" in a case when the lower 95% bound of the annealed / fixed gap ratio exceeds 1 + this.
GAIN_MARGIN = 0.10


CRITERION = (
    "Priors N(0, 1), two clusters at +-2 (var 0.25) and three atoms -1.5, 0, 1.5 (d = 1), sigma2 = 0.5, L in {4, 16}, "
    "N in {256, 1024, 4096, 16384} (quick {256, 1024}). Per case (prior, N, L) the fixed bandwidth's h2/sigma2 from "
    "{1/16, 1/8, 1/4, 1/2, 1, 2} (those >= 1/(2L)) and the annealed flow's c from {1/8, 1/4, 1/2, 1, 2, 4} are those "
    "of least mean gap over 3 (quick 2) selection contexts of their own; on 8 (quick 6) scored contexts each "
    "Stage 1 is followed by Stage 2 at bandwidth sigma2 and scored by the in-sample gap to Bayes. Passes when "
    "(i) in no case the lower 95% t-bound over seeds of mean log(gap annealed / gap fixed) exceeds log(1.1), and "
    "(ii) at the largest N, the per-seed mean over the six (prior, L) cases of log(gap annealed / gap fixed) has an "
    "upper 95% t-bound below 0. (Set after a pilot of 8 scored contexts per case on seeds of their own: pooled "
    "log-ratios -0.11, -0.19, -0.42, -0.70 at N = 256 ... 16384, every case's lower bound <= 0.)"
)


E7_NOTE = (
    "Reported, not decided on: the paper's h2 (E1's schedule (4 sigma2/e)/log N), the oracle reverse flow and the "
    "ideal gap (Stage 2 over the clean tokens, what the oracle tends to as L grows) beside each case; the "
    "pooled log-ratio at every N. Selecting h2 on the scored contexts themselves would lower the fixed bandwidth's "
    "gaps and can only make both criteria harder to pass, so that wrong procedure is not among the alternatives: "
    "the selection contexts are a stream of their own (proofs_check/topics/schedules/comparison.py, _contexts). Power (quick, 40 "
    "subsets of a pool of 3 x 6 seeds): size 0, power 1 against each alternative."
)


def annealed_is_fixed(real):
    """The first layer's bandwidth ``c sigma2`` in every layer (the schedule's steps kept)."""
    def schedule(sigma2, n_layers, ratio):
        bandwidths, steps = real(sigma2, n_layers, ratio)
        return np.full_like(bandwidths, ratio * sigma2), steps
    return schedule


def _fixed_with_the_schedules_budget(real):
    """A constant bandwidth ``c sigma2 / 3`` with equal steps whose depth budget ``2 sum eta_l h_l`` is the annealed
    schedule's, ``sigma2 (L + 1)/L``: the paper's layers at the horizon ``(1 + 1/L) T*`` (the referee's alternative)."""
    def schedule(sigma2, n_layers, ratio):
        bandwidths = np.full(n_layers, ratio * sigma2 / 3)
        return bandwidths, np.full(n_layers, sigma2 * (n_layers + 1) / n_layers / (2 * bandwidths[0] * n_layers))
    return schedule


def _reversed_schedule(real):
    """The annealed layers in reverse order: the smallest bandwidth first."""
    def schedule(sigma2, n_layers, ratio):
        bandwidths, steps = real(sigma2, n_layers, ratio)
        return bandwidths[::-1].copy(), steps[::-1].copy()
    return schedule


def _doubled_steps(real):
    """Every residual step of the annealed flow twice as long."""
    def schedule(sigma2, n_layers, ratio):
        bandwidths, steps = real(sigma2, n_layers, ratio)
        return bandwidths, 2 * steps
    return schedule


#: Broken annealed flows (a referee's report on the second comparison, which none of them fails: it claims no gain of
#: the schedule, and a broken schedule gains none). Registered on both comparisons; the first rejects them.
_BROKEN_ANNEALED = [
    alternative("annealed flow does nothing", "the annealed flow returns the noisy tokens (Stage 2 alone)",
                swap("attneb.numerics.schedules:annealed_flow", lambda real: lambda noisy, *a, **kw: np.asarray(noisy, float)),
                kind="implementation"),
    alternative("annealed flow ignores c", "the annealed flow at c = 1 whatever its chosen c",
                swap("attneb.numerics.schedules:annealed_flow",
                     lambda real: lambda noisy, s2, n_layers, ratio, **kw: real(noisy, s2, n_layers, 1.0, **kw)),
                kind="implementation"),
    alternative("annealed schedule reversed", "the layers' bandwidths and steps in reverse order",
                swap("attneb.numerics.schedules:annealed_schedule", _reversed_schedule), kind="implementation"),
    alternative("annealed steps doubled", "every residual step eta_l twice as long",
                swap("attneb.numerics.schedules:annealed_schedule", _doubled_steps), kind="implementation"),
]


#: The referee's alternative to both comparisons (a fixed bandwidth that the first cannot tell from the schedule).
_DEPTH_BUDGET = alternative(
    "a fixed bandwidth with the schedule's depth budget",
    "the annealed layers replaced by a constant bandwidth c sigma2/3 and equal steps whose budget 2 sum eta_l h_l is "
    "the schedule's sigma2 (L + 1)/L: the paper's layers at (1 + 1/L) T*",
    swap("attneb.numerics.schedules:annealed_schedule", _fixed_with_the_schedules_budget), kind="implementation")


def _replaced(estimator, make):
    """``gap_of`` with the gaps of ``estimator`` replaced by ``make(real, run)``."""
    def swap_gap(real):
        return lambda run, name: make(real, run) if name == estimator else real(run, name)
    return swap_gap


def stored_cases(store: ResultStore, quick: bool) -> dict:
    """Case -> selection records, chosen ratios and the scored runs of the first ``seeds`` seeds, as stored."""
    d = design(quick)
    selection = store.records(mode_name("E7", "selection", quick))
    scored = store.records(mode_name("E7", "scored", quick))
    out = {}
    for case in _cases(d):
        chosen_from = [selection.get(_selection_key(case, s)) for s in range(d["selection_seeds"])]
        if None in chosen_from:
            continue
        chosen = best_ratios(chosen_from)
        runs = [scored.get(_scored_key(case, s, *chosen)) for s in range(d["seeds"])]
        if None not in runs:
            out[case] = {"selection": chosen_from, "chosen": chosen, "runs": runs}
    if not out:
        raise LookupError(f"{store.path} holds no E7 runs of the {'quick' if quick else 'full'} mode; run "
                          "'attneb verify' to compute them")
    return out


@check("A1", "E7: annealed schedule against the fixed bandwidth at its best h2, equal depth (paired gaps to Bayes)",
       criterion=CRITERION,
       replication="subsample",
       alternatives=[
           alternative("no cost: the schedule does as the fixed bandwidth",
                       "every annealed gap replaced by the fixed bandwidth's on the same context",
                       swap(f"{__name__}:gap_of",
                            _replaced("annealed", lambda real, run: real(run, "fixed"))),
                       kind="data"),
           alternative("the fixed bandwidth gains 30%", "every gap of the fixed bandwidth at its best h2 times 0.7",
                       swap(f"{__name__}:gap_of",
                            _replaced("fixed", lambda real, run: 0.7 * real(run, "fixed"))),
                       kind="data"),
           alternative("schedule secretly fixed", "the annealed flow keeps the bandwidth c sigma2 in every layer",
                       swap("attneb.numerics.schedules:annealed_schedule", annealed_is_fixed), kind="implementation"),
           _DEPTH_BUDGET,
           *_BROKEN_ANNEALED,
       ],
       gating=False,
       note="superseded by 'E7, second comparison' (issue 24): its comparator is held at T*, and the note below names "
       "a near miss it lets through (a fixed bandwidth with the schedule's depth budget, power about 0), so it does "
       "not gate A1. " + E7_NOTE + " Added after the full run, on a referee's report: the alternative 'a fixed bandwidth with the "
       "schedule's depth budget' passes this check (the referee measured: quick, pooled annealed / fixed 0.884 [0.84, "
       "0.93] at N = 256 and 0.812 [0.776, 0.849] at N = 1024; full, chosen on E7's selection contexts and paired "
       "with the stored fixed gaps at N = 16384, 0.438 [0.380, 0.505], against the annealed flow's 0.471 [0.418, "
       "0.532]; with the budget sigma2, i.e. T = T*, 0.942 [0.923, 0.962], which still passes criterion (ii)): the "
       "check's power against it is about 0. So what it shows is that the annealed flow beats the fixed bandwidth "
       "held at T*, not that the shrinking bandwidth is what helps: a fixed bandwidth given the schedule's budget "
       "does as well. Its successor, 'E7, second comparison', lets the fixed bandwidth choose its horizon too, on "
       "fresh contexts. Broken annealed flows (a second referee's report; registered here and on the successor, "
       "which claims no gain of the schedule and so cannot reject them): quick power (8 subsets, 3 independent) 1.0 "
       "against 'does nothing' and 'ignores c', 0.75 against 'steps doubled', 0.125 against 'schedule reversed' "
       "(the reversed layers do almost as well: the referee measured 1.45 x the tuned comparator's gap against the "
       "true 1.34); 'a fixed bandwidth with the schedule's depth budget', now measured as the implementation swap it "
       "is (it was registered as a theory, re-decided on the true runs), 0.125.")
def schedule_comparison(ctx: Context) -> Evidence:
    d = design(ctx.quick)
    cases = e7_runs(ctx)
    seeds = ctx.subsample_seeds(d["seeds"])
    decision = decide(cases, seeds)
    largest = max(d["n"])
    pooled = "; ".join(f"N = {n}: {_ratio_text(iv)}" for n, iv in decision["pooled"].items())
    failed = [name for name, ok in decision["checks"].items() if not ok]
    wins = [_case_key(*c) for c, v in decision["small_steps"].items() if v]
    summary = (f"gap annealed / gap fixed at its best h2, geometric mean over the "
               f"{len(d['priors']) * len(d['layers'])} (prior, L) cases [95% t-interval "
               f"over {len(seeds)} seeds]: {pooled} (passes (ii) with the upper bound at N = {largest} below 1); "
               f"cases where the fixed bandwidth gains more than {GAIN_MARGIN:.0%} (lower bound above "
               f"{1 + GAIN_MARGIN:g}): {', '.join(_case_key(*c) for c in decision['gains']) or 'none'}"
               + (f". FAILED: {', '.join(failed)}" if failed else "")
               + f". Reported, not decided on: restricted to steps <= 1 (c >= 1), the annealed flow's best mean gap on "
                 f"the selection contexts is below the fixed bandwidth's in {sum(decision['small_steps'].values())} of "
                 f"{len(decision['small_steps'])} cases ({', '.join(wins) or 'none'})")
    figures = plot_study("E7", ctx)
    return Evidence(
        passed=decision["passed"], kind="interval", summary=summary,
        data={"seeds": seeds, "checks": decision["checks"],
              "small_steps_wins": wins,
              "pooled": {str(n): iv.__dict__ for n, iv in decision["pooled"].items()},
              "cases": {_case_key(*c): {"chosen": list(r["chosen"]),
                                        "means": {k: v.__dict__ for k, v in r["means"].items()},
                                        "annealed_vs_fixed": r["annealed_vs_fixed"].__dict__,
                                        "oracle_vs_fixed": r["oracle_vs_fixed"].__dict__,
                                        "paper_vs_fixed": r["paper_vs_fixed"].__dict__}
                        for c, r in decision["rows"].items()}},
        figures=figures, markdown="" if ctx.power else table(decision))


#: Role words of the second comparison's contexts: tuning (the choices) and fresh (the scored runs); a pilot that
#: sized its criterion ran on role words 5 and 6.
TUNING, FRESH = 3, 4


#: Grid of the tuned fixed bandwidth, h2 / sigma2: FIXED_RATIOS and the bandwidths c/3 of the depth-budget
#: alternative at every c of ANNEALED_RATIOS.
TUNED_RATIOS = (1 / 16, 1 / 12, 1 / 8, 1 / 6, 1 / 4, 1 / 3, 1 / 2, 2 / 3, 1.0, 4 / 3, 2.0)


#: A case where the annealed flow's gap is below the tuned fixed bandwidth's by more than this factor (the upper 95%
#: bound of their ratio below 1 / TUNED_MARGIN) fails the second comparison.
TUNED_MARGIN = 1.1


def horizon_factors(n_layers: int, quick: bool = False) -> tuple[float, ...]:
    """The tuned fixed bandwidth's horizons ``T / T*``: 1/2, 3/4, 1, 1 + 1/L (the annealed schedule's depth budget
    ``sigma2 (L + 1)/L`` over ``sigma2``), 3/2 and 2; quick mode only 1, 1 + 1/L and 3/2 (the pilot chose no other)."""
    return tuple(sorted({1.0, 1.0 + 1.0 / n_layers, 1.5} | (set() if quick else {0.5, 0.75, 2.0})))


def tuned_grid(n_layers: int, quick: bool = False) -> tuple[tuple[float, float], ...]:
    """Pairs ``(h2 / sigma2, T / T*)`` of the tuned fixed bandwidth: every ratio of :data:`TUNED_RATIOS` with every
    horizon of :func:`horizon_factors`, whatever the step ``T / L`` (the annealed flow's steps exceed 1 too)."""
    return tuple((r, f) for r in TUNED_RATIOS for f in horizon_factors(n_layers, quick))


def _fixed_at(noisy: np.ndarray, ratio: float, factor: float, n_layers: int) -> np.ndarray:
    """Stage 1 at the fixed bandwidth ``h2 = ratio sigma2`` in ``n_layers`` equal residual steps
    ``x <- x + (T / L)(a_h2(x) - x)`` to the horizon ``T = factor T*`` (steps above 1 allowed), then Stage 2."""
    h2 = ratio * SIGMA2
    step = factor * flow.leading_horizon(SIGMA2, h2) / n_layers
    tokens = noisy
    for _ in range(n_layers):
        tokens = tokens + step * flow.velocity(tokens, h2, **FAST)
    return _stage_two(noisy, tokens)


def run_tuning(prior_name: str, n: int, n_layers: int, seed: int, quick: bool, role: int = TUNING) -> dict:
    """Gaps of the fixed flow at every pair ``(h2 / sigma2, T / T*)`` of :func:`tuned_grid` and of the annealed
    flow at every ``c`` of :data:`ANNEALED_RATIOS`, on one tuning context."""
    _, noisy = _contexts(prior_name, n, role, seed)
    bayes = PRIORS[prior_name].posterior_mean(noisy, SIGMA2)
    return {"fixed": [[r, f, _gap(_fixed_at(noisy, r, f, n_layers), bayes)] for r, f in tuned_grid(n_layers, quick)],
            "annealed": [[c, _gap(_annealed(noisy, c, n_layers), bayes)] for c in ANNEALED_RATIOS]}


def tuned_choices(tuning: list[dict]) -> dict:
    """Least mean gap over the tuning records of one case: the fixed flow's pair ``(h2 / sigma2, T / T*)``, its
    ``h2 / sigma2`` at ``T = T*`` alone, and the annealed flow's ``c``."""
    fixed = [(r, f) for r, f, _ in tuning[0]["fixed"]]
    fixed_means = np.mean([[g for _, _, g in record["fixed"]] for record in tuning], axis=0)
    held = [k for k, (_, f) in enumerate(fixed) if f == 1.0]
    annealed_means = np.mean([[g for _, g in record["annealed"]] for record in tuning], axis=0)
    return {"fixed": tuple(fixed[int(np.argmin(fixed_means))]),
            "held": fixed[held[int(np.argmin(fixed_means[held]))]][0],
            "annealed": tuning[0]["annealed"][int(np.argmin(annealed_means))][0]}


def run_fresh(prior_name: str, n: int, n_layers: int, seed: int, fixed: tuple, held: float, annealed: float,
              role: int = FRESH) -> dict:
    """Gaps on one fresh context: the annealed flow at ``c = annealed``, the fixed flow at the pair ``fixed`` (tuned
    h2 and horizon) and at ``h2 / sigma2 = held`` with ``T = T*`` (the first comparison's comparator)."""
    _, noisy = _contexts(prior_name, n, role, seed)
    bayes = PRIORS[prior_name].posterior_mean(noisy, SIGMA2)
    return {"gaps": {"annealed": _gap(_annealed(noisy, annealed, n_layers), bayes),
                     "fixed": _gap(_fixed_at(noisy, *fixed, n_layers), bayes),
                     "held": _gap(_fixed_at(noisy, held, 1.0, n_layers), bayes)}}


def tuned_design(quick: bool) -> dict:
    """Cases, fresh contexts per case and tuning contexts per case of the second comparison: every prior and depth
    at N = 1024, 4096, 16384 (full); every prior at N = 1024 and L = 4 with one tuning context (quick)."""
    if quick:
        return {"cases": tuple((p, 1024, 4) for p in PRIORS), "seeds": 6, "tuning_seeds": 1}
    return {"cases": tuple((p, n, L) for p in PRIORS for n in (1024, 4096, 16384) for L in LAYERS), "seeds": 8,
            "tuning_seeds": 3}


def _tuning_key(case: tuple, seed: int) -> str:
    # keys are unique across a store's records: the first comparison's selection keys name the same cases and seeds
    return f"tuning-{_case_key(*case)}-seed{seed}"


def _fresh_key(case: tuple, seed: int, choices: dict) -> str:
    (ratio, factor), held, c = choices["fixed"], choices["held"], choices["annealed"]
    return f"fresh-{_case_key(*case)}-seed{seed}-h{ratio:g}-T{factor:g}-held{held:g}-c{c:g}"


def tuned_runs(ctx: Context) -> dict:
    """Case -> its tuning records, choices and fresh records by seed (the pool's seeds), computed where the store
    lacks them (in ``ctx.workers`` processes)."""
    d = tuned_design(ctx.quick)
    cache_key = ("E7-tuned", ctx.quick, str(ctx.store_path), ctx.pool)
    if cache_key in ctx.cache:
        return ctx.cache[cache_key]
    cases, seeds = list(d["cases"]), ctx.pool_seeds(d["seeds"])
    tuning_name, fresh_name = mode_name("E7", "tuning", ctx.quick), mode_name("E7", "fresh", ctx.quick)
    with ResultStore(ctx.store_path) as store:
        done = store.record_keys(tuning_name)
        todo = [(*case, s, ctx.quick) for case in cases for s in range(d["tuning_seeds"])
                if _tuning_key(case, s) not in done]
        for args, record in computed(todo, run_tuning, ctx.workers, tuning_name):
            store.add_record(tuning_name, _tuning_key(args[:3], args[3]), record)
        stored = store.records(tuning_name)
        tuning = {case: [stored[_tuning_key(case, s)] for s in range(d["tuning_seeds"])] for case in cases}
        chosen = {case: tuned_choices(records) for case, records in tuning.items()}
        done = store.record_keys(fresh_name)
        todo = [(*case, s, chosen[case]["fixed"], chosen[case]["held"], chosen[case]["annealed"])
                for case in cases for s in seeds if _fresh_key(case, s, chosen[case]) not in done]
        for args, record in computed(todo, run_fresh, ctx.workers, fresh_name):
            store.add_record(fresh_name, _fresh_key(args[:3], args[3], chosen[args[:3]]), record)
        fresh = store.records(fresh_name)
    ctx.cache[cache_key] = {case: {"tuning": tuning[case], "chosen": chosen[case],
                                   "runs": {s: fresh[_fresh_key(case, s, chosen[case])] for s in seeds}}
                            for case in cases}
    return ctx.cache[cache_key]


def decide_tuned(cases: dict, seeds: list[int]) -> dict:
    """The second comparison on the fresh runs of ``seeds``: per case the paired log-ratios annealed / tuned fixed,
    annealed / fixed held at T* and tuned / held, each case's verdict (``"annealed"`` when the upper bound of
    annealed / tuned lies below ``1 / TUNED_MARGIN``, ``"fixed"`` when its lower bound lies above ``TUNED_MARGIN``,
    else ``"neither"``), per ``N`` the per-seed mean over the cases of log(annealed / tuned) with its t-interval,
    and the two criteria (:data:`TUNED_CRITERION`)."""
    rows = {}
    for case, data in cases.items():
        runs = [data["runs"][s] for s in seeds]
        ratio = log_ratio(runs, "annealed", "fixed")
        verdict = ("annealed" if ratio.high < -math.log(TUNED_MARGIN)
                   else "fixed" if ratio.low > math.log(TUNED_MARGIN) else "neither")
        rows[case] = {"chosen": data["chosen"], "annealed_vs_tuned": ratio, "verdict": verdict,
                      "annealed_vs_held": log_ratio(runs, "annealed", "held"),
                      "tuned_vs_held": log_ratio(runs, "fixed", "held")}
    ns = sorted({n for _, n, _ in cases})
    pooled = {n: _pooled(cases, n, seeds) for n in ns}
    gains = [case for case, row in rows.items() if row["verdict"] == "annealed"]
    checks = {f"no case where the annealed flow gains more than {TUNED_MARGIN - 1:.0%}": not gains,
              f"the tuned fixed bandwidth wins on average at N = {ns[-1]}": pooled[ns[-1]].low > 0}
    return {"rows": rows, "pooled": pooled, "gains": gains, "checks": checks, "passed": all(checks.values())}


def tuned_table(decision: dict) -> str:
    """Per case the choices and the paired ratios annealed / tuned fixed, annealed / fixed at T*, tuned / at T*
    (geometric means over seeds, 95% t-intervals) and the verdict."""
    head = ("| prior | N | L | tuned h2/sigma2 | tuned T/T* | h2/sigma2 at T* | c | annealed / tuned fixed | "
            "annealed / fixed at T* | tuned fixed / fixed at T* | verdict |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (prior, n, L), row in decision["rows"].items():
        chosen = row["chosen"]
        lines.append(f"| {prior} | {n} | {L} | {chosen['fixed'][0]:.3g} | {chosen['fixed'][1]:g} | "
                     f"{chosen['held']:.3g} | {chosen['annealed']:g} | {_ratio_text(row['annealed_vs_tuned'])} | "
                     f"{_ratio_text(row['annealed_vs_held'])} | {_ratio_text(row['tuned_vs_held'])} | "
                     f"{row['verdict']} |")
    return "\n".join(lines)


TUNED_CRITERION = (
    "Priors N(0, 1), two clusters at +-2 (var 0.25) and three atoms -1.5, 0, 1.5 (d = 1), sigma2 = 0.5; full: N in "
    "{1024, 4096, 16384}, L in {4, 16}, 3 tuning and 8 fresh contexts per case; quick: N = 1024, L = 4, 1 tuning and 6 "
    "fresh contexts. Contexts of their own (role words 3 and 4 of E7's stream: not the first comparison's, not the "
    "pilot's). Per case, on the tuning contexts, the fixed bandwidth chooses its pair (h2/sigma2, T/T*) of least "
    "mean gap from h2/sigma2 in {1/16, 1/12, 1/8, 1/6, 1/4, 1/3, 1/2, 2/3, 1, 4/3, 2} and T/T* in {1/2, 3/4, 1, "
    "1 + 1/L, 3/2, 2} (quick {1, 1 + 1/L, 3/2}), L equal residual steps T/L of any size (the annealed flow's steps "
    "exceed 1 too), and the annealed flow its c from {1/8, 1/4, 1/2, 1, 2, 4}; on the fresh contexts each Stage 1 is "
    "followed by Stage 2 at bandwidth sigma2 and scored by the in-sample gap to Bayes. Passes when (i) in no case the "
    "upper end of the two-sided 95% t-interval (a one-sided 97.5% bound) over contexts of mean log(gap annealed / gap tuned fixed) lies below -log(1.1) (the annealed "
    "flow gains more than 10% nowhere), and (ii) at the largest N, the per-context mean over the cases of "
    "log(gap annealed / gap tuned fixed) has the lower end of its two-sided 95% t-interval above 0 (the tuned fixed bandwidth wins on average). "
    "(Set after pilots on contexts of their own, see the note: the annealed flow did not beat the tuned fixed "
    "bandwidth in any case.)"
)


def _horizon_ignored(real):
    """The tuned comparator's horizon read as T* at every grid point (its pairs differ in h2 only)."""
    return lambda noisy, ratio, factor, n_layers: real(noisy, ratio, 1.0, n_layers)


TUNED_NOTE = (
    "The successor of the first comparison, whose comparator is held at T* (a referee showed that a fixed bandwidth "
    "given the schedule's depth budget passes it). A first pilot (tuning role 5, fresh role 6, 3 + 8 contexts, N = "
    "256 .. 16384) held the comparator's steps T/L to at most 1, as the paper's layers are: it then chose 1.5 T* (or "
    "2 T* at N = 256) with a larger h2 in 22 of 24 cases and beat the annealed flow in 21 (annealed / tuned 1.3 - 4.1 "
    "at N >= 1024); only three atoms at L = 4 favoured the annealed flow (N = 16384: 0.806 [0.771, 0.842]), and there "
    "the referee's alternative did better still (0.717 [0.653, 0.789]): its steps exceed 1. So the comparator's steps "
    "were freed (a second pilot at N = 16384 on the same roles: annealed / tuned 1.49, 2.88, 1.35, 2.12, 1.24 [0.96, "
    "1.61], 2.51 for Gaussian, two clusters, three atoms at L = 4, 16; the tuning chose 1.5 T* in all six; quick "
    "design on pilot contexts: pooled 1.38 [1.27, 1.49]), and the claim this check decides is that the annealed flow "
    "does not beat a fixed bandwidth that chooses its horizon. Alternatives it must reject: the comparator's best "
    "horizon being T* (data: the tuned comparator replaced by the one held at T*, and a comparator that ignores its "
    "horizon), the annealed flow being the tuned fixed bandwidth itself (no gain and no loss: (ii) fails), and a "
    "30% gain of the schedule. The referee's alternative (a fixed bandwidth with the schedule's depth budget) is "
    "registered and measured, but it is a point of the comparator's grid: this check's claim holds under it, and its "
    "power against it is expected near 0. Measured on the check's contexts: quick, pooled annealed / tuned 1.34 "
    "[1.08, 1.65] at N = 1024, no case where the annealed flow gains (PASS; the tests had run its two-cluster case "
    "on these contexts before the criterion was committed); full, 1.60 [1.16, 2.21], 1.66 [1.39, 1.99] and 1.55 "
    "[1.34, 1.78] at N = 1024, 4096, 16384, the tuned fixed bandwidth better by more than 10% in 9 of the 18 cases, "
    "the annealed flow in none (closest: Gaussian, N = 16384, L = 4, 0.899 [0.666, 1.21]); the tuning chose T/T* = "
    "1.5 in 14 cases, 2 in 4 (N <= 4096) and 1.25 in one, never T*: PASS. Quick power (40 subsets of a pool of 3 x "
    "6 contexts): size 0; power 1.0 against every alternative but the referee's, 0.35 against it. The full power "
    "analysis was not run (the full check took 28 minutes with 2 workers on a loaded 2-core machine). "
    "Added on a referee's report, after the runs (criterion unchanged): broken annealed flows pass this check, since "
    "a broken schedule gains nothing either: quick power 0 against 'does nothing', 'ignores c' and 'steps doubled', "
    "0.125 against 'schedule reversed' (the referee: pooled annealed / tuned 10.1, 1.90, 2.18, 1.45 against the "
    "true 1.34, all passing). What guards the claim is the first comparison, which rejects the first two (power 1.0) "
    "and 'steps doubled' (0.75) but not the reversed schedule (0.125), and the identity 'annealed flow = its layers "
    "written out'; a bug in this module's _annealed wrapper (Stage 2 on the noisy tokens) passes both comparisons "
    "and the identity. Part (i) has little power against a gain in a single case: the annealed gap x 0.8 in the "
    "three-atom case only (a gain of about 18%) fails 14 of 40 subsets, x 0.7 26 of 40, x 0.6 40 of 40; the "
    "registered 'gains 30%' is rejected through (ii). The tuning is lopsided: 66 pairs (h2, T) (33 quick) for the "
    "fixed bandwidth against 6 values of c, on one tuning context in quick mode"
)


@check("A1", "E7, second comparison: annealed schedule against the fixed bandwidth at its best h2 AND horizon T/T*, "
       "equal depth, fresh contexts (paired gaps to Bayes)",
       criterion=TUNED_CRITERION,
       replication="subsample",
       alternatives=[
           alternative("the fixed bandwidth's best horizon is T*",
                       "every gap of the tuned comparator replaced by that of the fixed bandwidth held at T* (its best "
                       "h2 there) on the same context", swap(f"{__name__}:gap_of",
                                                             _replaced("fixed", lambda real, run: real(run, "held"))),
                       kind="data"),
           alternative("annealed = the fixed bandwidth at its chosen horizon",
                       "every annealed gap replaced by that of the fixed bandwidth at its tuned h2 and T on the same "
                       "context", swap(f"{__name__}:gap_of",
                                       _replaced("annealed", lambda real, run: real(run, "fixed"))), kind="data"),
           alternative("the schedule gains 30%", "every annealed gap times 0.7",
                       swap(f"{__name__}:gap_of",
                            _replaced("annealed", lambda real, run: 0.7 * real(run, "annealed"))), kind="data"),
           alternative("the comparator's horizon ignored", "the tuned comparator runs to T* at every grid point",
                       swap(f"{__name__}:_fixed_at", _horizon_ignored), kind="implementation"),
           _DEPTH_BUDGET,
           *_BROKEN_ANNEALED,
       ],
       note=TUNED_NOTE)
def schedule_against_tuned_horizon(ctx: Context) -> Evidence:
    d = tuned_design(ctx.quick)
    decision = decide_tuned(tuned_runs(ctx), ctx.subsample_seeds(d["seeds"]))
    pooled = "; ".join(f"N = {n}: {_ratio_text(iv)}" for n, iv in decision["pooled"].items())
    verdicts = {v: [_case_key(*c) for c, r in decision["rows"].items() if r["verdict"] == v]
                for v in ("annealed", "fixed", "neither")}
    failed = [name for name, ok in decision["checks"].items() if not ok]
    summary = (f"gap annealed / gap fixed at its tuned h2 and horizon, geometric mean over the cases [95% "
               f"t-interval over {d['seeds']} fresh contexts]: {pooled} (passes (ii) with the lower bound at the "
               f"largest N above 1); the annealed flow gains more than {TUNED_MARGIN - 1:.0%} in "
               f"{len(verdicts['annealed'])} of {len(decision['rows'])} cases "
               f"({', '.join(verdicts['annealed']) or 'none'}), the tuned fixed bandwidth in {len(verdicts['fixed'])} "
               f"({', '.join(verdicts['fixed']) or 'none'})"
               + (f". FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(
        passed=decision["passed"], kind="interval", summary=summary,
        data={"checks": decision["checks"], "verdicts": verdicts,
              "pooled": {str(n): iv.__dict__ for n, iv in decision["pooled"].items()},
              "cases": {_case_key(*c): {"chosen": {k: (list(v) if isinstance(v, tuple) else v)
                                                   for k, v in r["chosen"].items()},
                                        "annealed_vs_tuned": r["annealed_vs_tuned"].__dict__,
                                        "annealed_vs_held": r["annealed_vs_held"].__dict__,
                                        "tuned_vs_held": r["tuned_vs_held"].__dict__, "verdict": r["verdict"]}
                        for c, r in decision["rows"].items()}},
        markdown="" if ctx.power else tuned_table(decision))
