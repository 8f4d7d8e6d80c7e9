"""Size and power of every check: how often it fails under the true theory and under each wrong one.

A check that passes whatever the theory tells its user nothing. For every check, this module runs
the check under the true theory and under each registered :class:`~attneb.proofs_check.engine.registry.Alternative`
(with every alternative applied in turn), over replicates of the check's randomness, and counts

* the **size**: the fraction of replicates in which the check *fails* under the true theory (a
  false alarm; 0 for a deterministic check that passes);
* the **power** against each alternative: the fraction of replicates in which the check *fails*
  (rejects the wrong theory) while the alternative is applied. A run that raises is not counted
  as a rejection: it is recorded, and an alternative with such runs counts as not measured
  (a swap with a typo must not pass for power). Under the true theory a raising run counts as a
  failure, as it does in ``attneb verify``.

How replicates are made follows the check's ``replication``:

``none``
    Deterministic: one run per theory decides (size and power are 0 or 1).
``seeds``
    Replicate ``r`` draws fresh, independent seeds (:meth:`Context.fresh_seeds`); intervals are
    Clopper-Pearson over the replicates.
``subsample``
    The check's simulations are stored for a pool of ``pool`` times its seeds; replicate ``r``
    decides on a random subset of them (:meth:`Context.subsample_seeds`). The mean over
    replicates is the U-statistic estimate of the rate with independent seeds (unbiased); its
    interval is Clopper-Pearson with ``pool`` trials, the number of independent seed sets the
    pool holds, which is conservative.

Alternatives of kind ``theory`` and ``data`` decide again on the measurements of the true run
(shared cache and store); ``implementation`` alternatives measure again, in a fresh cache and
store of their own and one process (swaps do not reach worker processes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from scipy import stats
from tqdm import tqdm

from attneb import numerics

from .registry import CLAIMS, Alternative, Check, Context
from .runner import run_check, select

__all__ = ["GOAL_POWER", "GOAL_SIZE", "REPLICATES", "CheckPower", "Rate", "analyse", "check_power", "clear_numeric_caches"]

#: The goals of a discriminating check.
GOAL_POWER = 0.95
GOAL_SIZE = 0.05
#: Replicates per replication scheme, quick and full mode; and the pool factor of subsampled checks.
REPLICATES = {
    "quick": {"none": 1, "seeds": 8, "subsample": 40, "pool": 3},
    "full": {"none": 1, "seeds": 30, "subsample": 200, "pool": 4},
}


@dataclass(frozen=True)
class Rate:
    """``count`` failures (a raising check excluded) in ``trials`` runs, and the runs that raised.

    The interval is Clopper-Pearson 95% over ``effective`` independent replicates: ``trials`` for
    independent seeds; the number of independent seed sets of the pool for subsampled checks,
    whose rate (a mean over overlapping subsets) is rounded down for the lower bound and up for
    the upper one. A deterministic check (``exact``) has no randomness: its rate is exact.
    """

    count: int
    trials: int
    effective: int
    errors: tuple[str, ...] = ()
    exact: bool = False

    @property
    def rate(self) -> float:
        return self.count / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        """Clopper-Pearson 95% interval; the rate itself for a deterministic check (``exact``)."""
        if self.exact:
            return self.rate, self.rate
        n = self.effective
        k_low, k_high = math.floor(self.rate * n + 1e-9), math.ceil(self.rate * n - 1e-9)
        low = 0.0 if k_low == 0 else float(stats.beta.ppf(0.025, k_low, n - k_low + 1))
        high = 1.0 if k_high == n else float(stats.beta.ppf(0.975, k_high + 1, n - k_high))
        return low, high

    def to_dict(self) -> dict:
        low, high = self.interval
        return {"failures": self.count, "runs": self.trials, "effective_replicates": self.effective,
                "rate": self.rate, "ci95": [low, high], "exact": self.exact, "errors": len(self.errors),
                "error_messages": list(dict.fromkeys(self.errors))[:5]}


@dataclass(frozen=True)
class CheckPower:
    """Size and power of one check."""

    claim_id: str
    check: Check
    replicates: int
    method: str
    size: Rate
    power: dict[str, tuple[Alternative, Rate]]
    build_error: str | None = None

    @property
    def weak_against(self) -> list[str]:
        """Alternatives rejected less often than :data:`GOAL_POWER`, or whose runs raised (not measured)."""
        return [name for name, (_, r) in self.power.items() if r.rate < GOAL_POWER or r.errors]

    @property
    def answered_no(self) -> bool:
        """A question's check failing on the measured data: that failure is the answer, not a false alarm.

        Its size (1) and power are then not informative; that it can pass where the hypothesis holds is
        shown on synthetic data in the tests.
        """
        return CLAIMS[self.claim_id].question and self.size.rate == 1.0 and not self.size.errors

    @property
    def meets_goal(self) -> bool:
        """Point estimates: power >= GOAL_POWER against every alternative (none raising), size <= GOAL_SIZE."""
        return (bool(self.power) and not self.weak_against and self.size.rate <= GOAL_SIZE and not self.size.errors
                and self.build_error is None)

    @property
    def meets_goal_at_95(self) -> bool:
        """The same on the 95% bounds: every power's lower bound >= GOAL_POWER, the size's upper bound <= GOAL_SIZE."""
        return self.meets_goal and self.size.interval[1] <= GOAL_SIZE and all(
            r.interval[0] >= GOAL_POWER for _, r in self.power.values())

    def to_dict(self) -> dict:
        return {
            "claim": self.claim_id, "check": self.check.name, "replication": self.check.replication,
            "replicates": self.replicates, "effective_replicates": self.size.effective, "method": self.method,
            "criterion": self.check.criterion, "size": self.size.to_dict(),
            "power": {name: {"kind": alt.kind, "description": alt.description, **r.to_dict()}
                      for name, (alt, r) in self.power.items()},
            "meets_goal": self.meets_goal, "meets_goal_at_95": self.meets_goal_at_95, "weak_against": self.weak_against,
            "answered_no": self.answered_no,
            "build_error": self.build_error,
        }


def _slug(text: str) -> str:
    """A folder name for ``text``: readable, and unique (a hash of the whole text)."""
    readable = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40]
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def clear_numeric_caches() -> None:
    """Empty the memoised functions of :mod:`numerics` (a swapped routine must not meet values cached before)."""
    for name, module in list(sys.modules.items()):
        if name == numerics.__name__ or name.startswith(numerics.__name__ + "."):
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def _scheme(chk: Check, mode: str, replicates: dict | None) -> tuple[int, int, str]:
    """Replicates, effective independent replicates and the method's description for ``chk``."""
    settings = {**REPLICATES[mode], **(replicates or {})}
    if chk.replication == "none":
        return 1, 1, "deterministic: one run per theory"
    if chk.replication == "seeds":
        n = settings["seeds"]
        return n, n, f"{n} replicates with independent seeds"
    n, pool = settings["subsample"], settings["pool"]
    return n, pool, (f"{n} random seed subsets of a stored pool of {pool}x the check's seeds "
                     f"(interval over {pool} independent seed sets)")


