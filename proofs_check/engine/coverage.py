"""Which verify checks cover each public function whose output feeds a number in the report.

A check covers a function when a 1% error in the function's output (every number it returns
times 1.01, :func:`attneb.proofs_check.engine.registry.scaled_output`) makes the check fail. Checks declare the
functions they cover (``covers=`` in :func:`~attneb.proofs_check.engine.registry.check`); the power analysis runs
each declared 1% error as an alternative, so every declaration is measured, not assumed.

What must be covered is traced, not typed in: :data:`REPORT_FUNCTIONS` is every public function of
:mod:`attneb.numerics` and :mod:`attneb.theory` that a quick ``verify`` calls, as
``benchmarks/trace_report_functions.py`` recorded it (:mod:`attneb.proofs_check.engine.trace`) in
:data:`TRACED_FILE`, with the commit and date of the trace. Each is covered by a gating check, or
listed in :data:`TESTED_APART` with the test that checks it against a closed form or an independent
computation and the reason no check is measured against it; :func:`uncovered` lists the others.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .registry import CLAIMS

__all__ = ["REPORT_FUNCTIONS", "TESTED_APART", "TRACED_FILE", "coverage_map", "traced", "uncovered"]

#: The functions a quick ``verify`` calls, traced by ``benchmarks/trace_report_functions.py``.
TRACED_FILE = Path(__file__).with_name("traced_functions.json")


def traced() -> dict:
    """The trace of :data:`TRACED_FILE`: ``functions`` (target -> the claims that called it), ``commit``, ``date``,
    ``command``, the claims' statuses and the seconds it took."""
    return json.loads(TRACED_FILE.read_text())


#: Public functions whose output feeds a number in the report: those a quick ``verify`` calls, sorted.
REPORT_FUNCTIONS: tuple[str, ...] = tuple(traced()["functions"])

# The reasons of TESTED_APART begin with one of five words:
#   "no number": it returns an object, a name, a key, a flag or nothing, so a 1% output error is not
#       defined (scaled_output cannot make one) and no check can be measured against one;
#   "identity": it validates an argument and returns it unchanged, so a 1% output error is a 1%
#       error in that argument of every caller, which no one check owns;
#   "cancels": the checks read it only where a constant factor cancels;
#   "bound": it enters only an error bound, which decides where exact sums replace binned ones, not
#       a value the checks read;
#   "not measured": a 1% error would move numbers the checks decide on, but no check declares it,
#       so its power was never measured; its test fails on a 1% error instead.
_VALIDATION = "identity: validates an argument and returns it (or raises naming it)"
_NO_NUMBER_SWEEP = "no number: sweep bookkeeping (configs, specs, keys, the store) that passes its numbers on unchanged"
_DERIVATION = ("no number: builds a derivation (sympy steps and claims), which its claims' derivation checks decide "
               "item by item; their wrong theories are the derivation's mutants, measured by power")
_CHECKER = "no number: the symbolic checker (a verdict, an item, a reason); the derivation checks read it"
_LEARNS = ("no number: fit returns the estimator; what it learns reaches the report only through denoise and "
           "fit_denoise, tested with it")
_TESTS = "tests/numerics/"

