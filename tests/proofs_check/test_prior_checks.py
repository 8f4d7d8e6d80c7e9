"""C10 checks of :mod:`proofs_check.prior_checks`: they pass on the real priors and fail on broken ones.

The Monte Carlo of the risk check is measured once per module (``shared``): a broken ``mmse`` or a
swapped theory changes only the decision, which is made again on the cached draws, as the power
analysis does for theory alternatives. A broken posterior mean changes the measurement itself and
runs in a fresh context.
"""

import dataclasses

import numpy as np
import pytest

from numerics import priors
from proofs_check import convergence_checks, coverage, prior_checks
from proofs_check.registry import CLAIMS, Context

CHECKS = {chk.func.__name__: chk for chk in CLAIMS["C10"].checks if chk.func.__module__ == prior_checks.__name__}
TWEEDIE = ("tweedie_all_priors", "tweedie_finite_differences")
RISK = "bayes_risk_all_priors"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One quick context whose cache holds the measurements of every check on the real priors."""
    return Context(quick=True, out=tmp_path_factory.mktemp("prior-checks"))


def fresh(tmp_path):
    return Context(quick=True, out=tmp_path)


def _at_double_bandwidth(real):
    return lambda self, xt, sigma2: real(self, xt, 2 * sigma2)


def _one_percent_off(real):
    return lambda self, *args, **kwargs: _scaled(real(self, *args, **kwargs))


def _scaled(value):
    if isinstance(value, priors.RiskEstimate):
        return dataclasses.replace(value, value=1.01 * value.value)
    return 1.01 * value


def test_the_checks_are_registered_under_c10():
    assert set(CHECKS) == {*TWEEDIE, RISK}
    assert all(chk.replication == "seeds" and chk.criterion for chk in CHECKS.values())


@pytest.mark.parametrize("name", [*TWEEDIE, RISK])
def test_checks_pass_on_the_real_priors(shared, name):
    evidence = CHECKS[name].func(shared)
    assert evidence.passed, evidence.summary
    rows = evidence.data["per_prior"]
    assert len(rows) == len(prior_checks.REFERENCE_PRIORS) * len(prior_checks.SIGMA2S)
    assert all(np.isfinite(row["tolerance"]) and row["tolerance"] > 0 for row in rows.values())


def test_reference_priors_are_those_of_the_estimator_table():
    built = {part: getattr(priors, config["family"])(**{k: v for k, v in config.items() if k != "family"})
             for part, (_, config) in convergence_checks.TABLE_PRIORS.items()}
    for part, prior in built.items():
        label, ours = prior_checks.REFERENCE_PRIORS[part]
        assert label == convergence_checks.TABLE_PRIORS[part][0]
        assert repr(ours) == repr(prior)
    assert repr(prior_checks.REFERENCE_PRIORS["sphere-3d"][1]) == "UniformSphere(dim=3, radius=1.0)"


def test_every_prior_method_is_covered_by_these_checks():
    covered = {target for chk in CHECKS.values() for target in chk.covers}
    assert set(coverage.REPORT_FUNCTIONS["priors"]) <= covered


def test_fresh_seeds_give_new_points(shared):
    first = prior_checks._measured(shared, "score")
    other = prior_checks._measured(dataclasses.replace(shared, replicate=1, cache={}), "score")
    key = ("sphere", 0.5)
    assert not np.array_equal(first[key]["xt"], other[key]["xt"])


@pytest.mark.parametrize("name", [*TWEEDIE, RISK])
def test_checks_fail_under_every_wrong_theory(shared, name):
    """Theory alternatives decide again on the cached measurements of the real run."""
    chk = CHECKS[name]
    chk.func(shared)  # measure (or reuse)
    theories = [alt for alt in chk.wrong_theories() if alt.kind == "theory"]
    assert theories
    for alt in theories:
        with alt.applied():
            assert not chk.func(shared).passed, alt.name


@pytest.mark.parametrize(
    ("cls", "method", "wrong"),
    [
        (priors.UniformSphere, "_posterior_mean", _at_double_bandwidth),
        (priors.UniformBox, "_noisy_score", _one_percent_off),
        (priors.Discrete, "_posterior_mean", _one_percent_off),
        (priors.Laplace, "_noisy_score", _one_percent_off),
    ],
)
def test_tweedie_fails_for_a_broken_prior(monkeypatch, tmp_path, cls, method, wrong):
    monkeypatch.setattr(cls, method, wrong(getattr(cls, method)))
    assert not CHECKS["tweedie_all_priors"].func(fresh(tmp_path)).passed


@pytest.mark.parametrize(
    ("cls", "method", "wrong"),
    [
        (priors.GaussianMixture, "_posterior_mean", _at_double_bandwidth),
        (priors.Laplace, "_noisy_logpdf", _one_percent_off),
        (priors.UniformBox, "_noisy_logpdf", _one_percent_off),
        (priors.Gaussian, "_posterior_mean", _one_percent_off),
    ],
)
def test_finite_difference_tweedie_fails_for_a_broken_prior(monkeypatch, tmp_path, cls, method, wrong):
    monkeypatch.setattr(cls, method, wrong(getattr(cls, method)))
    assert not CHECKS["tweedie_finite_differences"].func(fresh(tmp_path)).passed


@pytest.mark.parametrize("cls", [priors.Laplace, priors.UniformBox, priors.Discrete])
def test_risk_check_fails_for_an_mmse_one_percent_off(monkeypatch, shared, cls):
    CHECKS[RISK].func(shared)  # measure (or reuse): mmse does not enter the measurement
    monkeypatch.setattr(cls, "_mmse", _one_percent_off(cls._mmse))
    evidence = CHECKS[RISK].func(shared)
    assert not evidence.passed
    failed = {row for row, r in evidence.data["per_prior"].items() if not r["passed"]}
    assert failed and all(type(prior_checks.REFERENCE_PRIORS[row.split()[0]][1]) is cls for row in failed)


def test_risk_check_fails_for_a_posterior_mean_at_double_bandwidth(monkeypatch, tmp_path):
    """A new measurement: sized to detect 5% (not 1%) errors to stay fast; the box's risk moves by more."""
    monkeypatch.setattr(prior_checks, "RISK_DETECT", 0.05)
    monkeypatch.setattr(priors.UniformBox, "_posterior_mean", _at_double_bandwidth(priors.UniformBox._posterior_mean))
    evidence = CHECKS[RISK].func(fresh(tmp_path))
    assert not evidence.passed
    failed = {row for row, r in evidence.data["per_prior"].items() if not r["passed"]}
    assert failed == {"box sigma2=0.5", "box sigma2=2.0"}
