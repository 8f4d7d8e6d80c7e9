"""The checks of E1, E2, E4, E5 (C8, C6, C9, G3) and of the baselines (B1): they pass on the real
implementation and fail when it, or the data they see, is broken on purpose.

The sweeps run on the shrunken configurations of ``_small_convergence.py`` (one store per module
for the checks that only decide again); breakages that change the simulations run in a fresh
store of their own. The vectorised statistics are checked against their one-row versions.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from matplotlib.figure import Figure

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
              attention_checks.clean_context_floor_t, estimator_table.estimator_table, recovery.recovery_per_seed,
              attention_checks.clean_context_per_seed, recovery.recovery_heavy_tails, recovery.recovery_floor_heavy_tails_t,
              estimator_table.estimator_table_heavy_tails]
#: Superseded checks still decided on the module's store (kept in the report, not gating).
SUPERSEDED = [recovery.recovery, attention_checks.clean_context, estimator_table.estimator_table_in_sample,
              recovery.recovery_floor, attention_checks.clean_context_floor, recovery.recovery_floor_heavy_tails]


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


@pytest.mark.parametrize("scope", [recovery.recovery_needs_stability, recovery.recovery_needs_stability_per_seed],
                         ids=lambda f: f.__name__)
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
                  attention_checks.clean_context_floor_t):
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


def test_the_scope_check_fails_when_no_prior_reaches_below_n_c_as_its_criterion_says(monkeypatch, tmp_path):
    """With N_c = 1 every N is far above N_c: the rise below N_c cannot be seen, and the check fails (it does not
    pass vacuously)."""
    monkeypatch.setattr(recovery, "run_pooled", lambda configs, ctx: _scope_rows())
    ctx = Context(quick=True, out=tmp_path, power=True)
    assert recovery.recovery_needs_stability_per_seed(ctx).passed
    monkeypatch.setattr(recovery.stability, "token_scaling", lambda sigma2, h2: 1.0)
    assert not recovery.recovery_needs_stability_per_seed(ctx).passed
    assert "at least one prior's largest N lies below N_c (else it fails)" in \
        _registered(recovery.recovery_needs_stability_per_seed).criterion
