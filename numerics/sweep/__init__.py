r"""Declarative experiments: expand a config into runs, execute them, keep tidy rows in SQLite.

An :class:`Experiment` (from a TOML file through :func:`load_experiment`, or from a dict through
:meth:`Experiment.from_dict`) names a prior, the noise variance, batch sizes ``n``, seeds,
estimators and, for the estimators that use them, a bandwidth schedule ``h2``, a horizon rule
``T``, the layer step ``eta`` and the Stage-1 ``method``. :meth:`Experiment.runs` expands it into
:class:`RunSpec` objects: fully resolved, JSON-serialisable numbers, one per row of results,
each identified by :attr:`RunSpec.key`, the sha256 of its canonical JSON.

One run draws the batch of its seed (:func:`numerics.experiments.draw_batch`, so the batch is
the same in whichever process it is drawn), fits and applies its estimator and records the MSE,
the gap to the Bayes posterior mean, the Bayes risk (MMSE) and the excess risk ``MSE - MMSE``,
in-sample (the estimator denoises the batch it was fitted on) and out-of-sample (``oos_*``: it
denoises ``n`` fresh noisy queries of the same seed, :func:`numerics.experiments.draw_queries`,
drawn from an independent stream and not in the context; ``runtime_s`` times the in-sample work).
Runs that share a batch (same prior, ``sigma2``, ``n`` and seed) are executed together in one
task (:func:`run_batch`), which draws the batch once; the numbers are those of :func:`run_one`.

:func:`run_sweep` skips the runs whose key a :class:`ResultStore` already holds and maps
:func:`run_batch` over the rest through :func:`iter_results`, the one place that knows how
tasks are executed: in-process, or through any :class:`concurrent.futures.Executor` (a process
pool for ``workers > 1``, later a ``dask.distributed`` client's ``get_executor()``). Rows are
written only by the calling process, each task's rows in one SQLite transaction as soon as the
task returns, so an interrupted sweep (Ctrl-C, SIGKILL) loses at most the tasks in flight and
the store stays consistent; running again resumes.

TOML schema (see ``examples/sweeps/``)::

    name = "two-cluster-recovery"        # required; part of every run's key
    description = "..."                  # optional, free text, not part of any key
    sigma2 = 0.5                         # number or list (a list sweeps it)
    n = [256, 512, 1024]                 # list of ints >= 1
    seeds = [0, 1, 2]                    # list of ints >= 0, or {start = 0, count = 10}
    estimators = ["two-stage", "stage-two-only", "tweedie-kde", "linear", "oracle", "npmle"]
                                         # also "clean-context": Stage 2 over the clean draws
    h2 = {rule = "power", scale = 0.5, exponent = 0.25}   # h2 = scale * n**-exponent;
                                         # or {rule = "log", scale = 1.0}: h2 = scale / log(n);
                                         # or a number, or a list of numbers (swept)
    T = "leading"                        # T = sigma2 / (2 h2); or a number (fixed), a list (grid),
                                         # {rule = "leading"}, {rule = "fixed", value = 2.0},
                                         # {rule = "scale", factor = 0.5 or [0.5, 1, 2]},
                                         # {rule = "grid", values = [0.5, 1.0, 2.0]}
    eta = 0.05                           # number or list; Euler layer step (two-stage, euler)
    method = "euler"                     # "euler", "ode" or a list

    [prior]                              # family = a class of numerics.priors, then its arguments
    family = "GaussianMixture"
    means = [[-2.0], [2.0]]
    var = 0.25

    [options.npmle]                      # optional: keyword arguments of that estimator's
                                         # constructor (checked against its signature)

    [mmse]                               # optional: Monte Carlo settings of the Bayes risk
    n_mc = 20000                         # (used only by priors without an exact or quadrature MMSE)
    seed = 0

Each estimator's run carries only the hyperparameters it uses (``h2`` for ``tweedie-kde``;
``h2``, ``T``, ``method`` and, for ``method = "euler"``, ``eta`` for ``two-stage``); the others
are ``None``, so sweeping ``h2`` does not repeat the runs of the estimators that ignore it.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as _dt
import functools
import hashlib
import importlib.metadata
import inspect
import itertools
import json
import math
import multiprocessing
import numbers
import os
import platform
import signal
import sqlite3
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import estimators as _estimators
from .. import experiments as _experiments
from .. import flow as _flow
from .. import priors as _priors

__all__ = [
    "COLUMNS",
    "ESTIMATORS",
    "EstimatorEntry",
    "Experiment",
    "ResultStore",
    "RunFailed",
    "RunSpec",
    "SweepSummary",
    "VOLATILE_COLUMNS",
    "iter_results",
    "load_experiment",
    "run_batch",
    "run_one",
    "run_sweep",
    "sweep_file",
]

#: Defaults of the optional fields.
DEFAULT_ETA = 0.05
DEFAULT_METHOD = "euler"
DEFAULT_MMSE_N_MC = 20_000
DEFAULT_MMSE_SEED = 0
#: A power-rule bandwidth ``scale * n**-exponent`` is rounded to this many significant digits, so
#: that it (and the run's key) does not depend on the last bit of the platform's ``pow``.
_H2_DIGITS = 12
#: Environment variables that set the thread count of BLAS / OpenMP in worker processes.
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
#: Version of the store's row schema (SQLite ``user_version``). 2 added the out-of-sample columns
#: ``oos_mse``, ``oos_gap`` and ``oos_excess``; a store of another version is refused, not migrated.
_SCHEMA_VERSION = 2


class RunFailed(RuntimeError):
    """A run raised; the message names the run (key and parameters) and the original error."""


# --------------------------------------------------------------------------------------------
# Estimator registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EstimatorEntry:
    """How the sweep builds one estimator.

    Attributes
    ----------
    name : str
        Short name used in configs and rows.
    load : callable
        Returns the estimator class.
    uses : tuple of str
        The sweep hyperparameters the estimator takes, among ``"h2"``, ``"T"``, ``"eta"``,
        ``"method"``; a run of this estimator carries only these.
    needs_prior : bool
        Whether the constructor takes the true prior (the oracle).
    heavy : bool
        Whether one run costs much more than a kernel sum over the batch (a particle flow, an
        optimisation); heavy runs of one batch go to separate tasks, light ones share a task.
    context : {"noisy", "clean"}
        The tokens the estimator is fitted on; it always denoises the noisy tokens. ``"clean"``
        is the clean-context special case (an attention step over the prior draws themselves).
    """

    name: str
    load: Callable[[], type]
    uses: tuple[str, ...] = ()
    needs_prior: bool = False
    heavy: bool = False
    context: str = "noisy"

    def managed(self) -> tuple[str, ...]:
        """Constructor arguments set by the sweep itself (never through ``options``)."""
        return ("sigma2", *self.uses, *(("prior",) if self.needs_prior else ()))


ESTIMATORS: dict[str, EstimatorEntry] = {
    e.name: e
    for e in (
        EstimatorEntry("two-stage", lambda: _estimators.TwoStageDenoiser, ("h2", "T", "eta", "method"), heavy=True),
        EstimatorEntry("stage-two-only", lambda: _estimators.StageTwoOnly),
        EstimatorEntry("tweedie-kde", lambda: _estimators.TweedieKDE, ("h2",)),
        EstimatorEntry("linear", lambda: _estimators.LinearShrinkage),
        EstimatorEntry("oracle", lambda: _estimators.OracleBayes, needs_prior=True),
        EstimatorEntry("npmle", lambda: _estimators.NPMLE, heavy=True),
        EstimatorEntry("clean-context", lambda: _estimators.StageTwoOnly, context="clean"),
    )
}


def _prior_families() -> dict[str, type]:
    out = {}
    for name in _priors.__all__:
        obj = getattr(_priors, name)
        if isinstance(obj, type) and issubclass(obj, _priors.Prior) and not inspect.isabstract(obj):
            out[name] = obj
    return out


# --------------------------------------------------------------------------------------------
# Canonical JSON and config validation helpers
# --------------------------------------------------------------------------------------------


def _plain(value):
    """``value`` with numpy scalars/arrays and tuples turned into JSON-ready Python objects."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, floats by ``repr`` (shortest round-trip), no nan/inf."""
    return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _real(value, name: str, *, low=None, low_open=True, high=None) -> float:
    if not _is_real(value):
        raise ValueError(f"{name} == {value!r} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} == {value}, must be finite")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} == {value}, must be {'>' if low_open else '>='} {low}")
    if high is not None and value > high:
        raise ValueError(f"{name} == {value}, must be <= {high}")
    return value