def _outcome(chk: Check, ctx: Context) -> tuple[bool, str | None]:
    """``(failed, error)``: whether the check failed, and the last line of its traceback if it raised."""
    result = run_check(chk, ctx)
    if result.status == "error":
        return False, result.error.strip().splitlines()[-1]
    return result.status == "fail", None


def check_power(
    claim_id: str,
    chk: Check,
    *,
    quick: bool,
    out: Path,
    workers: int = 1,
    cache: dict | None = None,
    replicates: dict | None = None,
    tick: Callable[[], None] = lambda: None,
) -> CheckPower:
    """Size and power of one check (see the module docstring).

    Parameters
    ----------
    claim_id : str
        The claim the check bears on (for the report).
    chk : Check
    quick : bool
        Mode of the check's problems, and of the replicate counts in :data:`REPLICATES`.
    out : pathlib.Path
        Report folder. The true theory and ``theory``/``data`` alternatives use its store;
        ``implementation`` alternatives use ``out/power/<check>/<alternative>/``.
    workers : int
        Worker processes of the true run's sweeps (implementation alternatives use 1).
    cache : dict, optional
        Shared cache, e.g. that of the verify run that preceded (its measurements are reused).
    replicates : dict, optional
        Overrides of :data:`REPLICATES` entries (``{"seeds": 4}``).
    tick : callable
        Called after every run of the check (a progress bar).
    """
    mode = "quick" if quick else "full"
    count, effective, method = _scheme(chk, mode, replicates)
    pool = {**REPLICATES[mode], **(replicates or {})}["pool"] if chk.replication == "subsample" else 1
    shared = Context(quick=quick, out=out, workers=workers, pool=pool, power=True,
                     cache={} if cache is None else cache)
    try:
        alternatives, build_error = chk.wrong_theories(), None
    except Exception as exc:  # noqa: BLE001 - recorded: the check is then not measured against its wrong theories
        alternatives, build_error = [], f"building its wrong theories raised {type(exc).__name__}: {exc}"
    fails, errors = 0, []
    rejections = {alt.name: [0, []] for alt in alternatives}
    contexts = {}
    for alt in alternatives:
        if alt.kind == "implementation":
            folder = out / "power" / _slug(chk.name) / _slug(alt.name)
            shutil.rmtree(folder, ignore_errors=True)  # stored runs are keyed by configuration, not by code
            folder.mkdir(parents=True)
            contexts[alt.name] = dataclasses.replace(shared, out=folder, workers=1, cache={})
        else:
            contexts[alt.name] = shared
    for r in range(count):
        failed, error = _outcome(chk, dataclasses.replace(shared, replicate=r))
        # under the truth a raising check is a failure (it fails verify); it is also listed
        fails += failed or error is not None
        if error:
            errors.append(f"replicate {r}: {error}")
        tick()
        for alt in alternatives:
            fresh = alt.kind == "implementation"
            if fresh:
                clear_numeric_caches()
            try:
                with alt.applied():
                    failed, error = _outcome(chk, dataclasses.replace(contexts[alt.name], replicate=r))
            finally:
                if fresh:
                    clear_numeric_caches()
            rejections[alt.name][0] += failed
            if error:
                rejections[alt.name][1].append(f"replicate {r}: {error}")
            tick()
    exact = chk.replication == "none"
    return CheckPower(
        claim_id, chk, count, method, Rate(fails, count, effective, tuple(errors), exact),
        {alt.name: (alt, Rate(rejections[alt.name][0], count, effective, tuple(rejections[alt.name][1]), exact))
         for alt in alternatives},
        build_error,
    )


