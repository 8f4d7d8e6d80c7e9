"""A time limit on a block of sympy work, in whichever thread runs it (CPython).

:func:`time_limit` starts a watchdog thread; if the block is still running when the limit
passes, the watchdog raises :class:`TimeLimitExceeded` in the thread that runs the block, with
CPython's ``PyThreadState_SetAsyncExc`` (through :mod:`ctypes`). Unlike ``signal.SIGALRM`` and
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
from collections.abc import Iterator

from sympy.core.parameters import global_parameters

__all__ = ["TimeLimitExceeded", "time_limit"]


class TimeLimitExceeded(BaseException):
    """Raised inside a block that ran past its :func:`time_limit`."""


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make ``exception`` pending in thread ``thread_id`` (None: withdraw a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               None if exception is None else ctypes.py_object(exception))


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in the block if it is still running after ``seconds``.

    Parameters
    ----------
    seconds : float or None
        The limit, > 0; None: no limit (no watchdog is started).

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
    parameters = dict(vars(global_parameters))
    lock = threading.Lock()
    state = {"armed": True, "fired": False}
    finished = threading.Event()

    def watch():
        if finished.wait(seconds):
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
