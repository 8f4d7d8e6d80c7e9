"""benchmarks/exp_share.py: the share of each check's CPU time spent in ``numpy.exp``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import attneb.proofs_check.engine.runner as runner
from attneb.proofs_check.engine.registry import Check, Evidence
from tests.benchmarks import load_script


def test_loaded_with_the_variable_it_counts_the_exponentials_of_each_check(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNEB_EXP_TRACE", raising=False)
    share = load_script("exp_share")
    assert isinstance(np.exp, np.ufunc)  # loading it without the variable installs nothing
    monkeypatch.setattr(np, "exp", np.exp)  # restored after the test
    monkeypatch.setattr(runner, "run_check", runner.run_check)
    trace = tmp_path / "exp.jsonl"
    share._install(str(trace))

    def body(ctx):
        np.exp(np.zeros((30, 40)))
        np.exp(np.zeros(7), out=np.empty(7))
        return Evidence(True, "identity", "ok")

    result = runner.run_check(Check(name="toy", func=body), ctx=None)
    assert result.status == "pass"
    [row] = [json.loads(line) for line in trace.read_text().splitlines()]
    assert row["check"] == "toy" and row["exp_values"] == 30 * 40 + 7
    assert 0 < row["exp_seconds"] <= row["cpu"] + 1.0


def test_the_table_sorts_by_cost_and_adds_up(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ATTNEB_EXP_TRACE", raising=False)
    share = load_script("exp_share")
    rows = [{"claim": "Z1", "check": "cheap", "cpu": 2.0, "exp_values": 0, "exp_seconds": 0.0},
            {"claim": "Z2", "check": "costly", "cpu": 10.0, "exp_values": 500_000_000, "exp_seconds": 4.0},
            {"claim": "Z3", "check": "tiny", "cpu": 0.5, "exp_values": 10, "exp_seconds": 0.0}]
    lines = share.table(rows, min_seconds=1.0).splitlines()
    assert lines[2] == "| Z2 | costly | 10.0 | 500 | 4.0 | 40% | 8.0 |"
    assert lines[3].startswith("| Z1 | cheap | 2.0 | 0 | 0.0 | 0% |")
    assert lines[-1] == "| all | 3 checks | 12.5 | 500 | 4.0 | 32% | 8.0 |"
    assert not any("tiny" in line for line in lines)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert share.main([str(tmp_path / "t.jsonl")]) == 0
    assert "| Z2 | costly |" in capsys.readouterr().out
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match="holds no check"):
        share.main([str(tmp_path / "empty.jsonl")])
