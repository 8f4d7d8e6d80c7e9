"""Where ``attneb verify``'s time goes, and the wall time a pool of W workers could reach with it.

Usage: python benchmarks/verify_schedule.py [--full] [--only C1 S1 ...] [--workers 2,4,8,16]
                                            [--profile FILE] [--out DIR]

First a profile: ``verify`` runs in this process, one check after another, on one kernel thread
(``--workers 1``), and every run that a check hands to the pool (the runs of
:func:`attneb.proofs_check.engine.studies.computed` and of the sweeps' :func:`attneb.numerics.sweep.iter_results`)
is timed on its own. The profile (JSON: per check its claim, wall seconds and the durations of
its runs, batch by batch) is written to ``--profile`` as the claims complete; an existing file
given there is read instead, and nothing is run.

Then a model of :mod:`attneb.proofs_check.engine.shared_pool` predicts the wall time on ``W`` workers: the
tasks of :func:`attneb.proofs_check.engine.runner._tasks` are taken in order by the first free
process; a check's runs go to its process's queue, where a process with no group takes them
(its own queue first, then the next processes' in turn) before it takes a group, and a process
whose check waits computes its own queue's runs only; a check is its batches of runs, in order,
then the rest of its time (its serial part). Printed per ``W``: the prediction, the floor (all the
profile's seconds over ``W``) and the group that ends last. The model leaves out verify's
start (its imports, with the fork server's beside them: about 2 s here, 7 s on a 16-core gVisor
host; ``benchmarks/pool_trace.py`` measures them) and what running beside other processes costs
(shared caches, lower clock rates on many busy cores), so it is a lower estimate;
compare it with ``benchmarks/verify_pool.py``, which measures.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import time
from collections import deque
from pathlib import Path


def profile(full: bool, only: list[str], out: Path, path: Path) -> list[dict]:
    """Run verify serially with each run timed; the per-check profile, also written to ``path`` as it grows."""
    os.environ.update(OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    import attneb.numerics.sweep.runner as sweep_runner
    import attneb.proofs_check.engine.runner as runner
    import attneb.proofs_check.engine.studies as studies
    from attneb import proofs_check
    from attneb.proofs_check.engine import content

    content.load_default()

    batches: list[list[float]] = []
    inside = [False]  # a run's own runs are part of its time, not a batch of their own

    def timed_calls(todo, call):
        if inside[0]:
            yield from ((item, call(item)) for item in todo)
            return
        batch = []
        batches.append(batch)
        for item in todo:
            start = time.perf_counter()
            inside[0] = True
            try:
                result = call(item)
            finally:
                inside[0] = False
            batch.append(time.perf_counter() - start)
            yield item, result

    def iter_results(tasks, run=sweep_runner.run_batch, *, executor=None, max_in_flight=None):
        return timed_calls(tasks, run)

    def computed(todo, run, workers, desc):
        return timed_calls(todo, lambda args: run(*args))

    original = studies.computed
    patched = [module for name, module in sys.modules.items()
               if name.startswith(proofs_check.__name__) and getattr(module, "computed", None) is original]
    for module in patched:
        module.computed = computed
    sweep_runner.iter_results = iter_results
    if not patched:
        raise RuntimeError("no module of proofs_check binds studies.computed: this profile would miss its runs")

    log: list[dict] = []
    run_check = runner.run_check

    def timed_check(chk, ctx):
        batches.clear()
        result = run_check(chk, ctx)
        log.append({"claim": None, "check": chk.name, "seconds": result.seconds, "status": result.status,
                    "batches": [b for b in batches if b]})
        return result

    def claimed(result):
        for entry in log:
            entry["claim"] = entry["claim"] or result.claim.id
        path.write_text(json.dumps(log, indent=1))
        print(f"{result.claim.id} {sum(c.seconds for c in result.checks):.1f} s", flush=True)

    runner.run_check = timed_check
    runner.run(only or None, quick=not full, out=out, workers=1, on_claim=claimed)
    return log


def _segments(checks: list[dict]) -> deque:
    """A group's work: per check, its batches of run durations, then its serial rest."""
    out = deque()
    for entry in checks:
        runs = sum(sum(batch) for batch in entry["batches"])
        out.extend(("runs", batch) for batch in entry["batches"])
        out.append(("serial", max(0.0, entry["seconds"] - runs)))
    return out


