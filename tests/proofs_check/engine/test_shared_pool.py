"""The pool of a parallel verify: the checks' runs go to its processes, and nothing else starts."""

import json
import operator
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attneb.proofs_check.engine import content, derivations, runner
from attneb.proofs_check.engine.registry import CLAIMS
from tests.processes import alive, children_of

PLUGIN = '''
import functools
import multiprocessing
import operator
import os
import time

import sympy as sp

from attneb.proofs_check.engine.derivations import register_derivation
from attneb.proofs_check.engine.registry import Evidence, check, claim
from attneb.theory import ClaimedForm, Derivation, Step
from attneb.proofs_check.engine.studies import computed


def where(i):
    """A run that says which process ran it, the process that started that one, and its parent."""
    time.sleep(0.08)
    return {"pid": os.getpid(), "started_by": multiprocessing.parent_process().pid, "parent": os.getppid(),
            "toy": os.environ.get("TOY_VARIABLE")}


def broken(i):
    raise ValueError(f"run {i} is broken")


def sleepy(i):
    time.sleep(120)


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
claim("Z7", "slow runs", "a toy claim whose runs outlast any test")
check("Z7", "runs that sleep", criterion="always passes")(_runs(sleepy))
claim("Z4", "a run ends its process", "a toy claim whose runs kill their process")
check("Z4", "runs that exit", criterion="always passes")(_fatal_runs)


@functools.cache
def _counted_derivation():
    """A derivation whose every build (one per process: cached) writes its process id beside this file."""
    with open(__file__ + ".builds", "a") as builds:
        builds.write(f"{os.getpid()}\\n")
    time.sleep(0.5)  # long enough for another idle process to take the next task
    x = sp.Symbol("x")
    return Derivation("toy_counted", "x + x = 2 x", [x], [Step(sp.Eq(x + x, 2 * x, evaluate=False), "add")], [],
                      [ClaimedForm(sp.Eq(x + x, 2 * x, evaluate=False), "x + x = 2 x", ref="Z2", name=sp.Symbol("2x"))])


claim("Z2", "one derivation, first claim", "a toy claim checked by a derivation")
claim("Z3", "one derivation, second claim", "a toy claim checked by the same derivation and one more check")
register_derivation("toy_counted", _counted_derivation, ["Z2", "Z3"])
check("Z3", "where it ran", criterion="always passes")(lambda ctx: Evidence(True, "identity", "ran", {"pid": os.getpid()}))
'''


@pytest.fixture
def plugin(tmp_path):
    """A plugin file registering the toy claims, here and in the pool's processes; removed afterwards."""
    saved = set(CLAIMS)
    path = tmp_path / "toy_pool.py"
    path.write_text(PLUGIN)
    content.load([str(path)])
    yield str(path)
    for cid in set(CLAIMS) - saved:
        del CLAIMS[cid]
        derivations.CLAIM_DERIVATIONS.pop(cid, None)
    for registry in (derivations.BUILDERS, derivations._REGISTERED, derivations.TIME_LIMITS):
        registry.pop("toy_counted", None)
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
    # a run that raises makes its check an error, with the traceback of the process that ran it
    assert raising.status == "error"
    error = raising.checks[0].error
    assert "ValueError: run" in error and "is broken" in error and "in broken" in error


def test_a_derivation_of_several_claims_is_checked_by_one_process_once(plugin, tmp_path):
    first, second = runner.run(["Z2", "Z3"], quick=True, out=tmp_path, workers=2, sources=[plugin])
    builds = Path(plugin + ".builds").read_text().split()
    assert len(builds) == 1 and int(builds[0]) != os.getpid()
    assert [c.status for c in first.checks + second.checks] == ["pass"] * 3
    assert first.checks[0].evidence.summary == second.checks[0].evidence.summary
    assert second.checks[1].name == "where it ran"


def test_the_pool_takes_each_derivation_first_with_all_its_claims():
    runnable = {claim_id: list(CLAIMS[claim_id].checks) for claim_id in runner.select(None)}
    tasks = runner._tasks(runnable)
    derivation_tasks = [t for t in tasks if all(derivation_of_names(t))]
    names = {derivations.derivation_of(chk) for checks in runnable.values() for chk in checks} - {None}
    assert tasks[:len(derivation_tasks)] == derivation_tasks and len(derivation_tasks) == len(names) >= 10
    assert [("C1", ["derivation 'attention' (sympy)"]), ("C2", ["derivation 'attention' (sympy)"])] in tasks
    assert [c for c, _ in next(t for t in tasks if "stage2" in t[0][1][0])] == ["C7", "C8", "C9"]
    placed = [(claim_id, name) for task in tasks for claim_id, names in task for name in names]
    assert sorted(placed) == sorted((c, chk.name) for c, checks in runnable.items() for chk in checks)


