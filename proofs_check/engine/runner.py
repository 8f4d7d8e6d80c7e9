"""Run the registered checks and collect their evidence."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from attneb.theory.derivation import markdown_text

from . import content
from .derivations import derivation_of
from .registry import CLAIMS, QUESTION_NOTE, Check, Claim, Context, Evidence
from .shared_pool import run_groups
from .studies import STUDIES

__all__ = ["NOT_RUN", "SHARED_MEASUREMENTS", "STUDIES", "CheckResult", "ClaimResult", "run", "run_check", "select",
           "status_label"]

#: Status of a superseded check that a run left out (``superseded=False``, the default).
NOT_RUN = "not run"


def status_label(question: bool, status: str) -> str:
    """How a status reads: a question's ``pass``/``fail`` is its answer, ``yes``/``no``."""
    if question and status in ("pass", "fail"):
        return "answer " + ("yes" if status == "pass" else "no")
    return status


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: ``"pass"``, ``"fail"``, ``"error"`` (it raised) or :data:`NOT_RUN`.

    ``seconds`` is the wall time of the check; ``cpu_seconds`` the CPU time of the process that ran it (all of the
    check's work with ``workers == 1``; with more workers, runs sent to other processes are not counted).
    """

    check: Check
    status: str
    evidence: Evidence | None
    error: str | None
    seconds: float
    cpu_seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.check.name

    def _markdown_lines(self) -> list[str]:
        """A Markdown list item: name, status, kind, time and summary; then criterion, figures, error and table."""
        superseded = "superseded, not gating; " if not self.check.gating else ""
        if self.status == NOT_RUN:
            return [f"- **{markdown_text(self.name)}** ({superseded}not run)"]
        evidence = self.evidence
        kind = f", {evidence.kind}" if evidence is not None else ""
        head = f"- **{markdown_text(self.name)}** ({superseded}{self.status}{kind}, {self.seconds:.2f} s)"
        lines = [head + (f": {markdown_text(evidence.summary)}" if evidence is not None else "")]
        if self.check.criterion:
            lines.append(f"  - criterion (fixed before the run): {markdown_text(self.check.criterion)}")
        if evidence is not None and evidence.figures:
            lines.append("  - figures, in the report folder: " + ", ".join(f"`{f}`" for f in evidence.figures))
        if self.error is not None:
            lines += ["  - raised:", "", "    ```", *("    " + line for line in self.error.rstrip().splitlines()),
                      "    ```"]
        if evidence is not None and evidence.markdown:
            lines += ["", evidence.markdown, ""]
        return lines

    def _repr_markdown_(self) -> str:
        """Name, status, kind of evidence, seconds and summary, with the criterion (and an error's traceback)."""
        return "\n".join(self._markdown_lines())


@dataclass(frozen=True)
class ClaimResult:
    """A claim and the outcomes of its checks."""

    claim: Claim
    checks: tuple[CheckResult, ...]

    @property
    def status(self) -> str:
        """``"unchecked"`` with no gating check, else ``"error"`` > ``"fail"`` > ``"pass"`` over the gating checks.

        A superseded check (``gating=False``) is reported with its own status (:data:`NOT_RUN`
        unless asked for) but does not decide the claim's.
        """
        statuses = {c.status for c in self.checks if c.check.gating}
        if not statuses:
            return "unchecked"
        for worst in ("error", "fail"):
            if worst in statuses:
                return worst
        return "pass"

    def _repr_markdown_(self) -> str:
        """Id, title, status (a question's: its answer) and statement; then each check's status, criterion, summary."""
        claim = self.claim
        kind = "question, " if claim.question else ""
        lines = [f"**{markdown_text(claim.id)}: {markdown_text(claim.title)}** — "
                 f"{kind}{status_label(claim.question, self.status)}", "", markdown_text(claim.statement)]
        if claim.question:
            lines += ["", QUESTION_NOTE]
        lines.append("")
        for result in self.checks:
            lines += result._markdown_lines()
        if not self.checks:
            lines.append("No check is registered for it yet.")
        return "\n".join(lines)


def run_check(chk: Check, ctx: Context) -> CheckResult:
    """Run one check; an exception is reported as status ``"error"`` with its traceback, never hidden."""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        evidence = chk.func(ctx)
    except Exception:  # noqa: BLE001 - a crashing check is reported, never hidden
        return CheckResult(chk, "error", None, traceback.format_exc(limit=5), time.perf_counter() - start,
                           time.process_time() - cpu)
    status = "pass" if evidence.passed else "fail"
    return CheckResult(chk, status, evidence, None, time.perf_counter() - start, time.process_time() - cpu)


def select(ids: Iterable[str] | None) -> list[str]:
    """Claim ids to run, each once (default: all, in registry order); unknown ids raise ``ValueError``.

    Loads the toolkit's own claims first (:func:`attneb.proofs_check.engine.content.load_default`).
    """
    content.load_default()
    selected = list(CLAIMS) if ids is None else list(dict.fromkeys(ids))
    unknown = [i for i in selected if i not in CLAIMS]
    if unknown:
        raise ValueError(f"unknown claim id(s) {unknown}; known: {list(CLAIMS)}")
    return selected


def run(
    ids: Iterable[str] | None = None,
    *,
    quick: bool = False,
    out: Path | str = Path("attneb-report"),
    workers: int = 1,
    on_claim: Callable[[ClaimResult], None] | None = None,
    cache: dict | None = None,
    sources: Sequence[str] = (),
    superseded: bool = False,
) -> list[ClaimResult]:
    """Run the checks of the claims ``ids`` (default: all), reporting them in registry order.

    With ``workers > 1`` the claims run in parallel, in that many processes (one BLAS and
    kernel thread each, no progress bars; spawned, or forks of the server that ``attneb verify``
    starts, :func:`attneb.proofs_check.engine.shared_pool.start_server`), each of which loads ``sources`` and
    runs the tasks of :func:`_tasks`: first each derivation's checks, for every claim it bears on; then the
    claims' other checks, those of one claim, and of the claims of a group of :data:`SHARED_MEASUREMENTS`, one
    after another in one process, sharing its cache. The
    runs of the checks' experiments go to the same processes (:mod:`attneb.proofs_check.engine.shared_pool`):
    about ``workers`` computations run at a time. The results do not depend on ``workers``:
    every check computes the same numbers in any process, the store
    takes concurrent writers, and :class:`ClaimResult` s come in registry order. A check that
    a fresh process does not know (registered at run time, not by ``sources``) runs in this
    process, as do all of them with ``workers == 1``; swapped or monkeypatched code reaches
    only this process.

    Parameters
    ----------
    ids : iterable of str, optional
        Claim ids to run; unknown ids raise ``ValueError``.
    quick : bool
        Smaller problems, still real checks.
    out : pathlib.Path or str
        Report folder, where checks keep their stores and figures (created if needed).
    workers : int
        Worker processes, shared by the claims and their experiments' runs.
    on_claim : callable, optional
        Called with each :class:`ClaimResult` as soon as it and every claim before it are complete.
    cache : dict, optional
        The cache of the checks run in this process (:attr:`Context.cache`); pass one to reuse
        its contents afterwards (a power analysis decides again on what the run measured).
    sources : sequence of str
        Modules or files that register extra claims (see :func:`load`), already loaded here;
        the worker processes load them too.
    superseded : bool
        Run the superseded checks (``gating=False``) too; by default each is reported with
        status :data:`NOT_RUN`.
    """
    selected = select(ids)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(quick=quick, out=out, workers=workers, cache={} if cache is None else cache)
    runnable = {claim_id: [c for c in CLAIMS[claim_id].checks if c.gating or superseded] for claim_id in selected}
    parallel = workers > 1
    results = []
    for claim_id, remote in (_in_workers(runnable, ctx, sources) if parallel else _here(runnable)):
        outcomes = dict(zip((c.name for c in runnable[claim_id]), remote))
        checks = tuple(
            CheckResult(c, NOT_RUN, None, None, 0.0) if c.name not in outcomes
            else run_check(c, ctx) if outcomes[c.name] is None else CheckResult(c, *outcomes[c.name])
            for c in CLAIMS[claim_id].checks)
        result = ClaimResult(CLAIMS[claim_id], checks)
        if on_claim is not None:
            on_claim(result)
        results.append(result)
    return results


#: Claims that decide on the same measurements, which the first of them to run computes and
#: stores: they run one after another in one worker process (in parallel, each would compute
#: them). E6's trained networks; E1's runs (C8, and G6's predicted gap).
SHARED_MEASUREMENTS = (("T1", "T2", "T3"), ("C8", "G6"))
#: Outcome of a check in a worker: ``(status, evidence, error, seconds, cpu_seconds)``, or ``None`` to run it here.
Outcome = tuple[str, Evidence | None, str | None, float, float] | None


def _here(runnable: dict[str, list[Check]]) -> Iterator[tuple[str, list[Outcome]]]:
    for claim_id, checks in runnable.items():
        yield claim_id, [None] * len(checks)


def _groups(selected: list[str]) -> list[list[str]]:
    """The claims each worker task runs, in registry order: alone, or with those it shares measurements with."""
    groups, placed = [], {}
    for claim_id in selected:
        shared = next((g for g in SHARED_MEASUREMENTS if claim_id in g), ())
        leader = next((c for c in shared if c in placed), None)
        if leader is None:
            placed[claim_id] = len(groups)
            groups.append([claim_id])
        else:
            groups[placed[leader]].append(claim_id)
            placed[claim_id] = placed[leader]
    return groups


def _tasks(runnable: dict[str, list[Check]]) -> list[list[tuple[str, list[str]]]]:
    """What the pool's processes take, in order: each a list of ``(claim id, check names)`` run in one process.

    First one task per derivation (:func:`.derivations.derivation_of`), holding its check of every claim it bears on:
    the derivation is built and checked once, by one process, and its other checks read that process's cache (run
    with the claims, each process that runs one would check it again: up to 25 s of one core each). Taken first,
    these indivisible seconds do not end the run. Then the claims' other checks, by the groups of :func:`_groups`.
    """
    by_derivation: dict[str, list[tuple[str, list[str]]]] = {}
    others = {}
    for claim_id, checks in runnable.items():
        others[claim_id] = [c.name for c in checks if derivation_of(c) is None]
        for chk in checks:
            if (name := derivation_of(chk)) is not None:
                by_derivation.setdefault(name, []).append((claim_id, [chk.name]))
    tasks = list(by_derivation.values())
    tasks += [[(c, others[c]) for c in group if others[c]] for group in _groups(list(runnable))]
    return [task for task in tasks if task]


def _in_workers(runnable: dict[str, list[Check]], ctx: Context,
                sources: Sequence[str]) -> Iterator[tuple[str, list[Outcome]]]:
    """Yield the outcomes of each claim's ``runnable`` checks in registry order, computed by the tasks of
    :func:`_tasks` in a pool of ``ctx.workers`` processes."""
    tasks = _tasks(runnable)
    done: dict[str, dict[str, Outcome]] = {claim_id: {} for claim_id in runnable}
    pending = list(runnable)

    def complete() -> Iterator[tuple[str, list[Outcome]]]:
        while pending and len(done[pending[0]]) == len(runnable[pending[0]]):
            claim_id = pending.pop(0)
            outcomes = done.pop(claim_id)
            yield claim_id, [outcomes[c.name] for c in runnable[claim_id]]

    yield from complete()
    for number, outcomes in run_groups(tasks, _run_claims, (ctx.quick, ctx.out, ctx.workers), workers=ctx.workers,
                                       sources=sources):
        names = dict(tasks[number])
        for claim, remote in outcomes.items():
            done[claim].update(zip(names[claim], remote))
        yield from complete()
    if pending:
        raise RuntimeError(f"verify's pool ended without the outcome of claim {pending[0]}")


#: The cache of the checks a worker process runs (:attr:`Context.cache`).
_WORKER_CACHE: dict = {}


def _run_claims(claims: list[tuple[str, list[str]]], quick: bool, out: Path, workers: int) -> dict[str, list[Outcome]]:
    """In a worker: run the named checks of each claim; ``None`` for a check this process does not know."""
    content.load_default()
    ctx = Context(quick=quick, out=out, workers=workers, cache=_WORKER_CACHE)
    outcomes = {}
    for claim_id, names in claims:
        known = {c.name: c for c in CLAIMS[claim_id].checks} if claim_id in CLAIMS else {}
        outcomes[claim_id] = []
        for name in names:
            result = run_check(known[name], ctx) if name in known else None
            outcomes[claim_id].append(None if result is None else
                                      (result.status, result.evidence, result.error, result.seconds,
                                       result.cpu_seconds))
    return outcomes