def _count_wrong_theories(chk: Check) -> int:
    try:
        return len(chk.wrong_theories())
    except Exception:  # noqa: BLE001 - reported by check_power
        return 0


def analyse(
    ids: Iterable[str] | None = None,
    *,
    quick: bool = False,
    out: Path = Path("attneb-report"),
    workers: int = 1,
    cache: dict | None = None,
    replicates: dict | None = None,
    progress: bool = True,
    on_check: Callable[[CheckPower], None] | None = None,
    superseded: bool = False,
) -> list[CheckPower]:
    """Size and power of every gating check of the claims ``ids`` (default: all), in registry order.

    ``progress`` shows one tqdm bar over all runs (on a terminal); ``on_check`` is called with
    each :class:`CheckPower` as soon as it is complete; ``superseded`` measures the superseded
    checks (``gating=False``) too. Other arguments as in :func:`check_power`.
    """
    mode = "quick" if quick else "full"
    selected = [(claim_id, chk) for claim_id in select(ids) for chk in CLAIMS[claim_id].checks
                if chk.gating or superseded]
    cache = {} if cache is None else cache
    total = sum(_scheme(chk, mode, replicates)[0] * (1 + _count_wrong_theories(chk)) for _, chk in selected)
    results = []
    with tqdm(total=total, desc="power", unit="run", disable=None if progress else True, dynamic_ncols=True) as bar:
        for claim_id, chk in selected:
            bar.set_postfix_str(f"{claim_id}: {chk.name[:40]}")
            result = check_power(claim_id, chk, quick=quick, out=out, workers=workers, cache=cache,
                                 replicates=replicates, tick=lambda: bar.update())
            if on_check is not None:
                on_check(result)
            results.append(result)
    return results
