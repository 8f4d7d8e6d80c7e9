"""The trace behind the coverage map (benchmarks/trace_report_functions.py): a trial on two claims finds only
functions the committed trace lists."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from attneb.proofs_check.engine import coverage

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_report_functions.py"


def _script():
    spec = importlib.util.spec_from_file_location("trace_report_functions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_trial_trace_of_two_claims_finds_only_committed_functions(tmp_path, capsys):
    out = tmp_path / "traced.json"
    record = _script().main(["--only", "C1", "C3", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["claims"] == ["C1", "C3"] and record["command"].endswith("--only C1 C3 --out " + str(out))
    found = set(record["functions"])
    assert {"attneb.theory.attention:derivation", "attneb.theory.depth_ode:derivation",
            "attneb.numerics.transformer:AttentionHead.__call__", "attneb.numerics.flow:particle_flow"} <= found
    assert sorted(found - set(coverage.REPORT_FUNCTIONS)) == []
    assert f"{len(found)} public functions" in capsys.readouterr().out
