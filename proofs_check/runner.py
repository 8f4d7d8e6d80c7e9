"""Run the registered checks and collect their evidence."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import anisotropic_checks as _anisotropic_checks  # noqa: F401  (registers G4: the anisotropic Gaussian prior)
from . import baseline_checks  # noqa: F401  (registers B1: the baselines against their definitions)
from . import blurring_checks as _blurring_checks  # noqa: F401  (registers G2 at eta = 1)
from . import claims as _claims  # noqa: F401  (registers C1-C10)
from . import convergence_checks as _convergence_checks  # noqa: F401  (registers E1, E2, E4, E5)
from . import evaluator_checks as _evaluator_checks  # noqa: F401  (registers the evaluators' checks)
from . import meanfield_checks as _meanfield_checks  # noqa: F401  (registers G1, G2, S1 simulations)
from . import numeric_checks as _numeric_checks  # noqa: F401  (registers the numeric checks)
from . import prior_checks as _prior_checks  # noqa: F401  (registers Tweedie and the Bayes risks of every prior)
from . import stability_checks as _stability_checks  # noqa: F401  (registers E3)
from . import symbolic_checks as _symbolic_checks  # noqa: F401  (registers the derivations)
from . import training_checks as _training_checks  # noqa: F401  (registers T0-T3, experiment E6)
from .registry import CLAIMS, Check, Claim, Context, Evidence
from .studies import STUDIES

__all__ = ["STUDIES", "CheckResult", "ClaimResult", "run", "run_check", "select"]


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: ``"pass"``, ``"fail"`` or ``"error"`` (it raised)."""

    check: Check
    status: str
    evidence: Evidence | None
    error: str | None
    seconds: float

    @property
    def name(self) -> str:
        return self.check.name


@dataclass(frozen=True)
class ClaimResult:
    """A claim and the outcomes of its checks."""

    claim: Claim
    checks: tuple[CheckResult, ...]

    @property
    def status(self) -> str:
        """``"unchecked"`` with no gating check, else ``"error"`` > ``"fail"`` > ``"pass"`` over the gating checks.

        A superseded check (``gating=False``) is reported with its own status but does not
        decide the claim's.
        """
        statuses = {c.status for c in self.checks if c.check.gating}
        if not statuses:
            return "unchecked"
        for worst in ("error", "fail"):
            if worst in statuses:
                return worst
        return "pass"


def run_check(chk: Check, ctx: Context) -> CheckResult:
    """Run one check; an exception is reported as status ``"error"`` with its traceback, never hidden."""
    start = time.perf_counter()
    try:
        evidence = chk.func(ctx)
    except Exception:  # noqa: BLE001 - a crashing check is reported, never hidden
        return CheckResult(chk, "error", None, traceback.format_exc(limit=5), time.perf_counter() - start)
    status = "pass" if evidence.passed else "fail"
    return CheckResult(chk, status, evidence, None, time.perf_counter() - start)


def select(ids: Iterable[str] | None) -> list[str]:
    """Claim ids to run (default: all, in registry order); unknown ids raise ``ValueError``."""
    selected = list(CLAIMS) if ids is None else list(ids)
    unknown = [i for i in selected if i not in CLAIMS]
    if unknown:
        raise ValueError(f"unknown claim id(s) {unknown}; known: {list(CLAIMS)}")
    return selected


def run(
    ids: Iterable[str] | None = None,
    *,
    quick: bool = False,
    out: Path = Path("attneb-report"),
    workers: int = 1,
    on_claim: Callable[[ClaimResult], None] | None = None,
    cache: dict | None = None,
) -> list[ClaimResult]:
    """Run the checks of the claims ``ids`` (default: all), in registry order.

    Parameters
    ----------
    ids : iterable of str, optional
        Claim ids to run; unknown ids raise ``ValueError``.
    quick : bool
        Smaller problems, still real checks.
    out : pathlib.Path
        Report folder, where checks keep their stores and figures (created if needed).
    workers : int
        Worker processes of the experiments' sweeps.
    on_claim : callable, optional
        Called with each :class:`ClaimResult` as soon as it is complete (progress, streaming).
    cache : dict, optional
        The run's shared cache (:attr:`Context.cache`); pass one to reuse its contents afterwards
        (a power analysis decides again on what the run measured).
    """
    selected = select(ids)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(quick=quick, out=out, workers=workers, cache={} if cache is None else cache)
    results = []
    for claim_id in selected:
        claim = CLAIMS[claim_id]
        result = ClaimResult(claim, tuple(run_check(c, ctx) for c in claim.checks))
        if on_claim is not None:
            on_claim(result)
        results.append(result)
    return results
