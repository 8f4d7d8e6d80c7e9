"""Experiments E1-E5: what each stores, and how its figure is drawn back from the store.

A :class:`Study` is one experiment of the report. Its data live in the report folder's
SQLite store (:class:`attneb.numerics.sweep.ResultStore`): risk sweeps as rows of the ``runs``
table under experiment names ``"<study>-<part>-<mode>"``, other measurements as records.
Its check (in :mod:`attneb.proofs_check.topics.stage2.recovery` or :mod:`attneb.proofs_check.topics.stability.onset`)
fills the store, resuming whatever an interrupted run left, and draws and saves the figures through
:meth:`Study.plot`; ``attneb plot NAME --store PATH`` calls the same :meth:`Study.plot`,
so a figure is redrawn from stored numbers without recomputing anything. In a notebook,
:meth:`Study.figures` returns the same :class:`matplotlib.figure.Figure` objects without writing
files::

    from attneb.proofs_check.engine import content
    from attneb.proofs_check.engine.studies import STUDIES

    content.load_default()  # registers every study
    [fig] = STUDIES["E5"].figures("report/results.sqlite", quick=True)

A power analysis may have stored more seeds of the same experiments (a pool it subsamples); every
figure, like every decision of ``attneb verify``, uses only the seeds its configuration names.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from tqdm import tqdm

from attneb.numerics import sweep
from attneb.numerics.sweep.workers import THREAD_VARS, child_environment

from .plotting import save
from .shared_pool import in_run, shared_executor

__all__ = ["STUDIES", "Study", "computed", "default_workers", "mode_name", "run_configs", "store_missing", "stored_rows",
           "study"]


@dataclass(frozen=True)
class Study:
    """One experiment: a name (``"E1"``), a title and the figures drawn from a store.

    Attributes
    ----------
    name, title : str
        Identifier used by ``attneb plot`` and a one-line description.
    claims : tuple of str
        The claims whose evidence the figures show (``attneb show``).
    files : tuple of str
        File names, without suffix, of the figures, in the order ``draw`` returns them
        (``("E5_clean_context",)``): :meth:`plot` writes ``<file>.png`` and ``<file>.pdf`` for each.
    draw : callable
        ``draw(store, quick) -> tuple of matplotlib.figure.Figure``: read the study's data of one mode
        from an open :class:`attneb.numerics.sweep.ResultStore` and draw one figure per entry of
        ``files``, writing nothing. Raises ``LookupError`` when the store holds none of the study's
        data for that mode.
    """

    name: str
    title: str
    claims: tuple[str, ...]
    files: tuple[str, ...]
    draw: Callable[[sweep.ResultStore, bool], tuple[Figure, ...]]

    def figures(self, store_path: Path, *, quick: bool = False) -> tuple[Figure, ...]:
        """Draw the study's figures of one mode from the store at ``store_path``, without writing files.

        Parameters
        ----------
        store_path : pathlib.Path
            The SQLite store of a report folder (``results.sqlite``).
        quick : bool
            The quick mode's data (``attneb verify --quick``) rather than the full mode's.

        Returns
        -------
        tuple of matplotlib.figure.Figure
            One per entry of :attr:`files`, in that order; no backend is switched and nothing is written.

        Raises
        ------
        FileNotFoundError
            If there is no store at ``store_path``.
        LookupError
            If the store holds none of the study's data for that mode.
        """
        store_path = Path(store_path)
        if not store_path.is_file():
            raise FileNotFoundError(f"store {store_path} does not exist; run 'attneb verify' to fill it")
        with sweep.ResultStore(store_path) as store:
            return self.draw(store, quick)

    def plot(self, store_path: Path, folder: Path, *, quick: bool = False) -> list[Path]:
        """Draw the study's figures (:meth:`figures`) and save each as PNG and PDF into ``folder``.

        Parameters
        ----------
        store_path : pathlib.Path
            The SQLite store of a report folder.
        folder : pathlib.Path
            Where ``<file>.png`` and ``<file>.pdf`` are written for each of :attr:`files` (created if missing).
        quick : bool
            The quick mode's data rather than the full mode's.

        Returns
        -------
        list of pathlib.Path
            The PNG paths, in the order of :attr:`files`; each PDF lies beside its PNG.
        """
        figures = self.figures(store_path, quick=quick)
        return [save(fig, Path(folder), file) for fig, file in zip(figures, self.files, strict=True)]


STUDIES: dict[str, Study] = {}


def study(name: str, title: str, claims: tuple[str, ...] = (), *, files: tuple[str, ...]) -> Callable:
    """Decorator registering ``draw(store, quick)`` as the figures of study ``name``, evidence of ``claims``.

    ``files`` names the figures ``draw`` returns, in order (see :class:`Study`).
    """

    def register(draw):
        if name in STUDIES:
            raise ValueError(f"study {name!r} is already registered")
        STUDIES[name] = Study(name, title, tuple(claims), tuple(files), draw)
        return draw

    return register


def mode_name(study_name: str, part: str, quick: bool) -> str:
    """Name of one part of a study in the store: ``"E1-gaussian-quick"``."""
    return f"{study_name}-{part}-{'quick' if quick else 'full'}"


def default_workers() -> int:
    """Worker processes of the studies' sweeps by default: one per core, at most 2 (the reference CI machine)."""
    return max(1, min(2, len(os.sched_getaffinity(0))))


