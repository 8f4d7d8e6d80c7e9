"""Claims and the checks that bear on them.

A :class:`Claim` is an id from THEORY.md, a one-sentence statement and its
assumptions. A check is a function ``check(ctx: Context) -> Evidence`` registered
against a claim with :func:`check`; it measures something (a residual against a
tolerance, a fitted rate with its interval, a difference with its interval over
seeds) and says whether the measurement supports the claim. A check never
returns a bare boolean: its :class:`Evidence` carries the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CLAIMS", "Check", "Claim", "Context", "Evidence", "check", "claim"]


@dataclass(frozen=True)
class Context:
    """What a check may know about the run: its mode and where results and figures go.

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
    cache : dict
        Results shared by the checks of one run (a derivation checked once for several claims).
    """

    quick: bool
    out: Path
    workers: int = 1
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def store_path(self) -> Path:
        """SQLite store of the experiments' rows."""
        return self.out / "results.sqlite"


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


@dataclass(frozen=True)
class Check:
    """A named measurement bearing on a claim."""

    name: str
    func: Callable[[Context], Evidence]


@dataclass
class Claim:
    """A claim of the paper (or of the toolkit), with the checks registered for it."""

    id: str
    title: str
    statement: str
    assumptions: tuple[str, ...]
    checks: list[Check] = field(default_factory=list)


CLAIMS: dict[str, Claim] = {}


def claim(id: str, title: str, statement: str, assumptions: tuple[str, ...] = ()) -> Claim:
    """Register a claim under ``id``; registering the same id twice is an error."""
    if id in CLAIMS:
        raise ValueError(f"claim id {id!r} is already registered")
    CLAIMS[id] = Claim(id, title, statement, tuple(assumptions))
    return CLAIMS[id]


CheckFunc = Callable[[Context], Evidence]


def check(claim_id: str, name: str) -> Callable[[CheckFunc], CheckFunc]:
    """Decorator registering ``func(ctx) -> Evidence`` as a check of claim ``claim_id``."""

    def register(func: CheckFunc) -> CheckFunc:
        if claim_id not in CLAIMS:
            raise ValueError(f"unknown claim id {claim_id!r}; register it with claim() first")
        CLAIMS[claim_id].checks.append(Check(name, func))
        return func

    return register
