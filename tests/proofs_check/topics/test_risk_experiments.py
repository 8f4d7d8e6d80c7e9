"""The checks of E1, E2, E4, E5 (C8, C6, C9, G3) and of the baselines (B1): they pass on the real
implementation and fail when it, or the data they see, is broken on purpose.

The sweeps run on the shrunken configurations of ``_small_convergence.py`` (one store per module
for the checks that only decide again); breakages that change the simulations run in a fresh
store of their own. The vectorised statistics are checked against their one-row versions.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import stats as scipy_stats

from attneb.numerics import flow, stats, sweep
from attneb.proofs_check.engine import replication, studies
from attneb.proofs_check.engine.registry import CLAIMS, SEED_STRIDE, Context
from attneb.proofs_check.engine.runner import run_check
from attneb.proofs_check.topics import attention as attention_checks
from attneb.proofs_check.topics import depth_noise as depth_noise_checks
from attneb.proofs_check.topics import designs
from attneb.proofs_check.topics.stage2 import baselines, estimator_table, recovery
from tests.proofs_check._small_convergence import shrink_convergence

#: One test process computes the module's shared fixtures (pytest-xdist --dist loadgroup), not each.
pytestmark = pytest.mark.xdist_group(name="risk-experiments store")

#: The real E2 design (taken before the autouse fixture of conftest.py shrinks it).
_REAL_DEPTH_CONFIGS = depth_noise_checks.depth_configs


def _only_log_gaussian(monkeypatch):
    """E1 on the Gaussian along the log schedule only (the power schedule's N = 131072 is costly)."""
    real = recovery.recovery_configs
    monkeypatch.setattr(recovery, "recovery_configs", lambda quick: {"gaussian-log": real(quick)["gaussian-log"]})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store with the shrunken E1 (Gaussian, log schedule), E2, E4 and E5 runs, and E1, E4 on Student-t priors."""
    out = tmp_path_factory.mktemp("convergence")
    with pytest.MonkeyPatch.context() as mp:
        shrink_convergence(mp)
        _only_log_gaussian(mp)
        ctx = Context(quick=True, out=out, power=True)
        for configs in (recovery.recovery_configs(True), depth_noise_checks.depth_configs(True), estimator_table.table_configs(True),
                        attention_checks.clean_configs(True), recovery.student_recovery_configs(True), estimator_table.student_table_configs(True)):
            replication.run_pooled(configs, ctx)
    return out


@pytest.fixture
def ctx(store, monkeypatch):
    _only_log_gaussian(monkeypatch)
    return Context(quick=True, out=store, power=True)


def _fresh(tmp_path, monkeypatch):
    _only_log_gaussian(monkeypatch)
    return Context(quick=True, out=tmp_path, power=True)


#: recovery_floor_t decides on 8 quick seeds and N to 131072: its pass and failures are tested on synthetic runs of that
#: design (test_the_student_t_floor_check_passes_without_a_floor_and_fails_with_one), not on the shrunken store.
NEW_CHECKS = [depth_noise_checks.depth_minimiser_is_t_g, depth_noise_checks.depth_leading_order,
              attention_checks.clean_context_floor_t8, estimator_table.estimator_table, recovery.recovery_per_seed,
              attention_checks.clean_context_per_seed, recovery.recovery_heavy_tails, recovery.recovery_floor_heavy_tails_t,
              estimator_table.estimator_table_heavy_tails]
#: Superseded checks still decided on the module's store (kept in the report, not gating).
SUPERSEDED = [recovery.recovery, attention_checks.clean_context, estimator_table.estimator_table_in_sample,
              recovery.recovery_floor, attention_checks.clean_context_floor, recovery.recovery_floor_heavy_tails,
              attention_checks.clean_context_floor_t]


@pytest.mark.parametrize("check", NEW_CHECKS + SUPERSEDED, ids=lambda f: f.__name__)
def test_check_passes_on_the_real_implementation(check, ctx):
    evidence = check(ctx)
    assert evidence.passed, evidence.summary
    assert evidence.figures == ()  # no figure inside a power analysis


def _registered(func):
    return next(c for claim in CLAIMS.values() for c in claim.checks if c.func is func)


def test_registration_subsampled_with_criteria_and_superseded_checks_kept():
    for func in NEW_CHECKS:
        chk = _registered(func)
        assert chk.replication == "subsample" and chk.criterion and chk.gating
        assert chk.wrong_theories(), chk.name
    for func in (depth_noise_checks.depth_t_g_at_largest_n, depth_noise_checks.depth_minimiser, *SUPERSEDED):
        chk = _registered(func)
        assert not chk.gating and chk.note.startswith("superseded by")
    assert depth_noise_checks.depth_t_g_at_largest_n in [c.func for c in CLAIMS["C6"].checks]


def test_e5_floor_check_decides_on_its_own_seeds_after_the_slope_check(tmp_path, monkeypatch):
    """Both designs name the same experiments; the 8-seed check must not read the 4-seed check's pooled rows
    (they were cached under the experiments' names alone, a referee found)."""
    ctx = Context(quick=True, out=tmp_path)
    small = {part: {**config, "n": [128, 256], "seeds": {"start": 0, "count": 4}}
             for part, config in attention_checks.clean_configs(True).items() if part == "gaussian"}
    monkeypatch.setattr(attention_checks, "clean_configs", lambda quick: small)
    slope = attention_checks.clean_context_per_seed(ctx)
    floor = attention_checks.clean_context_floor_t8(ctx)
    assert "n=4)" in slope.summary
    assert {f["seeds"] for f in floor.data["fits"].values()} == {attention_checks.FLOOR_T_QUICK_SEEDS}
    assert f"S = {attention_checks.FLOOR_T_QUICK_SEEDS}" in floor.summary


# --------------------------------------------------------------------------------------------
# Data and theory alternatives: decided again on the same store
# --------------------------------------------------------------------------------------------


def _alternative(func, name):
    return next(a for a in _registered(func).wrong_theories() if a.name == name)


@pytest.mark.parametrize("func, name", [
    (recovery.recovery_floor, "gap with a floor of 3% of the Bayes risk"),
    (recovery.recovery_floor, "no Stage 1 (depth unnecessary)"),
    (attention_checks.clean_context_floor, "gap with a floor of 0.4% of the Bayes risk"),
    (attention_checks.clean_context_floor_t, "gap with a floor of 0.4% of the Bayes risk"),
    (attention_checks.clean_context_floor_t8, "gap with a floor of 0.4% of the Bayes risk"),
    (estimator_table.estimator_table, "depth unnecessary (no Stage 1)"),
    (estimator_table.estimator_table, "depth helps only in-sample"),
    (recovery.recovery_heavy_tails, "no Stage 1 (depth unnecessary)"),
    (recovery.recovery_floor_heavy_tails, "gap with a floor of 3% of the Bayes risk"),
    (recovery.recovery_floor_heavy_tails, "no Stage 1 (depth unnecessary)"),
    (recovery.recovery_floor_heavy_tails_t, "gap with a floor of 3% of the Bayes risk"),
    (recovery.recovery_floor_heavy_tails_t, "no Stage 1 (depth unnecessary)"),
    (estimator_table.estimator_table_heavy_tails, "depth unnecessary (no Stage 1)"),
    (estimator_table.estimator_table_heavy_tails, "depth helps only in-sample"),
], ids=lambda v: getattr(v, "__name__", v))
def test_data_alternatives_fail_the_check(func, name, ctx):
    with _alternative(func, name).applied():
        evidence = func(ctx)
    assert not evidence.passed, evidence.summary


def test_e4_data_alternatives_decide_on_independent_batches_not_on_zero_differences(ctx):
    """The data alternatives stand an independent block of Stage-2-alone batches in for two-stage: the paired
    differences have a spread (no [0, 0] interval), and the block's seeds are none of the table's."""
    rows = replication.run_pooled(estimator_table.table_configs(True), ctx)
    spare = replication.run_pooled(estimator_table.spare_table_configs(True), ctx)
    for part in rows:
        assert not {r["seed"] for r in rows[part]} & {r["seed"] for r in spare[part]}
        assert {r["estimator"] for r in spare[part]} == {"stage-two-only"}
    for name, columns in (("depth unnecessary (no Stage 1)", ("benefit", "oos_benefit")),
                          ("depth helps only in-sample", ("oos_benefit",))):
        with _alternative(estimator_table.estimator_table, name).applied():
            evidence = estimator_table.estimator_table(ctx)
        for column in columns:
            for estimate, low, high in evidence.data[column].values():
                assert high - low > 1e-6, (name, column, estimate, low, high)
        assert not evidence.passed


def test_e1_floor_reports_its_resolution_and_per_prior_floors_shift_one_prior(ctx):
    evidence = recovery.recovery_floor(ctx)
    fit = evidence.data["floors"]["gaussian-log"]
    reached = evidence.data["resolution"]["gaussian-log"]
    for column in ("gap", "oos_gap"):
        upper = fit[column]["ci"][1]
        assert reached[column]["smallest_floor_rejected"] == pytest.approx(2 * max(upper, 0.0))
        assert reached[column]["smallest_floor_rejected_of_mmse"] == pytest.approx(2 * max(upper, 0.0) / fit["mmse"])
        assert reached[column]["added_floor_failing_this_check"] == pytest.approx(
            recovery.FLOOR_OF_MMSE / 2 * fit["mmse"] - upper)
    assert "cannot be told apart from no floor" in evidence.summary
    rows = recovery._schedule(replication.run_pooled(recovery.recovery_configs(True), ctx), "log")
    both = {"gaussian-log": rows["gaussian-log"], "clusters-log": rows["gaussian-log"]}
    real = recovery.recovery_floors(both)
    floored = recovery.recovery_floors(recovery._with_floor_on("clusters-log", 0.01)(both))
    assert floored["gaussian-log"]["gap"]["c"] == real["gaussian-log"]["gap"]["c"]
    assert floored["clusters-log"]["gap"]["c"] == pytest.approx(real["clusters-log"]["gap"]["c"] + 0.01 * fit["mmse"])
    names = [a.name for a in _registered(recovery.recovery_floor).wrong_theories()]
    assert sum(name.endswith("of the Bayes risk)") and ": floor at its gap" in name for name in names) == 2


def _falling_in_sample_only():
    """Synthetic E1 rows: the in-sample gap falls as N^-0.7, the gap on fresh queries stays put (a spread of 20%)."""
    rng = np.random.default_rng(6)
    rows = [{"n": n, "seed": s, "estimator": "two-stage", "gap": n ** -0.7 * math.exp(rng.normal(0, 0.2)),
             "oos_gap": 0.01 * math.exp(rng.normal(0, 0.2))} for n in (256, 1024, 4096, 16384) for s in range(4)]
    return {"student-t3-log": rows}


def test_heavy_tail_slope_check_decides_fresh_queries_too(monkeypatch, tmp_path):
    rows = _falling_in_sample_only()
    assert replication.per_seed_slope_decision(rows, "two-stage")[0]  # the three-prior check's rule: in-sample only
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: rows)
    evidence = recovery.recovery_heavy_tails(Context(quick=True, out=tmp_path, power=True))
    assert not evidence.passed and "Student-t, df 3, variance 1" in evidence.summary
    assert evidence.data["slopes"]["student-t3-log"][2] < 0 < evidence.data["oos_slopes"]["student-t3-log"][2]


def test_the_figures_take_the_student_t_sweeps_the_store_holds(store):
    """E1 and E4 draw the Student-t panels when their sweeps are stored (their checks run after the first drawing)."""
    with sweep.ResultStore(store / "results.sqlite") as opened:
        assert set(replication.stored_if_run(recovery.student_recovery_configs(True), opened)) == {"student-t5-log"}
        assert set(replication.stored_if_run(estimator_table.student_table_configs(True), opened)) == {"student-t3"}
        assert replication.stored_if_run(recovery.student_recovery_configs(False), opened) == {}


@pytest.mark.parametrize("name", ["E1", "E2", "E4", "E5"])
def test_a_study_returns_its_figures_without_writing_files(name, ctx):
    before = sorted(ctx.out.iterdir())
    figures = studies.STUDIES[name].figures(ctx.store_path, quick=True)
    assert len(figures) == len(studies.STUDIES[name].files) == 1
    assert isinstance(figures[0], Figure) and figures[0].axes
    assert sorted(ctx.out.iterdir()) == before


def test_the_e5_panel_is_drawn_into_a_given_axes_or_a_figure_of_its_own(ctx):
    with sweep.ResultStore(ctx.store_path) as opened:
        rows = designs.labelled(replication.stored(attention_checks.clean_configs(True), opened),
                                designs.RECOVERY_PRIORS)
    alone = attention_checks.plot_clean_context(rows)
    assert isinstance(alone, Figure) and len(alone.axes) == 1
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert attention_checks.plot_clean_context(rows, ax=right) is fig
    assert not left.has_data() and right.has_data() and len(fig.axes) == 2
    assert right.get_legend_handles_labels()[1] == alone.axes[0].get_legend_handles_labels()[1] == list(rows)


def test_student_t_priors_have_variance_one_like_the_gaussian_of_e1_and_e4():
    variances = [spec["scale"] ** 2 * spec["df"] / (spec["df"] - 2) for _, spec in designs.STUDENT_T_PRIORS.values()]
    assert [spec["df"] for _, spec in designs.STUDENT_T_PRIORS.values()] == [3.0, 5.0]
    assert variances == pytest.approx([1.0, 1.0], rel=1e-14)


def _scope_rows():
    """Synthetic E1 rows on the power schedule: the gap falls as N^-0.8 up to N = 16384 and rises at 131072 (< N_c)."""
    rng = np.random.default_rng(4)
    rows = []
    for n in (256, 1024, 4096, 16384, 131072):
        h2 = 0.5 * n ** -0.25
        for seed in range(4):
            gap = (n ** -0.8 if n < 131072 else 4 * 16384 ** -0.8) * math.exp(rng.normal(0, 0.05))
            rows.append({"n": n, "seed": seed, "estimator": "two-stage", "sigma2": designs.SIGMA2, "h2": h2, "gap": gap})
    return {"gaussian-power": rows}


@pytest.mark.parametrize("scope", [recovery.recovery_needs_stability, recovery.recovery_needs_stability_per_seed,
                                   recovery.recovery_needs_stability_eight_seeds], ids=lambda f: f.__name__)
def test_e1_scope_fails_instead_of_raising_without_early_points_and_registers_wrong_bounds(scope, monkeypatch, tmp_path):
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: _scope_rows())
    ctx = Context(quick=True, out=tmp_path, power=True)
    assert scope(ctx).passed
    outcomes = {}
    for alt in _registered(scope).wrong_theories():
        if alt.kind == "theory":
            with alt.applied():
                outcomes[alt.name] = scope(ctx)
    assert set(outcomes) == {"N_c x 4", "N_c / 4", "rate 1/e: N_c = exp(sigma2/(e h2))"}
    assert not outcomes["N_c x 4"].passed and "no slope can be fitted" in outcomes["N_c x 4"].summary
    assert outcomes["N_c x 4"].data["too_few_early_points"] == ["gaussian-power"]
    assert not outcomes["rate 1/e: N_c = exp(sigma2/(e h2))"].passed
    assert outcomes["N_c / 4"].passed  # what the check cannot tell apart (stated in its note)


