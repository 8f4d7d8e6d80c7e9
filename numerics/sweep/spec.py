r"""Experiment files: parse and validate a sweep's config, and expand it into runs.

An :class:`Experiment` (from a TOML file through :func:`load_experiment`, or from a dict through
:meth:`Experiment.from_dict`) names a prior, the noise variance, batch sizes ``n``, seeds,
estimators and, for the estimators that use them, a bandwidth schedule ``h2``, a horizon rule
``T``, the layer step ``eta`` and the Stage-1 ``method``. :meth:`Experiment.runs` expands it into
:class:`RunSpec` objects: fully resolved, JSON-serialisable numbers, one per row of results,
each identified by :attr:`RunSpec.key`, the sha256 of its canonical JSON. Every invalid field is
a ``ValueError`` whose message starts with the field.

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

import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import math
import numbers
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import flow as _flow
from .. import priors as _priors
from .canonical import plain, canonical_json
from .registry import ESTIMATORS, build_prior, prior_families


#: Defaults of the optional fields.
DEFAULT_ETA = 0.05
DEFAULT_METHOD = "euler"
DEFAULT_MMSE_N_MC = 20_000
DEFAULT_MMSE_SEED = 0
#: A power-rule bandwidth ``scale * n**-exponent`` is rounded to this many significant digits, so
#: that it (and the run's key) does not depend on the last bit of the platform's ``pow``.
_H2_DIGITS = 12


# --------------------------------------------------------------------------------------------
# Config validation helpers
# --------------------------------------------------------------------------------------------


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
        return plain(dataclasses.asdict(self))

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

    @property
    def path_key(self) -> tuple | None:
        """Two-stage Euler runs with equal path keys (same batch and Stage-1 arguments but ``T``) can share Stage 1
        (:func:`attneb.numerics.flow.particle_flow_at`); ``None`` for every other run."""
        if self.estimator != "two-stage" or self.method not in (None, "euler") or self.T is None:
            return None
        return (*self.batch_key, self.h2, self.eta, self.method, canonical_json(self.options))

    def describe(self) -> str:
        parts = [f"{self.estimator}", f"{self.prior['family']}", f"sigma2={self.sigma2!r}", f"n={self.n}"]
        parts += [f"{k}={getattr(self, k)!r}" for k in ("h2", "T", "eta", "method") if getattr(self, k) is not None]
        parts.append(f"seed={self.seed}")
        if self.options:
            parts.append(f"options={canonical_json(self.options)}")
        return " ".join(parts)

    def build_prior(self) -> _priors.Prior:
        return build_prior(self.prior)

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
        return plain(out)

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
    families = prior_families()
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
    spec.update({k: plain(v) for k, v in params.items()})  # e.g. budget_bytes, as given
    spec.update({k: plain(v) for k, v in prior.params().items()})  # canonical values
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
        out[est] = plain(dict(opts))
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
