"""Which verify checks cover each public function whose output feeds a number in the report.

A check covers a function when a 1% error in the function's output (every number it returns
times 1.01, :func:`proofs_check.registry.scaled_output`) makes the check fail. Checks declare the
functions they cover (``covers=`` in :func:`~proofs_check.registry.check`); the power analysis runs
each declared 1% error as an alternative, so every declaration is measured, not assumed.
:data:`REPORT_FUNCTIONS` lists what must be covered.
"""

from __future__ import annotations

from collections import defaultdict

from .registry import CLAIMS

__all__ = ["REPORT_FUNCTIONS", "coverage_map", "uncovered"]

_PRIORS = ("Gaussian", "GaussianMixture", "Discrete", "UniformSphere", "UniformBox", "Laplace", "StudentT")
_PRIOR_METHODS = ("noisy_logpdf", "noisy_score", "posterior_mean", "mmse")

#: Public functions whose output feeds a number in the report, by group.
REPORT_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "kernel sums and densities": (
        "numerics.kernels:kernel_mean",
        "numerics.kernels:log_kde",
        "numerics.kernels:kde_score",
        "numerics.binned:kernel_mean",
        "numerics.binned:kde_score",
        "numerics.flow:particle_flow",
        "numerics.flow:leading_horizon",
    ),
    "priors": tuple(f"numerics.priors:{cls}.{method}" for cls in _PRIORS for method in _PRIOR_METHODS),
    "estimators and baselines": (
        "numerics.estimators:TwoStageDenoiser.denoise",
        "numerics.estimators:StageTwoOnly.denoise",
        "numerics.estimators:TweedieKDE.denoise",
        "numerics.estimators:LinearShrinkage.denoise",
        "numerics.npmle:NPMLE.denoise",
        "numerics.transformer:AttentionHead.__call__",
        "numerics.transformer:TwoStageTransformer.__call__",
    ),
    "explicit-schedule comparators (E7)": (
        "numerics.schedules:oracle_reverse_flow",
        "numerics.schedules:annealed_flow",
    ),
    "trained networks": (
        "numerics.training:TrainedTransformer.denoise",
        "numerics.training:loss_and_gradient",
    ),
    "theory evaluators": (
        "theory.depth_noise:leading_horizon",
        "theory.depth_noise:gaussian_horizon",
        "theory.depth_noise:gaussian_layers_fractional",
        "theory.depth_noise:gaussian_variance_map",
        "theory.depth_noise:anisotropic_depth",
        "theory.anisotropic:excess_at_depth",
        "theory.anisotropic:variances_at_depth",
        "theory.stability:growth_rate",
        "theory.stability:fastest_mode",
        "theory.stability:token_scaling",
    ),
}


def coverage_map() -> dict[str, list[str]]:
    """Function -> the checks (``"claim: check"``) that declare they cover it."""
    covered = defaultdict(list)
    for claim in CLAIMS.values():
        for chk in claim.checks:
            for target in chk.covers:
                covered[target].append(f"{claim.id}: {chk.name}")
    return dict(sorted(covered.items()))


def uncovered() -> list[str]:
    """Functions of :data:`REPORT_FUNCTIONS` that no check covers."""
    covered = coverage_map()
    return [target for group in REPORT_FUNCTIONS.values() for target in group if target not in covered]