def test_seed_slopes_are_per_seed_fits_with_a_t_interval_over_seeds():
    rng = np.random.default_rng(5)
    ns = [256, 1024, 4096, 16384]
    rows = [{"n": n, "seed": s, "estimator": "e", "gap": n ** -0.7 * math.exp(rng.normal(0, 0.2))}
            for s in range(5) for n in ns]
    fit = replication.seed_slopes({"p": rows}, "e")["p"]
    each = [stats.loglog_slope([r["n"] for r in rows if r["seed"] == s], [r["gap"] for r in rows if r["seed"] == s])
            .slope.estimate for s in range(5)]
    assert np.allclose(list(fit["slopes"].values()), each, rtol=0, atol=1e-12)
    iv = stats.mean_interval(each)
    assert (fit["interval"].low, fit["interval"].high) == pytest.approx((iv.low, iv.high))
    # balanced design: the mean of the per-seed slopes is the pooled slope; only the interval differs
    assert fit["interval"].estimate == pytest.approx(replication.gap_slopes({"p": rows}, "e")["p"].slope.estimate)
    one_n = replication.seed_slopes({"p": rows}, "e", keep=lambda r: r["n"] == 256)["p"]
    assert one_n["slopes"] == {} and one_n["interval"] is None


def test_floor_alternative_shifts_the_fitted_floor_by_exactly_the_floor(ctx):
    rows = recovery._schedule(replication.run_pooled(recovery.recovery_configs(True), ctx), "log")
    real = recovery.recovery_floors(rows)
    floored = recovery.recovery_floors(recovery._with_floor(rows))
    for part, fits in real.items():
        shift = recovery.FLOOR_OF_MMSE * fits["mmse"]
        for column in ("gap", "oos_gap"):
            assert floored[part][column]["c"] == pytest.approx(fits[column]["c"] + shift, rel=1e-9, abs=1e-12)
            assert np.allclose(floored[part][column]["ci"], np.add(fits[column]["ci"], shift), rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Broken implementations: measured again, in a fresh store
# --------------------------------------------------------------------------------------------


def _stage_one_ignores_h2(monkeypatch):
    real = flow.particle_flow
    monkeypatch.setattr(flow, "particle_flow", lambda x0, h2, T, **kwargs: real(x0, 0.25, T, **kwargs))


def test_e2_fails_when_stage_one_ignores_its_bandwidth(tmp_path, monkeypatch):
    _stage_one_ignores_h2(monkeypatch)
    ctx = _fresh(tmp_path, monkeypatch)
    t_g, leading = depth_noise_checks.depth_minimiser_is_t_g(ctx), depth_noise_checks.depth_leading_order(ctx)
    assert not t_g.passed and "grid minimum at the end of the grid" in t_g.summary
    assert not leading.passed


def test_e1_and_e5_floors_fail_without_stage_one_or_with_a_noisy_context(tmp_path, monkeypatch):
    monkeypatch.setattr(flow, "particle_flow", lambda x0, *args, **kwargs: np.asarray(x0, dtype=float))
    entry = sweep.ESTIMATORS["clean-context"]
    monkeypatch.setitem(sweep.ESTIMATORS, "clean-context", sweep.EstimatorEntry(entry.name, entry.load))
    ctx = _fresh(tmp_path, monkeypatch)
    for floor in (recovery.recovery_floor, recovery.recovery_floor_t, attention_checks.clean_context_floor,
                  attention_checks.clean_context_floor_t, attention_checks.clean_context_floor_t8):
        assert not floor(ctx).passed, floor.__name__


# --------------------------------------------------------------------------------------------
# Subsampled decisions: pool simulated, subset decided, figures on the intended seeds
# --------------------------------------------------------------------------------------------


def test_decisions_use_the_subsample_and_figures_the_intended_seeds(tmp_path, monkeypatch):
    small = {"gaussian": {**attention_checks.clean_configs(True)["gaussian"], "n": [128, 256], "seeds": {"start": 0, "count": 2}}}
    monkeypatch.setattr(attention_checks, "clean_configs", lambda quick: small)
    pooled = Context(quick=True, out=tmp_path, pool=3, replicate=2, power=True)
    rows = replication.run_pooled(attention_checks.clean_configs(True), pooled)["gaussian"]
    assert {r["seed"] for r in rows} == set(pooled.subsample_seeds(2)) and len(rows) == 4
    with sweep.ResultStore(tmp_path / "results.sqlite") as store:
        assert {r["seed"] for r in store.rows()} == set(range(6))  # the pool is kept
        assert {r["seed"] for r in replication.stored(attention_checks.clean_configs(True), store)["gaussian"]} == {0, 1}
    [png] = studies.STUDIES["E5"].plot(tmp_path / "results.sqlite", tmp_path, quick=True)
    assert png.name == "E5_clean_context.png" and png.is_file() and png.with_suffix(".pdf").is_file()


# --------------------------------------------------------------------------------------------
# The vectorised statistics
# --------------------------------------------------------------------------------------------


def test_parabola_minima_agree_row_by_row_and_recover_a_parabola():
    rng = np.random.default_rng(0)
    T = np.round(1.0 + 0.05 * np.arange(9), 10)
    curves = np.exp((T - rng.uniform(1.05, 1.35, (50, 1))) ** 2 * 20 + rng.normal(0, 0.01, (50, 9)))
    together = depth_noise_checks.parabola_minima(T, curves)
    assert np.allclose(together, [depth_noise_checks.parabola_minima(T, c)[0] for c in curves], rtol=0, atol=1e-12)
    exact = np.exp((T - 1.234) ** 2 * 20)
    assert depth_noise_checks.parabola_minima(T, exact)[0] == pytest.approx(1.234, abs=1e-9)


def _synthetic_depth_rows(t_inf, b, ns, seeds, noise, rng):
    rows = []
    T = np.round(1.0 + 0.05 * np.arange(7), 10)
    for n in ns:
        centre = t_inf - b / math.sqrt(n)
        for s in range(seeds):
            wobble = rng.normal(0, noise)
            for t in T:
                rows.append({"n": n, "seed": s, "T": float(t), "gap": math.exp(8 * (t - centre - wobble) ** 2),
                             "oos_gap": math.exp(8 * (t - centre - wobble) ** 2)})
    return rows


def test_depth_extrapolation_recovers_t_inf_with_its_coverage():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(40):
        result = depth_noise_checks.depth_minimisers(_synthetic_depth_rows(1.2, 3.0, [4096, 16384, 65536], 6, 0.01, rng))
        covered += result["ci"][0] <= 1.2 <= result["ci"][1]
        assert result["bracketed"]
    assert covered >= 34  # nominal 95%: 38 of 40; at least 34 (binomial 1% quantile)
    exact = depth_noise_checks.depth_minimisers(_synthetic_depth_rows(1.2, 3.0, [4096, 16384, 65536], 4, 0.0, rng))
    assert exact["T_inf"] == pytest.approx(1.2, abs=1e-6) and exact["slope_b"] == pytest.approx(3.0, abs=1e-4)


def test_floor_fit_recovers_a_floor_and_its_absence():
    rng = np.random.default_rng(2)
    n = np.array([256, 1024, 4096, 16384, 65536], dtype=float)
    clean = 0.5 * n ** -0.8
    table = clean * np.exp(rng.normal(0, 0.05, (12, n.size)))
    none = replication.floor_fit(n, table)
    some = replication.floor_fit(n, table + 2e-4)
    # no floor: c within 10% of the floor below, its interval below half of it; the floor: c shifted by it exactly
    assert abs(none["c"]) < 2e-5 and none["ci"][1] < 1e-4 and none["a"] == pytest.approx(0.8)
    assert some["ci"][0] > 1e-4 and some["c"] == pytest.approx(none["c"] + 2e-4, rel=1e-9)


def test_resample_weights_are_bootstrap_resamples():
    w = replication.resample_weights(5)
    assert w.shape == (replication.BOOTSTRAP, 5) and np.allclose(w.sum(axis=1), 1.0)
    assert np.allclose(w * 5, np.round(w * 5)) and np.allclose(w.mean(axis=0), 0.2, atol=0.02)


def test_replicates_draw_other_seed_subsets():
    base = Context(quick=True, out=None, pool=3)
    subsets = {tuple(dataclasses.replace(base, replicate=r).subsample_seeds(4)) for r in range(1, 20)}
    assert len(subsets) > 10 and all(set(s) <= set(range(12)) for s in subsets)
    assert SEED_STRIDE > 12


# --------------------------------------------------------------------------------------------
# B1: the baselines against their definitions
# --------------------------------------------------------------------------------------------

BASELINES = [baselines.npmle_is_the_npmle, baselines.tweedie_kde_is_tweedie,
             baselines.linear_is_gaussian_posterior_mean]


@pytest.mark.parametrize("check", BASELINES, ids=lambda f: f.__name__)
def test_baseline_checks_pass(check, tmp_path):
    evidence = check(Context(quick=True, out=tmp_path))
    assert evidence.passed, evidence.summary


@pytest.mark.parametrize("check, alternative", [
    (check, alt) for check in BASELINES for alt in _registered(check).wrong_theories()
], ids=lambda v: getattr(v, "__name__", None) or v.name)
def test_baseline_checks_fail_under_every_wrong_implementation(check, alternative, tmp_path):
    # run as verify and the power analysis run it: a wrong implementation is rejected only by a check that runs
    # and fails (status "fail"); one that raises (status "error") measured nothing and rejects nothing
    with alternative.applied():
        result = run_check(_registered(check), Context(quick=True, out=tmp_path))
    assert result.status == "fail", result.error or result.evidence.summary


def test_npmle_reference_computations_are_independent_and_right():
    rng = np.random.default_rng(3)
    noisy = rng.normal(size=(300, 1)) * 1.3
    atoms = np.linspace(-3, 3, 30)[:, None]
    log_lik = baselines._log_likelihood_matrix(noisy, atoms, 0.5)
    w = baselines.plain_em(log_lik, 2000)
    assert baselines.mean_loglik(log_lik, w) >= baselines.mean_loglik(log_lik, baselines.plain_em(log_lik, 100))
    assert baselines.optimality_gap(log_lik, w) < 1e-2
    from attneb.numerics import priors
    q = rng.normal(size=(20, 1))
    assert np.allclose(baselines.bayes_mean_of_atoms(q, atoms, w, 0.5),
                       priors.Discrete(atoms, w / w.sum()).posterior_mean(q, 0.5), atol=1e-12)


# --------------------------------------------------------------------------------------------
# Slow: the E2 checks on the real quick design reject their registered wrong theories
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_e2_on_the_quick_design_rejects_its_wrong_theories(tmp_path, monkeypatch):
    monkeypatch.setattr(depth_noise_checks, "depth_configs", _REAL_DEPTH_CONFIGS)
    ctx = Context(quick=True, out=tmp_path, power=True, workers=studies.default_workers())
    assert depth_noise_checks.depth_minimiser_is_t_g(ctx).passed and depth_noise_checks.depth_leading_order(ctx).passed
    for func in (depth_noise_checks.depth_minimiser_is_t_g, depth_noise_checks.depth_leading_order):
        for alt in _registered(func).wrong_theories():
            if alt.kind == "implementation":  # the 1% errors: their power is measured by proofs_check.power
                continue
            with alt.applied():
                assert not func(ctx).passed, (func.__name__, alt.name)


def test_the_scope_check_decides_on_the_per_seed_interval_not_the_pooled_one(monkeypatch, tmp_path):
    """Three seeds whose early slopes differ (-1.1, -0.4 and -0.6, lines crossing at N = 1024): the pooled interval over
    (N, seed) points lies below 0, the t-interval over the three per-seed slopes (2 degrees of freedom) does not."""
    rows = [r for r in _scope_rows()["gaussian-power"] if r["seed"] < 3]
    for r in rows:
        if r["n"] <= 4096:
            r["gap"] = 1024 ** -0.8 * (r["n"] / 1024) ** (-1.1, -0.4, -0.6)[r["seed"]]
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: {"gaussian-power": rows})
    ctx = Context(quick=True, out=tmp_path, power=True)
    pooled, per_seed = recovery.recovery_needs_stability(ctx), recovery.recovery_needs_stability_per_seed(ctx)
    assert per_seed.data["early_slopes_per_seed"]["gaussian-power"][2] > 0 > pooled.data["early_slopes"]["gaussian-power"][2]
    assert pooled.passed and not per_seed.passed


