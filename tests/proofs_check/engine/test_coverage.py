"""The coverage map: every function a quick verify calls is covered by a check or tested apart by a test that
exists."""

from __future__ import annotations

import ast
import datetime
import re
from pathlib import Path

import pytest

from attneb.proofs_check.engine import coverage

ROOT = Path(__file__).resolve().parents[3]
KINDS = ("no number", "identity", "cancels", "bound", "not measured")


def test_every_traced_function_is_covered_or_tested_apart():
    assert coverage.uncovered() == []


def test_tested_apart_lists_only_traced_functions_that_no_check_covers():
    covered = coverage.coverage_map()
    assert sorted(set(coverage.TESTED_APART) - set(coverage.REPORT_FUNCTIONS)) == []
    assert sorted(set(coverage.TESTED_APART) & set(covered)) == []


def _functions(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("target", sorted(coverage.TESTED_APART))
def test_each_function_tested_apart_names_a_test_that_exists_and_its_reason(target):
    node, reason = coverage.TESTED_APART[target]
    path, _, name = node.partition("::")
    assert path.startswith("tests/") and (ROOT / path).is_file(), node
    assert re.sub(r"\[.*\]$", "", name) in _functions(ROOT / path), node
    assert reason.startswith(KINDS), reason


def test_the_trace_says_when_and_how_it_was_made():
    record = coverage.traced()
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"])
    assert datetime.datetime.fromisoformat(record["date"]).tzinfo is not None
    assert record["command"].startswith("python benchmarks/trace_report_functions.py")
    assert record["mode"] == "quick" and record["claims"] and record["seconds"] > 0
    functions = record["functions"]
    assert list(functions) == sorted(functions) and tuple(functions) == coverage.REPORT_FUNCTIONS
    assert all(re.fullmatch(r"attneb\.(numerics|theory)(\.\w+)*:[A-Za-z]\w*(\.\w+)*", target) for target in functions)
    assert all(set(claims) <= {"import", *record["claims"]} for claims in functions.values())
