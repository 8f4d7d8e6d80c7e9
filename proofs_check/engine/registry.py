"""Claims, the checks that bear on them, and the wrong theories each check must reject.

A :class:`Claim` is an id (C6; docs/theory.md lists them), a one-sentence statement and its assumptions. A check
is a function ``check(ctx: Context) -> Evidence`` registered against a claim with :func:`check`;
it measures something (a residual against a tolerance, a fitted rate with its interval, a
difference with its interval over seeds) and says whether the measurement supports the claim. A
check never returns a bare boolean: its :class:`Evidence` carries the numbers.

Every check names, beside itself, the plausible wrong theories it must reject: each an
:class:`Alternative` that swaps one or more attributes of the code (a theory evaluator, a
constant, a numeric routine, or the function that turns stored measurements into the data a
decision sees) for the wrong version while the check runs. :mod:`attneb.proofs_check.engine.power` runs every
check under the true theory and under each alternative, over replicates of its randomness, and
reports its size (how often the truth fails) and its power (how often each alternative is
rejected). The pass criterion is registered with the check (``criterion``), fixed before the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attneb import theory
from attneb.theory.derivation import markdown_text

__all__ = [
    "CLAIMS",
    "KINDS",
    "PACKAGES_ROOT",
    "QUESTION_NOTE",
    "REPLICATIONS",
    "SEED_STRIDE",
    "Alternative",
    "Check",
    "Claim",
    "Context",
    "Evidence",
    "Swap",
    "alternative",
    "check",
    "claim",
    "resolve",
    "scaled_output",
    "source_of",
    "swap",
]

#: Replicate ``r`` of a check with fresh seeds uses its seeds shifted by ``r * SEED_STRIDE``.
SEED_STRIDE = 100_003

#: The folder holding the toolkit's packages (``theory/``, ``numerics/``, ``proofs_check/``): where-paths are
#: relative to it (in a checkout, the repository; installed, the ``attneb`` folder of site-packages).
PACKAGES_ROOT = Path(__file__).resolve().parents[2]


def _relative(path: str) -> str:
    """``path`` relative to the toolkit's folder, else to the current folder (a user's file), else as it is."""
    resolved = Path(path).resolve()
    for root in (PACKAGES_ROOT, Path.cwd()):
        if resolved.is_relative_to(root):
            return str(resolved.relative_to(root))
    return str(path)


def source_of(obj: Any) -> str:
    """``path:line`` where a function, class or module is defined (path relative to the toolkit's folder), or ``""``."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    try:
        path = inspect.getsourcefile(obj)
        line = obj.__code__.co_firstlineno if hasattr(obj, "__code__") else inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return ""
    return f"{_relative(path)}:{line}" if path else ""


def _caller(depth: int = 2) -> str:
    """``path:line`` of the code ``depth`` frames up (the one that called the registering function)."""
    frame = sys._getframe(depth)
    return f"{_relative(frame.f_code.co_filename)}:{frame.f_lineno}"


@dataclass(frozen=True)
class Context:
    """What a check may know about the run: its mode, where results go, and which replicate it is.

    Attributes
    ----------
    quick : bool
        Smaller problems (``attneb verify --quick``), still real checks.
    out : pathlib.Path
        The report folder; sweeps keep their rows in ``out / "results.sqlite"`` (so an
        interrupted ``verify`` resumes) and figures are written next to the report.
    workers : int
        Worker processes of the experiments' sweeps (their rows do not depend on it; 1 runs
        every run in this process).
    replicate : int
        0 in ``attneb verify``. In a power analysis, replicate ``r >= 1`` asks the check to run
        on an independent draw of its randomness (:meth:`fresh_seeds`), or, for checks whose
        simulations are stored, on a random subset of a larger pool of seeds
        (:meth:`subsample_seeds`).
    pool : int
        How many times its registered number of seeds a subsampled check simulates (1 in
        ``attneb verify``; more in a power analysis, so that replicates are subsets of a pool).
    power : bool
        True inside a power analysis: checks skip their figures.
    cache : dict
        Results shared by the checks of one run (a derivation checked once for several claims, a
        simulation measured once and decided under several theories).
    """

    quick: bool
    out: Path
    workers: int = 1
    replicate: int = 0
    pool: int = 1
    power: bool = False
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def store_path(self) -> Path:
        """SQLite store of the experiments' rows."""
        return self.out / "results.sqlite"

    def fresh_seeds(self, seeds: Sequence[int]) -> list[int]:
        """The seeds of this replicate: ``seeds`` for replicate 0, else ``seeds`` shifted by ``replicate * SEED_STRIDE``."""
        return [int(s) + self.replicate * SEED_STRIDE for s in seeds]

    def pool_seeds(self, count: int, start: int = 0) -> list[int]:
        """Every seed a subsampled check simulates: ``start, ..., start + count * pool - 1``."""
        return list(range(start, start + count * self.pool))

    def subsample_seeds(self, count: int, start: int = 0) -> list[int]:
        """The ``count`` seeds of this replicate: the first ``count`` for replicate 0, else a random subset of the pool.

        Averaged over replicates, the pass rate of a decision on these subsets is the U-statistic
        estimate of its pass rate with ``count`` independent seeds (unbiased, but with the
        variance of about ``pool`` independent replicates, not of one per subset).
        """
        if self.replicate == 0:
            return list(range(start, start + count))
        pool = self.pool_seeds(count, start)
        if len(pool) < count:
            raise ValueError(f"pool of {len(pool)} seeds is smaller than the {count} a replicate needs")
        chosen = np.random.default_rng([self.replicate, count, start]).choice(pool, size=count, replace=False)
        return sorted(int(s) for s in chosen)


@dataclass(frozen=True)
class Evidence:
    """What one check measured.

    Attributes
    ----------
    passed : bool
        Whether the measurement supports the claim.
    kind : str
        ``"identity"`` (residual vs tolerance), ``"rate"`` (fitted exponent with an interval),
        ``"interval"`` (a statistic with a confidence interval over seeds), ``"symbolic"``
        (a sympy proof) or ``"numeric"`` (a high-precision evaluation, not a proof).
    summary : str
        One line a reader can check by eye.
    data : dict
        The numbers behind the summary (JSON-serialisable).
    figures : tuple of str
        Figures the check drew, as file names in the report folder (PNG; a PDF sits beside each).
    markdown : str
        A block for ``report.md`` beyond the summary (a table), or empty.
    """

    passed: bool
    kind: str
    summary: str
    data: dict[str, Any] = field(default_factory=dict)
    figures: tuple[str, ...] = ()
    markdown: str = ""


# --------------------------------------------------------------------------------------------
# Alternatives
# --------------------------------------------------------------------------------------------

#: Kinds of alternative. ``theory``: a prediction or constant of the theory is swapped (the
#: measurement is unchanged and may be reused); ``data``: the measured data are replaced by what
#: the wrong theory would produce (reused measurement, transformed); ``implementation``: a
#: numeric routine is swapped, so the measurement itself must be made again (fresh store, one
#: process).
KINDS = ("theory", "data", "implementation")


_INHERITED = object()


def resolve(target: str) -> tuple[Any, str]:
    """``"package.module:attr"`` or ``"package.module:Class.attr"`` -> (owner object, attribute name).

    Raises ``ValueError`` for a malformed target, ``ImportError`` for a missing module and
    ``AttributeError`` for a missing attribute: a swap or a ``covers`` entry that names nothing
    is an error, never a silent no-op.
    """
    module_name, sep, path = target.partition(":")
    if not sep or not path:
        raise ValueError(f"swap target {target!r} must read 'package.module:attribute' (or ':Class.attribute')")
    owner: Any = importlib.import_module(module_name)
    *parents, attribute = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    if not hasattr(owner, attribute):
        raise AttributeError(f"swap target {target!r}: {owner!r} has no attribute {attribute!r}")
    return owner, attribute


@dataclass(frozen=True)
class Swap:
    """Replace ``target`` (``"package.module:attr"``) by ``make(real)`` while an alternative is applied."""

    target: str
    make: Callable[[Any], Any]


def swap(target: str, make: Callable[[Any], Any]) -> Swap:
    """A :class:`Swap` of ``target`` by ``make(real_value)``; use ``lambda real: value`` for a constant."""
    return Swap(target, make)


@dataclass(frozen=True)
class Alternative:
    """A plausible wrong theory (or implementation) that a check must reject.

    Attributes
    ----------
    name : str
        Short name, e.g. ``"horizon correction 1/4"``.
    description : str
        What is swapped, in words.
    swaps : tuple of Swap
        The attributes replaced while the alternative is applied.
    kind : str
        One of :data:`KINDS`.
    source : str
        ``path:line`` where it was built (``attneb show``).
    """

    name: str
    description: str
    swaps: tuple[Swap, ...]
    kind: str = "theory"
    source: str = field(default="", compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind == {self.kind!r}; must be one of {KINDS}")
        if not self.swaps:
            raise ValueError(f"alternative {self.name!r} swaps nothing; give at least one swap()")

    def _repr_markdown_(self) -> str:
        """Name, kind, description, the swapped targets and where it was built."""
        where = f"; built at `{self.source}`" if self.source else ""
        targets = ", ".join(f"`{s.target}`" for s in self.swaps)
        return (f"**{markdown_text(self.name)}** ({self.kind} alternative{where}): "
                f"{markdown_text(self.description)}; swaps {targets}")

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block the swapped attributes hold the wrong versions; restored on exit."""
        saved = []
        try:
            for s in self.swaps:
                owner, attribute = resolve(s.target)
                # a class keeps its own descriptor (or none, when the attribute is inherited)
                real = owner.__dict__.get(attribute, _INHERITED) if isinstance(owner, type) else getattr(owner, attribute)
                wrong = s.make(getattr(owner, attribute))
                setattr(owner, attribute, wrong)
                saved.append((owner, attribute, real))
            yield
        finally:
            failures = []
            for owner, attribute, real in reversed(saved):
                try:
                    if real is _INHERITED:
                        delattr(owner, attribute)
                    else:
                        setattr(owner, attribute, real)
                except Exception as exc:  # noqa: BLE001 - restore every other swap, then report
                    failures.append(f"{owner!r}.{attribute}: {exc!r}")
            if failures:
                raise RuntimeError("could not restore " + "; ".join(failures))


def alternative(name: str, description: str, *swaps: Swap, kind: str = "theory") -> Alternative:
    """Build an :class:`Alternative` from its swaps."""
    return Alternative(name, description, tuple(swaps), kind, source=_caller())


def _scaled(value, factor: float):
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, float, np.ndarray, np.floating, np.integer)):
        return value * factor
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_scaled(v, factor) for v in value)
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: _scaled(getattr(value, f.name), factor)
                                             for f in dataclasses.fields(value) if f.init})
    raise TypeError(f"cannot scale an output of type {type(value).__name__}")


def scaled_output(target: str, factor: float = 1.01, *, kind: str | None = None) -> Alternative:
    """The alternative "``target`` is off by ``factor``": every number it returns multiplied by ``factor``.

    Used for coverage: a check covers a function when a 1% error in its output fails the check.
    The kind is ``theory`` for a target in :mod:`theory` (which :mod:`numerics` never imports, so
    measurements are unaffected and may be reused) and ``implementation`` otherwise.
    """
    if kind is None:
        module = target.split(":")[0]
        in_theory = module == theory.__name__ or module.startswith(theory.__name__ + ".")
        kind = "theory" if in_theory else "implementation"

    def make(real):
        def wrong(*args, **kwargs):
            return _scaled(real(*args, **kwargs), factor)
        return wrong

    return alternative(f"{(factor - 1) * 100:+g}% error in {target}",
                       f"every number {target} returns multiplied by {factor:g}", swap(target, make), kind=kind)


# --------------------------------------------------------------------------------------------
# Claims and checks
# --------------------------------------------------------------------------------------------

#: How a check's randomness is replicated in a power analysis: ``none`` (deterministic: one run
#: under each theory decides), ``seeds`` (replicate ``r`` draws fresh seeds, ``ctx.fresh_seeds``)
#: or ``subsample`` (replicate ``r`` decides on a random subset of a stored pool of seeds,
#: ``ctx.subsample_seeds``).
REPLICATIONS = ("none", "seeds", "subsample")

AlternativeList = Sequence[Alternative] | Callable[[], Sequence[Alternative]]

#: What a question's answer means, shown with a question (its display, its result's).
QUESTION_NOTE = ("A question: its criteria are fixed before the run; a failed check is the answer *no*, a finding "
                 "about the theory reported with its numbers, not a defect.")


@dataclass(frozen=True)
class Check:
    """A named measurement bearing on a claim, with its criterion and the wrong theories it must reject.

    Attributes
    ----------
    name : str
    func : callable
        ``func(ctx) -> Evidence``.
    criterion : str
        The pass criterion in words, fixed before the run.
    alternatives : sequence of Alternative, or a callable returning one
        Plausible wrong theories the check must reject (a callable is called when they are
        needed, for alternatives that are costly to build, such as mutated derivations).
    covers : tuple of str
        Public functions (``"package.module:attr"``) whose 1% error this check fails; each is also
        a power alternative (:func:`scaled_output`).
    replication : str
        One of :data:`REPLICATIONS`.
    gating : bool
        False for a superseded criterion kept in the report: its result is shown, the claim's
        status does not depend on it.
    note : str
        Shown beside the check (e.g. which check supersedes it, or what it cannot tell apart).
    source : str
        ``path:line`` of the code that computes it (``attneb show``, the report's "where").
    """

    name: str
    func: Callable[[Context], Evidence]
    criterion: str = ""
    alternatives: AlternativeList = ()
    covers: tuple[str, ...] = ()
    replication: str = "none"
    gating: bool = True
    note: str = ""
    source: str = field(default="", compare=False)

    def describe_alternatives(self) -> list[str]:
        """Names of the wrong theories, without building generated ones (a callable is described, not called)."""
        listed = ["generated: " + (self.alternatives.__doc__ or "built when needed").strip().splitlines()[0]] \
            if callable(self.alternatives) else [a.name for a in self.alternatives]
        return listed + [scaled_output(target).name for target in self.covers]

    def _markdown_lines(self) -> list[str]:
        """A Markdown list item: name, where, then criterion, note and wrong theories as sub-items."""
        superseded = "superseded, not gating; " if not self.gating else ""
        where = f"`{self.source}`" if self.source else "where unknown"
        lines = [f"- **{markdown_text(self.name)}** ({superseded}{where})"]
        if self.criterion:
            lines.append(f"  - criterion (fixed before the run): {markdown_text(self.criterion)}")
        if self.note:
            lines.append(f"  - note: {markdown_text(self.note)}")
        wrong = "; ".join(map(markdown_text, self.describe_alternatives())) or "no wrong theory registered"
        lines.append(f"  - must reject: {wrong}")
        return lines

    def _repr_markdown_(self) -> str:
        """Name, where it is computed, criterion, note and the wrong theories it must reject (not built)."""
        return "\n".join(self._markdown_lines())

    def wrong_theories(self) -> list[Alternative]:
        """The registered alternatives followed by the 1% errors of the covered functions."""
        listed = self.alternatives() if callable(self.alternatives) else self.alternatives
        theories = list(listed) + [scaled_output(target) for target in self.covers]
        names = [a.name for a in theories]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"check {self.name!r} has several wrong theories named {duplicates}; names must differ")
        return theories


@dataclass
class Claim:
    """A claim of the paper (or of the toolkit), with the checks registered for it.

    A ``question`` is a hypothesis the toolkit puts to an experiment (what a trained network
    learns), not a statement whose failure is a defect: its checks have criteria fixed before the
    run and can fail, and a failure is reported as the answer "no"; ``attneb verify`` does not exit
    non-zero for it. ``source`` is the ``path:line`` of its registration.
    """

    id: str
    title: str
    statement: str
    assumptions: tuple[str, ...]
    checks: list[Check] = field(default_factory=list)
    question: bool = False
    source: str = ""

    def _repr_markdown_(self) -> str:
        """Id, title, kind, statement, assumptions, then each check (:class:`Check`'s display), derivations included."""
        kind = "question" if self.question else "claim"
        where = f"; registered at `{self.source}`" if self.source else ""
        lines = [f"**{markdown_text(self.id)}: {markdown_text(self.title)}** ({kind}{where})", "",
                 markdown_text(self.statement)]
        if self.assumptions:
            lines += ["", "Assumptions: " + "; ".join(map(markdown_text, self.assumptions)) + "."]
        if self.question:
            lines += ["", QUESTION_NOTE]
        lines += ["", f"Checks ({len(self.checks)}):" if self.checks else "No check is registered for it yet."]
        if self.checks:
            lines.append("")
        for chk in self.checks:
            lines += chk._markdown_lines()
        return "\n".join(lines)


CLAIMS: dict[str, Claim] = {}


def claim(id: str, title: str, statement: str, assumptions: tuple[str, ...] = (), *, question: bool = False) -> Claim:
    """Register a claim (or, with ``question=True``, a hypothesis: see :class:`Claim`) under ``id``.

    Registering the same id twice is an error.
    """
    if id in CLAIMS:
        raise ValueError(f"claim id {id!r} is already registered")
    CLAIMS[id] = Claim(id, title, statement, tuple(assumptions), question=question, source=_caller())
    return CLAIMS[id]


CheckFunc = Callable[[Context], Evidence]


def check(
    claim_id: str,
    name: str,
    *,
    criterion: str = "",
    alternatives: AlternativeList = (),
    covers: Sequence[str] = (),
    replication: str = "none",
    gating: bool = True,
    note: str = "",
    source: str | None = None,
) -> Callable[[CheckFunc], CheckFunc]:
    """Decorator registering ``func(ctx) -> Evidence`` as a check of claim ``claim_id``.

    See :class:`Check` for the keyword arguments (``source`` defaults to where ``func`` is
    defined). Targets in ``covers`` and in the swaps of ``alternatives`` are resolved when the
    alternative is applied, not here.
    """
    if replication not in REPLICATIONS:
        raise ValueError(f"replication == {replication!r}; must be one of {REPLICATIONS}")

    def register(func: CheckFunc) -> CheckFunc:
        if claim_id not in CLAIMS:
            raise ValueError(f"unknown claim id {claim_id!r}; register it with claim() first")
        if any(c.name == name for c in CLAIMS[claim_id].checks):
            raise ValueError(f"claim {claim_id!r} already has a check named {name!r}")
        CLAIMS[claim_id].checks.append(Check(name, func, criterion, alternatives, tuple(covers), replication,
                                             gating, note, source=source or source_of(func)))
        return func

    return register