def _floor_rows(seeds: int = recovery.FLOOR_T_QUICK_SEEDS):
    """Synthetic E1 runs of the floor check's quick design, without a floor: gap = 0.05 MMSE (N/256)^-0.6 times a
    lognormal of scatter 0.2 per (N, seed) (in-sample and fresh queries); Stage 2 alone stalls at 0.05 MMSE."""
    rng = np.random.default_rng(11)
    out = {}
    for part, mmse in (("gaussian-log", 0.3333), ("clusters-log", 0.18)):
        rows = []
        for n in (256, 1024, 4096, 16384, 131072):
            for seed in range(seeds):
                gap, oos = 0.05 * mmse * (n / 256) ** -0.6 * np.exp(0.2 * rng.standard_normal(2))
                stalled = 0.05 * mmse * np.exp(0.2 * rng.standard_normal(2))
                for estimator, (g, o) in (("two-stage", (gap, oos)), ("stage-two-only", stalled)):
                    rows.append({"n": n, "seed": seed, "estimator": estimator, "mmse": mmse, "gap": g, "oos_gap": o,
                                 "mse": mmse + g, "oos_mse": mmse + o, "excess": g, "oos_excess": o})
        out[part] = rows
    return out


def test_the_student_t_floor_check_passes_without_a_floor_and_fails_with_one(monkeypatch, tmp_path):
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: _floor_rows())
    ctx = Context(quick=True, out=tmp_path, power=True)
    assert recovery.recovery_floor_t(ctx).passed
    for name in ("gap with a floor of 3% of the Bayes risk", "no Stage 1 (depth unnecessary)"):
        with _alternative(recovery.recovery_floor_t, name).applied():
            assert not recovery.recovery_floor_t(ctx).passed, name