def run_configs(configs: list[dict], store_path: Path, *, workers: int = 1) -> dict[str, list[dict]]:
    """Run (or resume) the sweeps ``configs`` into the store with ``workers`` processes; rows by experiment name.

    With ``workers > 1`` in a process of a parallel ``verify``, the runs go to its pool
    (:mod:`attneb.proofs_check.engine.shared_pool`) instead of a pool of their own; inside a run of that
    pool, they run here.
    """
    shared = shared_executor() if workers > 1 else None
    local_workers = 1 if shared is not None or in_run() else workers
    rows = {}
    with sweep.ResultStore(store_path) as store:
        for config in configs:
            experiment = sweep.Experiment.from_dict(config)
            sweep.run_sweep(experiment, store, workers=local_workers, executor=shared,
                            max_in_flight=2 * workers if shared else None, progress=True)
            rows[experiment.name] = store.rows(experiment.name)
    return rows


def stored_rows(store: sweep.ResultStore, names: list[str]) -> dict[str, list[dict]]:
    """Rows of the experiments ``names``; ``LookupError`` naming those the store lacks."""
    rows = {name: store.rows(name) for name in names}
    missing = [name for name, r in rows.items() if not r]
    if missing:
        raise LookupError(f"{store.path} holds no rows of {', '.join(missing)}; run 'attneb verify' "
                          "(with --quick for the quick mode) to compute them")
    return rows


def store_missing(store, experiment: str, wanted, run, key, workers: int) -> None:
    """Compute ``run(*args)`` for every ``args`` of ``wanted`` whose record ``key(*args)`` the open ``store`` lacks under
    ``experiment`` (with :func:`computed`, in ``workers`` processes), storing each record as it finishes."""
    done = store.record_keys(experiment)
    todo = [args for args in wanted if key(*args) not in done]
    for args, record in computed(todo, run, workers, experiment):
        store.add_record(experiment, key(*args), record)


def computed(todo: list[tuple], run, workers: int, desc: str):
    """Yield ``(args, run(*args))`` for every ``args`` of ``todo``, as each finishes.

    In this process when ``workers <= 1`` (where monkeypatches and swapped implementations
    apply) or inside a run of the pool; else in the pool of a parallel ``verify``
    (:mod:`attneb.proofs_check.engine.shared_pool`) when this process belongs to one, or in a pool of
    ``workers`` spawned processes with one BLAS thread each; ``2 * workers`` runs at most are
    submitted and not finished at once (:func:`attneb.numerics.sweep.iter_results`). The caller stores
    each record as it comes, so an interrupted run loses only the runs in flight.
    """
    if workers <= 1 or len(todo) < 2 or in_run():
        for args in tqdm(todo, desc=desc, unit="run", disable=None, dynamic_ncols=True):
            yield args, run(*args)
        return
    with contextlib.ExitStack() as stack:
        executor = shared_executor()
        if executor is None:
            stack.enter_context(child_environment(dict.fromkeys(THREAD_VARS, "1"), override=False))
            executor = ProcessPoolExecutor(max_workers=min(workers, len(todo)),
                                           mp_context=multiprocessing.get_context("spawn"))
            stack.callback(executor.shutdown, wait=False, cancel_futures=True)
        bar = stack.enter_context(tqdm(total=len(todo), desc=desc, unit="run", disable=None, dynamic_ncols=True))
        for args, record in sweep.iter_results(todo, functools.partial(_unpacked, run), executor=executor,
                                               max_in_flight=2 * workers):
            bar.update()
            yield args, record


def _unpacked(run, args: tuple):
    """``run(*args)``: a picklable adapter of a run to :func:`attneb.numerics.sweep.iter_results`' one argument."""
    return run(*args)
