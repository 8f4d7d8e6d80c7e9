"""Alternatives, the power analysis and its report: the machinery that shows every check can fail."""

from __future__ import annotations

import dataclasses
import json
import sys
import types

import numpy as np
import pytest

from attneb.numerics import priors
from attneb.proofs_check import cli
from attneb.proofs_check.engine import power, registry
from attneb.proofs_check.engine.coverage import REPORT_FUNCTIONS
from attneb.proofs_check.engine.registry import (
    CLAIMS,
    Context,
    Evidence,
    alternative,
    check,
    claim,
    scaled_output,
    swap,
)
from attneb.proofs_check.engine.runner import select


@pytest.fixture
def toy_registry():
    """Register toy claims in a scratch module; the registry is restored afterwards."""
    saved = {cid: list(c.checks) for cid, c in CLAIMS.items()}
    module = types.ModuleType("attneb_toy")
    module.threshold = 0.5
    module.offset = lambda: 0.0
    sys.modules["attneb_toy"] = module
    yield module
    for cid in list(CLAIMS):
        if cid not in saved:
            del CLAIMS[cid]
        else:
            CLAIMS[cid].checks[:] = saved[cid]
    del sys.modules["attneb_toy"]


def test_swap_replaces_and_restores_module_and_class_attributes():
    real_mean = priors.Discrete.posterior_mean
    assert "posterior_mean" not in priors.Discrete.__dict__  # inherited from Prior
    wrong = alternative("x", "y", swap("attneb.numerics.priors:Discrete.posterior_mean", lambda real: lambda self, *a: 0.0),
                        swap("attneb.numerics.priors:_TINY", lambda real: 1.0), kind="implementation")
    with wrong.applied():
        assert priors.Discrete(np.zeros((1, 1))).posterior_mean(np.zeros((1, 1)), 1.0) == 0.0
        assert priors._TINY == 1.0
    assert priors.Discrete.posterior_mean is real_mean and "posterior_mean" not in priors.Discrete.__dict__
    assert priors._TINY == np.finfo(float).tiny


def test_swap_is_restored_when_the_check_raises():
    real = priors._TINY
    with pytest.raises(RuntimeError), alternative("x", "y", swap("attneb.numerics.priors:_TINY", lambda r: 2.0)).applied():
        raise RuntimeError
    assert priors._TINY == real


@pytest.mark.parametrize("target, match", [
    ("attneb.numerics.priors", "must read 'package.module:attribute'"),
    ("attneb.numerics.priors:Nope.x", "has no attribute 'Nope'"),
    ("attneb.numerics.priors:nothing", "has no attribute 'nothing'"),
    ("attneb.numerics.nonexistent:x", "No module named"),
])
def test_bad_swap_targets_are_named(target, match):
    with pytest.raises((ValueError, AttributeError, ImportError), match=match), \
            alternative("x", "y", swap(target, lambda r: r)).applied():
        pass


def test_alternative_arguments_are_checked():
    with pytest.raises(ValueError, match="kind == 'other'"):
        alternative("x", "y", swap("a:b", lambda r: r), kind="other")
    with pytest.raises(ValueError, match="swaps nothing"):
        alternative("x", "y")


def test_scaled_output_scales_every_number():
    @dataclasses.dataclass(frozen=True)
    class Result:
        value: float
        method: str

    module = types.ModuleType("attneb_scaled")
    module.f = lambda: (2.0, np.ones(2), [Result(1.0, "exact")], "text", None, True)
    sys.modules["attneb_scaled"] = module
    try:
        with scaled_output("attneb_scaled:f", 1.5).applied():
            number, array, [result], text, nothing, flag = module.f()
    finally:
        del sys.modules["attneb_scaled"]
    assert number == 3.0 and np.all(array == 1.5) and result == Result(1.5, "exact")
    assert (text, nothing, flag) == ("text", None, True)
    assert scaled_output("attneb.numerics.kernels:kernel_mean").name == "+1% error in attneb.numerics.kernels:kernel_mean"


def test_seeds_of_replicates():
    ctx = Context(quick=True, out=None)
    assert ctx.fresh_seeds([3, 4]) == [3, 4]
    again = dataclasses.replace(ctx, replicate=2)
    assert again.fresh_seeds([3, 4]) == [3 + 2 * registry.SEED_STRIDE, 4 + 2 * registry.SEED_STRIDE]
    pooled = dataclasses.replace(ctx, pool=4)
    assert pooled.pool_seeds(5, start=10) == list(range(10, 30))
    assert pooled.subsample_seeds(5, start=10) == list(range(10, 15))
    subsets = [dataclasses.replace(pooled, replicate=r).subsample_seeds(5, start=10) for r in range(1, 30)]
    assert all(len(set(s)) == 5 and set(s) <= set(range(10, 30)) for s in subsets)
    assert len({tuple(s) for s in subsets}) > 20
    assert subsets[0] == dataclasses.replace(pooled, replicate=1).subsample_seeds(5, start=10)