@pytest.mark.parametrize("scope", [recovery.recovery_needs_stability_per_seed,
                                   recovery.recovery_needs_stability_eight_seeds], ids=lambda f: f.__name__)
def test_the_scope_check_fails_when_no_prior_reaches_below_n_c_as_its_criterion_says(scope, monkeypatch, tmp_path):
    """With N_c = 1 every N is far above N_c: the rise below N_c cannot be seen, and the check fails (it does not
    pass vacuously)."""
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: _scope_rows())
    ctx = Context(quick=True, out=tmp_path, power=True)
    assert scope(ctx).passed
    monkeypatch.setattr(recovery.stability, "token_scaling", lambda sigma2, h2: 1.0)
    assert not scope(ctx).passed
    assert "at least one prior's largest N lies below N_c (else it fails)" in _registered(scope).criterion


def test_the_eight_seed_scope_check_runs_e1_s_power_schedule_on_8_quick_seeds_and_e1_s_in_full(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: (seen.append(configs), _scope_rows())[1])
    for quick in (True, False):
        recovery.recovery_needs_stability_eight_seeds(Context(quick=quick, out=tmp_path, power=True))
        e1 = {part: c for part, c in recovery.recovery_configs(quick).items() if part.endswith("-power")}
        assert set(seen[-1]) == set(e1) and e1  # (the tests' E1 is shrunk to the clusters' power schedule)
        for part, config in seen[-1].items():
            assert {**config, "seeds": None} == {**e1[part], "seeds": None}
            assert config["seeds"] == ({"start": 0, "count": 8} if quick else e1[part]["seeds"])


