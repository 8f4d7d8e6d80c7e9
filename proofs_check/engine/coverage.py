"""Which verify checks cover each public function whose output feeds a number in the report.

A check covers a function when a 1% error in the function's output (every number it returns
times 1.01, :func:`attneb.proofs_check.engine.registry.scaled_output`) makes the check fail. Checks declare the
functions they cover (``covers=`` in :func:`~attneb.proofs_check.engine.registry.check`); the power analysis runs
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
        "attneb.numerics.kernels:kernel_mean",
        "attneb.numerics.kernels:log_kde",
        "attneb.numerics.kernels:kde_score",
        "attneb.numerics.binned:kernel_mean",
        "attneb.numerics.binned:kde_score",
        "attneb.numerics.flow:particle_flow",
        "attneb.numerics.flow:leading_horizon",
    ),
    "priors": tuple(f"attneb.numerics.priors:{cls}.{method}" for cls in _PRIORS for method in _PRIOR_METHODS),
    "estimators and baselines": (
        "attneb.numerics.estimators:TwoStageDenoiser.denoise",
        "attneb.numerics.estimators:StageTwoOnly.denoise",
        "attneb.numerics.estimators:TweedieKDE.denoise",
        "attneb.numerics.estimators:LinearShrinkage.denoise",
        "attneb.numerics.npmle:NPMLE.denoise",
        "attneb.numerics.transformer:AttentionHead.__call__",
        "attneb.numerics.transformer:TwoStageTransformer.__call__",
    ),
    "explicit-schedule comparators (E7)": (
        "attneb.numerics.schedules:oracle_reverse_flow",
        "attneb.numerics.schedules:annealed_flow",
    ),
    "trained networks": (
        "attneb.numerics.training:TrainedTransformer.denoise",
        "attneb.numerics.training:loss_and_gradient",
    ),
    "theory evaluators": (
        "attneb.theory.depth_noise:leading_horizon",
        "attneb.theory.depth_noise:gaussian_horizon",
        "attneb.theory.depth_noise:gaussian_layers_fractional",
        "attneb.theory.depth_noise:gaussian_variance_map",
        "attneb.theory.depth_noise:anisotropic_depth",
        "attneb.theory.anisotropic:excess_at_depth",
        "attneb.theory.anisotropic:variances_at_depth",
        "attneb.theory.stability:growth_rate",
        "attneb.theory.stability:fastest_mode",
        "attneb.theory.stability:token_scaling",
    ),
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
    """Functions of :data:`REPORT_FUNCTIONS` that no check covers."""
    covered = coverage_map()
    return [target for group in REPORT_FUNCTIONS.values() for target in group if target not in covered]
