"""Declarative experiments: expand a config into runs, execute them, keep tidy rows in SQLite.

One concern per module:

- :mod:`~attneb.numerics.sweep.spec`: experiment files (TOML schema), their validation
  (:class:`Experiment`, :func:`load_experiment`) and expansion into runs (:class:`RunSpec`,
  keyed by the sha256 of its canonical JSON, :mod:`~attneb.numerics.sweep.canonical`);
- :mod:`~attneb.numerics.sweep.registry`: the estimators a sweep can run (:data:`ESTIMATORS`) and the
  prior families;
- :mod:`~attneb.numerics.sweep.measure`: one task, runs that share a batch measured into rows
  (:func:`run_batch`, :func:`run_one`);
- :mod:`~attneb.numerics.sweep.store`: the SQLite store (:class:`ResultStore`): one transaction per
  task, first write of a key wins, resumable after SIGKILL;
- :mod:`~attneb.numerics.sweep.provenance`: the code that computed a stored result
  (:func:`source_fingerprint`); a store reads only the running code's results unless told to
  reuse others;
- :mod:`~attneb.numerics.sweep.runner` and :mod:`~attneb.numerics.sweep.workers`: running a sweep
  (:func:`run_sweep`, :func:`sweep_file`, :func:`iter_results`): executors, the local process
  pool, progress, resumption.

Every public name of these modules is imported here (``__all__`` lists the main ones); import
them from ``attneb.numerics.sweep``, whose interface does not depend on this layout.
"""

from .canonical import canonical_json
from .measure import RunFailed, run_batch, run_one
from .provenance import REUSE_VARIABLE, reuse_other_code, source_fingerprint
from .registry import ESTIMATORS, EstimatorEntry
from .runner import SweepSummary, iter_results, run_sweep, sweep_file
from .spec import (
    DEFAULT_ETA,
    DEFAULT_METHOD,
    DEFAULT_MMSE_N_MC,
    DEFAULT_MMSE_SEED,
    Experiment,
    H2Schedule,
    RunSpec,
    TRule,
    load_experiment,
)
from .store import COLUMNS, VOLATILE_COLUMNS, ResultStore

__all__ = [
    "COLUMNS",
    "ESTIMATORS",
    "EstimatorEntry",
    "Experiment",
    "ResultStore",
    "REUSE_VARIABLE",
    "RunFailed",
    "RunSpec",
    "SweepSummary",
    "VOLATILE_COLUMNS",
    "iter_results",
    "load_experiment",
    "run_batch",
    "run_one",
    "reuse_other_code",
    "run_sweep",
    "source_fingerprint",
    "sweep_file",
]