# --------------------------------------------------------------------------------------------
# B1: each baseline check decides on the tolerances its criterion states
# --------------------------------------------------------------------------------------------


def _moved(out, delta):
    out = np.array(out, dtype=float, copy=True)
    out.flat[0] += delta
    return out


def _npmle_condition(condition: str, delta: float, monkeypatch, seen: list):
    """Put ``delta`` (the size the criterion compares with its tolerance) into one of the NPMLE check's four
    conditions; record (atoms, batch shape, queries shape) of every fit and denoise in ``seen``."""
    from attneb.numerics import npmle

    class Model(npmle.NPMLE):
        def fit(self, noisy):
            super().fit(noisy)
            seen.append(("fit", self.atoms_.shape[0], np.shape(noisy)))
            if condition == "reported loglik":
                self.loglik_ = self.loglik_ + delta * max(1.0, abs(self.loglik_))
            return self

        def denoise(self, queries):
            seen.append(("denoise", np.shape(queries)))
            return super().denoise(queries)

    monkeypatch.setattr(npmle, "NPMLE", Model)
    real_em, real_mean, real_gap = baselines.plain_em, baselines.mean_loglik, baselines.optimality_gap
    state = {}

    def em(log_lik, iterations):
        seen.append(("em", iterations))
        state["em"] = real_em(log_lik, iterations)
        return state["em"]

    def mean_loglik(log_lik, weights):
        if weights is state.get("em") and condition == "beats EM":
            return state["ours"] + delta  # EM's likelihood above the NPMLE's by delta
        state["ours"] = real_mean(log_lik, weights)
        return state["ours"]

    monkeypatch.setattr(baselines, "plain_em", em)
    monkeypatch.setattr(baselines, "mean_loglik", mean_loglik)
    if condition == "optimal":
        monkeypatch.setattr(baselines, "optimality_gap", lambda log_lik, w: delta)
    if condition == "denoiser":
        real_bayes = baselines.bayes_mean_of_atoms
        monkeypatch.setattr(baselines, "bayes_mean_of_atoms", lambda q, a, w, s2: _moved(
            real_bayes(q, a, w, s2), delta * np.abs(q).max()))


@pytest.mark.parametrize("condition, tolerance", [("beats EM", 1e-9), ("optimal", 1e-5), ("reported loglik", 1e-9),
                                                  ("denoiser", 1e-9)])
def test_the_npmle_conditions_are_decided_at_their_tolerances_as_its_criterion_says(condition, tolerance, monkeypatch, tmp_path):
    """0.99 x the tolerance passes, 1.01 x fails: (i) l(w_EM) - l(w_NPMLE) <= 1e-9, (ii) max g - 1 <= 1e-5, (iii)
    |loglik_ - l| <= 1e-9 max(1, |l|), (iv) |denoise - posterior mean of the atoms| <= 1e-9 max |q|; on both
    batches (N = 2000 in 1-D, 1500 in 2-D; 256 atoms; 400 queries; EM of 300 steps)."""
    text = _registered(baselines.npmle_is_the_npmle).criterion
    for phrase in ("(i) l(w_NPMLE) >= l(w_EM) - 1e-9 with w_EM after 300 plain EM steps", "(ii) max_k g_k(w_NPMLE) - 1 "
                   "<= 1e-5", "within 1e-9 (relative to max(1, |l|))", "a_k over the fitted atoms and weights within 1e-9 "
                   "(relative to the queries' scale)", "N = 2000, 256 grid atoms", "N = 1500, 256 exemplar atoms",
                   "sigma2 = 0.5", "denoise(400 fresh noisy queries)"):
        assert phrase in text, phrase
    ctx = Context(quick=True, out=tmp_path)
    for factor, passes in ((0.99, True), (1.01, False)):
        seen = []
        with monkeypatch.context() as m:
            _npmle_condition(condition, factor * tolerance, m, seen)
            evidence = baselines.npmle_is_the_npmle(ctx)
        assert evidence.passed is passes, (factor, evidence.summary)
        assert all(case["ok"][condition] is passes for case in evidence.data.values())
        assert seen == [("fit", 256, (2000, 1)), ("denoise", (400, 1)), ("em", 300),
                        ("fit", 256, (1500, 2)), ("denoise", (400, 2)), ("em", 300)]