def _int(value, name: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} == {value!r} must be an integer, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} == {value}, must be >= {low}")
    return int(value)


def _unique(values: Sequence, name: str) -> tuple:
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{name} lists {v!r} more than once; each value must appear once")
        seen.add(v)
    return tuple(values)


def _listed(value, name: str, item: Callable[[Any, str], Any]) -> tuple:
    """A scalar or a non-empty list of scalars, each checked by ``item``; returns a tuple."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{name} is an empty list; give at least one value")
        return _unique([item(v, f"{name}[{i}]") for i, v in enumerate(value)], name)
    return (item(value, name),)


def _check_keys(table: Mapping, allowed: Iterable[str], name: str, required: Iterable[str] = ()) -> None:
    allowed = tuple(allowed)
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        where = f"in {name}" if name else "at the top level"
        raise ValueError(f"unknown key {unknown[0]!r} {where}; expected keys among {allowed}")
    for key in required:
        if key not in table:
            raise ValueError(f"{name + '.' if name else ''}{key} is required")


def _table(value, name: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} == {value!r} must be a table (a dict)")
    return value


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class H2Schedule:
    """Bandwidth as a function of ``n``: fixed values, ``scale * n**-exponent`` or ``scale / log(n)`` (rounded).

    The ``"log"`` rule keeps ``N`` far above the stability bound ``N_c = exp(2 sigma2 / (e h2))``
    (claim S1): ``N_c = N**(2 sigma2 / (e scale))``, a fixed power of ``N`` below 1 when
    ``scale > 2 sigma2 / e``; the ``"power"`` rule makes ``N_c`` grow faster than any power of ``N``.
    """

    rule: str  # "fixed", "power" or "log"
    values: tuple[float, ...] = ()
    scale: float | None = None
    exponent: float | None = None

    @classmethod
    def parse(cls, value) -> "H2Schedule":
        if isinstance(value, Mapping):
            rule = value.get("rule")
            if rule == "power":
                _check_keys(value, ("rule", "scale", "exponent"), "h2", ("scale", "exponent"))
                return cls(
                    "power",
                    scale=_real(value["scale"], "h2.scale", low=0.0),
                    exponent=_real(value["exponent"], "h2.exponent"),
                )
            if rule == "log":
                _check_keys(value, ("rule", "scale"), "h2", ("scale",))
                return cls("log", scale=_real(value["scale"], "h2.scale", low=0.0))
            if rule == "fixed":
                _check_keys(value, ("rule", "value"), "h2", ("value",))
                return cls("fixed", _listed(value["value"], "h2.value", lambda v, n: _real(v, n, low=0.0)))
            raise ValueError(f"h2.rule == {rule!r} is not a known rule; expected one of ('power', 'log', 'fixed')")
        return cls("fixed", _listed(value, "h2", lambda v, n: _real(v, n, low=0.0)))

    def at(self, n: int) -> tuple[float, ...]:
        if self.rule == "fixed":
            return self.values
        if self.rule == "log":
            if n < 2:
                raise ValueError(f"h2 = scale / log(n) needs n >= 2, got n == {n}")
            return (float(f"{self.scale / math.log(n):.{_H2_DIGITS}g}"),)
        return (float(f"{self.scale * float(n) ** (-self.exponent):.{_H2_DIGITS}g}"),)

    def to_config(self):
        if self.rule == "fixed":
            return list(self.values) if len(self.values) > 1 else self.values[0]
        if self.rule == "log":
            return {"rule": "log", "scale": self.scale}
        return {"rule": "power", "scale": self.scale, "exponent": self.exponent}


@dataclass(frozen=True)
class TRule:
    """Stage-1 horizon: ``leading`` (``sigma2 / (2 h2)``), ``scale`` (factors of it), or absolute values."""

    rule: str  # "leading", "scale", "fixed" or "grid"
    values: tuple[float, ...] = (1.0,)

    @classmethod
    def parse(cls, value) -> "TRule":
        nonneg = lambda v, n: _real(v, n, low=0.0, low_open=False)  # noqa: E731
        if isinstance(value, str):
            value = {"rule": value}
        if not isinstance(value, Mapping):
            return cls("grid" if isinstance(value, (list, tuple)) else "fixed", _listed(value, "T", nonneg))
        rule = value.get("rule")
        if rule == "leading":
            _check_keys(value, ("rule",), "T")
            return cls("leading", (1.0,))
        if rule == "scale":
            _check_keys(value, ("rule", "factor"), "T", ("factor",))
            return cls("scale", _listed(value["factor"], "T.factor", nonneg))
        if rule == "fixed":
            _check_keys(value, ("rule", "value"), "T", ("value",))
            return cls("fixed", (nonneg(value["value"], "T.value"),))
        if rule == "grid":
            _check_keys(value, ("rule", "values"), "T", ("values",))
            if not isinstance(value["values"], (list, tuple)):
                raise ValueError(f"T.values == {value['values']!r} must be a list of numbers")
            return cls("grid", _listed(value["values"], "T.values", nonneg))
        raise ValueError(
            f"T.rule == {rule!r} is not a known rule; expected one of ('leading', 'scale', 'fixed', 'grid')"
        )

    def at(self, sigma2: float, h2: float) -> tuple[float, ...]:
        if self.rule in ("leading", "scale"):
            return tuple(f * _flow.leading_horizon(sigma2, h2) for f in self.values)
        return self.values

    def to_config(self):
        if self.rule == "leading":
            return "leading"
        if self.rule == "scale":
            return {"rule": "scale", "factor": list(self.values)}
        if self.rule == "fixed":
            return {"rule": "fixed", "value": self.values[0]}
        return {"rule": "grid", "values": list(self.values)}


# --------------------------------------------------------------------------------------------
# Run specification
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=True)
class RunSpec:
    """One run, fully resolved; its :attr:`key` is the sha256 of :meth:`to_json`.

    ``h2``, ``T``, ``eta`` and ``method`` are ``None`` for estimators that do not use them.
    ``prior`` is ``{"family": <class name>, <constructor argument>: <value>, ...}`` in canonical
    form (arrays as nested lists, default weights written out).
    """

    experiment: str
    prior: dict
    sigma2: float
    n: int
    seed: int
    estimator: str
    h2: float | None = None
    T: float | None = None
    eta: float | None = None
    method: str | None = None
    options: dict = field(default_factory=dict)
    mmse_n_mc: int = DEFAULT_MMSE_N_MC
    mmse_seed: int = DEFAULT_MMSE_SEED

    def __post_init__(self):
        # Same numbers, same key: 1 and 1.0 must not give two runs.
        for name in ("sigma2", "h2", "T", "eta"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))
        for name in ("n", "seed", "mmse_n_mc", "mmse_seed"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.estimator not in ESTIMATORS:
            raise ValueError(
                f"estimator == {self.estimator!r} is not a known estimator; expected one of {tuple(ESTIMATORS)}"
            )

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self) -> dict:
        return _plain(dataclasses.asdict(self))

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace, floats by ``repr``."""
        return canonical_json(self.to_dict())

    @functools.cached_property
    def key(self) -> str:
        """``sha256`` hex digest of :meth:`to_json`: the same in every process and on every machine."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping) -> "RunSpec":
        names = {f.name for f in dataclasses.fields(cls)}
        _check_keys(data, names, "RunSpec")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        return cls.from_dict(json.loads(text))

    @property
    def batch_key(self) -> tuple:
        """Runs with equal batch keys see the same noisy batch."""
        return (canonical_json(self.prior), self.sigma2, self.n, self.seed)

    def describe(self) -> str:
        parts = [f"{self.estimator}", f"{self.prior['family']}", f"sigma2={self.sigma2!r}", f"n={self.n}"]
        parts += [f"{k}={getattr(self, k)!r}" for k in ("h2", "T", "eta", "method") if getattr(self, k) is not None]
        parts.append(f"seed={self.seed}")
        if self.options:
            parts.append(f"options={canonical_json(self.options)}")
        return " ".join(parts)

    def build_prior(self) -> _priors.Prior:
        return _build_prior(self.prior)

    def build_estimator(self, prior: _priors.Prior | None = None):
        entry = ESTIMATORS[self.estimator]
        kwargs = {"sigma2": self.sigma2}
        for name in entry.uses:
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        if entry.needs_prior:
            kwargs["prior"] = prior if prior is not None else self.build_prior()
        return entry.load()(**kwargs, **self.options)


def _build_prior(spec: Mapping) -> _priors.Prior:
    params = dict(spec)
    return _prior_families()[params.pop("family")](**params)


# --------------------------------------------------------------------------------------------
# Experiment
# --------------------------------------------------------------------------------------------

_TOP_KEYS = (
    "name", "description", "prior", "sigma2", "n", "seeds", "estimators",
    "h2", "T", "eta", "method", "options", "mmse",
)  # fmt: skip


@dataclass(frozen=True)
class Experiment:
    """A validated, declarative sweep; :meth:`runs` expands it into :class:`RunSpec` objects.

    Build one with :meth:`from_dict` or :func:`load_experiment` (TOML); the module docstring
    gives the schema. Every error is a ``ValueError`` whose message starts with the field.
    """

    name: str
    prior: dict
    sigma2: tuple[float, ...]
    n: tuple[int, ...]
    seeds: tuple[int, ...]
    estimators: tuple[str, ...]
    h2: H2Schedule | None = None
    T: TRule = TRule("leading")
    eta: tuple[float, ...] = (DEFAULT_ETA,)
    method: tuple[str, ...] = (DEFAULT_METHOD,)
    options: dict = field(default_factory=dict)
    mmse_n_mc: int = DEFAULT_MMSE_N_MC
    mmse_seed: int = DEFAULT_MMSE_SEED
    description: str = ""

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))

    @classmethod
    def from_dict(cls, config: Mapping, *, source: str | None = None) -> "Experiment":
        """Validate a config dict (the TOML document as parsed by ``tomllib``).

        ``source`` (e.g. the file name) prefixes every error message.
        """
        try:
            return cls._from_dict(config)
        except ValueError as exc:
            if source is None:
                raise
            raise ValueError(f"{source}: {exc}") from exc

    @classmethod
    def _from_dict(cls, config: Mapping) -> "Experiment":
        config = _table(config, "experiment")
        _check_keys(config, _TOP_KEYS, "", ("name", "prior", "sigma2", "n", "seeds", "estimators"))
        name = config["name"]
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name == {name!r} must be a non-empty string")
        description = config.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"description == {description!r} must be a string")

        prior, _ = _parse_prior(config["prior"])
        sigma2 = _listed(config["sigma2"], "sigma2", lambda v, n: _real(v, n, low=0.0))
        if not isinstance(config["n"], (list, tuple, numbers.Integral)) or isinstance(config["n"], bool):
            raise ValueError(f"n == {config['n']!r} must be an integer or a list of integers")
        ns = _listed(config["n"], "n", lambda v, n: _int(v, n, low=1))
        seeds = _parse_seeds(config["seeds"])

        names = config["estimators"]
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, (list, tuple)) or not names:
            raise ValueError(f"estimators == {names!r} must be a non-empty list of names from {tuple(ESTIMATORS)}")
        for i, est in enumerate(names):
            if est not in ESTIMATORS:
                raise ValueError(
                    f"estimators[{i}] == {est!r} is not a known estimator; expected one of {tuple(ESTIMATORS)}"
                )
        names = _unique(list(names), "estimators")
        uses = {u for est in names for u in ESTIMATORS[est].uses}

        h2 = None
        if "h2" in config:
            h2 = H2Schedule.parse(config["h2"])
        elif "h2" in uses:
            users = [e for e in names if "h2" in ESTIMATORS[e].uses]
            raise ValueError(f"h2 is required by estimator {users[0]!r}; give a number, a list or a rule table")
        T = TRule.parse(config.get("T", "leading"))
        eta = _listed(config.get("eta", DEFAULT_ETA), "eta", lambda v, n: _real(v, n, low=0.0, high=1.0))
        method = _listed(
            config.get("method", DEFAULT_METHOD),
            "method",
            lambda v, n: v if isinstance(v, str) and v in _flow.SOLVERS else _bad_option(v, n, tuple(_flow.SOLVERS)),
        )

        options = _parse_options(config.get("options", {}), names)
        mmse = _table(config.get("mmse", {}), "mmse")
        _check_keys(mmse, ("n_mc", "seed"), "mmse")
        mmse_n_mc = _int(mmse.get("n_mc", DEFAULT_MMSE_N_MC), "mmse.n_mc", low=2)
        mmse_seed = _int(mmse.get("seed", DEFAULT_MMSE_SEED), "mmse.seed", low=0)

        if "linear" in names and min(ns) < 2:
            raise ValueError(f"n == {min(ns)}: estimator 'linear' needs n >= 2 to estimate a covariance")
        return cls(
            name=name,
            prior=prior,
            sigma2=sigma2,
            n=ns,
            seeds=seeds,
            estimators=names,
            h2=h2,
            T=T,
            eta=eta,
            method=method,
            options=options,
            mmse_n_mc=mmse_n_mc,
            mmse_seed=mmse_seed,
            description=description,
        )

    def to_dict(self) -> dict:
        """A config dict that :meth:`from_dict` maps back to an equal experiment."""
        out = {
            "name": self.name,
            "prior": self.prior,
            "sigma2": list(self.sigma2),
            "n": list(self.n),
            "seeds": list(self.seeds),
            "estimators": list(self.estimators),
            "T": self.T.to_config(),
            "eta": list(self.eta),
            "method": list(self.method),
            "mmse": {"n_mc": self.mmse_n_mc, "seed": self.mmse_seed},
        }
        if self.h2 is not None:
            out["h2"] = self.h2.to_config()
        if self.options:
            out["options"] = self.options
        if self.description:
            out["description"] = self.description
        return _plain(out)

    def runs(self) -> list[RunSpec]:
        """Every run, in a fixed order (sigma2, n, seed, estimator, h2, T, method, eta), without duplicates."""
        out: dict[str, RunSpec] = {}
        for sigma2, n, seed, est in itertools.product(self.sigma2, self.n, self.seeds, self.estimators):
            for params in self._hyper(est, sigma2, n):
                spec = RunSpec(
                    experiment=self.name,
                    prior=self.prior,
                    sigma2=sigma2,
                    n=n,
                    seed=seed,
                    estimator=est,
                    options=self.options.get(est, {}),
                    mmse_n_mc=self.mmse_n_mc,
                    mmse_seed=self.mmse_seed,
                    **params,
                )
                out.setdefault(spec.key, spec)
        return list(out.values())

    def _hyper(self, est: str, sigma2: float, n: int) -> Iterator[dict]:
        uses = ESTIMATORS[est].uses
        h2s = self.h2.at(n) if "h2" in uses else (None,)
        for h2 in h2s:
            if "T" not in uses:
                yield {"h2": h2}
                continue
            for T in self.T.at(sigma2, h2):
                for method in self.method:
                    etas = self.eta if method == "euler" else (None,)
                    for eta in etas:
                        yield {"h2": h2, "T": T, "method": method, "eta": eta}


def _bad_option(value, name, options):
    raise ValueError(f"{name} == {value!r} is not a known option; expected one of {options}")


def _parse_seeds(value) -> tuple[int, ...]:
    if isinstance(value, Mapping):
        _check_keys(value, ("start", "count"), "seeds", ("count",))
        start = _int(value.get("start", 0), "seeds.start", low=0)
        count = _int(value["count"], "seeds.count", low=1)
        return tuple(range(start, start + count))
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"seeds == {value!r} must be a list of integers or a table {{start = 0, count = 10}}")
    return _listed(list(value), "seeds", lambda v, n: _int(v, n, low=0))


def _parse_prior(value) -> tuple[dict, _priors.Prior]:
    """Canonical prior spec (the prior's declared parameters, as plain lists) and the prior."""
    value = _table(value, "prior")
    families = _prior_families()
    if "family" not in value:
        raise ValueError(f"prior.family is required; expected one of {tuple(families)}")
    family = value["family"]
    if family not in families:
        raise ValueError(f"prior.family == {family!r} is not a known prior; expected one of {tuple(families)}")
    cls = families[family]
    params = {k: v for k, v in value.items() if k != "family"}
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    _check_keys(params, accepted, "prior")
    try:
        prior = cls(**params)
    except TypeError as exc:
        raise ValueError(f"prior ({family}): {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"prior.{exc}") from exc
    spec = {"family": family}
    spec.update({k: _plain(v) for k, v in params.items()})  # e.g. budget_bytes, as given
    spec.update({k: _plain(getattr(prior, k)) for k in cls._param_names})  # canonical values
    return spec, prior


def _parse_options(value, names: Sequence[str]) -> dict:
    value = _table(value, "options")
    out = {}
    for est, opts in value.items():
        if est not in ESTIMATORS:
            raise ValueError(f"options.{est}: {est!r} is not a known estimator; expected one of {tuple(ESTIMATORS)}")
        if est not in names:
            raise ValueError(f"options.{est} is given but {est!r} is not in estimators {tuple(names)}")
        opts = _table(opts, f"options.{est}")
        entry = ESTIMATORS[est]
        try:
            cls = entry.load()
        except ImportError as exc:
            raise ValueError(f"options.{est}: {exc}") from exc
        accepted = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", *entry.managed())]
        for key in opts:
            if key in entry.managed():
                raise ValueError(
                    f"options.{est}.{key}: {key!r} is set by the sweep itself; "
                    f"set it at the top level of the experiment instead"
                )
        _check_keys(opts, accepted, f"options.{est}")
        out[est] = _plain(dict(opts))
    return out


def load_experiment(path) -> Experiment:
    """Read and validate an experiment from a TOML file."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            config = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    return Experiment.from_dict(config, source=str(path))


# --------------------------------------------------------------------------------------------
# Executing runs
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _mmse(prior_json: str, sigma2: float, n_mc: int, seed: int) -> _priors.RiskEstimate:
    prior = _build_prior(json.loads(prior_json))
    return prior.mmse(sigma2, rng=np.random.default_rng(seed), n_mc=n_mc)


@functools.lru_cache(maxsize=1)
def _versions() -> dict:
    import scipy

    try:
        attneb = importlib.metadata.version("attneb")
    except importlib.metadata.PackageNotFoundError:
        attneb = "unknown"
    return {
        "attneb_version": attneb,
        "numpy_version": np.__version__,
        "scipy_version": scipy.__version__,
        "python_version": platform.python_version(),
    }


def run_one(spec: RunSpec) -> dict:
    """Execute one run and return its row (a dict with the keys of :data:`COLUMNS`)."""
    return run_batch([spec])[0]


def run_batch(specs: Sequence[RunSpec]) -> list[dict]:
    """Execute runs that share one batch (same prior, ``sigma2``, ``n``, seed): one row per run.

    The batch is drawn once; every row equals what :func:`run_one` gives for its spec.
    Raises :class:`RunFailed` naming the run if an estimator raises.
    """
    specs = list(specs)
    if not specs:
        return []
    first = specs[0]
    if any(s.batch_key != first.batch_key for s in specs):
        raise ValueError("run_batch needs runs that share prior, sigma2, n and seed; group them by RunSpec.batch_key")
    prior = first.build_prior()
    clean, noisy = _experiments.draw_batch(prior, first.sigma2, first.n, first.seed)
    bayes = prior.posterior_mean(noisy, first.sigma2)
    q_clean, q_noisy = _experiments.draw_queries(prior, first.sigma2, first.n, first.seed)
    q_bayes = prior.posterior_mean(q_noisy, first.sigma2)
    rows = []
    for spec in specs:
        try:
            risk = _mmse(canonical_json(spec.prior), spec.sigma2, spec.mmse_n_mc, spec.mmse_seed)
            estimator = spec.build_estimator(prior)
            context = clean if ESTIMATORS[spec.estimator].context == "clean" else noisy
            start = time.perf_counter()
            est = estimator.fit(context).denoise(noisy)
            runtime = time.perf_counter() - start
            oos = estimator.denoise(q_noisy)
        except Exception as exc:  # noqa: BLE001 - re-raised with the run named
            raise RunFailed(f"run {spec.key[:12]} ({spec.describe()}) failed: {type(exc).__name__}: {exc}") from exc
        mse = float(np.mean((est - clean) ** 2))
        oos_mse = float(np.mean((oos - q_clean) ** 2))
        layers = getattr(estimator, "n_layers_", None)
        rows.append(
            {
                "key": spec.key,
                "experiment": spec.experiment,
                "estimator": spec.estimator,
                "prior": spec.prior["family"],
                "dim": int(prior.dim),
                "sigma2": spec.sigma2,
                "n": spec.n,
                "seed": spec.seed,
                "h2": spec.h2,
                "T": spec.T,
                "eta": spec.eta,
                "method": spec.method,
                "n_layers": None if layers is None else int(layers),
                "mse": mse,
                "mmse": float(risk.value),
                "mmse_error": float(risk.error),
                "mmse_method": risk.method,
                "gap": float(np.mean((est - bayes) ** 2)),
                "excess": mse - float(risk.value),
                "oos_mse": oos_mse,
                "oos_gap": float(np.mean((oos - q_bayes) ** 2)),
                "oos_excess": oos_mse - float(risk.value),
                "runtime_s": runtime,
                "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
                **_versions(),
                "options": canonical_json(spec.options),
                "spec": spec.to_json(),
            }
        )
    return rows


def _tasks(specs: Iterable[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """Group runs by batch: the light runs of a batch and its first heavy run form one task, every
    other heavy run is a task of its own (the batch is redrawn, identically, for it).

    Tasks come largest ``n`` first, so that long tasks start early and the pool ends evenly.
    """
    groups: dict[tuple, list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.batch_key, []).append(spec)
    tasks = []
    for group in groups.values():
        light = [s for s in group if not ESTIMATORS[s.estimator].heavy]
        heavy = [s for s in group if ESTIMATORS[s.estimator].heavy]
        tasks.append(tuple(light + heavy[:1]))
        tasks.extend((h,) for h in heavy[1:])
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
# Worker processes
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _single_threaded_children():
    """Start child processes with one BLAS/OpenMP thread each (unless the user set the variables).

    Spawned workers read these variables when they import numpy. One thread per worker is also
    the fast choice for one worker: the kernel sums multiply ``(rows, d) x (d, N)`` matrices with
    a small ``d``, for which OpenBLAS threads cost more than they bring (see :func:`run_sweep`).
    """
    saved = {var: os.environ.get(var) for var in _THREAD_VARS}
    for var in _THREAD_VARS:
        os.environ.setdefault(var, "1")
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


def _init_worker(parent_pid: int) -> None:
    """Worker start-up: leave Ctrl-C to the parent (which stops the pool) and exit if it dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="attneb-parent-watch").start()


def _process_pool(workers: int) -> ProcessPoolExecutor:
    # "spawn": fresh interpreters that import numpy with the thread variables set, and no fork
    # of a parent that already runs threads (tqdm's monitor, BLAS).
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(os.getpid(),),
    )


