"""Local worker processes of a sweep: a spawned process pool, one BLAS thread per worker.

The workers ignore Ctrl-C (the parent stops the pool) and exit when their parent dies, so an
interrupted or killed sweep leaves no worker behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import wait

#: Environment variables that set the thread count of BLAS / OpenMP in worker processes.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@contextlib.contextmanager
def child_environment(values: dict[str, str], *, override: bool):
    """Set ``values`` in ``os.environ`` for the child processes started inside the block, then restore it.

    Spawned children read the environment when they start (numpy reads the thread variables when
    it is imported). With ``override=False`` a variable the user has set keeps its value.
    """
    saved = {var: os.environ.get(var) for var in values}
    for var, value in values.items():
        if override:
            os.environ[var] = value
        else:
            os.environ.setdefault(var, value)
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def single_threaded_children():
    """Start child processes with one BLAS/OpenMP thread each (unless the user set the variables).

    One thread per worker is also the fast choice for one worker: the kernel sums multiply
    ``(rows, d) x (d, N)`` matrices with a small ``d``, for which OpenBLAS threads cost more than
    they bring (see :func:`run_sweep`).
    """
    return child_environment(dict.fromkeys(THREAD_VARS, "1"), override=False)


def _watch_parent(sentinel: int) -> None:
    wait([sentinel])  # ready once the process that started this one has ended
    os._exit(1)


def init_worker() -> None:
    """Worker start-up: leave Ctrl-C to the parent (which stops the pool) and exit if it dies.

    The parent is the process that started this one (:func:`multiprocessing.parent_process`), also
    where a fork server forked it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(multiprocessing.parent_process().sentinel,), daemon=True,
                     name="attneb-parent-watch").start()


def process_pool(workers: int) -> ProcessPoolExecutor:
    # "spawn": fresh interpreters that import numpy with the thread variables set, and no fork
    # of a parent that already runs threads (tqdm's monitor, BLAS).
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=init_worker,
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (their runs in flight are lost)."""
    # ProcessPoolExecutor has no public way to end running workers before Python 3.14.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.terminate()
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.join(timeout=5)