@pytest.mark.parametrize("backend", ["exact", "binned"])
def test_tweedie_kde_is_decided_within_its_stated_bounds_as_its_criterion_says(backend, monkeypatch, tmp_path):
    """An error of 0.99 x the bound passes, 1.01 x fails: 1e-7 on the exact path, 1e-7 + sigma2 tol (largest
    coordinate range of the batch) / h2 (tol = 1e-7) on the binned one, against xt + sigma2 x a central difference of
    log_kde of step 1e-5, on 300 queries of each batch (N = 4096 in 1-D, 1500 in 2-D)."""
    text = _registered(baselines.tweedie_kde_is_tweedie).criterion
    for phrase in ("TweedieKDE(backend='exact').denoise equals xt + sigma2 * (central difference, step 1e-05, of "
                   "numerics.kernels.log_kde) within 1e-07", "TweedieKDE(backend='binned', tol=1e-07).denoise within "
                   "1e-07 + sigma2 * tol * (largest coordinate range of the batch) / h2", "(1-D, N = 4096)",
                   "(2-D, N = 1500), sigma2 = 0.5", "300 fresh noisy queries"):
        assert phrase in text, phrase
    from attneb.numerics import estimators, kernels

    def bound(model):
        if model.backend == "exact":
            return 1e-7
        return 1e-7 + 0.5 * 1e-7 * float(np.ptp(model.context_, axis=0).max()) / model.h2

    ctx = Context(quick=True, out=tmp_path)
    for factor, passes in ((0.99, True), (1.01, False)):
        calls, bounds = [], []

        def fd_score(queries, keys, h2, step=baselines.FD_STEP):
            calls.append((np.shape(queries), np.shape(keys), step))
            return kernels.kde_score(queries, keys, h2)  # the score itself: the reference is exact here

        class Model(estimators.TweedieKDE):
            def denoise(self, queries):
                assert self.tol == 1e-7 and self.sigma2 == 0.5
                bounds.append(bound(self))
                exact = queries + self.sigma2 * kernels.kde_score(queries, self.context_, self.h2)
                return _moved(exact, factor * bounds[-1] if self.backend == backend else 0.0)

        with monkeypatch.context() as m:
            m.setattr(baselines, "finite_difference_score", fd_score)
            m.setattr(estimators, "TweedieKDE", Model)
            evidence = baselines.tweedie_kde_is_tweedie(ctx)
        assert evidence.passed is passes, (factor, evidence.summary)
        assert calls == [((300, 1), (4096, 1), 1e-5), ((300, 2), (1500, 2), 1e-5)]
        assert [case["tolerance"] for case in evidence.data.values()] == pytest.approx(bounds, rel=1e-12)


def test_linear_shrinkage_is_decided_at_1e_10_of_the_queries_scale_as_its_criterion_says(monkeypatch, tmp_path):
    """0.9e-10 x max |q| from the Gaussian posterior mean passes, 1.1e-10 fails; the 2-D batch has a direction of
    noisy variance about 0.25 < sigma2 (the positive part acts), N = 1000 each, 300 queries."""
    text = _registered(baselines.linear_is_gaussian_posterior_mean).criterion
    assert "within 1e-10 relative to the queries' scale" in text and "LinearShrinkage.denoise(300 queries)" in text
    real = baselines.gaussian_moment_posterior_mean
    ctx = Context(quick=True, out=tmp_path)
    for factor, passes in ((0.9e-10, True), (1.1e-10, False)):
        shapes = []
        with monkeypatch.context() as m:
            m.setattr(baselines, "gaussian_moment_posterior_mean", lambda q, noisy, s2: shapes.append(
                (q.shape, noisy.shape, s2)) or _moved(real(q, noisy, s2), factor * np.abs(q).max()))
            evidence = baselines.linear_is_gaussian_posterior_mean(ctx)
        assert evidence.passed is passes, (factor, evidence.summary)
        assert shapes == [((300, 1), (1000, 1), 0.5), ((300, 2), (1000, 2), 0.5)]
    low = min(evidence.data["2-D, one under-dispersed direction"]["eigenvalues"])
    assert 0.2 < low < 0.3 and low < baselines.SIGMA2


# --------------------------------------------------------------------------------------------
# C6 / E2: the levels and bounds the two gating checks decide at
# --------------------------------------------------------------------------------------------

#: (tau2, h2) of E2's cases: quick, and full (with (0.25, 0.125)).
E2_QUICK, E2_FULL = [(1.0, 0.25), (0.25, 0.25), (1.0, 0.125)], [(1.0, 0.25), (0.25, 0.25), (1.0, 0.125), (0.25, 0.125)]


def _e2_rows(pairs, seeds=4, unbracketed=()):
    """E2 rows on each case's real grid: gap = exp(8 (T - m)^2) per seed and N, m = (the grid's middle depth) + 0.003 -
    0.3 N^(-1/2) + noise, the noise drawn per (h2, N, seed): the two tau2 at one h2 have the same minimisers up to
    their grids' offset, and the same rise between the two h2. In the cases of ``unbracketed`` the largest N's minimum
    lies beyond the grid."""
    parts = {}
    for tau2, h2 in pairs:
        grid = depth_noise_checks.depth_grid(tau2, h2)
        spec = json.dumps({"prior": {"family": "Gaussian", "mean": [0.0], "var": tau2}})
        rows = []
        for n in (4096, 16384, 65536):
            for seed in range(seeds):
                noise = np.random.default_rng([int(1000 * h2), n, seed]).normal(0.0, 0.004)
                centre = grid[2] + 0.003 - 0.3 / math.sqrt(n) + noise
                if (tau2, h2) in unbracketed and n == 65536:
                    centre = grid[-1] + 0.02
                for t in grid:
                    gap = math.exp(8 * (t - centre) ** 2)
                    rows.append({"n": n, "seed": seed, "T": t, "gap": gap, "oos_gap": gap, "spec": spec, "h2": h2,
                                 "sigma2": 0.5})
        parts[f"tau2={tau2:g}-h2={h2:g}"] = rows
    return parts


