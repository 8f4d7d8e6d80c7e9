"""The runner in parallel (the report it writes with any number of workers) and the CLI's closed pipe."""

import copy
import json
import os
import subprocess
import sys

import pytest

from attneb.proofs_check import cli
from attneb.proofs_check.engine import runner
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
    """The report without what differs between runs (timings, date) or processes (the toy's pid)."""
    report = {k: copy.deepcopy(v) for k, v in report.items() if k not in ("created", "seconds")}
    for entry in report["claims"]:
        for evidence in entry["evidence"]:
            evidence.pop("seconds")
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
