"""``report.json``'s ``provenance``: the code, its environment, the command, the cores and the times, in
``report.json``, ``report.md`` and ``report.html``; and the git commit, which never fails a report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import scipy
import sympy

import attneb
from attneb.numerics.sweep import source_fingerprint
from attneb.proofs_check.engine import report as report_module
from attneb.proofs_check.engine.registry import CLAIMS, claim
from attneb.proofs_check.engine.report import SCHEMA, git_state, run_provenance, write_report
from attneb.proofs_check.engine.runner import ClaimResult

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


@pytest.fixture
def toy_result():
    saved = set(CLAIMS)
    try:
        yield ClaimResult(claim("Z71", "a toy", "a toy claim with no check"), ())
    finally:
        for cid in set(CLAIMS) - saved:
            del CLAIMS[cid]


def test_the_block_names_the_code_its_environment_and_the_times(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/attneb", "verify", "--out", "my report", "--only", "C3"])
    finished = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    origin = run_provenance(seconds=65.0, finished=finished)
    assert origin["schema"] == SCHEMA >= 2
    assert origin["toolkit"] == attneb.__version__ and origin["code"] == source_fingerprint()
    assert (origin["python"], origin["numpy"], origin["scipy"], origin["sympy"]) == \
        (sys.version.split()[0], np.__version__, scipy.__version__, sympy.__version__)
    assert origin["command"] == "attneb verify --out 'my report' --only C3"
    assert 1 <= origin["cores"]["available"] <= origin["cores"]["total"] == os.cpu_count()
    assert (origin["started"], origin["finished"]) == ("2026-01-02T03:03:00+00:00", "2026-01-02T03:04:05+00:00")
    json.dumps(origin)  # JSON as it is


def test_a_given_start_is_written_in_utc_and_python_m_reads_as_such(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(Path(attneb.__file__).with_name("__main__.py")), "verify", "--quick"])
    started = datetime(2026, 1, 2, 4, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    origin = run_provenance(seconds=1.0, started=started)
    assert origin["started"] == "2026-01-02T03:00:00+00:00"
    assert origin["command"] == "python -m attneb verify --quick"


def test_write_report_keeps_the_earlier_keys_and_shows_the_block(tmp_path, toy_result):
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30)
    written = write_report([toy_result], tmp_path, quick=True, seconds=2.5, started=started, derivations=False)
    stored = json.loads((tmp_path / "report.json").read_text())
    origin = stored["provenance"]
    assert stored == written and list(stored)[0] == "provenance"
    assert origin["started"] == started.isoformat() and origin["finished"] == stored["created"]
    assert stored["code"] == origin["code"] and stored["seconds"] == 2.5
    assert stored["versions"] == {k: origin[k] for k in ("python", "numpy", "scipy", "sympy")}
    markdown = (tmp_path / "report.md").read_text()
    assert "## Provenance" in markdown and f"- command: `{origin['command']}`" in markdown
    assert f"- report layout: schema {SCHEMA}" in markdown
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Provenance</h2>" in page and origin["started"] in page


def test_without_a_start_it_is_the_run_and_power_seconds_before_the_end(tmp_path, toy_result):
    written = write_report([toy_result], tmp_path, quick=True, seconds=100.0, power=[], power_seconds=20.0,
                           derivations=False)
    origin = written["provenance"]
    took = datetime.fromisoformat(origin["finished"]) - datetime.fromisoformat(origin["started"])
    assert abs(took.total_seconds() - 120.0) <= 1.0


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@needs_git
def test_git_state_is_the_commit_and_whether_tracked_files_changed(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("venv/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    head = _git(repo, "rev-parse", "HEAD")
    assert git_state(repo / "pkg") == {"commit": head, "dirty": False}
    (repo / "pkg" / "scratch.txt").write_text("untracked files do not count\n")
    assert git_state(repo / "pkg") == {"commit": head, "dirty": False}
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    assert git_state(repo / "pkg") == {"commit": head, "dirty": True}
    # A package installed into a virtual environment that sits, ignored, inside a checkout is no checkout.
    (repo / "venv" / "site-packages" / "attneb").mkdir(parents=True)
    (repo / "venv" / "site-packages" / "attneb" / "mod.py").write_text("x = 3\n")
    assert git_state(repo / "venv" / "site-packages" / "attneb") is None


@needs_git
def test_git_state_is_none_outside_a_checkout(tmp_path):
    assert git_state(tmp_path) is None


def test_git_state_is_none_without_git_or_when_git_hangs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git there
    assert git_state(Path(report_module.__file__).parent) is None
    monkeypatch.undo()

    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))

    monkeypatch.setattr(report_module.subprocess, "run", hangs)
    assert git_state(Path(report_module.__file__).parent) is None
    assert run_provenance(seconds=1.0)["git"] is None


@needs_git
def test_the_report_names_the_commit_of_the_source_it_was_imported_from():
    source = Path(report_module.__file__).resolve().parent
    tracked = subprocess.run(["git", "-C", str(source), "ls-files", "--", "."], capture_output=True, text=True)
    if tracked.returncode != 0 or not tracked.stdout.strip():
        pytest.skip("the toolkit was not imported from a git checkout")
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert git_state()["commit"] == head == run_provenance(seconds=0.0)["git"]["commit"]


def test_verify_names_the_checkout_as_it_was_when_the_run_began(tmp_path, monkeypatch):
    """A commit made while a long run goes on is not named as the code that ran: verify reads git when it starts."""
    from attneb.proofs_check import cli
    from attneb.proofs_check.engine import runner

    ran = []
    monkeypatch.setattr(report_module, "git_state", lambda *args: {"commit": "later", "dirty": True} if ran
                        else {"commit": "at-the-start", "dirty": False})
    monkeypatch.setattr(runner, "run", lambda *args, **kwargs: ran.append(True) or [])
    assert cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["provenance"]["git"] == {"commit": "at-the-start", "dirty": False}
    assert run_provenance(seconds=1.0, git={"commit": "given", "dirty": True})["git"] == {"commit": "given",
                                                                                          "dirty": True}
