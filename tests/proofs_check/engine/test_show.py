"""``attneb show``: one claim with its pieces, each with a file and line that exists and holds it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attneb.proofs_check import cli
from attneb.proofs_check.engine import show
from attneb.proofs_check.engine.registry import CLAIMS, PACKAGES_ROOT


def _line_of(where: str) -> str:
    path, line = where.rsplit(":", 1)
    return (PACKAGES_ROOT / path).read_text().splitlines()[int(line) - 1]


def test_every_claim_and_check_says_where_it_is_registered():
    for claim in CLAIMS.values():
        assert re.search(r"\bclaim\(", _line_of(claim.source)), claim.id
        for chk in claim.checks:
            line = _line_of(chk.source)
            assert line.lstrip().startswith(("@check", "def ", "@")), (claim.id, chk.name, chk.source)


def test_a_record_holds_statement_derivations_checks_wrong_theories_and_figures():
    record = show.claim_record("C6", derivations=False)
    assert record["statement"] == CLAIMS["C6"].statement and record["where"].endswith(
        "topics/depth_noise.py:" + record["where"].rsplit(":", 1)[1])
    assert [d["name"] for d in record["derivations"]] == ["depth_noise", "gaussian"]
    assert all(d["where"].startswith("theory/") for d in record["derivations"])
    assert len(record["checks"]) == len(CLAIMS["C6"].checks)
    gating = [c for c in record["checks"] if c["gating"] and c["name"].startswith("E2")]
    assert gating and all(c["criterion"] and c["wrong_theories"] for c in gating)
    assert [f["study"] for f in record["figures"]] == ["E2"]
    text = show.format_claim(record)
    for piece in (record["statement"], record["checks"][0]["name"], record["checks"][0]["where"], "E2"):
        assert piece in text


def test_the_last_verdict_and_power_come_from_a_report():
    name = CLAIMS["C1"].checks[0].name
    report = {"mode": "quick", "created": "2026-11-28T00:00:00+00:00",
              "claims": [{"id": "C1", "evidence": [{"check": name, "status": "pass", "summary": "max residual 1e-15"}]}],
              "power": {"checks": [{"claim": "C1", "check": name, "replicates": 1, "size": {"rate": 0.0},
                                    "power": {"kernel bandwidth 2 h2": {"rate": 1.0}}}]}}
    record = show.claim_record("C1", report=report, derivations=False)
    first = record["checks"][0]
    assert first["last"] == {"mode": "quick", "status": "pass", "summary": "max residual 1e-15"}
    assert first["power"]["power"] == {"kernel bandwidth 2 h2": 1.0}
    text = show.format_claim(record)
    assert "last verdict (quick): PASS: max residual 1e-15" in text and "kernel bandwidth 2 h2 1.00" in text


def test_covered_functions_are_located():
    record = show.claim_record("C1", derivations=False)
    covers = [c for check in record["checks"] for c in check["covers"]]
    assert covers and all(c["where"].startswith("numerics/") for c in covers)


def test_unknown_claim_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown claim id 'C99'"):
        show.claim_record("C99")


def test_the_command(tmp_path, capsys):
    assert cli.main(["show"]) == 0
    listing = capsys.readouterr().out
    assert all(cid in listing for cid in CLAIMS)
    assert cli.main(["show", "C4", "--plain", "--report", str(tmp_path)]) == 2  # no report there
    assert "no report.json" in capsys.readouterr().err
    assert cli.main(["show", "C4", "--plain", "--json", "--no-derivations"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["id"] == "C4" and record["derivations"][0]["name"] == "energy"
    assert cli.main(["show", "C99"]) == 2


def test_derivations_print_with_sympys_pretty_printer():
    out = subprocess.run([sys.executable, "-m", "attneb", "show", "C4", "--pretty"], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent).stdout
    assert "Derivation 'energy'" in out and "Derivative(" not in out


def test_the_report_says_where_each_claim_and_check_lives(tmp_path):
    from attneb.proofs_check.engine.registry import Evidence
    from attneb.proofs_check.engine.report import write_report
    from attneb.proofs_check.engine.runner import CheckResult, ClaimResult

    claim = CLAIMS["C4"]
    result = ClaimResult(claim, tuple(CheckResult(c, "pass", Evidence(True, "symbolic", "ok"), None, 0.1)
                                      for c in claim.checks))
    report = write_report([result], tmp_path, quick=True, seconds=1.0)
    assert report["claims"][0]["where"] == claim.source
    assert report["claims"][0]["evidence"][0]["where"] == claim.checks[0].source
    markdown = (tmp_path / "report.md").read_text()
    assert "| claim | status | title | where |" in markdown
    assert f"`{claim.source}`" in markdown and f"`{claim.checks[0].source}`" in markdown


def test_a_claim_of_ones_own_shows_with_load(capsys):
    from attneb.proofs_check.engine import derivations

    saved, builders = set(CLAIMS), dict(derivations.BUILDERS)
    try:
        assert cli.main(["show", "X1", "--load", "examples/own_claim.py", "--plain"]) == 0
    finally:
        for cid in set(CLAIMS) - saved:
            del CLAIMS[cid]
            derivations.CLAIM_DERIVATIONS.pop(cid, None)
        derivations.BUILDERS.clear()
        derivations.BUILDERS.update(builders)
    out = capsys.readouterr().out
    assert "X1: attention commutes with translations (claim; examples/own_claim.py:" in out
    assert "Derivation 'translation': Attention commutes with translations (examples/own_claim.py:" in out