def derivation_of_names(task):
    """Whether each check of a task is a derivation's."""
    return [derivations.derivation_of(next(c for c in CLAIMS[claim_id].checks if c.name == name)) is not None
            for claim_id, names in task for name in names]


FORKS = """
import json, os, sys
from pathlib import Path
from attneb.proofs_check.engine import content, runner, shared_pool

plugin, out = sys.argv[1], Path(sys.argv[2])
shared_pool.start_server()
content.load([plugin])

def runs(folder):
    (result,) = runner.run(["Z5"], quick=True, out=out / folder, workers=2, sources=[plugin])
    return result.checks[0].evidence.data["runs"]

forked = runs("first")
os.environ["TOY_VARIABLE"] = "set later"
spawned = runs("second")
print(json.dumps({"pid": os.getpid(), "forked": forked, "spawned": spawned}))
"""


@pytest.mark.slow  # about 16 s
def test_after_start_server_the_pool_forks_from_it_while_the_environment_stays(plugin, tmp_path):
    # in a fresh interpreter: this one's fork server, if any, started in another test's environment
    out = subprocess.run([sys.executable, "-c", FORKS, plugin, str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=300)
    got = json.loads(out.stdout.splitlines()[-1])
    for runs in (got["forked"], got["spawned"]):
        assert {r["started_by"] for r in runs} == {got["pid"]} and len({r["pid"] for r in runs}) == 2
    (server,) = {r["parent"] for r in got["forked"]}  # one fork server, neither this process nor a worker
    assert server != got["pid"] and server not in {r["pid"] for r in got["forked"]}
    assert {r["toy"] for r in got["forked"]} == {None}
    # a changed environment: spawned here, and they see it
    assert {r["parent"] for r in got["spawned"]} == {got["pid"]}
    assert {r["toy"] for r in got["spawned"]} == {"set later"}


KILLED = """
import sys
from pathlib import Path
from attneb.proofs_check.engine import content, runner, shared_pool

shared_pool.start_server()
content.load([sys.argv[1]])
runner.run(["Z7"], quick=True, out=Path(sys.argv[2]), workers=2, sources=[sys.argv[1]])
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the pool's processes")
def test_a_killed_parent_leaves_neither_fork_server_nor_workers(plugin, tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", KILLED, plugin, str(tmp_path)])
    try:
        deadline = time.monotonic() + 120
        found = []
        while len(found) < 4 and time.monotonic() < deadline:  # the resource tracker, the server, two workers
            time.sleep(0.2)
            found = [p for child in children_of(parent.pid) for p in (child, *children_of(child))]
        assert len(found) >= 4
    finally:
        parent.kill()
        parent.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in found), "processes of the pool outlived their parent"


def test_a_process_of_the_pool_that_ends_stops_the_run(plugin, tmp_path):
    with pytest.raises(RuntimeError, match=r"died \(exit code 7\), running the claims \[.Z4.\]"):
        runner.run(["Z4", "Z5"], quick=True, out=tmp_path, workers=2, sources=[plugin])


def test_outside_a_pool_computed_starts_its_own_processes_and_yields_every_run_once():
    from attneb.proofs_check.engine.studies import computed

    todo = [(i, 1) for i in range(9)]
    got = dict(computed(todo, operator.add, 2, "toy"))
    assert got == {(i, 1): i + 1 for i in range(9)}
    assert os.getpid() not in {pid for _, pid in computed([()] * 4, os.getpid, 2, "toy")}


def test_a_fork_server_started_by_other_code_is_not_used():
    """multiprocessing keeps one fork server per process: one started without the toolkit's settings is not the pool's."""
    code = ("import multiprocessing, multiprocessing.forkserver as f\n"
            "multiprocessing.get_context('forkserver')\n"
            "f.ensure_running()\n"
            "from attneb.proofs_check.engine import shared_pool\n"
            "shared_pool.start_server()\n"
            "print(shared_pool._context().get_start_method())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["spawn"]
