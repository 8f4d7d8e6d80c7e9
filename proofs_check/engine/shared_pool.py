"""One pool of worker processes for a parallel ``verify``: the claims and their experiments' runs share it.

``verify --workers W`` starts ``W`` processes (one BLAS and kernel thread each, no progress
bars), forks of a fork server that imported the toolkit once (:func:`start_server`). Each
takes, in turn, a run that some check is waiting for or, when none is queued, the next group of
claims, whose checks it runs. A check hands the runs of its experiments
(:func:`attneb.proofs_check.engine.studies.computed`, the sweeps of
:func:`attneb.proofs_check.engine.studies.run_configs`) to its process's :class:`SharedExecutor`, which queues
them where every process of the pool can take them; while the check waits for them, a thread of
its own process computes them too (only its own: no run computes beside another check in
progress, whose process state, warnings filters say, it would share). So one interpreter starts
for the whole run, importing numpy, scipy, sympy and the checks once, and about ``W``
computations run at a time: one per process, except that a process's helper thread may finish
a run while its check has resumed. A run that asks for runs of its own computes them itself, one
after another.

Before this pool, every claim's process started a pool of ``W`` more processes for each of its
sweeps: up to ``W * (W + 1)`` processes at once, and a fresh pool, whose interpreters import
everything again, for every sweep.

A run is a pure function of its arguments and the store keeps the first write of each, so
which process computes a run changes no result. A process that dies (killed for memory, say)
ends the whole run with an error naming the claims it was running: a process that dies inside a
queue's lock leaves the queue unusable, so the pool cannot go on safely. The store keeps every run
finished until then, and the next ``verify`` resumes from it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from multiprocessing import forkserver

from attneb.numerics.sweep.workers import THREAD_VARS, child_environment, init_worker

from . import content

__all__ = ["RemoteTraceback", "SharedExecutor", "in_run", "run_groups", "shared_executor", "start_server"]

#: How long an idle process waits on one queue before it looks at the others (seconds).
_POLL_S = 0.02
#: How often the parent looks for a worker that died (seconds).
_WATCH_S = 1.0

#: What the pool's processes import before they are forked (once, in the fork server): the runner
#: (whose ``_run_claims`` the processes run) and the toolkit's claims.
_PRELOAD = (f"{__name__.rpartition('.')[0]}.runner", *content.DEFAULT_CONTENT)
#: Set in the pool's processes: one BLAS and kernel thread each, no progress bars.
_CHILD_VARIABLES = {**dict.fromkeys(THREAD_VARS, "1"), "TQDM_DISABLE": "1"}

_executor: SharedExecutor | None = None
_local = threading.local()
#: The environment :func:`start_server` started the fork server with (``None``: not started).
_server_environment: dict[str, str] | None = None


def _environment() -> dict[str, str]:
    """The environment of the pool's processes, were they started now."""
    return {**os.environ, **_CHILD_VARIABLES}


