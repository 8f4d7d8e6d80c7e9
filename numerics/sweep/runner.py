"""Running a sweep: skip what the store holds, execute the rest, write each task's rows as it ends.

:func:`run_sweep` skips the runs whose key a :class:`~attneb.numerics.sweep.ResultStore` already holds,
groups the rest into tasks (:func:`~attneb.numerics.sweep.run_batch` over the runs of one batch) and
maps them through :func:`iter_results`, the one place that knows how tasks are executed:
in-process, or through any :class:`concurrent.futures.Executor` (a process pool for
``workers > 1``, or a ``dask.distributed`` client's ``get_executor()``, see
:mod:`attneb.numerics.distributed`). Rows are written only by the calling process, each task's rows in
one SQLite transaction as soon as the task returns, so an interrupted sweep (Ctrl-C, SIGKILL)
loses at most the tasks in flight and the store stays consistent; running again resumes. A
tqdm bar counts the runs. :func:`sweep_file` is the ``attneb sweep`` job.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass

from .measure import run_batch
from .registry import ESTIMATORS
from .spec import Experiment, RunSpec, load_experiment
from .store import ResultStore
from .workers import process_pool, single_threaded_children, stop_pool


# --------------------------------------------------------------------------------------------
# Tasks and executors
# --------------------------------------------------------------------------------------------


def _tasks(specs: Iterable[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """Group runs by batch: the light runs of a batch and its first heavy unit form one task, every
    other heavy unit is a task of its own (the batch is redrawn, identically, for it). A heavy unit is one
    heavy run, or the two-stage runs of a batch that share a Stage-1 path (:attr:`RunSpec.path_key`).

    Tasks come largest ``n`` first, so that long tasks start early and the pool ends evenly.
    """
    groups: dict[tuple, list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.batch_key, []).append(spec)
    tasks = []
    for group in groups.values():
        light = [s for s in group if not ESTIMATORS[s.estimator].heavy]
        units: dict[object, list[RunSpec]] = {}
        for s in group:
            if ESTIMATORS[s.estimator].heavy:
                units.setdefault(s.key if s.path_key is None else s.path_key, []).append(s)
        heavy = list(units.values())
        tasks.append(tuple(light + (heavy[0] if heavy else [])))
        tasks.extend(tuple(unit) for unit in heavy[1:])
    tasks.sort(key=lambda t: -t[0].n)  # stable: expansion order within equal n
    return tasks


def iter_results(
    tasks: Iterable[Sequence[RunSpec]],
    run: Callable[[Sequence[RunSpec]], list[dict]] = run_batch,
    *,
    executor: Executor | None = None,
    max_in_flight: int | None = None,
) -> Iterator[tuple[Sequence[RunSpec], list[dict]]]:
    """Execute ``run(task)`` for every task; yield ``(task, result)`` as each finishes.

    The seam between the sweep and where runs execute. ``executor=None`` runs the tasks one by
    one in this process. Otherwise tasks go to ``executor.submit`` (any
    :class:`concurrent.futures.Executor`: a process pool, a ``dask.distributed`` client's
    ``get_executor()``), at most ``max_in_flight`` at a time (default ``2 * os.cpu_count()``),
    so that stopping early cancels little. If a task raises, no further task is submitted,
    the tasks already running are still yielded as they finish, then the first error is raised.
    Closing the generator (or an exception in the consumer) cancels the tasks not yet started.
    """
    if executor is None:
        for task in tasks:
            yield task, run(task)
        return
    if max_in_flight is None:
        max_in_flight = 2 * (os.cpu_count() or 1)
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight == {max_in_flight}, must be >= 1")
    todo = iter(tasks)
    running: dict = {}
    error: BaseException | None = None
    try:
        while True:
            while error is None and len(running) < max_in_flight:
                task = next(todo, None)
                if task is None:
                    break
                running[executor.submit(run, task)] = task
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                task = running.pop(future)
                if future.cancelled():
                    continue
                exc = future.exception()
                if exc is not None:
                    error = error or exc
                    continue
                yield task, future.result()
        if error is not None:
            raise error
    finally:
        for future in running:
            future.cancel()


# --------------------------------------------------------------------------------------------
# Sweep
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSummary:
    """What :func:`run_sweep` did."""

    experiment: str
    total: int
    skipped: int
    ran: int
    elapsed_s: float
    store: str

    def __str__(self) -> str:
        rate = f", {self.ran / self.elapsed_s:.2f} runs/s" if self.ran and self.elapsed_s > 0 else ""
        return (
            f"sweep {self.experiment!r}: {self.total} runs, {self.skipped} already in {self.store}, "
            f"{self.ran} ran in {self.elapsed_s:.1f} s{rate}"
        )


def _progress_bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    # disable=None: tqdm shows the bar only when stderr is a terminal.
    return tqdm(total=total, desc=desc, unit="run", disable=None, dynamic_ncols=True)


def run_sweep(
    experiment: Experiment,
    store: ResultStore | str | os.PathLike,
    *,
    workers: int = 1,
    executor: Executor | None = None,
    max_in_flight: int | None = None,
    progress: bool = True,
) -> SweepSummary:
    """Run every run of ``experiment`` that ``store`` does not hold yet; write each task's rows as it ends.

    Parameters
    ----------
    experiment : Experiment
    store : ResultStore or path
        Where rows go (a path is opened, and closed at the end).
    workers : int
        ``1``: run in this process. ``K > 1``: a pool of ``K`` spawned worker processes, each
        with one BLAS thread. The rows do not depend on ``K`` (except :data:`VOLATILE_COLUMNS`).
    executor : concurrent.futures.Executor, optional
        Run the tasks through this executor instead (e.g. a ``dask.distributed`` client's
        ``get_executor()``); ``workers`` is then ignored. It is not shut down here.
    max_in_flight : int, optional
        Tasks submitted at once (default ``2 * workers``, or ``2 * os.cpu_count()`` with ``executor``).
    progress : bool
        Show a tqdm progress bar (on a terminal) counting runs.

    Returns
    -------
    SweepSummary

    Notes
    -----
    Ctrl-C stops submitting, ends the workers and re-raises ``KeyboardInterrupt``; the rows of
    the finished tasks are in the store and the next call resumes. If a run raises, no new task
    starts, the tasks running are finished and stored, and :class:`RunFailed` is raised.

    One BLAS thread per process is deliberate: a two-stage run at ``N = 1000``, ``d = 1`` took
    1.74 s with OpenBLAS on 2 threads and 0.55 s on 1 (bit-identical results).
    """
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers == {workers!r}, must be an integer >= 1")
    own_store = not isinstance(store, ResultStore)
    if own_store:
        store = ResultStore(store)
    start = time.perf_counter()
    try:
        specs = experiment.runs()
        finished = store.finished_keys(experiment.name)
        pending = [s for s in specs if s.key not in finished]
        tasks = _tasks(pending)
        bar = _progress_bar(len(pending), experiment.name, progress and bool(pending))
        ran = 0
        pool = None
        completed = False
        try:
            with contextlib.ExitStack() as stack:
                if executor is None and workers > 1 and len(tasks) > 1:
                    stack.enter_context(single_threaded_children())
                    pool = executor = process_pool(workers)
                    max_in_flight = max_in_flight or 2 * workers
                for _task, rows in iter_results(tasks, run_batch, executor=executor, max_in_flight=max_in_flight):
                    store.add(rows)
                    ran += len(rows)
                    if bar is not None:
                        bar.update(len(rows))
                completed = True
        finally:
            if pool is not None:
                if completed:
                    pool.shutdown(wait=True)
                else:
                    stop_pool(pool)
            if bar is not None:
                bar.close()
        return SweepSummary(
            experiment=experiment.name,
            total=len(specs),
            skipped=len(specs) - len(pending),
            ran=ran,
            elapsed_s=time.perf_counter() - start,
            store=str(store.path),
        )
    finally:
        if own_store:
            store.close()


def sweep_file(
    config,
    store,
    *,
    workers: int = 1,
    progress: bool = True,
    csv_path=None,
    executor: Executor | None = None,
    scheduler=None,
) -> SweepSummary:
    """The ``attneb sweep CONFIG --store PATH [--workers K | --scheduler ADDRESS] [--csv OUT]`` job.

    Loads the experiment, runs what the store lacks and, with ``csv_path``, exports the
    experiment's rows (all of them, old and new). ``scheduler`` (a ``dask.distributed`` address,
    see :func:`attneb.numerics.distributed.dask_executor`) runs the tasks on that cluster's workers
    while this process writes the store; it excludes ``executor`` and ``workers > 1``.
    """
    experiment = load_experiment(config)
    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            if executor is not None or workers != 1:
                raise ValueError(f"scheduler == {scheduler!r} excludes executor and workers == {workers!r}; "
                                 "the cluster's workers run the tasks")
            from ..distributed import dask_executor

            executor = stack.enter_context(dask_executor(scheduler))
        result_store = stack.enter_context(ResultStore(store))
        summary = run_sweep(experiment, result_store, workers=workers, executor=executor, progress=progress)
        if csv_path is not None:
            result_store.to_csv(csv_path, experiment=experiment.name)
    return summary