def _stop_pool(pool: ProcessPoolExecutor) -> None:
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


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------

#: Row schema: (column, SQLite type). ``key`` is the primary key.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "TEXT PRIMARY KEY"),
    ("experiment", "TEXT NOT NULL"),
    ("estimator", "TEXT NOT NULL"),
    ("prior", "TEXT NOT NULL"),
    ("dim", "INTEGER NOT NULL"),
    ("sigma2", "REAL NOT NULL"),
    ("n", "INTEGER NOT NULL"),
    ("seed", "INTEGER NOT NULL"),
    ("h2", "REAL"),
    ("T", "REAL"),
    ("eta", "REAL"),
    ("method", "TEXT"),
    ("n_layers", "INTEGER"),
    ("mse", "REAL NOT NULL"),
    ("mmse", "REAL NOT NULL"),
    ("mmse_error", "REAL NOT NULL"),
    ("mmse_method", "TEXT NOT NULL"),
    ("gap", "REAL NOT NULL"),
    ("excess", "REAL NOT NULL"),
    ("oos_mse", "REAL NOT NULL"),
    ("oos_gap", "REAL NOT NULL"),
    ("oos_excess", "REAL NOT NULL"),
    ("runtime_s", "REAL NOT NULL"),
    ("finished_at", "TEXT NOT NULL"),
    ("attneb_version", "TEXT NOT NULL"),
    ("numpy_version", "TEXT NOT NULL"),
    ("scipy_version", "TEXT NOT NULL"),
    ("python_version", "TEXT NOT NULL"),
    ("options", "TEXT NOT NULL"),
    ("spec", "TEXT NOT NULL"),
)
_NAMES = tuple(name for name, _ in COLUMNS)
_TYPES = {name: kind.split()[0] for name, kind in COLUMNS}
_NULLABLE = {name for name, kind in COLUMNS if "NOT NULL" not in kind and "PRIMARY KEY" not in kind}
#: Columns that differ between two executions of the same run (timing, clock, environment).
VOLATILE_COLUMNS = ("runtime_s", "finished_at", "attneb_version", "numpy_version", "scipy_version", "python_version")
_ORDER = "experiment, estimator, prior, sigma2, n, h2, T, method, eta, seed, key"


