"""A1 (E7): the decision on synthetic runs, the checks on the real implementation (small design) and their wrong
theories, the transport map, and the figures and table drawn from the store."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from attneb.numerics import flow
from attneb.numerics.estimators import TwoStageDenoiser
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.engine.studies import STUDIES
from attneb.proofs_check.topics.schedules import comparators, comparison
from tests.strategies import finite_floats, log_uniform


def registered(func):
    [chk] = [c for c in CLAIMS["A1"].checks if c.func is func]
    return chk


CASES = [(p, n, L) for p in ("gaussian", "two-cluster") for n in (256, 1024) for L in (4, 16)]


def synthetic(log_ratio, seeds=8, spread=0.05, rng_seed=0):
    """Runs whose annealed / fixed gap ratio is exp(log_ratio(case) + noise) per seed."""
    rng = np.random.default_rng(rng_seed)
    selection = [{"fixed": [[0.25, 2e-3], [0.5, 1e-3]], "annealed": [[0.5, 1e-3], [1.0, 3e-3]]}] * 2
    cases = {}
    for case in CASES:
        runs = {}
        for s in range(seeds):
            fixed = 1e-3 * math.exp(0.3 * rng.standard_normal())
            gaps = {"paper": 1.2 * fixed, "fixed": fixed, "oracle": 0.1 * fixed, "ideal": 0.05 * fixed,
                    "annealed": fixed * math.exp(log_ratio(case) + spread * rng.standard_normal())}
            runs[s] = {"gaps": gaps}
        cases[case] = {"selection": selection, "chosen": (0.5, 0.5), "runs": runs}
    return cases


def test_the_decision_passes_where_the_schedule_wins_and_fails_where_it_does_not():
    seeds = list(range(8))
    cases = synthetic(lambda case: -0.3 if case[1] == 1024 else 0.0)
    wins = comparison.decide(cases, seeds)
    assert wins["passed"] and not wins["gains"]
    # the pooled estimate and its 95% t-interval, from the synthetic log-ratios directly: per seed, the mean over the
    # four cases at N = 1024
    per_seed = [np.mean([math.log(cases[c]["runs"][s]["gaps"]["annealed"] / cases[c]["runs"][s]["gaps"]["fixed"])
                         for c in CASES if c[1] == 1024]) for s in seeds]
    mean, half = np.mean(per_seed), stats.t.ppf(0.975, len(seeds) - 1) * np.std(per_seed, ddof=1) / math.sqrt(len(seeds))
    pooled = wins["pooled"][1024]
    assert (pooled.estimate, pooled.low, pooled.high) == pytest.approx((mean, mean - half, mean + half), abs=1e-12)
    # 32 log-ratios drawn around -0.3 with sd 0.05 (spread): their mean lies within 4 standard errors of -0.3
    assert pooled.estimate == pytest.approx(-0.3, abs=4 * 0.05 / math.sqrt(32))
    no_cost = comparison.decide(synthetic(lambda case: 0.0), seeds)
    assert not no_cost["passed"] and no_cost["checks"]["no case where the fixed bandwidth gains more than 10%"]
    one_gain = comparison.decide(synthetic(lambda case: 0.3 if case == ("gaussian", 256, 4) else -0.3), seeds)
    assert not one_gain["passed"] and one_gain["gains"] == [("gaussian", 256, 4)]
    assert one_gain["checks"]["the schedule wins on average at N = 1024"]


def test_the_table_has_a_row_per_case_with_the_paired_ratios():
    decision = comparison.decide(synthetic(lambda case: -0.5, spread=0.0), list(range(8)))
    lines = comparison.table(decision).splitlines()
    assert len(lines) == 2 + len(CASES)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert "| gaussian | 256 | 4 |" in lines[2] and "| 0.607 [0.607, 0.607] | 0.1 [" in lines[2]


def test_best_ratios_take_the_least_mean_gap_over_the_selection_contexts():
    selection = [{"fixed": [[0.25, 3.0], [0.5, 1.0]], "annealed": [[0.5, 1.0], [1.0, 2.0]]},
                 {"fixed": [[0.25, 0.5], [0.5, 4.0]], "annealed": [[0.5, 4.0], [1.0, 2.5]]}]
    assert comparison.best_ratios(selection) == (0.25, 1.0)


@given(st.integers(1, 4), st.integers(2, 6), st.data())
def test_the_chosen_ratios_have_the_least_mean_gap(contexts, size, data):
    gaps = st.lists(log_uniform(1e-6, 1.0), min_size=size, max_size=size)
    selection = [{"fixed": [[2.0**-k, g] for k, g in enumerate(data.draw(gaps))],
                  "annealed": [[2.0**k, g] for k, g in enumerate(data.draw(gaps))]} for _ in range(contexts)]
    for part, chosen in zip(("fixed", "annealed"), comparison.best_ratios(selection)):
        means = {r: np.mean([dict(record[part])[r] for record in selection]) for r, _ in selection[0][part]}
        assert means[chosen] == min(means.values())


@settings(max_examples=8)
@given(log_uniform(1e-3, 1e3), st.data())
def test_the_decision_does_not_depend_on_the_unit_of_the_gaps(scale, data):
    offsets = {case: data.draw(finite_floats(-0.5, 0.5)) for case in CASES}
    cases = synthetic(lambda case: offsets[case])
    scaled = {case: {**c, "runs": {s: {"gaps": {k: scale * g for k, g in run["gaps"].items()}}
                                   for s, run in c["runs"].items()}} for case, c in cases.items()}
    a, b = comparison.decide(cases, list(range(8))), comparison.decide(scaled, list(range(8)))
    assert a["checks"] == b["checks"] and a["gains"] == b["gains"]
    assert a["pooled"][1024].estimate == pytest.approx(b["pooled"][1024].estimate, abs=1e-12)
    per_case = [np.mean([math.log(run["gaps"]["annealed"] / run["gaps"]["fixed"]) for run in cases[c]["runs"].values()])
                for c in CASES if c[1] == 1024]
    assert a["pooled"][1024].estimate == pytest.approx(np.mean(per_case), abs=1e-12)


def _mixture_cdf_by_scipy(x, means, var):
    """CDF of the equal-weight mixture of N(m, var) over ``means``, from scipy.stats.norm (not the module's own)."""
    return np.mean([stats.norm.cdf(x, loc=m, scale=math.sqrt(var)) for m in means], axis=0)


@settings(max_examples=20)
@given(st.lists(finite_floats(-3.0, 3.0), min_size=1, max_size=3), log_uniform(0.05, 2.0), log_uniform(0.05, 4.0))
@example([-1.0, 1.5], 0.25, 1.0)  # two clusters: a wrong scale in the components' CDFs moves the map (one cannot)
def test_the_transport_map_carries_the_noisy_quantiles_onto_the_prior(means, var, sigma2):
    x = np.linspace(min(means) - 2.0, max(means) + 2.0, 9)
    y = comparators.transport_map(x, means, var, sigma2)
    assert np.all(np.diff(y) > 0)
    # F_0(y) = F_sigma2(x); the root finder's xtol 1e-14 moves a CDF by far less than 1e-10
    np.testing.assert_allclose(_mixture_cdf_by_scipy(y, means, var), _mixture_cdf_by_scipy(x, means, var + sigma2),
                               atol=1e-10)


def test_the_fixed_grid_keeps_steps_up_to_one():
    assert comparison.fixed_ratios(4) == (1 / 8, 1 / 4, 1 / 2, 1.0, 2.0)
    assert comparison.fixed_ratios(16)[0] == 1 / 16
    assert all(comparison.SIGMA2 / (2 * r * comparison.SIGMA2) / L <= 1 for L in comparison.LAYERS for r in comparison.fixed_ratios(L))


def test_the_transport_map_of_a_gaussian_is_its_linear_shrinkage():
    x = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(comparators.transport_map(x, (1.0,), 0.7, 0.5), 1.0 + np.sqrt(0.7 / 1.2) * (x - 1.0), atol=1e-10)


@pytest.mark.parametrize("func", [comparators.oracle_transport, comparators.annealed_written_out], ids=lambda f: f.__name__)
def test_the_deterministic_checks_pass_and_reject_every_wrong_theory(func, tmp_path):
    chk = registered(func)
    ctx = Context(quick=True, out=tmp_path, power=True)
    evidence = chk.func(ctx)
    assert evidence.passed, evidence.summary
    assert chk.criterion and len(chk.wrong_theories()) >= 4
    for wrong in chk.wrong_theories():
        with wrong.applied():
            assert not chk.func(ctx).passed, wrong.name


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The comparison on the small design, measured once for the module (no figures)."""
    ctx = Context(quick=True, out=tmp_path_factory.mktemp("e7"), power=True)
    return ctx, registered(comparison.schedule_comparison)


def test_the_comparison_passes_on_the_small_design_and_rejects_the_wrong_data(small):
    ctx, chk = small
    evidence = chk.func(ctx)
    assert evidence.passed, evidence.summary
    assert set(evidence.data["cases"]) == {"two-cluster-N1024-L4"}
    wrong_data = [wrong for wrong in chk.wrong_theories() if wrong.kind == "data"]
    assert len(wrong_data) == 2
    for wrong in wrong_data:
        with wrong.applied():
            assert not chk.func(ctx).passed, wrong.name


@pytest.mark.slow  # simulates the small design again under each wrong implementation (2 s)
def test_the_comparison_rejects_every_wrong_implementation(small, tmp_path):
    _, chk = small
    for k, wrong in enumerate(w for w in chk.wrong_theories() if w.kind == "implementation"):
        fresh = Context(quick=True, out=tmp_path / f"wrong{k}", power=True)
        fresh.out.mkdir()
        with wrong.applied():
            assert not chk.func(fresh).passed, wrong.name


def test_a_store_without_e7_runs_is_named(tmp_path):
    (tmp_path / "results.sqlite").touch()
    with pytest.raises(LookupError, match="no E7 runs of the full mode"):
        STUDIES["E7"].plot(tmp_path / "results.sqlite", tmp_path, quick=False)


@pytest.mark.slow  # 4 s of matplotlib; verify A1 (test_verify) draws the same figures by default
def test_the_figures_are_drawn_from_the_store_and_the_table_is_in_the_report(small):
    ctx, _ = small
    runs = comparison.e7_runs(ctx)  # stored in the fixture's folder (computed here if this test runs alone)
    pngs = STUDIES["E7"].plot(ctx.store_path, ctx.out / "figures", quick=True)
    assert [p.name for p in pngs] == ["E7_gaps.png", "E7_selection.png"]
    assert all(p.is_file() and p.with_suffix(".pdf").is_file() for p in pngs)
    assert comparison.table(comparison.decide(runs, list(range(6)))).count("\n") == 2  # head, rule, one case


# --------------------------------------------------------------------------------------------
# The second comparison: the fixed bandwidth also chooses its horizon
# --------------------------------------------------------------------------------------------


def synthetic_tuned(log_ratio, seeds=8, spread=0.05, rng_seed=0):
    """Fresh runs whose annealed / tuned fixed gap ratio is exp(log_ratio(case) + noise) per seed."""
    rng = np.random.default_rng(rng_seed)
    cases = {}
    for case in CASES:
        runs = {}
        for s in range(seeds):
            fixed = 1e-3 * math.exp(0.3 * rng.standard_normal())
            runs[s] = {"gaps": {"fixed": fixed, "held": 3 * fixed,
                                "annealed": fixed * math.exp(log_ratio(case) + spread * rng.standard_normal())}}
        cases[case] = {"tuning": [], "chosen": {"fixed": (0.25, 1.5), "held": 0.125, "annealed": 0.25}, "runs": runs}
    return cases


def test_the_second_decision_passes_where_the_tuned_fixed_bandwidth_is_not_beaten():
    seeds = list(range(8))
    fixed_wins = comparison.decide_tuned(synthetic_tuned(lambda case: 0.3 if case[1] == 1024 else 0.0), seeds)
    assert fixed_wins["passed"] and not fixed_wins["gains"]
    assert {r["verdict"] for c, r in fixed_wins["rows"].items() if c[1] == 1024} == {"fixed"}
    no_difference = comparison.decide_tuned(synthetic_tuned(lambda case: 0.0), seeds)
    assert not no_difference["passed"] and not no_difference["gains"]
    one_gain = comparison.decide_tuned(synthetic_tuned(lambda case: -0.3 if case == ("gaussian", 256, 4) else 0.3), seeds)
    assert not one_gain["passed"] and one_gain["gains"] == [("gaussian", 256, 4)]
    lines = comparison.tuned_table(fixed_wins).splitlines()
    assert len(lines) == 2 + len(CASES) and all(line.count("|") == lines[0].count("|") for line in lines)


def test_the_tuned_choices_are_the_least_mean_gaps():
    tuning = [{"fixed": [[0.25, 1.0, 3.0], [0.25, 1.5, 1.0], [0.5, 1.0, 2.0]], "annealed": [[0.5, 1.0], [1.0, 2.0]]},
              {"fixed": [[0.25, 1.0, 1.0], [0.25, 1.5, 2.0], [0.5, 1.0, 1.5]], "annealed": [[0.5, 4.0], [1.0, 2.5]]}]
    assert comparison.tuned_choices(tuning) == {"fixed": (0.25, 1.5), "held": 0.5, "annealed": 1.0}


def test_the_tuned_grid_holds_every_horizon_at_every_bandwidth():
    for L in comparison.LAYERS:
        assert set(comparison.horizon_factors(L)) >= {1.0, 1 + 1 / L, 1.5, 2.0}
        assert len(comparison.tuned_grid(L)) == len(comparison.TUNED_RATIOS) * len(comparison.horizon_factors(L))
        assert set(comparison.horizon_factors(L, quick=True)) == {1.0, 1 + 1 / L, 1.5}


@pytest.mark.parametrize("ratio, factor, n_layers", [(0.25, 1.0, 4), (0.5, 2.0, 4), (1 / 16, 1.5, 16)])
def test_the_tuned_comparator_is_the_papers_layers_where_their_steps_are_at_most_one(ratio, factor, n_layers):
    _, noisy = comparison._contexts("two-cluster", 512, comparison.TUNING, 0)
    h2 = ratio * comparison.SIGMA2
    T = factor * flow.leading_horizon(comparison.SIGMA2, h2)
    paper = TwoStageDenoiser(comparison.SIGMA2, h2, T=T, eta=T / n_layers, backend="exact").fit_denoise(noisy)
    np.testing.assert_allclose(comparison._fixed_at(noisy, ratio, factor, n_layers), paper, rtol=0, atol=1e-12)


def test_the_second_comparison_passes_on_the_small_design_and_rejects_its_wrong_theories(tmp_path):
    [chk] = [c for c in CLAIMS["A1"].checks if c.func is comparison.schedule_against_tuned_horizon]
    ctx = Context(quick=True, out=tmp_path / "true", power=True)
    ctx.out.mkdir()
    evidence = chk.func(ctx)
    assert evidence.passed, evidence.summary
    assert set(evidence.data["cases"]) == {"two-cluster-N1024-L4"}
    rejected = [w for w in chk.wrong_theories() if w.kind == "data" or w.name == "the comparator's horizon ignored"]
    assert len(rejected) == 4
    for k, wrong in enumerate(rejected):
        fresh = ctx if wrong.kind == "data" else Context(quick=True, out=tmp_path / f"wrong{k}", power=True)
        fresh.out.mkdir(exist_ok=True)
        with wrong.applied():
            assert not chk.func(fresh).passed, wrong.name


def test_a_gain_is_decided_on_the_two_sided_interval_as_the_criterion_says():
    """Six contexts whose log(annealed / tuned) have mean -0.219 and sd 0.132: the one-sided 95% upper bound (-0.110)
    lies below -log 1.1 (-0.095), the upper end of the two-sided 95% interval (-0.080) does not, so no gain."""
    z = np.array([-1.5, -0.9, -0.3, 0.3, 0.9, 1.5])
    logs = -0.219 + 0.132 * z / z.std(ddof=1)
    one_sided = comparison.stats.mean_interval(logs, level=0.90)
    assert one_sided.high < -math.log(comparison.TUNED_MARGIN) < comparison.stats.mean_interval(logs).high
    case = CASES[0]
    runs = {s: {"gaps": {"fixed": 1e-3, "held": 3e-3, "annealed": 1e-3 * math.exp(v)}} for s, v in enumerate(logs)}
    cases = {case: {"tuning": [], "chosen": {"fixed": (0.25, 1.5), "held": 0.125, "annealed": 0.25}, "runs": runs}}
    decision = comparison.decide_tuned(cases, list(range(6)))
    assert decision["rows"][case]["verdict"] == "neither" and not decision["gains"]
    assert "upper end of the two-sided 95% t-interval (a one-sided 97.5% bound)" in comparison.TUNED_CRITERION
