"""The time limit of an item's check: in the main thread, in other threads and in worker processes; progress.

The limit is raised asynchronously in whichever thread runs the check
(:mod:`attneb.theory._time_limit`), so ``attneb verify``'s worker processes (the
main thread of a spawned or forked process) and a thread of a notebook are
covered alike; each case is exercised here.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import threading
import time

import pytest
import sympy as sp
from sympy.core.parameters import global_parameters

from attneb.theory import derivation
from attneb.theory._time_limit import TimeLimitExceeded, time_limit
from attneb.theory.derivation import ClaimedForm, Derivation, Step, check_equation

x = sp.Symbol("x", positive=True)
f = sp.Function("f")
ANGLES = sp.symbols("a1:9", positive=True)
#: cos of a sum of eight angles against its expansion: neither expand nor cancel proves it, simplify takes
#: far longer than LIMIT (minutes), a numeric evaluation a fraction of a second
SLOW_TRUE = sp.Eq(sp.cos(sum(ANGLES)), sp.expand_trig(sp.cos(sum(ANGLES))), evaluate=False)
LIMIT = 2.0


def eq(lhs, rhs):
    return sp.Eq(lhs, rhs, evaluate=False)


def spin(seconds=30.0):
    """Run bytecode for ``seconds`` (a test of the limit fails, rather than hangs, if nothing interrupts it)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def in_thread(function, *args, **kwargs):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()


# --------------------------------------------------------------------------- the mechanism


@pytest.mark.parametrize("where", ["main thread", "other thread"])
def test_a_block_past_its_limit_is_interrupted_and_nothing_fires_afterwards(where):
    def run():
        start = time.perf_counter()
        with pytest.raises(TimeLimitExceeded):
            with time_limit(0.2):
                spin()
        interrupted = time.perf_counter() - start
        with time_limit(0.2):
            total = sum(range(100))
        spin(0.5)  # bytecode running past the second limit: no stray exception
        return interrupted, total

    interrupted, total = run() if where == "main thread" else in_thread(run)
    assert interrupted >= 0.2 and total == 4950


def test_the_limit_counts_the_threads_cpu_time_not_the_wall_clock():
    """Waiting (as a check starved of CPU by other processes waits) does not use up the limit; computing does."""
    if not hasattr(time, "pthread_getcpuclockid"):
        pytest.skip("no thread CPU clock on this platform: the limit is on the wall clock")
    with time_limit(0.2):
        time.sleep(0.6)  # no CPU time: three times the limit in wall time, not interrupted
    start = time.thread_time()
    with pytest.raises(TimeLimitExceeded):
        with time_limit(0.2):
            spin()
    assert time.thread_time() - start >= 0.2


def test_no_limit_starts_no_watchdog():
    before = threading.active_count()
    with time_limit(None):
        assert threading.active_count() == before


def test_sympy_parameters_come_back_after_an_interruption():
    """An interruption inside ``with evaluate(False)`` leaves sympy evaluating as before."""
    with pytest.raises(TimeLimitExceeded):
        with time_limit(0.2):
            with sp.evaluate(False):
                spin()
    assert global_parameters.evaluate is True
    assert x + x == 2 * x


def test_the_exception_is_not_caught_by_except_exception():
    caught = []
    with pytest.raises(TimeLimitExceeded):
        with time_limit(0.2):
            try:
                spin()
            except Exception as error:  # noqa: BLE001 - what interrupted code commonly does
                caught.append(error)
    assert not caught


# --------------------------------------------------------------------------- checks that run past the limit


@pytest.fixture
def endless_simplify(monkeypatch):
    """``simplify`` never returns: an equation that the cheap reductions cannot decide runs into the limit."""
    monkeypatch.setattr(derivation, "_COSTLY_REDUCTIONS", (("simplify", lambda residual: spin()),))


TRUE_UNDECIDED = eq(sp.atan(x) + sp.atan(1 / x), sp.pi / 2)  # expand and cancel cannot, simplify would


@pytest.mark.parametrize("where", ["main thread", "other thread"])
def test_a_timed_out_reduction_is_decided_numerically(endless_simplify, where):
    check = check_equation if where == "main thread" else lambda *a, **k: in_thread(check_equation, *a, **k)
    method, detail, residual, tolerance = check(TRUE_UNDECIDED, time_limit=0.3)
    assert method == "numeric" and residual <= tolerance
    assert detail == "the symbolic reduction did not finish within 0.3 s of CPU time; mpmath, 40 digits, 6 seeded random points"