class ResultStore:
    """Tidy rows of finished runs in one SQLite file (WAL journal), keyed by :attr:`RunSpec.key`.

    Every :meth:`add` is one transaction: after a crash at any moment the file holds whole rows
    only. Rows are only added, never updated (``INSERT OR IGNORE``: a key already present keeps
    its first row). ``synchronous=NORMAL``: a committed row survives the process being killed;
    only a power loss or OS crash may drop the last commits (never corrupting the file).

    Parameters
    ----------
    path : str or Path
        The database file; created with its table if missing.
    timeout : float
        Seconds to wait for another process's write lock.
    """

    def __init__(self, path, *, timeout: float = 30.0):
        self.path = Path(path)
        self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _SCHEMA_VERSION):
            self._conn.close()
            raise ValueError(f"{self.path} has store schema version {version}; this attneb writes {_SCHEMA_VERSION}: "
                             "start a fresh store (a new report folder, or another --store path)")
        with self._transaction():
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{n} {k}' for n, k in COLUMNS)})")
            self._conn.execute("CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, experiment TEXT NOT NULL, "
                               "payload TEXT NOT NULL, finished_at TEXT NOT NULL)")
            self._conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _transaction(self):
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def add(self, rows: Iterable[Mapping]) -> int:
        """Insert rows (dicts with the keys of :data:`COLUMNS`) in one transaction; returns how many were new."""
        values = [tuple(row[name] for name in _NAMES) for row in rows]
        if not values:
            return 0
        sql = f"INSERT OR IGNORE INTO runs ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"
        with self._transaction():
            before = self._conn.total_changes
            self._conn.executemany(sql, values)
            return self._conn.total_changes - before

    def finished_keys(self, experiment: str | None = None) -> set[str]:
        """Keys of the stored runs (of one experiment, or all)."""
        if experiment is None:
            cur = self._conn.execute("SELECT key FROM runs")
        else:
            cur = self._conn.execute("SELECT key FROM runs WHERE experiment = ?", (experiment,))
        return {key for (key,) in cur}

    def rows(self, experiment: str | None = None) -> list[dict]:
        """Stored rows as dicts (columns of :data:`COLUMNS`), in a fixed order."""
        where, args = ("", ()) if experiment is None else (" WHERE experiment = ?", (experiment,))
        cur = self._conn.execute(f"SELECT {', '.join(_NAMES)} FROM runs{where} ORDER BY {_ORDER}", args)
        return [dict(zip(_NAMES, values)) for values in cur]

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def add_record(self, experiment: str, key: str, payload: Mapping) -> bool:
        """Keep one finished unit of an experiment that is not a risk sweep (a JSON-serialisable mapping).

        Same guarantees as :meth:`add`: one transaction, first write of a key wins. Returns
        whether the record was new.
        """
        text = canonical_json(payload)
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        with self._transaction():
            before = self._conn.total_changes
            self._conn.execute("INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?)", (key, experiment, text, stamp))
            return self._conn.total_changes > before

    def records(self, experiment: str) -> dict[str, dict]:
        """The records of ``experiment`` by key (see :meth:`add_record`)."""
        cur = self._conn.execute("SELECT key, payload FROM records WHERE experiment = ? ORDER BY key", (experiment,))
        return {key: json.loads(payload) for key, payload in cur}

    def record_keys(self, experiment: str) -> set[str]:
        """The keys of ``experiment``'s records, without reading their payloads."""
        cur = self._conn.execute("SELECT key FROM records WHERE experiment = ?", (experiment,))
        return {key for (key,) in cur}

    def to_csv(self, path, experiment: str | None = None) -> int:
        """Write the rows (of one experiment, or all) to a CSV file with a header; returns the row count.

        ``None`` is written as an empty field (the nullable columns are never an empty string);
        floats by ``repr``, so :meth:`read_csv` gives back the rows exactly.
        """
        rows = self.rows(experiment)
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(_NAMES)
            for row in rows:
                writer.writerow(["" if row[n] is None else row[n] for n in _NAMES])
        return len(rows)

    @staticmethod
    def read_csv(path) -> list[dict]:
        """Rows from a CSV written by :meth:`to_csv`, with the column types of :data:`COLUMNS`."""
        cast = {"INTEGER": int, "REAL": float, "TEXT": str}
        with open(path, newline="", encoding="utf-8") as fh:
            return [
                {k: (None if v == "" and k in _NULLABLE else cast[_TYPES[k]](v)) for k, v in row.items()}
                for row in csv.DictReader(fh)
            ]

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check``: ``"ok"`` for a sound file."""
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"


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
                    stack.enter_context(_single_threaded_children())
                    pool = executor = _process_pool(workers)
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
                    _stop_pool(pool)
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
    see :func:`numerics.distributed.dask_executor`) runs the tasks on that cluster's workers
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
