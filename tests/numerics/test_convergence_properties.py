r"""Property-based convergence tests of the two-stage denoiser (issue 4, part 5).

For every drawn well-behaved case ``(prior, sigma2)`` (:func:`tests.strategies.prior_and_noise`):

* the gap to Bayes, :math:`\frac{1}{Nd}\sum_i\lVert\hat x_i - E[x\mid\tilde x_i]\rVert^2`, is smaller
  at the larger ``N`` than at the smaller ``N``;
* the two-stage estimator has a smaller gap than :class:`StageTwoOnly` (no Stage 1).

Margins come from seeds, never from a hand-picked tolerance: over ``S`` seeds the paired
per-seed differences ``d_s`` (e.g. ``gap(N_small, s) - gap(N_large, s)``; seed ``s`` gives the
batch ``draw_batch(prior, sigma2, N, s)``) must have the lower end of their 95% Student-t
interval (:func:`attneb.numerics.stats.mean_interval`, i.e. a one-sided 97.5% bound) above 0. Given a
drawn case the test is deterministic (fixed seeds), so a failing example replays exactly from
Hypothesis's example database (``.hypothesis/``).

Bandwidth schedule. ``T`` is the depth-noise rule ``T = sigma2 / (2 h2)`` (``T=None``) and
``h2 = sigma2 * N**(-1/4)`` (relative to ``sigma2``, so the case is scale invariant), i.e.
``T = N**(1/4) / 2``. The toolkit's stability bound asks for ``N >> exp(2 sigma2 / (e h2))
= exp(2 N**(1/4) / e)`` (finite-N clumping otherwise); with this schedule the ratio
``N / exp(2 N**(1/4) / e)`` is 10.8 at N = 128, 15.6 at 512, 16 at 1024 and 14.7 at 2048, and
falls below 10 only past N ~ 8000, so every N used here is in the regime
(:func:`_check_regime` asserts a ratio >= 8). A constant in front of the schedule below 1 leaves
the regime at N = 128 (``c = 0.5``: bound ~ 140 > N).

Default run: gap at ``N = 128`` vs ``1024`` over 16 seeds, two-stage vs StageTwoOnly at ``N = 512``
over 6 seeds, 3 drawn examples each plus one explicit; ``@pytest.mark.slow``: ``N = 256`` vs ``1024`` over 24 seeds (and
the comparison at 1024 over 8), 10 examples, priors on ``R^2`` as well. Not 2048: on the box
``[0, 1]`` with ``sigma2 = 1/12`` the gap stops falling past N = 1024 with this schedule (12
seeds: 0.0041, 0.0026, 0.0018, 0.00082 [0.00061, 0.00103], 0.00104 [0.00083, 0.00124] at N = 128
... 2048), so ``256`` vs ``2048`` fails there; that plateau is a finding about the schedule
``h2 = sigma2 N**(-1/4)`` (open), not something a tolerance should hide. Fewer seeds or a smaller
ratio of sizes were too weak, not wrong: ``128`` vs ``512`` over 6 seeds on a Gaussian prior with
``sigma2 = Var`` (gap 0.032 -> 0.017), and ``128`` vs ``1024`` over 6 seeds on the mixture
``means 0, 1; weights 4/7, 3/7; var 0.1`` at ``sigma2 = 0.345``, whose per-seed gaps are heavy
tailed (16 seeds: 0.0130, 0.0056, 0.0067, 0.0048 at N = 128, 256, 512, 1024; paired
difference 128 - 1024 = 0.0082 [0.0041, 0.0123]), did not resolve the fall (nor did 10 seeds on the same
mixture with its components listed in the other order: 0.0049 [-0.0006, 0.0104]).

Noise level. ``sigma2 / max_i Var(x_i)`` is drawn in ``[0.5, 2]`` (:data:`NOISE_RATIO`). Below that,
on smooth unimodal priors, the two-stage estimator genuinely does NOT beat StageTwoOnly at these N
with this schedule (Gaussian prior, ``Var = 1``, N = 512, 6 seeds: gaps 0.00145 vs 0.00072 at
``sigma2 = 0.1``, 0.0031 vs 0.0021 at 0.2, tie at 0.3, 0.0070 vs 0.0145 at 0.5): the attention
over the dense noisy batch is already close to Bayes there, and Stage 1 (depth ``N**(1/4)/2``,
independent of ``sigma2``) over-contracts. Boxes, spheres and separated mixtures still win at 0.1.

Pinned reference values (``tests/data/convergence_reference.json``, written only by
``python -m tests.regenerate_reference``) make the small experiments regression tests.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings

from attneb.numerics.estimators import StageTwoOnly, TwoStageDenoiser
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import GaussianMixture
from attneb.numerics.stats import mean_interval
from tests import regenerate_reference
from tests.strategies import prior_and_noise, well_behaved_priors

LEVEL = 0.95  # two-sided; the lower end is a one-sided 97.5% bound
REGIME_RATIO = 8.0  # N / exp(2 sigma2 / (e h2)) required of every batch size used
FAST = dict(n_small=128, n_large=1024, n_compare=512, seeds=range(16), compare_seeds=range(6))
SLOW = dict(n_small=256, n_large=1024, n_compare=1024, seeds=range(24), compare_seeds=range(8))
# sigma2 / max_i Var(x_i): see the module docstring for why not below 0.5
NOISE_RATIO = (0.5, 2.0)


def h2_schedule(sigma2: float, n: int) -> float:
    """``h2 = sigma2 * n**(-1/4)``: see the module docstring (same as the pinned reference)."""
    return regenerate_reference._h2(sigma2, n)


def _check_regime(sigma2: float, n: int) -> None:
    bound = math.exp(2.0 * sigma2 / (math.e * h2_schedule(sigma2, n)))
    assert n >= REGIME_RATIO * bound, f"N = {n} is not >> exp(2 sigma2/(e h2)) = {bound:.3g}"


def _gaps(prior, sigma2: float, n: int, seeds) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed gap to Bayes of the two-stage estimator and of StageTwoOnly, shape ``(S,)`` each."""
    _check_regime(sigma2, n)
    h2 = h2_schedule(sigma2, n)
    two_stage, stage_two = [], []
    for seed in seeds:
        _, noisy = draw_batch(prior, sigma2, n, seed)
        bayes = prior.posterior_mean(noisy, sigma2)
        two_stage.append(np.mean((TwoStageDenoiser(sigma2, h2).fit_denoise(noisy) - bayes) ** 2))
        stage_two.append(np.mean((StageTwoOnly(sigma2).fit_denoise(noisy) - bayes) ** 2))
    return np.array(two_stage), np.array(stage_two)


