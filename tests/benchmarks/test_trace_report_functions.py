"""The trace behind the coverage map (benchmarks/trace_report_functions.py): a trial on two claims finds only
functions the committed trace lists."""

from __future__ import annotations

import json

import pytest

from attneb.proofs_check.engine import coverage
from tests.benchmarks import load_script


@pytest.mark.slow
def test_a_trial_trace_of_two_claims_finds_only_committed_functions(tmp_path, capsys):
    out = tmp_path / "traced.json"
    record = load_script("trace_report_functions").main(["--only", "C1", "C3", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["claims"] == ["C1", "C3"] and record["command"].endswith("--only C1 C3 --out " + str(out))
    found = set(record["functions"])
    assert {"attneb.theory.attention:derivation", "attneb.theory.depth_ode:derivation",
            "attneb.numerics.transformer:AttentionHead.__call__", "attneb.numerics.flow:particle_flow"} <= found
    assert sorted(found - set(coverage.REPORT_FUNCTIONS)) == []
    assert f"{len(found)} public functions" in capsys.readouterr().out