def _register_toy_checks(module):
    claim("Z1", "toy", "a toy claim")

    @check("Z1", "deterministic", criterion="offset() == 0",
           alternatives=[alternative("offset 1", "offset 1", swap("attneb_toy:offset", lambda r: (lambda: 1.0)))])
    def deterministic(ctx):
        return Evidence(module.offset() == 0, "identity", "toy")

    @check("Z1", "random", criterion="a uniform draw below threshold", replication="seeds",
           alternatives=[alternative("threshold 0", "always rejected", swap("attneb_toy:threshold", lambda r: 0.0)),
                         alternative("raises", "a broken routine", swap("attneb_toy:offset", lambda r: None),
                                     kind="implementation")])
    def random(ctx):
        [seed] = ctx.fresh_seeds([0])
        module.offset()
        return Evidence(bool(np.random.default_rng(seed).uniform() < module.threshold), "interval", "toy")

    @check("Z1", "never fails", criterion="always passes", replication="seeds",
           alternatives=[alternative("anything", "anything", swap("attneb_toy:threshold", lambda r: 0.0))])
    def never(ctx):
        return Evidence(True, "identity", "toy")


def test_power_counts_failures_under_the_truth_and_each_alternative(toy_registry, tmp_path):
    _register_toy_checks(toy_registry)
    results = {r.check.name: r for r in power.analyse(["Z1"], quick=True, out=tmp_path, progress=False,
                                                      replicates={"seeds": 40})}
    det = results["deterministic"]
    assert (det.replicates, det.size.count, det.power["offset 1"][1].rate) == (1, 0, 1.0)
    assert det.meets_goal and det.meets_goal_at_95  # no randomness: one run per theory gives the exact rate
    rnd = results["random"]
    assert rnd.replicates == 40 and 0.2 < rnd.size.rate < 0.8  # fails when the draw exceeds 1/2
    assert rnd.power["threshold 0"][1].rate == 1.0
    raised = rnd.power["raises"][1]
    assert raised.rate == 0.0 and len(raised.errors) == 40 and "TypeError" in raised.errors[0]
    assert not rnd.meets_goal and rnd.weak_against == ["raises"]  # a raising run is not a rejection
    never = results["never fails"]
    assert never.weak_against == ["anything"] and not never.meets_goal
    assert toy_registry.threshold == 0.5  # every swap restored
    assert [p.name.split("-")[0] for p in (tmp_path / "power").glob("random-*/raises-*")] == ["raises"]


def test_verify_power_writes_the_table_and_loads_a_module(toy_registry, tmp_path, capsys):
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import sys\nfrom tests.proofs_check.engine.test_power import _register_toy_checks\n"
                      "_register_toy_checks(sys.modules['attneb_toy'])\n")
    out = tmp_path / "report"
    code = cli.main(["verify", "--quick", "--workers", "1", "--out", str(out), "--load", str(plugin), "--only", "Z1",
                     "--power", "--replicates", "6"])
    assert code == 1  # the random check fails about half of the time, replicate 0 included or not
    printed = capsys.readouterr().out
    assert "power analysis (quick)" in printed and "BELOW GOAL" in printed
    report = json.loads((out / "report.json").read_text())
    checks = {c["check"]: c for c in report["power"]["checks"]}
    assert checks["deterministic"]["power"]["offset 1"]["rate"] == 1.0
    assert checks["random"]["replicates"] == 6
    markdown = (out / "report.md").read_text()
    assert "## Size and power of every check" in markdown
    assert "| Z1 | deterministic | 1 (1) | 0 | offset 1 (theory) | 1 |" in markdown
    assert "never fails: size 0.00; weak against: anything" in markdown
    assert "6 runs raised: not measured" in markdown
    assert "criterion (fixed before the run): offset() == 0" in markdown


def _register_toy_question(module):
    claim("Z3", "toy question", "a toy hypothesis", question=True)

    @check("Z3", "answered no", criterion="offset() == 1",
           alternatives=[alternative("offset 1", "offset 1", swap("attneb_toy:offset", lambda r: (lambda: 1.0)))])
    def answered_no(ctx):
        return Evidence(module.offset() == 1, "identity", "toy")


