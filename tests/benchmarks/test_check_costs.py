"""benchmarks/check_costs.py: the cost-and-power table of the gating checks."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks import load_script


def _report(cpu: dict[str, float], superseded: str = "old") -> dict:
    evidence = [{"check": name, "gating": True, "status": "pass", "cpu_seconds": s} for name, s in cpu.items()]
    evidence.append({"check": superseded, "gating": False, "status": "not run", "cpu_seconds": 0.0})
    return {"claims": [{"id": "Z1", "evidence": evidence}]}


def test_the_table_lists_gating_checks_by_cost_with_their_least_power():
    costs = load_script("check_costs")
    quick, full = _report({"cheap": 1.0, "costly": 20.0}), _report({"cheap": 3.0, "costly": 90.0})
    power = {"claims": [], "power": {"checks": [
        {"claim": "Z1", "check": "costly", "size": {"rate": 0.05},
         "power": {"x 2": {"rate": 1.0}, "near miss": {"rate": 0.4}}}]}}
    lines = costs.table(quick, full, power).splitlines()
    assert lines[2].startswith("| Z1 | costly | 20.0 | 90.0 | 0.05 | 0.40 (near miss) | 0.02 |")
    assert lines[3].startswith("| Z1 | cheap | 1.0 | 3.0 |  |  |")
    assert lines[-1] == "| all | 2 gating checks | 21 | 93 | | | |"
    assert not any("| old |" in line for line in lines)


def test_the_command_reads_report_files_and_refuses_other_json(tmp_path, capsys):
    costs = load_script("check_costs")
    (tmp_path / "q.json").write_text(json.dumps(_report({"a": 2.5})))
    assert costs.main(["--quick", str(tmp_path / "q.json")]) == 0
    assert "| Z1 | a | 2.5 |  |" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not an attneb report.json"):
        costs.main(["--quick", str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit):
        costs.main([])
