"""One pool of worker processes for a parallel ``verify``: the claims and their experiments' runs share it.

``verify --workers W`` starts ``W`` spawned processes (one BLAS and kernel thread each, no
progress bars) and no others. Each process takes, in turn, a run that some check is waiting
for or, when none is queued, the next group of claims, whose checks it runs. A check hands the
runs of its experiments (:func:`proofs_check.studies.computed`, the sweeps of
:func:`proofs_check.studies.run_configs`) to its process's :class:`SharedExecutor`, which queues
them for the whole pool; while the check waits for them, a thread of its process runs queued
runs too (its own or another check's). So at most ``W`` processes compute at any time, however
many checks have runs in flight, and ``W`` interpreters start (each importing numpy, scipy
and sympy) for the whole run.

Before this pool, every claim's process started a pool of ``W`` more processes for each of its
sweeps: up to ``W * (W + 1)`` processes at once, and a fresh pool, whose interpreters import
everything again, for every sweep.

A run is a pure function of its arguments and the store keeps the first write of each, so
which process computes a run changes no result.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import os
import pickle
import queue
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from pathlib import Path

from numerics.sweep.workers import THREAD_VARS, _init_worker, child_environment

__all__ = ["RemoteTraceback", "SharedExecutor", "run_groups", "shared_executor"]

#: How long an idle process waits on one queue before it looks at the other (seconds).
_POLL_S = 0.02
#: How often the parent looks for a worker that died (seconds).
_WATCH_S = 1.0

_executor: SharedExecutor | None = None


def shared_executor() -> SharedExecutor | None:
    """The pool's executor in a worker process of :func:`run_groups`; ``None`` in any other process."""
    return _executor


class RemoteTraceback(Exception):
    """The traceback of an exception that a run raised in another process (set as the exception's ``__cause__``)."""

    def __str__(self) -> str:
        return self.args[0]


def _pickled_outcome(key, func: Callable, args: tuple) -> bytes:
    """Run ``func(*args)``; ``(key, True, result)`` or ``(key, False, (exception, traceback))``, pickled."""
    try:
        outcome = (key, True, func(*args))
    except BaseException as exc:  # noqa: BLE001 - handed back to whoever submitted the run
        outcome = (key, False, (exc, traceback.format_exc()))
    try:
        return pickle.dumps(outcome)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception
        text = f"the outcome of the run could not be sent back: {exc!r}\n" + (outcome[2][1] if not outcome[1] else "")
        return pickle.dumps((key, False, (RuntimeError(text.splitlines()[0]), text)))


def _execute(item: bytes, results: Sequence) -> None:
    """Run one queued run and send its outcome to the queue of the process that submitted it."""
    requester, key, func, args = pickle.loads(item)
    results[requester].put(_pickled_outcome(key, func, args))


class SharedExecutor(Executor):
    """Runs submitted in one worker process of :func:`run_groups`, executed by any process of the pool.

    ``submit`` queues the run for the pool and returns a :class:`concurrent.futures.Future`
    that this process completes when the outcome comes back. While runs of this process are
    pending, one of its threads executes queued runs (any process's): the check that waits for
    them keeps its core busy. A cancelled future's run may still execute; its outcome is dropped.
    An exception raised by a run is re-raised by ``Future.result()`` with the remote traceback
    as its ``__cause__`` (:class:`RemoteTraceback`).
    """

    def __init__(self, index: int, runs, results: Sequence) -> None:
        self._index, self._runs, self._results = index, runs, results
        self._pending: dict[int, Future] = {}
        self._changed = threading.Condition()
        self._keys = itertools.count()
        for target, name in ((self._receive, "receive"), (self._help, "help")):
            threading.Thread(target=target, daemon=True, name=f"attneb-pool-{name}").start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if kwargs:
            fn = functools.partial(fn, **kwargs)
        key = next(self._keys)
        item = pickle.dumps((self._index, key, fn, args))  # here, so that an unpicklable run raises here
        future = Future()
        with self._changed:
            self._pending[key] = future
            self._changed.notify_all()
        self._runs.put(item)
        return future

    def _receive(self) -> None:
        while True:
            key, ok, payload = pickle.loads(self._results[self._index].get())
            with self._changed:
                future = self._pending.pop(key)
            if not future.set_running_or_notify_cancel():
                continue
            if ok:
                future.set_result(payload)
            else:
                exc, text = payload
                exc.__cause__ = RemoteTraceback(text)
                future.set_exception(exc)

    def _help(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending)
            try:
                item = self._runs.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            _execute(item, self._results)


def _worker(index: int, parent: int, sources: tuple[str, ...], run_claims: Callable, args: tuple,
            queues: tuple, stop) -> None:
    """A process of the pool: queued runs first, else the next group of claims, until ``stop`` is set."""
    global _executor
    from .runner import load

    _init_worker(parent)
    groups, runs, results, outcomes = queues
    load(sources)
    _executor = SharedExecutor(index, runs, results)
    more_groups = True
    while not stop.is_set():
        try:
            _execute(runs.get(timeout=0 if more_groups else _POLL_S), results)
            continue
        except queue.Empty:
            if not more_groups:
                continue
        try:
            task = groups.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if task is None:
            more_groups = False
            continue
        number, group = task
        outcomes.put(_pickled_outcome(number, run_claims, (group, *args)))
    for pipe in (groups, runs, *results, outcomes):
        pipe.cancel_join_thread()  # what is still unsent is no longer awaited: exit without flushing it


def run_groups(groups: Sequence, run_claims: Callable, args: tuple, *, workers: int,
               sources: Sequence[str] = ()) -> Iterator[tuple[int, object]]:
    """Yield ``(i, run_claims(groups[i], *args))`` for every group, as each completes, computed by a pool of ``workers``.

    ``run_claims`` and ``args`` must be picklable (``run_claims`` a module-level function).
    The processes are spawned with one BLAS thread each and no progress bars, and load
    ``sources`` first (see :func:`proofs_check.runner.load`). If ``run_claims`` raises in a
    worker, the exception is raised here, with its traceback as ``__cause__``; if a worker
    process ends, a ``RuntimeError`` says so. Closing the generator, or an exception, ends
    every process of the pool.
    """
    context = multiprocessing.get_context("spawn")
    queues = (context.Queue(), context.Queue(), [context.Queue() for _ in range(workers)], context.Queue())
    group_queue, outcomes = queues[0], queues[3]
    stop = context.Event()
    with child_environment({**dict.fromkeys(THREAD_VARS, "1"), "TQDM_DISABLE": "1"}, override=True):
        processes = [context.Process(target=_worker, name=f"attneb-verify-{i}",
                                     args=(i, os.getpid(), tuple(sources), run_claims, args, queues, stop))
                     for i in range(workers)]
        for process in processes:
            process.start()
    try:
        for number, group in enumerate(groups):
            group_queue.put((number, group))
        for _ in processes:
            group_queue.put(None)
        for _ in groups:
            while True:
                try:
                    number, ok, payload = pickle.loads(outcomes.get(timeout=_WATCH_S))
                    break
                except queue.Empty:
                    ended = [p for p in processes if not p.is_alive()]
                    if ended:
                        raise RuntimeError(f"worker process {ended[0].name} of verify's pool ended (exit code "
                                           f"{ended[0].exitcode}) before the claims were done") from None
            if not ok:
                exc, text = payload
                raise exc from RemoteTraceback(text)
            yield number, payload
    finally:
        stop.set()
        for process in processes:
            process.join(timeout=2 * _WATCH_S)
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join()
