"""A time limit on a block of sympy work, in whichever thread runs it (CPython).

:func:`time_limit` starts a watchdog thread; if the block is still running when the limit
passes, the watchdog raises :class:`TimeLimitExceeded` in the thread that runs the block, with
CPython's ``PyThreadState_SetAsyncExc`` (through :mod:`ctypes`). The limit is on the CPU time
of the thread that runs the block (its POSIX thread CPU clock), not on the wall clock, so that an
outcome does not depend on how loaded the machine is (a sympy reduction that takes 10 s of CPU
took 36 s of wall time beside four other processes on 2 cores); where there is no thread CPU
clock (``time.pthread_getcpuclockid`` is missing, as on Windows) it is on the wall clock. A
block that waits (``time.sleep``, I/O) spends no CPU time and is not stopped. Unlike ``signal.SIGALRM`` and
``setitimer``, which interrupt only the main thread and allow one alarm per process, this works
in any thread: in the main thread of ``attneb verify`` and of its worker processes (where
derivation checks run, :mod:`attneb.proofs_check.engine.shared_pool`), in a thread of a notebook or of
a thread pool, and beside another library's alarm.

Like a signal handler's exception, the asynchronous exception is raised between two bytecodes
of the interrupted thread:

- a single long call into C (one huge integer product, ``time.sleep``) is not interrupted; the
  exception comes when it returns;
- the exception is raised once, and is a :class:`BaseException`, so ``except Exception`` in the
  interrupted code does not catch it; a bare ``except:`` (a few small ones in mpmath) would,
  and the block then runs to its end;
- it may land in a ``finally`` block of the interrupted code before that block has restored
  what it changed. sympy keeps such state in its thread-local ``global_parameters``
  (``with evaluate(False)``); :func:`time_limit` puts back the values they had when the block
  began whenever it ends the block.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Callable, Iterator

from sympy.core.parameters import global_parameters

__all__ = ["TimeLimitExceeded", "time_limit"]

#: Seconds between two readings of the watched thread's CPU clock.
POLL = 0.05


class TimeLimitExceeded(BaseException):
    """Raised inside a block that ran past its :func:`time_limit`."""


def _cpu_clock() -> Callable[[], float]:
    """The calling thread's CPU time in seconds, readable from another thread (the wall clock where there is none)."""
    if not hasattr(time, "pthread_getcpuclockid"):
        return time.monotonic
    clock = time.pthread_getcpuclockid(threading.get_ident())
    return lambda: time.clock_gettime(clock)


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make ``exception`` pending in thread ``thread_id`` (None: withdraw a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               None if exception is None else ctypes.py_object(exception))


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in the block if it is still running after ``seconds`` of its thread's CPU time.

    Parameters
    ----------
    seconds : float or None
        The limit, > 0, in CPU seconds of the thread that runs the block (wall seconds where
        the platform has no thread CPU clock); None: no limit (no watchdog is started).

    Notes
    -----
    The watchdog fires at most once. Once the block has ended it cannot fire any more, and an
    exception it made pending but that the block did not raise yet is withdrawn; one that
    arrives while the block ends (the limit passing as the block finishes) is raised from the
    ``with`` statement like any other. When the exception leaves the block, sympy's
    ``global_parameters`` are put back to their values at its start.
    """
    if seconds is None:
        yield
        return
    target = threading.get_ident()
    clock = _cpu_clock()
    deadline = clock() + seconds
    parameters = dict(vars(global_parameters))
    lock = threading.Lock()
    state = {"armed": True, "fired": False}
    finished = threading.Event()

    def watch():
        while (left := deadline - clock()) > 0:
            if finished.wait(min(left, POLL) if clock is not time.monotonic else left):
                return
        with lock:
            if state["armed"]:
                _raise_in(target, TimeLimitExceeded)
                state["fired"] = True

    threading.Thread(target=watch, name="attneb-time-limit", daemon=True).start()
    try:
        yield
    except TimeLimitExceeded:
        for name, value in parameters.items():
            setattr(global_parameters, name, value)  # only a changed value clears sympy's cache
        raise
    finally:
        with lock:
            state["armed"] = False
            if state["fired"]:
                _raise_in(target, None)
        finished.set()