def start_server() -> None:
    """Start a fork server for the pools of this process; ``attneb verify`` calls this first.

    The fork server is a fresh interpreter (one BLAS thread, no progress bars) that imports the
    toolkit (``attneb.proofs_check.engine.runner``: numpy, scipy, sympy and every check) once. The processes of
    a later :func:`run_groups` are forks of it, so ``W`` processes cost one import instead of
    ``W`` (about 1.2 s of one core each on a 2-core Xeon VM, 5.5 s on a 16-core gVisor host), and
    started early, the server imports beside the command's own imports. It lives until this
    process ends. A pool uses it only while this process's environment is the one the server
    started with, and spawns fresh processes otherwise, as it does where this was never called
    (a library user's pools, which so import the code as it is at each run): a fork has what the
    server imported, with the settings it read then. Where other code of this process started
    multiprocessing's one fork server first (without the toolkit, with other thread settings),
    nothing is started and pools spawn.
    """
    global _server_environment
    if _server_environment is not None or getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:
        return
    with child_environment(_CHILD_VARIABLES, override=True), _sigint_ignored():
        multiprocessing.get_context("forkserver").set_forkserver_preload(list(_PRELOAD))
        forkserver.ensure_running()
    _server_environment = _environment()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Processes started inside ignore Ctrl-C from the start: the fork server's imports, which run before it
    sets its own handlers, are not interrupted (with a traceback) when Ctrl-C stops the command (which ends them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _context() -> multiprocessing.context.BaseContext:
    """Forks of the server of :func:`start_server` where it runs with this environment, else spawned processes."""
    return multiprocessing.get_context("forkserver" if _server_environment == _environment() else "spawn")


def shared_executor() -> SharedExecutor | None:
    """The pool's executor in a worker process of :func:`run_groups`; ``None`` in any other process or inside a run."""
    return None if in_run() else _executor


def in_run() -> bool:
    """Whether this thread is computing a run of the pool (whose own runs then run in it, one after another)."""
    return getattr(_local, "in_run", False)


class RemoteTraceback(Exception):
    """The traceback of an exception raised in another process (set as the exception's ``__cause__``)."""

    def __str__(self) -> str:
        return self.args[0]


def _failure(exc: BaseException, text: str) -> bytes:
    """``(False, (exc, text))`` pickled, with a ``RuntimeError`` in place of an exception that does not round-trip."""
    try:
        blob = pickle.dumps((False, (exc, text)))
        pickle.loads(blob)
        return blob
    except Exception:  # noqa: BLE001 - e.g. an exception whose __init__ takes other arguments than its args
        return pickle.dumps((False, (RuntimeError(f"{type(exc).__name__}: {exc}"), text)))


def _outcome(func: Callable, args: tuple) -> bytes:
    """``func(*args)`` as a pickled ``(True, result)``, or ``(False, (exception, traceback))``."""
    try:
        result = func(*args)
    except BaseException as exc:  # noqa: BLE001 - handed back to whoever asked for it
        return _failure(exc, traceback.format_exc())
    try:
        return pickle.dumps((True, result))
    except Exception as exc:  # noqa: BLE001
        return _failure(RuntimeError(f"the result could not be sent back: {exc!r}"), traceback.format_exc())


def _unpickled(blob: bytes) -> tuple[bool, object]:
    """The ``(ok, payload)`` of :func:`_outcome`, or a failure saying why it cannot be read here."""
    try:
        return pickle.loads(blob)
    except Exception as exc:  # noqa: BLE001
        return False, (RuntimeError(f"the outcome could not be read back: {exc!r}"), traceback.format_exc())


def _raise(payload) -> None:
    exc, text = payload
    raise exc from RemoteTraceback(text)


def _execute(item: tuple, results: Sequence) -> None:
    """Compute one queued run and send its outcome to the process that submitted it."""
    requester, key, blob = item
    _local.in_run = True
    try:
        ok, payload = _unpickled(blob)
        outcome = _outcome(*payload) if ok else _failure(*payload)
    finally:
        _local.in_run = False
    results[requester].put((key, outcome))


def _fail_all(pending: dict, exc: BaseException) -> None:
    for future in pending.values():
        if future.set_running_or_notify_cancel():
            future.set_exception(exc)
    pending.clear()


class SharedExecutor(Executor):
    """Runs submitted in one worker process of :func:`run_groups`, computed by any process of the pool.

    ``submit`` queues the run and returns a :class:`concurrent.futures.Future` that this process
    completes when the outcome comes back. While a future of this process is pending and not
    cancelled, its helper thread computes this process's queued runs. A cancelled future's run may
    still be computed; its outcome is dropped. An exception raised by a run is raised again by
    ``Future.result()``, with the remote traceback as its ``__cause__`` (:class:`RemoteTraceback`).
    """

    def __init__(self, index: int, runs: Sequence, results: Sequence) -> None:
        self._index, self._runs, self._results = index, runs, results
        self._pending: dict[tuple[int, int], Future] = {}
        self._changed = threading.Condition()
        self._keys = zip(itertools.repeat(os.getpid()), itertools.count())
        for target, name in ((self._receive, "receive"), (self._help, "help")):
            threading.Thread(target=target, daemon=True, name=f"attneb-pool-{name}").start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if kwargs:
            fn = functools.partial(fn, **kwargs)
        blob = pickle.dumps((True, (fn, args)))  # here, so that an unpicklable run raises here
        key = next(self._keys)
        future = Future()
        with self._changed:
            self._pending[key] = future
            self._changed.notify_all()
        self._runs[self._index].put((self._index, key, blob))
        return future

    def _receive(self) -> None:
        try:
            while True:
                key, blob = self._results[self._index].get()
                with self._changed:
                    future = self._pending.pop(key)
                if not future.set_running_or_notify_cancel():  # cancelled: its outcome is dropped
                    continue
                ok, payload = _unpickled(blob)
                if ok:
                    future.set_result(payload)
                else:
                    exc, text = payload
                    exc.__cause__ = RemoteTraceback(text)
                    future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - the queue broke (the process is ending): nothing will come back
            with self._changed:
                _fail_all(self._pending, RuntimeError(f"this process stopped receiving the outcomes of its runs: {exc!r}"))

    def _waiting(self) -> bool:
        return any(not future.cancelled() for future in self._pending.values())

    def _help(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._waiting, timeout=1.0)
                if not self._waiting():
                    continue
            try:
                item = self._runs[self._index].get(timeout=_POLL_S)
            except queue.Empty:
                continue
            except (OSError, ValueError, EOFError):
                return  # the queue is closed: the process is ending
            _execute(item, self._results)


def _worker(index: int, sources: tuple[str, ...], run_claims: Callable, args: tuple, queues: tuple, groups_running,
            stop) -> None:
    """A process of the pool: queued runs first (its own, then the others'), else the next group, until ``stop``."""
    global _executor
    init_worker()
    groups, runs, results, outcomes = queues
    content.load(sources)
    _executor = SharedExecutor(index, runs, results)
    order = [runs[(index + i) % len(runs)] for i in range(len(runs))]
    more_groups = True
    while not stop.is_set():
        item = None
        for pipe in order:
            try:
                item = pipe.get(block=False)
                break
            except queue.Empty:
                pass
        if item is not None:
            _execute(item, results)
            continue
        if not more_groups:
            stop.wait(_POLL_S)
            continue
        try:
            task = groups.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if task is None:
            more_groups = False
            continue
        number, group = task
        groups_running[index] = number
        outcomes.put((number, _outcome(run_claims, (group, *args))))
    for pipe in (groups, *runs, *results):
        pipe.cancel_join_thread()  # what is still unsent is awaited by no one: exit without flushing it


def run_groups(groups: Sequence, run_claims: Callable, args: tuple, *, workers: int,
               sources: Sequence[str] = ()) -> Iterator[tuple[int, object]]:
    """Yield ``(i, run_claims(groups[i], *args))`` for every group, as each completes, computed by a pool of ``workers``.

    Each group is a sequence of tuples whose first item names a claim. ``run_claims`` and
    ``args`` must be picklable (``run_claims`` a module-level function). The processes (one BLAS
    thread each, no progress bars) are forks of the server of :func:`start_server` where it runs
    with this environment, else spawned; they load ``sources`` first (see
    :func:`attneb.proofs_check.engine.content.load`). If ``run_claims`` raises in a worker, the exception is
    raised here, with its traceback as ``__cause__``; if a worker process dies, a
    ``RuntimeError`` names the claims it was running. Closing the generator, or an exception,
    ends every process of the pool at once.
    """
    context = _context()
    queues = (context.Queue(), [context.Queue() for _ in range(workers)], [context.Queue() for _ in range(workers)],
              context.Queue())
    group_queue, outcomes = queues[0], queues[3]
    # the group each process took last (-1: none yet); its outcome may still be on the way
    groups_running = context.Array("q", [-1] * workers, lock=False)
    stop = context.Event()
    processes = [context.Process(target=_worker, name=f"attneb-verify-{i}", daemon=True,
                                 args=(i, tuple(sources), run_claims, args, queues, groups_running, stop))
                 for i in range(workers)]
    completed = False
    try:
        with child_environment(_CHILD_VARIABLES, override=True):
            for process in processes:
                process.start()
        for number, group in enumerate(groups):
            group_queue.put((number, group))
        for _ in processes:
            group_queue.put(None)
        done: set[int] = set()
        while len(done) < len(groups):
            try:
                number, blob = outcomes.get(timeout=_WATCH_S)
            except queue.Empty:
                for i, process in enumerate(processes):
                    if not process.is_alive():
                        running = groups_running[i]
                        what = (f"running the claims {[claim for claim, *_ in groups[running]]}"
                                if running >= 0 and running not in done else "between claims")
                        raise RuntimeError(
                            f"worker process {process.name} of verify's pool died (exit code {process.exitcode}"
                            f"{': killed, out of memory?' if process.exitcode == -9 else ''}), {what}; the store keeps "
                            "the runs finished so far and the next verify resumes from them (with fewer --workers if "
                            "memory ran out)")
                continue
            done.add(number)
            ok, payload = _unpickled(blob)
            if not ok:
                _raise(payload)
            yield number, payload
        completed = True
    finally:
        stop.set()
        # idle processes see stop within _POLL_S and exit cleanly; on an error, or past the deadline, they are ended
        deadline = time.monotonic() + (2.0 if completed else 0.0)
        started = [process for process in processes if process.pid is not None]
        for process in started:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            process.terminate()
        for process in started:
            process.join()