def test_verify_power_names_the_questions_answered_no(toy_registry, tmp_path, capsys):
    """The count of questions in the power line once shadowed their names (a crash after the report was written)."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import sys\nfrom tests.proofs_check.engine.test_power import _register_toy_question\n"
                      "_register_toy_question(sys.modules['attneb_toy'])\n")
    code = cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path / "report"), "--load", str(plugin),
                     "--only", "Z3", "--power"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "1 more are checks of questions answered no" in printed
    assert "questions answered no (findings, see the report): Z3" in printed


def test_load_explains_a_missing_module(tmp_path, capsys):
    assert cli.main(["verify", "--quick", "--out", str(tmp_path), "--load", "no_such_module_here"]) == 2
    assert "no_such_module_here" in capsys.readouterr().err
    assert cli.main(["verify", "--quick", "--out", str(tmp_path), "--load", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_check_registration_is_validated(toy_registry):
    claim("Z2", "toy", "a toy claim")
    check("Z2", "once")(lambda ctx: None)
    with pytest.raises(ValueError, match="already has a check named 'once'"):
        check("Z2", "once")(lambda ctx: None)
    with pytest.raises(ValueError, match="replication == 'often'"):
        check("Z2", "other", replication="often")
    with pytest.raises(ValueError, match="unknown claim id 'Z9'"):
        check("Z9", "x")(lambda ctx: None)


def test_every_check_states_its_criterion_and_the_wrong_theories_it_must_reject():
    missing = [f"{cid}: {chk.name}" for cid in select(None) for chk in CLAIMS[cid].checks
               if not chk.criterion or not chk.describe_alternatives()]
    assert missing == []


def test_every_function_feeding_the_report_is_covered():
    from attneb.proofs_check.engine.coverage import uncovered

    assert uncovered() == []
    assert all(":" in target for target in REPORT_FUNCTIONS)


def test_the_example_claim_runs_with_its_power(tmp_path, capsys):
    saved = {cid: list(c.checks) for cid, c in CLAIMS.items()}
    from attneb.proofs_check.engine import derivations

    builders = dict(derivations.BUILDERS)
    try:
        code = cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path), "--load",
                         "examples/own_claim.py", "--only", "X1", "--power", "--replicates", "3"])
    finally:
        for cid in list(CLAIMS):
            if cid not in saved:
                del CLAIMS[cid]
        derivations.BUILDERS.clear()
        derivations.BUILDERS.update(builders)
    assert code == 0, capsys.readouterr().out
    checks = {c["check"]: c for c in json.loads((tmp_path / "report.json").read_text())["power"]["checks"]}
    assert checks["attention head and kernel mean commute with a random translation"]["meets_goal"]
    assert checks["derivation 'translation' (sympy)"]["meets_goal"]


@pytest.mark.slow  # 40 s: its inequality is decided numerically after a 10 s time limit, then eight replicates
def test_the_newcomers_example_claim_passes_with_its_power(tmp_path, capsys):
    saved = set(CLAIMS)
    from attneb.proofs_check.engine import derivations

    builders = dict(derivations.BUILDERS)
    try:
        code = cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path), "--load",
                         "examples/stage2_monotone.py", "--only", "M1", "--power", "--replicates", "3"])
    finally:
        for cid in set(CLAIMS) - saved:
            del CLAIMS[cid]
        derivations.BUILDERS.clear()
        derivations.BUILDERS.update(builders)
    assert code == 0, capsys.readouterr().out
    report = json.loads((tmp_path / "report.json").read_text())
    (derivation, numeric) = report["claims"][0]["evidence"]
    assert derivation["data"]["methods"]["numeric"] >= 1 and "numeric" in derivation["summary"]  # the inequality
    assert all(c["meets_goal"] for c in report["power"]["checks"])


def test_swaps_are_restored_even_when_building_one_fails():
    import attneb.numerics.flow as flow

    real = flow.leading_horizon
    broken = alternative("x", "y", swap("attneb.numerics.flow:leading_horizon", lambda r: (lambda *a: 99.0)),
                         swap("attneb.numerics.priors:Discrete.posterior_mean", lambda r: 1 / 0))
    with pytest.raises(ZeroDivisionError), broken.applied():
        pass
    assert flow.leading_horizon is real and "posterior_mean" not in priors.Discrete.__dict__


def test_alternative_names_must_differ(toy_registry):
    claim("Z3", "toy", "a toy claim")
    check("Z3", "twice", criterion="x", covers=("attneb.numerics.kernels:kernel_mean", "attneb.numerics.kernels:kernel_mean"))(
        lambda ctx: None)
    with pytest.raises(ValueError, match="several wrong theories named"):
        CLAIMS["Z3"].checks[0].wrong_theories()


def test_rate_interval_over_independent_replicates():
    exact = power.Rate(0, 30, 30)
    assert exact.interval[0] == 0.0 and exact.interval[1] == pytest.approx(0.1157, abs=1e-4)
    subsampled = power.Rate(20, 120, 3)  # 1/6 of the subsets, over 3 independent seed sets
    low, high = subsampled.interval
    assert low == 0.0 and high == pytest.approx(0.9057, abs=1e-4)  # rounded up: one failure in three


def test_a_failing_builder_of_wrong_theories_is_reported(toy_registry, tmp_path):
    claim("Z4", "toy", "a toy claim")

    def broken():
        """wrong theories that cannot be built"""
        raise ImportError("no such module")

    check("Z4", "lazy", criterion="x", alternatives=broken)(lambda ctx: Evidence(True, "identity", "toy"))
    [result] = power.analyse(["Z4"], quick=True, out=tmp_path, progress=False)
    assert not result.meets_goal and "ImportError: no such module" in result.build_error