def _e2_check(func, parts, monkeypatch, tmp_path, horizon=None, leading=None):
    """``func`` on the rows ``parts``, with T_G and T* replaced where given (theory read at call time)."""
    monkeypatch.setattr(depth_noise_checks, "run_pooled", lambda configs, ctx: parts)
    if horizon is not None:
        monkeypatch.setattr(depth_noise_checks.depth_noise, "gaussian_horizon", horizon)
    if leading is not None:
        monkeypatch.setattr(depth_noise_checks.depth_noise, "leading_horizon", leading)
    return func(Context(quick=True, out=tmp_path, power=True))


@pytest.mark.parametrize("pairs", [E2_QUICK, E2_FULL], ids=["quick: 3 cases", "full: 4 cases"])
def test_t_g_must_meet_the_bonferroni_interval_of_t_inf_as_its_criterion_says(pairs, monkeypatch, tmp_path):
    """The interval of T_inf at level 1 - 0.05/(number of cases) must meet [T_G, T_G + 0.005]: T_G 1e-9 below its
    upper end passes (the 95% interval's upper end lies below T_G), 1e-9 above fails; T_G + 0.005 1e-9 above its
    lower end passes, 1e-9 below fails. The other cases' T_G sit at their estimates."""
    text = _registered(depth_noise_checks.depth_minimiser_is_t_g).criterion
    assert "the interval of T_inf at level 1 - 0.05/(number of cases) (Bonferroni) meets [T_G, T_G + 0.005]" in text
    assert "interval of T_inf = estimate +- t_{S-1} sqrt(S/(S-1)) x its standard deviation over 2000 resamples" in text
    parts = _e2_rows(pairs)
    level = 1 - 0.05 / len(pairs)
    first = next(iter(parts))
    wide = depth_noise_checks.depth_minimisers(parts[first], "oos_gap", level)
    usual = depth_noise_checks.depth_minimisers(parts[first], "oos_gap", 0.95)
    assert usual["ci"][1] < wide["ci"][1] - 1e-6 and wide["ci"][0] + 1e-6 < usual["ci"][0]
    others = {part: depth_noise_checks.depth_minimisers(rows, "oos_gap", level)["T_inf"] for part, rows in parts.items()}
    for t_g, passes in ((wide["ci"][1] - 1e-9, True), (wide["ci"][1] + 1e-9, False),
                        (wide["ci"][0] - 0.005 + 1e-9, True), (wide["ci"][0] - 0.005 - 1e-9, False)):
        values = {**others, first: t_g}

        def horizon(sigma2, tau2, h2):
            return values[f"tau2={tau2:g}-h2={h2:g}"]

        with monkeypatch.context() as m:
            evidence = _e2_check(depth_noise_checks.depth_minimiser_is_t_g, parts, m, tmp_path, horizon=horizon)
        case = evidence.data["cases"][first]["oos"]
        assert case["level"] == pytest.approx(level, rel=1e-15) and case["ci"] == pytest.approx(wide["ci"], rel=1e-12)
        assert evidence.passed is passes and evidence.data["verdicts"][first] is passes, (t_g, evidence.summary)


def test_the_interval_of_t_inf_is_the_two_sided_t_interval_of_the_bootstrap_spread_as_its_criterion_says():
    """Half-widths at two levels stand in the ratio of t_{S-1} quantiles (two-sided), about the same estimate."""
    rows = _e2_rows([(1.0, 0.25)], seeds=4)["tau2=1-h2=0.25"]
    at = {level: depth_noise_checks.depth_minimisers(rows, "oos_gap", level) for level in (0.95, 1 - 0.05 / 3)}
    halves = {level: (r["ci"][1] - r["ci"][0]) / 2 for level, r in at.items()}
    ratio = scipy_stats.t.ppf(1 - 0.025 / 3, 3) / scipy_stats.t.ppf(0.975, 3)
    assert halves[1 - 0.05 / 3] / halves[0.95] == pytest.approx(ratio, rel=1e-12)
    assert halves[0.95] == pytest.approx(scipy_stats.t.ppf(0.975, 3) * at[0.95]["se"], rel=1e-12)
    assert np.mean(at[0.95]["ci"]) == pytest.approx(at[0.95]["T_inf"], rel=1e-14)
    # se, recomputed: T_inf by weighted least squares in N^(-1/2) (weights 1/bootstrap variance of each N's minimiser)
    # over the 2000 resamples of the 4 seeds (shared across N), its standard deviation times sqrt(S/(S-1))
    ns, weights = (4096, 16384, 65536), replication.resample_weights(4)
    assert weights.shape == (2000, 4)
    tables = [replication.seed_table([r for r in rows if r["n"] == n], "oos_gap", x="T") for n in ns]
    point = np.array([depth_noise_checks.parabola_minima(T, table.mean(axis=0))[0] for T, _, table in tables])
    boots = np.column_stack([depth_noise_checks.parabola_minima(T, weights @ table) for T, _, table in tables])
    design = np.column_stack([np.ones(3), -np.asarray(ns, dtype=float) ** -0.5])
    w = np.diag(1 / boots.var(axis=0, ddof=1))
    intercept = np.linalg.solve(design.T @ w @ design, design.T @ w)[0]
    assert at[0.95]["T_inf"] == pytest.approx(intercept @ point, rel=1e-12)
    assert at[0.95]["se"] == pytest.approx((boots @ intercept).std(ddof=1) * math.sqrt(4 / 3), rel=1e-9)


def test_an_unbracketed_minimiser_fails_the_t_g_check_as_its_criterion_says(monkeypatch, tmp_path):
    """A case whose grid minimum at the largest N is the grid's last depth fails, whatever its interval of T_inf."""
    parts = _e2_rows(E2_QUICK, unbracketed=[(1.0, 0.125)])
    estimates = {part: depth_noise_checks.depth_minimisers(rows, "oos_gap", 1 - 0.05 / 3)["T_inf"] for part, rows in parts.items()}
    evidence = _e2_check(depth_noise_checks.depth_minimiser_is_t_g, parts, monkeypatch, tmp_path,
                         horizon=lambda sigma2, tau2, h2: estimates[f"tau2={tau2:g}-h2={h2:g}"])
    assert not evidence.data["cases"]["tau2=1-h2=0.125"]["oos"]["bracketed"]
    assert [part for part, ok in evidence.data["verdicts"].items() if not ok] == ["tau2=1-h2=0.125"] and not evidence.passed
    assert "the grid minimum of the mean gap at the largest N lies strictly inside the grid" in \
        _registered(depth_noise_checks.depth_minimiser_is_t_g).criterion