@pytest.mark.parametrize("where", ["main thread", "other thread"])
def test_a_timed_out_reduction_that_cannot_be_evaluated_fails(endless_simplify, where):
    check = check_equation if where == "main thread" else lambda *a, **k: in_thread(check_equation, *a, **k)
    method, detail, residual, _ = check(eq(f(x) * TRUE_UNDECIDED.lhs, f(x) * TRUE_UNDECIDED.rhs), time_limit=0.3)
    assert (method, residual) == ("failed", None)
    assert detail == "the symbolic reduction did not finish within 0.3 s of CPU time; lhs - rhs cannot be evaluated numerically"


def test_a_timed_out_series_fails(monkeypatch):
    """An equation with O(.) terms has no numeric check: past the limit it fails."""
    monkeypatch.setattr(derivation, "_order_zero", lambda residual: spin())
    method, detail, _, _ = check_equation(eq(sp.exp(x), 1 + x + sp.O(x**2)), time_limit=0.3)
    assert method == "failed"
    assert detail == "the symbolic reduction did not finish within 0.3 s of CPU time; lhs - rhs cannot be evaluated numerically"


def test_a_false_equation_fails_whatever_the_limit(endless_simplify):
    assert check_equation(eq(sp.atan(x) + sp.atan(1 / x), sp.pi / 3), time_limit=0.3)[0] == "failed"


def test_without_the_limit_the_reduction_decides():
    """The same equation, and a check within its limit: symbolic, as without any limit."""
    assert check_equation(TRUE_UNDECIDED, time_limit=None)[:2] == ("numeric", "mpmath, 40 digits, 6 seeded random "
                                                                                "points")
    assert check_equation(eq((x + 1) ** 2, x**2 + 2 * x + 1), time_limit=LIMIT) == ("symbolic", "expand", 0.0, None)


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan")])
def test_time_limit_must_be_positive_seconds(value):
    with pytest.raises(ValueError, match="time_limit"):
        check_equation(TRUE_UNDECIDED, time_limit=value)


@pytest.mark.parametrize("value", ["60", True])
def test_time_limit_must_be_a_number(value):
    with pytest.raises(TypeError, match="time_limit"):
        check_equation(TRUE_UNDECIDED, time_limit=value)


def test_real_sympy_work_past_the_limit_in_a_thread():
    method, detail, _, _ = in_thread(check_equation, SLOW_TRUE, time_limit=LIMIT)
    assert method == "numeric" and detail.startswith(f"the symbolic reduction did not finish within {LIMIT:g} s of CPU time")


def test_real_sympy_work_past_the_limit_in_a_worker_process():
    """As in ``attneb verify --workers W``: the check runs in a process of its own (here spawned)."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        method, detail, _, _ = pool.submit(check_equation, SLOW_TRUE, time_limit=LIMIT).result(timeout=120)
    assert method == "numeric" and detail.startswith(f"the symbolic reduction did not finish within {LIMIT:g} s of CPU time")


# --------------------------------------------------------------------------- derivations: the limit and progress


def test_check_passes_its_limit_to_every_item_and_reports_progress(endless_simplify):
    steps = [Step(eq((x + 1) ** 2, x**2 + 2 * x + 1), "square"), Step(TRUE_UNDECIDED, "arctangents")]
    claims = [ClaimedForm(eq(x + x, 2 * x), "doubling", name=sp.Symbol("d"))]
    toy = Derivation("toy", "toy", [x], steps, [eq(sp.Symbol("r"), x)], claims)
    seen = []
    report = toy.check(time_limit=0.3, progress=lambda *args: seen.append(args))
    assert [(kind, index, method) for kind, index, method, _ in seen] == [
        ("step", 1, "symbolic"), ("step", 2, "numeric"), ("claim", 1, "symbolic")]
    assert all(isinstance(seconds, float) and seconds >= 0 for *_, seconds in seen)
    assert seen[1][3] >= 0.3
    assert report.passed and "did not finish within 0.3 s of CPU time" in report.entries[1].detail
    single = []
    assert toy.check_item("step", 1, progress=lambda *args: single.append(args)).method == "symbolic"
    assert [args[:3] for args in single] == [("step", 1, "symbolic")]
    with pytest.raises(TypeError, match="progress"):
        toy.check_item("step", 1, progress="print")