def simulate(groups: list[list[dict]], workers: int) -> tuple[float, int]:
    """Predicted wall time of ``groups`` on a pool of ``workers`` (see the module docstring), and the last group to end."""
    waiting_groups = deque(enumerate(groups))
    queues = [deque() for _ in range(workers)]
    work: list[deque | None] = [None] * workers      # the rest of the group each process runs
    group_of = [-1] * workers
    outstanding = [0] * workers                        # runs of the process's current batch not yet done
    busy = [False] * workers
    resume = set()                                      # processes whose batch ended while they computed a run
    events: list[tuple[float, int, str, int, int]] = []
    order = 0
    ends: dict[int, float] = {}

    def at(time_s: float, kind: str, process: int, owner: int = -1) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (time_s, order, kind, process, owner))

    def advance(p: int, now: float) -> None:
        while work[p]:
            kind, value = work[p].popleft()
            if kind == "serial":
                busy[p] = True
                at(now + value, "serial", p)
                return
            queues[p].extend((duration, p) for duration in value)
            outstanding[p] = len(value)
            return
        ends[group_of[p]] = now
        work[p] = None

    def take(p: int, now: float, sources) -> bool:
        for q in sources:
            if queues[q]:
                duration, owner = queues[q].popleft()
                busy[p] = True
                at(now + duration, "run", p, owner)
                return True
        return False

    def dispatch(now: float) -> None:
        for p in range(workers):
            if busy[p]:
                continue
            if work[p] is not None:
                take(p, now, [p])
                continue
            if take(p, now, [(p + i) % workers for i in range(workers)]):  # as shared_pool._worker
                continue
            if waiting_groups:
                group_of[p], group = waiting_groups.popleft()
                work[p] = _segments(group)
                advance(p, now)
                if not busy[p] and work[p] is not None:
                    take(p, now, [p])

    dispatch(0.0)
    now = 0.0
    while events:
        now, _, kind, p, owner = heapq.heappop(events)
        busy[p] = False
        if kind == "serial":
            advance(p, now)
        else:
            outstanding[owner] -= 1
            if outstanding[owner] == 0 and work[owner] is not None:
                resume.add(owner)
        for q in [q for q in resume if not busy[q]]:
            resume.discard(q)
            advance(q, now)
        dispatch(now)
    last = max(ends, key=ends.get) if ends else -1
    return now, last


def groups_of(log: list[dict]) -> list[list[dict]]:
    """The profile's checks cut as verify's pool cuts them (:func:`attneb.proofs_check.engine.runner._tasks`: each
    derivation's checks first, one task per derivation, then the claims' other checks by groups)."""
    from attneb.proofs_check.engine import content
    from attneb.proofs_check.engine.registry import CLAIMS
    from attneb.proofs_check.engine.runner import _tasks

    content.load_default()
    claims = list(dict.fromkeys(entry["claim"] for entry in log))
    logged = {(entry["claim"], entry["check"]) for entry in log}
    runnable = {claim: [c for c in CLAIMS[claim].checks if (claim, c.name) in logged] for claim in claims}
    entry_of = {(entry["claim"], entry["check"]): entry for entry in log}
    return [[entry_of[(claim, name)] for claim, names in task for name in names] for task in _tasks(runnable)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full job instead of --quick")
    parser.add_argument("--only", nargs="+", default=[], metavar="ID", help="claim ids (default: all)")
    parser.add_argument("--workers", default="2,4,8,16", help="comma-separated worker counts (default %(default)s)")
    parser.add_argument("--profile", type=Path, default=Path("verify-profile.json"),
                        help="where the profile goes; read instead of running verify if it exists")
    parser.add_argument("--out", type=Path, default=None, help="verify's report folder (default: a temporary one)")
    args = parser.parse_args()
    if args.profile.is_file():
        log = json.loads(args.profile.read_text())
        print(f"profile read from {args.profile}")
    else:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="attneb-verify-schedule-") as scratch:
            out = args.out or Path(scratch)
            start = time.perf_counter()
            log = profile(args.full, args.only, out, args.profile)
            print(f"profile written to {args.profile} ({time.perf_counter() - start:.0f} s wall)")
    total = sum(entry["seconds"] for entry in log)
    runs = [duration for entry in log for batch in entry["batches"] for duration in batch]
    serial = total - sum(runs)
    print(f"{len(log)} checks, {total:.1f} s in all on one core: {sum(runs):.1f} s in {len(runs)} runs "
          f"(longest {max(runs, default=0):.2f} s), {serial:.1f} s in the checks themselves")
    heaviest = sorted(log, key=lambda e: -e["seconds"])[:5]
    print("heaviest checks: " + "; ".join(f"{e['claim']} {e['seconds']:.1f} s ({e['check'][:48]})" for e in heaviest))
    groups = groups_of(log)
    print(f"{'workers':>7} {'predicted s':>11} {'floor s':>8}  group ending last")
    for workers in (int(w) for w in args.workers.split(",") if w):
        predicted, last = simulate(groups, workers)
        print(f"{workers:>7} {predicted:11.1f} {total / workers:8.1f}  {'+'.join(dict.fromkeys(e['claim'] for e in groups[last]))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