def _assert_positive(diffs: np.ndarray, what: str) -> None:
    interval = mean_interval(diffs, LEVEL)
    assert interval.low > 0, f"{what}: paired differences {interval}, lower end not > 0; diffs={diffs}"


def _check_gap_decreases(case, n_small, n_large, seeds) -> None:
    prior, sigma2 = case
    small, _ = _gaps(prior, sigma2, n_small, seeds)
    large, _ = _gaps(prior, sigma2, n_large, seeds)
    _assert_positive(small - large, f"gap(N={n_small}) - gap(N={n_large}) for {prior!r}, sigma2={sigma2:.4g}")


def _check_beats_stage_two(case, n, seeds) -> None:
    prior, sigma2 = case
    two_stage, stage_two = _gaps(prior, sigma2, n, seeds)
    _assert_positive(stage_two - two_stage, f"gap(StageTwoOnly) - gap(two-stage) at N={n} for {prior!r}, sigma2={sigma2:.4g}")


# Health check: each example fits two estimators on several batches (about 1 s), by design.
_fast = settings(max_examples=3, suppress_health_check=[HealthCheck.too_slow])
_slow = settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow])


# Cases found by Hypothesis while these tests were written, kept as explicit examples so they
# run on every profile (the ``ci`` profile is derandomized and has no example database).
# (the same prior with its components listed in the other order failed at 10 seeds: other batches)
HEAVY_TAILED_MIXTURE = (GaussianMixture([[1.0], [0.0]], [3 / 7, 4 / 7], var=0.1), 0.34489795918367344)
LOW_NOISE_GAUSSIAN = (GaussianMixture([[0.0]], [1.0], var=1.0), 0.5)  # the edge of NOISE_RATIO


