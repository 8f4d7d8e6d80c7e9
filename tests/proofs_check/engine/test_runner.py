"""The runner in parallel (the report it writes with any number of workers) and the CLI's closed pipe."""

import copy
import json
import os
import subprocess
import sys

import pytest

from attneb.numerics.sweep import source_fingerprint
from attneb.proofs_check import cli
from attneb.proofs_check.engine import runner
from attneb.proofs_check.engine.power import analyse
from attneb.proofs_check.engine.registry import CLAIMS, Evidence, check, claim

PLUGIN = '''
import os
from attneb.proofs_check.engine.registry import Evidence, check, claim

claim("Z8", "where", "a toy claim whose check says which process ran it")
check("Z8", "process id", criterion="always passes")(
    lambda ctx: Evidence(True, "identity", "ran", {"pid": os.getpid()}))
'''


@pytest.fixture
def scratch_claims():
    """Claims registered by the test (here and by a --load plugin) are removed afterwards."""
    saved = set(CLAIMS)
    yield
    for cid in set(CLAIMS) - saved:
        del CLAIMS[cid]
    sys.modules.pop("attneb_user_plugin", None)


def stable(report: dict) -> dict:
    """The report without what differs between runs (timings, dates, provenance's times) or processes (the toy's pid)."""
    report = {k: copy.deepcopy(v) for k, v in report.items() if k not in ("created", "seconds")}
    report["provenance"].pop("started"), report["provenance"].pop("finished")
    for entry in report["claims"]:
        for evidence in entry["evidence"]:
            evidence.pop("seconds"), evidence.pop("cpu_seconds")
            evidence["data"].pop("pid", None)
    return report


@pytest.mark.usefixtures("scratch_claims")
def test_parallel_verify_writes_the_report_of_a_sequential_one(tmp_path, capsys):
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    claim("Z9", "here", "a toy claim that no fresh process knows")
    check("Z9", "process id", criterion="always passes")(
        lambda ctx: Evidence(True, "identity", "ran", {"pid": os.getpid()}))
    reports, printed = {}, {}
    for workers in (1, 2):
        CLAIMS.pop("Z8", None)  # registered again by --load, as in a fresh `attneb verify`
        out = tmp_path / f"workers-{workers}"
        assert cli.main(["verify", "--quick", "--workers", str(workers), "--out", str(out), "--load", str(plugin),
                         "--only", "B1", "Z8", "Z9"]) == 0
        reports[workers] = json.loads((out / "report.json").read_text())
        printed[workers] = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:4]]
    assert stable(reports[1]) == stable(reports[2])
    assert printed[1] == printed[2] == ["B1", "Z8", "Z9"]  # registry order, whichever finished first
    pids = {w: {c["id"]: c["evidence"][0]["data"].get("pid") for c in reports[w]["claims"]} for w in (1, 2)}
    assert pids[1]["Z8"] == pids[1]["Z9"] == pids[2]["Z9"] == os.getpid()
    assert pids[2]["Z8"] != os.getpid()  # in a worker process, which loaded the plugin


def test_a_closed_pipe_ends_the_command_quietly():
    """`attneb derive | head -1`: the reader goes away; no traceback, the shell's status for SIGPIPE."""
    proc = subprocess.Popen([sys.executable, "-m", "attneb", "derive"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == cli.EXIT_CLOSED_PIPE == 141
    assert err == ""


def test_a_claim_named_twice_runs_once():
    assert runner.select(["C4", "C1", "C4"]) == ["C4", "C1"]


@pytest.mark.usefixtures("scratch_claims")
def test_superseded_checks_run_only_when_asked_and_keep_their_last_result(tmp_path, capsys):
    calls = []
    claim("Z7", "toy", "a toy claim with a check and the one it superseded")
    check("Z7", "current", criterion="always passes")(lambda ctx: Evidence(True, "identity", "current ran", {}))
    check("Z7", "old", criterion="fails", gating=False, note="superseded by 'current'")(
        lambda ctx: calls.append(1) or Evidence(False, "identity", "old ran and failed", {}))

    def verify(*flags: str) -> dict:
        assert cli.main(["verify", "--quick", "--workers", "1", "--out", str(tmp_path), "--only", "Z7", *flags]) == 0
        report = json.loads((tmp_path / "report.json").read_text())
        return {e["check"]: e for e in report["claims"][0]["evidence"]} | {"created": report["created"]}

    first = verify()
    assert calls == [] and first["old"]["status"] == "not run" and first["current"]["status"] == "pass"
    assert first["old"]["summary"].endswith("no earlier result at hand") and "last_run" not in first["old"]
    assert first["old"]["criterion"] == "fails" and first["old"]["gating"] is False
    assert "[superseded] old: not run" in capsys.readouterr().out
    second = verify("--superseded")
    assert calls == [1] and second["old"]["status"] == "fail" and second["old"]["summary"] == "old ran and failed"
    for _ in range(2):  # carried over from one report to the next while the check is not run
        later = verify()
        assert calls == [1] and later["old"]["status"] == "not run"
        assert later["old"]["last_run"] == {"status": "fail", "summary": "old ran and failed", "mode": "quick",
                                            "created": second["created"], "code": source_fingerprint()}
        assert f"last run {second['created']} (quick, code {source_fingerprint()}): fail: old ran and failed" \
            in later["old"]["summary"]
    assert cli.main(["verify", "--out", str(tmp_path), "--only", "Z7", "--workers", "1"]) == 0  # full mode
    full = json.loads((tmp_path / "report.json").read_text())["claims"][0]["evidence"][1]
    assert "last_run" not in full  # a quick result is not the full mode's last result


@pytest.mark.usefixtures("scratch_claims")
def test_the_power_analysis_measures_superseded_checks_only_when_asked(tmp_path):
    claim("Z7", "toy", "a toy claim with a check and the one it superseded")
    check("Z7", "current", criterion="always passes")(lambda ctx: Evidence(True, "identity", "ran", {}))
    check("Z7", "old", criterion="always passes", gating=False)(lambda ctx: Evidence(True, "identity", "ran", {}))
    measured = [[r.check.name for r in analyse(["Z7"], quick=True, out=tmp_path, progress=False, superseded=asked)]
                for asked in (False, True)]
    assert measured == [["current"], ["current", "old"]]