#: Traced functions no check is measured against: target -> (the test that checks it against a closed form
#: or an independent computation, why a 1% error in it changes no decided number or why no check sees it).
TESTED_APART: dict[str, tuple[str, str]] = {
    # --- numerics.base, binned, gpu: paths and plans --------------------------------------------------------
    "attneb.numerics.base:single_blas_thread": (
        f"{_TESTS}test_base.py::test_single_blas_thread_limits_blas_to_one_thread_and_restores_it",
        "no number: a context that sets how many threads BLAS uses, which changes results only by rounding"),
    "attneb.numerics.binned:GridPlan.node_coef": (
        f"{_TESTS}test_binned.py::test_node_coefficients_are_their_closed_forms",
        "bound: a term of the binned sums' error bound (test_raw_grid_error_within_the_reported_bound holds the "
        "bound to the measured error)"),
    "attneb.numerics.binned:GridPlan.node_factor": (
        f"{_TESTS}test_binned.py::test_node_coefficients_are_their_closed_forms",
        "bound: a factor of the binned sums' error bound (as node_coef)"),
    "attneb.numerics.binned:kernel_logsumexp": (
        f"{_TESTS}test_binned.py::test_log_kde_and_logsumexp_within_tolerance",
        "not measured: the binned log-sum of flow.energy (G4's runs); tested against the exact sums of "
        "numerics.kernels within its tolerance"),
    "attneb.numerics.binned:log_kde": (
        f"{_TESTS}test_binned.py::test_log_kde_and_logsumexp_within_tolerance",
        "not measured: the log-KDE at S1's probes in its threshold runs (d <= 2, many pairs); tested within its "
        "tolerance against the exact kernels.log_kde, which C2's checks are measured against"),
    "attneb.numerics.binned:plan_grid": (
        f"{_TESTS}test_binned.py::test_planned_grid_meets_its_tolerance",
        "no number: the grid's plan (spacing, cut-off); the binned sums it plans are within their tolerance of "
        "the exact ones whatever the plan, which the test measures"),
    "attneb.numerics.binned:resolve_backend": (
        f"{_TESTS}test_binned.py::test_auto_backend_rule",
        "no number: names the kernel path ('exact', 'binned', 'gpu'), whose sums agree within their tolerance"),
    "attneb.numerics.binned:spatial_order": (
        f"{_TESTS}test_binned.py::test_spatial_order_sorts_points_by_grid_cell",
        "no number: the order (a permutation) in which the binned sums visit the tokens"),
    "attneb.numerics.gpu:available": (
        f"{_TESTS}test_gpu.py::test_available_says_whether_torch_cuda_and_triton_are_there",
        "no number: whether the GPU path can run (a flag)"),
    # --- numerics.estimators, npmle: fits, Stage 2, the oracle ----------------------------------------------
    "attneb.numerics.estimators:LinearShrinkage.fit": (
        f"{_TESTS}test_estimators.py::test_linear_shrinkage_is_positive_part_james_stein_in_one_dimension", _LEARNS),
    "attneb.numerics.estimators:OracleBayes.fit": (
        f"{_TESTS}test_estimators.py::test_bad_parameters_raise_at_fit",
        "no number: fit only checks that the batch lives in the prior's dimension and returns the estimator"),
    "attneb.numerics.estimators:OracleBayes.denoise": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form",
        "not measured: the prior's posterior mean (covered for every prior) as an estimator, E4's Bayes row (C9); "
        "tested against the Gaussian closed form"),
    "attneb.numerics.estimators:StageTwoOnly.fit": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form", _LEARNS),
    "attneb.numerics.estimators:StageTwoOnly.fit_denoise": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form",
        "not measured: fit then denoise on the batch itself: a 1% error of denoise reaches it (measured), one of its "
        "own is not"),
    "attneb.numerics.estimators:TweedieKDE.fit": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form", _LEARNS),
    "attneb.numerics.estimators:TwoStageDenoiser.fit": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form", _LEARNS),
    "attneb.numerics.estimators:TwoStageDenoiser.fit_depths": (
        f"{_TESTS}test_estimators.py::test_fit_depths_equals_fitting_each_depth",
        "no number: returns fitted estimators, each equal bit for bit to fitting its depth alone (tested); what they "
        "learn reaches the report through denoise"),
    "attneb.numerics.estimators:TwoStageDenoiser.get_params": (
        f"{_TESTS}test_estimators.py::test_init_stores_arguments_only",
        "no number: the constructor's arguments, by name (fit_depths copies the estimator with them)"),
    "attneb.numerics.estimators:TwoStageDenoiser.fit_denoise": (
        f"{_TESTS}test_estimators.py::test_fit_then_denoise_is_the_closed_form",
        "not measured: fit then denoise on the batch itself: a 1% error of denoise reaches it (measured), one of its "
        "own is not"),
    "attneb.numerics.estimators:stage_two": (
        f"{_TESTS}test_estimators.py::test_stage_two_is_the_posterior_mean_of_the_empirical_prior",
        "not measured: Stage 2, whose output StageTwoOnly.denoise and TwoStageDenoiser.denoise return (their 1% errors "
        "are measured); tested against a softmax written out"),
    "attneb.numerics.npmle:NPMLE.fit": (
        f"{_TESTS}test_npmle.py::test_weights_on_the_simplex_and_prior_on_the_positive_ones", _LEARNS),
    "attneb.numerics.npmle:NPMLE.fit_denoise": (
        f"{_TESTS}test_npmle.py::test_fit_denoise_is_the_posterior_mean_of_the_fitted_prior",
        "not measured: fit then denoise on the batch itself: a 1% error of denoise reaches it (measured), one of its "
        "own is not"),
    "attneb.numerics.npmle:em_step": (
        f"{_TESTS}test_npmle.py::test_each_sqp_and_em_step_increases_the_loglik_on_the_simplex",
        "not measured: one EM update of the NPMLE's weights inside fit; tested: each step stays on the simplex and "
        "raises the log-likelihood"),
    # --- numerics.experiments: the data and E4's table ------------------------------------------------------
    "attneb.numerics.experiments:draw_batch": (
        f"{_TESTS}test_experiments.py::test_draws_follow_the_prior_and_the_noise_law",
        "not measured: the data of every experiment; tested against the prior's and the noise's laws"),
    "attneb.numerics.experiments:draw_queries": (
        f"{_TESTS}test_experiments.py::test_draws_follow_the_prior_and_the_noise_law",
        "not measured: the fresh queries of the experiments; tested against the prior's and the noise's laws"),
    "attneb.numerics.experiments:risk_records": (
        f"{_TESTS}test_estimators.py::test_risk_records_are_reproducible_and_oracle_has_no_gap",
        "not measured: E4's table of risks (C9); every number recomputed from the closed-form Bayes rule"),
    # --- numerics.flow, kernels ------------------------------------------------------------------------------
    "attneb.numerics.flow:energy": (
        f"{_TESTS}test_flow.py::test_velocity_is_minus_energy_gradient",
        "not measured: the context-induced energy of G4's and S1's runs; tested: its gradient is minus the "
        "velocity, computed apart"),
    "attneb.numerics.flow:n_layers": (
        f"{_TESTS}test_flow.py::test_layer_count_and_step",
        "no number a 1% error makes: an integer (the layer count), checked against round(T / eta)"),
    "attneb.numerics.flow:particle_flow_at": (
        f"{_TESTS}test_flow.py::test_particle_flow_at_equals_each_depths_own_flow_bit_for_bit",
        "not measured: Stage 1 of E2's and H1's grids of depths, through particle_flow (whose 1% error C3 is measured "
        "against); tested bit for bit against particle_flow at each depth"),
    "attneb.numerics.flow:velocity": (
        f"{_TESTS}test_flow.py::test_velocity_is_the_attention_step_written_out",
        "not measured: the depth-ODE field of A1's reference flow (E7); tested against a softmax written out"),
    "attneb.numerics.kernels:kernel_logsumexp": (
        f"{_TESTS}test_kernels.py::test_kernel_logsumexp_matches_scipy_logsumexp",
        "not measured: the exact log-sum of flow.energy; tested against scipy.special.logsumexp"),
    # --- numerics.meanfield: the particle measurements of G1, G2, G4, S1 ------------------------------------
    "attneb.numerics.meanfield:mixture_quantile_tokens": (
        f"{_TESTS}test_meanfield.py::test_quantile_tokens_sit_at_the_mixture_quantiles",
        "not measured: G5's starting tokens; tested: the mixture's CDF at token i is (i + 1/2)/n within 1e-14"),
    "attneb.numerics.meanfield:mode_growth_rate": (
        f"{_TESTS}test_meanfield.py::test_mode_growth_matches_linearised_rate_on_a_small_lattice",
        "not measured: S1's measured growth rate of a mode; tested against the linearised rate in closed form"),
    "attneb.numerics.meanfield:standardized_gaussian_tokens": (
        f"{_TESTS}test_meanfield.py::test_standardized_tokens_have_exactly_the_asked_moments",
        "not measured: G1's and G4's starting tokens; tested: their sample mean and variance are exactly the asked"),
    "attneb.numerics.meanfield:structure_factor": (
        f"{_TESTS}test_meanfield.py::test_structure_factor_on_a_uniform_grid_equals_the_direct_sum",
        "cancels: S1 decides on S relative to its value at depth 0 (onset.departure_depth) and on the slope of "
        "log S (onset.growth_rate_fit), where a factor cancels; tested against the direct sum"),
    "attneb.numerics.meanfield:threshold_depth": (
        f"{_TESTS}test_meanfield.py::test_threshold_depth_is_exact_for_exponential_growth",
        "not measured: S1's departure depths; tested exact on exponential growth"),
    "attneb.numerics.meanfield:token_trajectory": (
        f"{_TESTS}test_meanfield.py::test_token_trajectory_samples_the_euler_layers",
        "not measured: S1's finite-N runs; tested against Euler layers written out"),
    "attneb.numerics.meanfield:variance_horizon": (
        f"{_TESTS}test_meanfield.py::test_variance_horizon_is_the_crossing_of_euler_layers_written_out",
        "not measured: G2's measured horizons; tested against Euler layers and their crossing written out"),
    "attneb.numerics.meanfield:variance_horizon_ode": (
        f"{_TESTS}test_meanfield.py::test_continuous_horizon_matches_the_gaussian_mean_field",
        "not measured: G1's measured horizons; tested against the Gaussian mean-field horizon in closed form"),
    # --- numerics.priors: moments and samples ---------------------------------------------------------------
    **{f"attneb.numerics.priors:{cls}.{method}": (
        f"{_TESTS}test_priors.py::test_moments_are_the_closed_forms",
        "not measured: the prior's mean and variance (read by C10's checks); tested against the closed forms")
       for cls in ("Discrete", "Gaussian", "GaussianMixture", "Laplace", "StudentT", "UniformBox", "UniformSphere")
       for method in ("mean", "var", "moments")},
    "attneb.numerics.priors:Prior.moments": (
        f"{_TESTS}test_priors.py::test_moments_are_the_closed_forms",
        "not measured: the prior's mean and variance (read by C10's checks); tested against the closed forms"),
    **{f"attneb.numerics.priors:{cls}.params": (
        f"{_TESTS}test_priors_scipy_api.py::test_params_rebuild_the_prior",
        "identity: the constructor's validated arguments, returned unchanged (the sweep's specs and repr read them)")
       for cls in ("Discrete", "Gaussian", "GaussianMixture", "Laplace", "StudentT", "UniformBox", "UniformSphere")},
    **{f"attneb.numerics.priors:{cls}.sample": (
        f"{_TESTS}test_priors.py::test_samples_follow_the_law_to_a_fraction_of_a_percent",
        "not measured: the clean draws of every experiment; tested against the law's closed form")
       for cls in ("Discrete", "Gaussian", "GaussianMixture", "Laplace", "StudentT", "UniformBox", "UniformSphere")},
    # --- numerics.stats: intervals and fits -----------------------------------------------------------------
    "attneb.numerics.stats:control_variate_interval": (
        f"{_TESTS}test_stats.py::"
        "test_control_variate_interval_is_mean_interval_of_the_draws_adjusted_by_the_pilots_coefficients",
        "not measured: C10's Monte Carlo intervals; tested against least squares and a t interval written out"),
    "attneb.numerics.stats:geometric_mean_interval": (
        f"{_TESTS}test_stats.py::test_geometric_mean_interval_is_mean_interval_of_the_logs_mapped_back",
        "not measured: S1's ratio interval (stability/dimension.py); tested against scipy's gmean and t quantile"),
    "attneb.numerics.stats:group_slopes_interval": (
        f"{_TESTS}test_stats.py::test_group_slopes_interval_is_the_t_interval_of_scipy_per_group_slopes",
        "not measured: T2's slope interval; tested against scipy's per-group slopes and t quantile"),
    "attneb.numerics.stats:linear_fit": (
        f"{_TESTS}test_stats.py::test_linear_fit_is_least_squares_with_its_t_interval",
        "not measured: the fitted rates of many checks; tested against least squares and the t interval written out"),
    "attneb.numerics.stats:loglog_slope": (
        f"{_TESTS}test_stats.py::test_loglog_slope_of_a_power_law_is_its_exponent",
        "not measured: the convergence slopes of many checks; tested exact on power laws"),
    "attneb.numerics.stats:mean_interval": (
        f"{_TESTS}test_stats.py::test_mean_interval_is_scipys_t_interval",
        "not measured: the seed intervals of many checks; tested against scipy.stats.t.interval"),
    # --- numerics.sweep: specs, keys, the store -------------------------------------------------------------
    "attneb.numerics.sweep.canonical:canonical_json": (
        f"{_TESTS}test_sweep.py::test_canonical_json_is_sorted_compact_json_of_plain_values", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.canonical:plain": (
        f"{_TESTS}test_sweep.py::test_canonical_json_is_sorted_compact_json_of_plain_values",
        "identity: numpy numbers and arrays as the same Python numbers and lists"),
    "attneb.numerics.sweep.measure:run_batch": (
        f"{_TESTS}test_sweep.py::test_rows_agree_with_risk_records",
        "not measured: the rows of E1-E5's sweeps; tested: equal to experiments.risk_records, tested apart"),
    "attneb.numerics.sweep.provenance:reuse_other_code": (
        f"{_TESTS}test_provenance.py::test_the_environment_variable_asks_for_reuse",
        "no number: whether stores may use results of other code (a flag)"),
    "attneb.numerics.sweep.provenance:source_fingerprint": (
        f"{_TESTS}test_provenance.py::test_the_fingerprint_is_the_sha256_of_the_sources_written_out",
        "no number: names the code that computed a stored result (a string)"),
    "attneb.numerics.sweep.registry:EstimatorEntry.managed": (
        f"{_TESTS}test_sweep.py::test_invalid_config_names_the_field", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.registry:build_prior": (
        f"{_TESTS}test_sweep.py::test_build_prior_makes_the_family_with_its_parameters", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.registry:prior_families": (
        f"{_TESTS}test_sweep.py::test_build_prior_makes_the_family_with_its_parameters", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.runner:iter_results": (
        f"{_TESTS}test_sweep.py::test_iter_results_yields_every_task_with_its_rows",
        "not measured: hands each sweep task's rows, as run_batch computed them, to the store; tested: equal to "
        "run_batch's, in this process and through an executor"),
    "attneb.numerics.sweep.runner:run_sweep": (
        f"{_TESTS}test_sweep.py::test_rerun_skips_finished_runs", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:Experiment.from_dict": (
        f"{_TESTS}test_sweep.py::test_power_rule_and_fixed_T", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:Experiment.runs": (
        f"{_TESTS}test_sweep.py::test_power_rule_and_fixed_T",
        "not measured: the runs of a sweep (sigma2, N, seed, h2, T of each); tested against the rules written out"),
    "attneb.numerics.sweep.spec:H2Schedule.at": (
        f"{_TESTS}test_sweep.py::test_power_rule_and_fixed_T",
        "not measured: the bandwidth of each N in a sweep; tested against the power rule written out"),
    "attneb.numerics.sweep.spec:H2Schedule.parse": (
        f"{_TESTS}test_sweep.py::test_power_rule_and_fixed_T", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.batch_key": (
        f"{_TESTS}test_sweep.py::test_runs_of_one_batch_share_its_key", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.path_key": (
        f"{_TESTS}test_sweep.py::test_runs_on_a_grid_of_depths_share_stage_one_and_give_the_rows_of_their_own_runs",
        _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.build_estimator": (
        f"{_TESTS}test_sweep.py::test_rows_agree_with_risk_records", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.build_prior": (
        f"{_TESTS}test_sweep.py::test_build_prior_makes_the_family_with_its_parameters", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.key": (
        f"{_TESTS}test_sweep.py::test_golden_key", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.to_dict": (
        f"{_TESTS}test_sweep.py::test_spec_json_round_trip", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:RunSpec.to_json": (
        f"{_TESTS}test_sweep.py::test_spec_json_round_trip", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.spec:TRule.at": (
        f"{_TESTS}test_sweep.py::test_expansion_resolves_only_the_hyperparameters_each_estimator_uses",
        "not measured: the depth of each run in a sweep; tested against the leading horizon written out"),
    "attneb.numerics.sweep.spec:TRule.parse": (
        f"{_TESTS}test_sweep.py::test_power_rule_and_fixed_T", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.add": (
        f"{_TESTS}test_sweep.py::test_store_gives_back_what_was_added", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.add_record": (
        f"{_TESTS}test_sweep.py::test_records_keep_the_first_write_and_survive_reopening", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.close": (
        f"{_TESTS}test_sweep.py::test_store_gives_back_what_was_added", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.finished_keys": (
        f"{_TESTS}test_sweep.py::test_rerun_skips_finished_runs", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.record_keys": (
        f"{_TESTS}test_sweep.py::test_records_keep_the_first_write_and_survive_reopening", _NO_NUMBER_SWEEP),
    "attneb.numerics.sweep.store:ResultStore.records": (
        f"{_TESTS}test_sweep.py::test_records_keep_the_first_write_and_survive_reopening",
        "not measured: the stored records of E3, E6, E7 (S1, T1-T3, A1), given back as written; tested exact"),
    "attneb.numerics.sweep.store:ResultStore.rows": (
        f"{_TESTS}test_sweep.py::test_store_gives_back_what_was_added",
        "not measured: the stored rows of E1-E5, given back as written; tested exact"),
    # --- numerics.training, transformer ----------------------------------------------------------------------
    "attneb.numerics.training:TrainedTransformer.stage_one": (
        "tests/numerics/test_training.py::test_stage_one_is_the_construction_s_stage_one",
        "not measured: the trained network's Stage 1 (T1's figures and rows); tested against numerics.transformer"),
    "attneb.numerics.training:attend": (
        "tests/numerics/test_training.py::test_no_layers_is_one_attention_step_over_the_noisy_tokens",
        "not measured: one attention step of the trained network (its denoise is covered); tested against scipy's "
        "softmax"),
    "attneb.numerics.training:fit_transformer": (
        "tests/numerics/test_training.py::test_training_lowers_the_loss_and_is_reproducible",
        "no number: returns the trained network, whose denoise and loss are covered"),
    "attneb.numerics.training:init_params": (
        "tests/numerics/test_training.py::test_construction_equals_two_stage_transformer",
        "not measured: the starting parameters of training (and the construction); tested: the construction is "
        "numerics.transformer's two-stage transformer"),
    "attneb.numerics.training:matrices": (
        "tests/numerics/test_training.py::test_no_layers_is_one_attention_step_over_the_noisy_tokens",
        "not measured: the attention matrices of the network's parameters; tested against them written out"),
    "attneb.numerics.training:stage_one": (
        "tests/numerics/test_training.py::test_stage_one_is_the_construction_s_stage_one",
        "not measured: the trained network's Stage 1; tested against numerics.transformer"),
    "attneb.numerics.transformer:AttentionHead.gaussian": (
        "tests/numerics/test_transformer.py::test_layers_written_out_with_a_softmax",
        "not measured: builds the Gaussian head (W_Q = W_K = I / sqrt(h2), W_V = I, c = 1 / h2), whose __call__ is "
        "covered; tested: the head it builds attends as a softmax written out"),
    "attneb.numerics.transformer:ResidualAttentionLayer.__call__": (
        "tests/numerics/test_transformer.py::test_layers_written_out_with_a_softmax",
        "not measured: one residual layer of Stage 1 (C3); tested against a softmax written out"),
    "attneb.numerics.transformer:TwoStageTransformer.stage_one": (
        "tests/numerics/test_transformer.py::test_layers_written_out_with_a_softmax",
        "not measured: the transformer's Stage 1 (C3, C7); tested against layers written out"),
    # --- numerics.validation ----------------------------------------------------------------------------------
    **{f"attneb.numerics.validation:{name}": (f"{_TESTS}test_validation.py::test_{name}", _VALIDATION)
       for name in ("check_array", "check_fitted", "check_interval", "check_nonnegative", "check_nonnegative_int",
                    "check_option", "check_positive", "check_positive_int", "check_rng", "check_same_dim")},
    # --- theory: evaluators and their argument checks ----------------------------------------------------------
    "attneb.theory.anisotropic:check_depth": (
        "tests/theory/test_anisotropic.py::test_argument_checks_return_valid_values_unchanged", _VALIDATION),
    "attneb.theory.anisotropic:check_tau2s": (
        "tests/theory/test_anisotropic.py::test_argument_checks_return_valid_values_unchanged", _VALIDATION),
    "attneb.theory.anisotropic:excess_slope_at_depth": (
        "tests/theory/test_anisotropic.py::test_evaluators_agree_with_the_independent_route",
        "not measured: the slope G4's best depth is found from; tested against the independent route"),
    "attneb.theory.second_order:cumulants": (
        "tests/theory/test_second_order.py::test_a_gaussian_start_follows_the_exact_gaussian_variance_flow_to_first_order",
        "not measured: G5's predicted cumulants (a 1% error in both orders' values moves q by about 0.1, inside its "
        "tolerance); tested against the exact Gaussian variance flow to 1e-10"),
    "attneb.theory.second_order:moment_corrections": (
        "tests/theory/test_second_order.py::test_a_gaussian_start_follows_the_exact_gaussian_variance_flow_to_first_order",
        "not measured: the first-order moments behind G5's prediction; tested against the exact Gaussian variance "
        "flow to 1e-9"),
    "attneb.theory.second_order:second_order_term": (
        "tests/theory/test_second_order.py::test_the_r2_moments_match_quadrature_of_r2_substituted_by_sympy",
        "not measured: R2 of a mixture on a grid, under G5's moment corrections; tested against R2 substituted by "
        "sympy and integrated by scipy.integrate.quad, to 1e-8"),
    "attneb.theory.second_order:terms": (
        "tests/theory/test_second_order.py::test_the_terms_are_the_backward_heat_operator_and_the_papers_second_order_term",
        "no number: sympy expressions read off the mean_field derivation (which its checks decide); tested equal "
        "to -rho'' and -(1/2)(rho (rho''/rho)')'"),
    "attneb.theory.gap:gain": (
        "tests/theory/test_gap.py::test_the_gain_is_one_at_depth_zero_and_grows_with_depth",
        "not measured: the fluctuation term of G6's prediction (a question that answers no on the sphere, so no "
        "power is measured; its band moves with a 1% error by far less than its width); tested: 1 at depth 0, "
        "growing with depth and with the dimension"),
    "attneb.theory.gap:gaussian_bias": (
        "tests/theory/test_gap.py::test_the_gaussian_bias_is_that_of_the_exact_layer_map",
        "not measured: G6's Gaussian bias; tested against the exact one-layer variance map written out, to 1e-12"),
    "attneb.theory.gap:inverse_effective_tokens": (
        "tests/theory/test_gap.py::test_the_inverse_effective_tokens_is_that_of_the_kernel_weights",
        "not measured: the width of G6's variance band; tested against the kernel weights of sampled tokens, "
        "within 10%"),
    "attneb.theory.gap:mean_field_bias": (
        "tests/theory/test_gap.py::test_the_mean_field_bias_of_a_gaussian_tends_to_the_exact_one_within_its_stated_error",
        "not measured: G6's bias of the mixtures; tested against the Gaussian's exact bias, its error shrinking "
        "with the tokens and within its stated |B - B_half|"),
    "attneb.theory.gap:variance": (
        "tests/theory/test_gap.py::test_the_stage_two_variance_is_that_of_stage_two_over_independent_tokens",
        "not measured: G6's Stage-2 variance of the 1-D priors; tested against Stage 2 run over 300 samples"),
    "attneb.theory.gap_sphere:bayes_radius": (
        "tests/theory/test_gap_sphere.py::test_bayes_is_the_uniform_spheres_posterior_mean",
        "not measured: the sphere's Bayes rule in G6's bias; tested against numerics.priors.UniformSphere to 1e-10"),
    "attneb.theory.gap_sphere:mean_field_bias": (
        "tests/theory/test_gap_sphere.py::test_the_mean_field_bias_converges_in_the_shells_and_shrinks_with_h2",
        "not measured: G6's bias of the sphere; tested: converged in the shells to 1%, and Stage 2 alone (depth 0) "
        "against E1's measured gaps by benchmarks/sphere_gap.py (reported)"),
    "attneb.theory.gap_sphere:noisy_radial_density": (
        "tests/theory/test_gap_sphere.py::test_the_noisy_radial_density_has_mass_one_and_second_moment_r2_plus_3v",
        "not measured: the query density of G6's sphere terms; tested: mass 1 and second moment R^2 + 3 v to 1e-9"),
    "attneb.theory.gap_sphere:shell_kernel_mean": (
        "tests/theory/test_gap_sphere.py::test_the_shell_kernel_mean_is_the_kernel_mean_of_the_shells",
        "not measured: the shells' kernel mean behind G6's sphere bias; tested against quadrature over the sphere "
        "to 1e-9"),
    "attneb.theory.gap_sphere:variance": (
        "tests/theory/test_gap_sphere.py::test_the_stage_two_variance_is_that_of_stage_two_over_samples_of_the_sphere",
        "not measured: G6's Stage-2 variance of the sphere; tested against Stage 2 run over 300 samples of the "
        "sphere, within 15%"),
    "attneb.theory.gaussian:stage2_bandwidth_family": (
        "tests/theory/test_evaluators.py::test_stage2_family_makes_attention_over_gaussian_tokens_the_bayes_rule",
        "not measured: T1's Bayes family of Stage-2 bandwidths; tested: it makes attention the Bayes rule"),
    # --- theory: derivations and the checker ---------------------------------------------------------------------
    **{f"attneb.theory.{name}:derivation": (f"tests/theory/test_registry.py::test_derivation_checks[{name}]",
                                            _DERIVATION)
       for name in ("anisotropic", "attention", "depth_noise", "depth_ode", "energy", "gaussian", "mean_field",
                    "stability", "stage2", "tweedie")},
    "attneb.theory.derivation:CheckReport.methods": (
        "tests/theory/test_framework.py::test_check_report_and_text", _CHECKER),
    "attneb.theory.derivation:CheckReport.passed": (
        "tests/theory/test_framework.py::test_check_report_and_text", _CHECKER),
    "attneb.theory.derivation:ClaimedForm.reason": (
        "tests/theory/test_framework.py::test_claimed_form_names_its_quantity_and_checks_its_fields", _CHECKER),
    "attneb.theory.derivation:ClaimedForm.relation": (
        "tests/theory/test_framework.py::test_claimed_form_names_its_quantity_and_checks_its_fields", _CHECKER),
    **{f"attneb.theory.derivation:ClaimedForm.{name}": (
        "tests/theory/test_framework.py::test_claimed_form_names_its_quantity_and_checks_its_fields", _CHECKER)
       for name in ("derived", "typed")},
    "attneb.theory.derivation:Derivation.check": (
        "tests/theory/test_mutations.py::test_mutated_claim_fails_the_whole_check", _CHECKER),
    "attneb.theory.derivation:Derivation.check_item": (
        "tests/theory/test_framework.py::test_with_step_copies", _CHECKER),
    "attneb.theory.derivation:Derivation.item": (
        "tests/theory/test_framework.py::test_items_are_addressed_by_kind_and_index", _CHECKER),
    "attneb.theory.derivation:Derivation.items": (
        "tests/theory/test_framework.py::test_check_report_and_text", _CHECKER),
    "attneb.theory.derivation:Derivation.result_of": (
        "tests/theory/test_framework.py::test_result_of",
        "no number: the right side of a result, a sympy expression the evaluators (covered) are built from"),
    "attneb.theory.derivation:StepCheck.passed": (
        "tests/theory/test_framework.py::test_with_step_copies", _CHECKER),
    "attneb.theory.derivation:check_equation": (
        "tests/theory/test_framework.py::test_false_equation_fails", _CHECKER),
    "attneb.theory:derivation_module": (
        "tests/theory/test_registry.py::test_each_name_finds_its_module_and_its_derivation",
        "no number: looks a derivation's module up by name"),
    "attneb.theory:get_derivation": (
        "tests/theory/test_registry.py::test_each_name_finds_its_module_and_its_derivation",
        "no number: looks a derivation up by name"),
    "attneb.theory:list_derivations": (
        "tests/theory/test_registry.py::test_registry_names", "no number: the derivations' names"),
}


def coverage_map() -> dict[str, list[str]]:
    """Function -> the gating checks (``"claim: check"``) that declare they cover it (a superseded one does not)."""
    covered = defaultdict(list)
    for claim in CLAIMS.values():
        for chk in (c for c in claim.checks if c.gating):
            for target in chk.covers:
                covered[target].append(f"{claim.id}: {chk.name}")
    return dict(sorted(covered.items()))


def uncovered() -> list[str]:
    """Functions of :data:`REPORT_FUNCTIONS` that no gating check covers and :data:`TESTED_APART` does not list."""
    covered = coverage_map()
    return [target for target in REPORT_FUNCTIONS if target not in covered and target not in TESTED_APART]
