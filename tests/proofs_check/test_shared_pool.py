"""The pool of a parallel verify: the checks' runs go to its processes, and nothing else starts."""

import operator
import os
import subprocess
import sys

import pytest

from proofs_check import runner
from proofs_check.registry import CLAIMS

PLUGIN = '''
import multiprocessing
import operator
import os
import time

from proofs_check.registry import Evidence, check, claim
from proofs_check.studies import computed


def where(i):
    """A run that says which process ran it, the process that started that one, and its parent."""
    time.sleep(0.08)
    return {"pid": os.getpid(), "started_by": multiprocessing.parent_process().pid, "parent": os.getppid(),
            "toy": os.environ.get("TOY_VARIABLE"), "accelerator": os.environ.get("ATTNEB_ACCELERATOR")}


def broken(i):
    raise ValueError(f"run {i} is broken")


def fatal(i, pid):
    """Ends the process of the check that asked for it (the other process computes its share and lives)."""
    if os.getpid() == pid:
        os._exit(7)
    time.sleep(0.05)


def _runs(func, *args):
    return lambda ctx: Evidence(True, "identity", "ran", {
        "pid": os.getpid(),
        "runs": [r for _, r in computed([(i, *args) for i in range(24)], func, ctx.workers, "toy")]})


def _fatal_runs(ctx):
    return _runs(fatal, os.getpid())(ctx)


claim("Z5", "runs", "a toy claim whose check hands its runs to the pool")
check("Z5", "where the runs ran", criterion="always passes")(_runs(where))
claim("Z6", "a run raises", "a toy claim whose runs raise")
check("Z6", "runs that raise", criterion="always passes")(_runs(broken))
claim("Z4", "a run ends its process", "a toy claim whose runs kill their process")
check("Z4", "runs that exit", criterion="always passes")(_fatal_runs)
'''


@pytest.fixture
def plugin(tmp_path):
    """A plugin file registering the toy claims, here and in the pool's processes; removed afterwards."""
    saved = set(CLAIMS)
    path = tmp_path / "toy_pool.py"
    path.write_text(PLUGIN)
    runner.load([str(path)])
    yield str(path)
    for cid in set(CLAIMS) - saved:
        del CLAIMS[cid]
    sys.modules.pop("attneb_user_toy_pool", None)


def test_the_runs_of_the_checks_go_to_the_pool_and_no_process_starts_another(plugin, tmp_path):
    runs_ok, raising = runner.run(["Z5", "Z6"], quick=True, out=tmp_path, workers=2, sources=[plugin])
    data = runs_ok.checks[0].evidence.data
    assert len(data["runs"]) == 24
    ran = {r["pid"] for r in data["runs"]}
    # both processes of the pool computed runs (the check's own through its helper thread), and
    # this process started each: no pool was started inside a worker
    assert data["pid"] in ran and len(ran) == 2 and os.getpid() not in ran
    assert {r["started_by"] for r in data["runs"]} == {os.getpid()}
    # both are forks of one fork server, which imported the toolkit for them
    (server,) = {r["parent"] for r in data["runs"]}
    assert server not in ran | {os.getpid()}
    # a run that raises makes its check an error, with the traceback of the process that ran it
    assert raising.status == "error"
    error = raising.checks[0].error
    assert "ValueError: run" in error and "is broken" in error and "in broken" in error


def test_the_pool_sees_the_environment_of_its_start(plugin, tmp_path, monkeypatch):
    runner.run(["Z5"], quick=True, out=tmp_path / "first", workers=2, sources=[plugin])  # the fork server is up
    monkeypatch.setenv("TOY_VARIABLE", "set later")
    (result,) = runner.run(["Z5"], quick=True, out=tmp_path / "second", workers=2, sources=[plugin])
    runs = result.checks[0].evidence.data["runs"]
    assert {r["toy"] for r in runs} == {"set later"}
    assert os.getpid() not in {r["parent"] for r in runs}  # forks of the server
    # a variable read on import (by numerics.kernels) that changed since the server started: fresh processes
    monkeypatch.setenv("ATTNEB_ACCELERATOR", "auto")
    (result,) = runner.run(["Z5"], quick=True, out=tmp_path / "third", workers=2, sources=[plugin])
    runs = result.checks[0].evidence.data["runs"]
    assert {r["accelerator"] for r in runs} == {"auto"}
    assert {r["parent"] for r in runs} == {os.getpid()}


def test_a_process_of_the_pool_that_ends_stops_the_run(plugin, tmp_path):
    with pytest.raises(RuntimeError, match=r"died \(exit code 7\), running the claims \[.Z4.\]"):
        runner.run(["Z4", "Z5"], quick=True, out=tmp_path, workers=2, sources=[plugin])


def test_outside_a_pool_computed_starts_its_own_processes_and_yields_every_run_once():
    from proofs_check.studies import computed

    todo = [(i, 1) for i in range(9)]
    got = dict(computed(todo, operator.add, 2, "toy"))
    assert got == {(i, 1): i + 1 for i in range(9)}
    assert os.getpid() not in {pid for _, pid in computed([()] * 4, os.getpid, 2, "toy")}


def test_a_fork_server_started_by_other_code_is_not_used():
    """multiprocessing keeps one fork server per process: one started without the toolkit's settings is not the pool's."""
    code = ("import multiprocessing, multiprocessing.forkserver as f\n"
            "multiprocessing.get_context('forkserver')\n"
            "f.ensure_running()\n"
            "from proofs_check.shared_pool import start_server\n"
            "print(start_server().get_start_method())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["spawn"]