@pytest.mark.parametrize("pairs", [E2_QUICK, E2_FULL], ids=["quick: one tau2, 95%", "full: two tau2, 97.5%"])
def test_the_leading_order_slope_interval_is_at_the_bonferroni_level_as_its_criterion_says(pairs, monkeypatch, tmp_path):
    """The slope (T_inf(0.125) - T_inf(0.25)) / (T*(0.125) - T*(0.25)), interval at 1 - 0.05/(number of tau2 at both
    h2), standard errors in quadrature, t with S - 1 = 3 degrees of freedom: T*'s rise chosen so that the interval's
    upper end is 1 + 1e-6 (passes) or 1 - 1e-6 (fails). In full mode the passing case lies outside the 95% interval."""
    text = _registered(depth_noise_checks.depth_leading_order).criterion
    assert "has its interval at level 1 - 0.05/(number of such tau2) (Bonferroni: 95% quick, 97.5% full; the two T_inf " \
        "independent, their standard errors added in quadrature, t with S-1 degrees of freedom) containing 1" in text
    parts = _e2_rows(pairs)
    pairs_at_both = 1 if pairs == E2_QUICK else 2
    level = 1 - 0.05 / pairs_at_both
    fits = {part: depth_noise_checks.depth_minimisers(rows) for part, rows in parts.items()}
    rise = fits["tau2=1-h2=0.125"]["T_inf"] - fits["tau2=1-h2=0.25"]["T_inf"]
    se = math.hypot(fits["tau2=1-h2=0.125"]["se"], fits["tau2=1-h2=0.25"]["se"])
    t_level, t_95 = scipy_stats.t.ppf(0.5 + level / 2, 3), scipy_stats.t.ppf(0.975, 3)
    for factor, passes in ((1 - 1e-6, True), (1 + 1e-6, False)):
        run = (rise + t_level * se) * factor  # T*(0.125) - T*(0.25): the upper end of the interval is 1 / factor
        if pairs_at_both == 2 and passes:
            assert (rise + t_95 * se) / run < 1  # the 95% interval would exclude 1
        with monkeypatch.context() as m:
            evidence = _e2_check(depth_noise_checks.depth_leading_order, parts, m, tmp_path,
                                 leading=lambda sigma2, h2: 1.0 if h2 == 0.25 else 1.0 + run)
        slopes = evidence.data["slopes"]
        assert len(slopes) == pairs_at_both
        assert all(slope["ci"][1] == pytest.approx(1 / factor, rel=1e-9) for slope in slopes.values())
        assert evidence.passed is passes, (factor, evidence.summary)


def test_the_e2_design_is_as_its_criterion_says():
    """Gaussian N(0, tau2), sigma2 = 0.5, layers of step 0.05, N in {4096, 16384, 65536}, 4 seeds quick and 10 full,
    five depths T* + 0.05 k, k = round(20 c) - 2 .. round(20 c) + 2, c = log(1 + sigma2/tau2)/2; the cases (tau2, h2)
    (1, 0.25), (0.25, 0.25), (1, 0.125), and (0.25, 0.125) in full mode."""
    from attneb.numerics.sweep import spec

    for func in (depth_noise_checks.depth_minimiser_is_t_g, depth_noise_checks.depth_leading_order):
        assert depth_noise_checks._E2_DESIGN in _registered(func).criterion
    for quick, pairs, seeds in ((True, E2_QUICK, 4), (False, E2_FULL, 10)):
        configs = _REAL_DEPTH_CONFIGS(quick)
        assert [(c["prior"]["var"], c["h2"]) for c in configs.values()] == pairs
        for (tau2, h2), config in zip(pairs, configs.values()):
            assert config["prior"] == {"family": "Gaussian", "mean": [0.0], "var": tau2} and config["sigma2"] == 0.5
            assert config["n"] == [4096, 16384, 65536] and config["seeds"] == {"start": 0, "count": seeds}
            k_c = round(20 * 0.5 * math.log(1 + 0.5 / tau2))
            assert config["T"]["values"] == pytest.approx([0.5 / (2 * h2) + 0.05 * k for k in range(k_c - 2, k_c + 3)],
                                                          abs=1e-12)
            assert config.get("eta", spec.DEFAULT_ETA) == 0.05


def test_the_first_superseded_e2_check_uses_the_95_percentile_interval_as_its_criterion_says(monkeypatch, tmp_path):
    """T_G 1e-9 inside the 95% percentile bootstrap interval (seeds) of the in-sample minimiser at the largest N
    passes, 1e-9 outside fails; tau2 = 1 only, every h2 with N_max >= 10 N_c (here both)."""
    text = _registered(depth_noise_checks.depth_t_g_at_largest_n).criterion
    assert "every h2 with N_max >= 10 N_c" in text and "in the 95% percentile bootstrap interval (seeds) of the " \
        "in-sample risk-minimising depth at the largest N" in text and designs.REGIME == 10
    parts = _e2_rows(E2_QUICK)
    largest = {part: [r for r in rows if r["n"] == 65536] for part, rows in parts.items()}
    T, _, table = replication.seed_table(largest["tau2=1-h2=0.25"], "gap", x="T")
    boots = depth_noise_checks.parabola_minima(T, replication.resample_weights(4) @ table)
    low, high = np.quantile(boots, [0.025, 0.975])
    others = {part: depth_noise_checks.measured_minimiser(rows).estimate for part, rows in largest.items()}
    for t_g, passes in ((high - 1e-9, True), (high + 1e-9, False), (low + 1e-9, True), (low - 1e-9, False)):
        values = {**others, "tau2=1-h2=0.25": t_g}
        with monkeypatch.context() as m:
            evidence = _e2_check(depth_noise_checks.depth_t_g_at_largest_n, parts, m, tmp_path,
                                 horizon=lambda sigma2, tau2, h2: values[f"tau2={tau2:g}-h2={h2:g}"])
        assert set(evidence.data["cases"]) == {"tau2=1-h2=0.25", "tau2=1-h2=0.125"}  # tau2 = 1 only
        assert evidence.data["cases"]["tau2=1-h2=0.25"]["ci"] == pytest.approx([low, high], rel=1e-12)
        assert evidence.passed is passes, (t_g, evidence.summary)


def test_the_second_superseded_e2_check_needs_each_interval_closer_to_0_as_its_criterion_says(monkeypatch, tmp_path):
    """The 95% interval of T_min/T* - 1 at h2 = 0.125 must lie closer to 0 than that at h2 = 0.25: T* moved so that
    the larger h2's nearest end sits a relative 1e-6 beyond (passes) or within (fails) the smaller h2's farthest."""
    assert "the 95% bootstrap interval of T_min/T* - 1 lies strictly closer to 0 than that of the next larger h2, " \
        "for every h2" in _registered(depth_noise_checks.depth_minimiser).criterion
    parts = _e2_rows(E2_QUICK)
    ci = {h2: depth_noise_checks.measured_minimiser([r for r in parts[f"tau2=1-h2={h2:g}"] if r["n"] == 65536])
          for h2 in (0.25, 0.125)}
    farthest = (ci[0.125].high - ci[0.125].low) / (ci[0.125].high + ci[0.125].low)  # with T*(0.125) the midpoint
    for factor, passes in ((1 + 1e-6, True), (1 - 1e-6, False)):
        star = {0.125: (ci[0.125].low + ci[0.125].high) / 2, 0.25: ci[0.25].low / (1 + farthest * factor)}
        with monkeypatch.context() as m:
            evidence = _e2_check(depth_noise_checks.depth_minimiser, parts, m, tmp_path,
                                 leading=lambda sigma2, h2: star[h2])
        assert evidence.passed is passes, (factor, evidence.summary)