@pytest.mark.slow  # about 38 s on 2 cores (its examples run up to N = 4096 on the exact path)
@_fast
@given(prior_and_noise(ratio=NOISE_RATIO))
@example(HEAVY_TAILED_MIXTURE)
def test_gap_to_bayes_decreases_with_n(case):
    _check_gap_decreases(case, FAST["n_small"], FAST["n_large"], FAST["seeds"])


@_fast
@given(prior_and_noise(ratio=NOISE_RATIO))
@example(LOW_NOISE_GAUSSIAN)
def test_two_stage_beats_stage_two_only(case):
    _check_beats_stage_two(case, FAST["n_compare"], FAST["compare_seeds"])


@pytest.mark.slow
@_slow
@given(prior_and_noise(well_behaved_priors(1) | well_behaved_priors(2), ratio=NOISE_RATIO))
def test_gap_to_bayes_decreases_with_n_large(case):
    _check_gap_decreases(case, SLOW["n_small"], SLOW["n_large"], SLOW["seeds"])


@pytest.mark.slow
@_slow
@given(prior_and_noise(well_behaved_priors(1) | well_behaved_priors(2), ratio=NOISE_RATIO))
def test_two_stage_beats_stage_two_only_large(case):
    _check_beats_stage_two(case, SLOW["n_compare"], SLOW["compare_seeds"])


def test_schedule_is_in_the_stable_regime():
    for n in (FAST["n_small"], FAST["n_large"], SLOW["n_small"], SLOW["n_large"]):
        _check_regime(1.0, n)
    with pytest.raises(AssertionError, match="not >>"):
        _check_regime(1.0, 10**6)  # the N**(-1/4) schedule leaves the regime at very large N


def test_paired_interval_rejects_no_improvement():
    """The margin check can fail: equal gaps (d = 0 +- noise) are not an improvement."""
    rng = np.random.default_rng(0)
    with pytest.raises(AssertionError, match="lower end not > 0"):
        _assert_positive(rng.normal(0.0, 1e-3, size=6), "pure noise")


# --- pinned reference values ---------------------------------------------------------------

# Tolerance: the same code and seeds on another BLAS/CPU differ only by rounding in the kernel
# matrix products (~1e-16 relative per operation), accumulated over the O(50) Stage-1 layers;
# rtol 1e-9 leaves many orders of magnitude for that and still catches any change of the
# numerics. The oracle's gap is exactly 0 (it is the reference), hence the tiny atol.
RTOL, ATOL = 1e-9, 1e-15


def _pinned() -> dict:
    return json.loads(regenerate_reference.PATH.read_text())


def test_pinned_reference_file_matches_configurations():
    data = _pinned()
    assert data["format_version"] == regenerate_reference.FORMAT_VERSION
    assert data["metadata"]["command"] == "python -m tests.regenerate_reference"
    assert sorted(data["configs"]) == sorted(regenerate_reference.CONFIGS)


@pytest.mark.parametrize("name", sorted(regenerate_reference.CONFIGS))
def test_pinned_reference_values(name):
    """Recompute a small experiment and compare with the pinned file.

    A failure means the numbers changed. If the change was intended, regenerate with
    ``python -m tests.regenerate_reference`` and commit the file with the change; otherwise it is
    a regression.
    """
    expected = _pinned()["configs"][name]
    actual = regenerate_reference.compute(name)
    for key in ("prior", "n", "seed"):
        assert actual[key] == expected[key], key
    for key in ("sigma2", "h2", "T"):
        assert actual[key] == pytest.approx(expected[key], rel=RTOL, abs=ATOL), key
    assert sorted(actual["results"]) == sorted(expected["results"])
    for est, values in expected["results"].items():
        for metric, value in values.items():
            got = actual["results"][est][metric]
            assert got == pytest.approx(value, rel=RTOL, abs=ATOL), f"{name}: {est} {metric} {got!r} != pinned {value!r}"
    # the pinned configurations themselves show the properties under test
    res = expected["results"]
    assert res["two-stage"]["gap"] < res["stage-two-only"]["gap"]
    assert res["oracle"]["mse"] <= min(res["two-stage"]["mse"], res["stage-two-only"]["mse"])
