"""What every process of a parallel ``attneb verify`` did, and when: start-up, checks, runs, idle.

Usage:
    ATTNEB_POOL_TRACE=trace.jsonl attneb verify --workers 16 --load benchmarks/pool_trace.py [...]
    python benchmarks/pool_trace.py trace.jsonl [--serial-seconds S]

Loaded by ``verify`` (``--load`` imports it in the parent and in every process of the pool) with
``ATTNEB_POOL_TRACE`` set, it wraps :func:`attneb.proofs_check.engine.runner.run_check` and the pool's
:func:`attneb.proofs_check.engine.shared_pool._execute` and appends one JSON line per event to that file:
``load`` (a process has imported the toolkit: its name, wall clock, CPU seconds so far and birth
time), ``check`` and ``run`` (start, end and the CPU seconds of the thread that ran it: a check's
CPU leaves out the time it waits for its runs; a run also names the index of the process whose
check asked for it). Nothing else changes; without the variable, loading it
does nothing.

Run as a script, it reads such a file and prints per process its start-up (birth to loaded), the
seconds it spent computing checks and runs, and its idle seconds; then the totals: wall time, CPU
seconds of start-up and of work, how busy the pool was (CPU of work over workers x wall), the
number of processes computing in each tenth of the run, and the items that ended last. With
``--serial-seconds`` (the work of the same job on one core, from ``benchmarks/verify_schedule.py``
on this machine), it also prints how much more CPU the pool spent than that work: what running
16 at once costs (duplicated derivations, shared caches, lower all-core clock rates).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import threading
import time
from collections import defaultdict

_ENV = "ATTNEB_POOL_TRACE"


def _birth() -> float | None:
    """This process's start time (seconds since the epoch), from ``/proc``; ``None`` where that cannot be read."""
    try:
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as stat:
            boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _install(path: str) -> None:
    import attneb.proofs_check.engine.runner as runner
    import attneb.proofs_check.engine.shared_pool as shared_pool
    from attneb.proofs_check.engine.registry import CLAIMS

    lock = threading.Lock()
    stream = open(path, "a", buffering=1)  # one line per write, appended: processes do not interleave

    def emit(**fields) -> None:
        with lock:
            stream.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")

    claim_of = {id(chk): claim_id for claim_id, claim in CLAIMS.items() for chk in claim.checks}
    run_check, execute = runner.run_check, shared_pool._execute

    def traced_check(chk, ctx):
        t0, cpu0 = time.time(), time.thread_time()
        try:
            return run_check(chk, ctx)
        finally:
            emit(event="check", claim=claim_of.get(id(chk), "?"), name=chk.name, t0=t0, t1=time.time(),
                 cpu=time.thread_time() - cpu0)

    def traced_execute(item, results):
        t0, cpu0 = time.time(), time.thread_time()
        try:
            return execute(item, results)
        finally:
            emit(event="run", thread=threading.current_thread().name, requester=item[0], t0=t0, t1=time.time(),
                 cpu=time.thread_time() - cpu0)

    runner.run_check, shared_pool._execute = traced_check, traced_execute
    emit(event="load", name=multiprocessing.current_process().name, time=time.time(), cpu=time.process_time(),
         birth=_birth())


def summary(events: list[dict], serial_seconds: float | None = None, last: int = 8) -> str:
    """The report of a trace (see the module's docstring)."""
    loads = {e["pid"]: e for e in events if e["event"] == "load"}
    work = [e for e in events if e["event"] in ("check", "run")]
    if not work:
        raise ValueError("the trace holds no check and no run: was ATTNEB_POOL_TRACE set and the module loaded?")
    workers = sorted({e["pid"] for e in work})
    start = min(e["birth"] or e["time"] for e in loads.values()) if loads else min(e["t0"] for e in work)
    end = max(e["t1"] for e in work)
    wall = end - start
    lines = [f"{len(workers)} processes computed, over {wall:.1f} s from the first process's birth (verify's) to the "
             "last item's end",
             f"{'process':>8} {'birth->load s':>13} {'load CPU s':>10} {'checks s':>9} {'check CPU':>9} "
             f"{'runs s':>8} {'run CPU':>8} {'idle s':>7}"]
    totals = defaultdict(float)
    for pid in workers:
        mine = [e for e in work if e["pid"] == pid]
        load = loads.get(pid, {})
        startup = load["time"] - load["birth"] if load.get("birth") else float("nan")
        checks = [e for e in mine if e["event"] == "check"]
        runs = [e for e in mine if e["event"] == "run"]
        busy = _union([(e["t0"], e["t1"]) for e in mine])
        idle = wall - busy - (load.get("time", start) - start)
        row = {"checks": sum(e["t1"] - e["t0"] for e in checks), "check_cpu": sum(e["cpu"] for e in checks),
               "runs": sum(e["t1"] - e["t0"] for e in runs), "run_cpu": sum(e["cpu"] for e in runs),
               "load_cpu": load.get("cpu", float("nan"))}
        for key, value in row.items():
            totals[key] += value
        lines.append(f"{pid:>8} {startup:>13.2f} {row['load_cpu']:>10.2f} {row['checks']:>9.1f} "
                     f"{row['check_cpu']:>9.1f} {row['runs']:>8.1f} {row['run_cpu']:>8.1f} {idle:>7.1f}")
    cpu = totals["check_cpu"] + totals["run_cpu"]
    for pid, load in loads.items():
        if pid not in workers and load.get("birth"):
            lines.append(f"process {pid} (verify's own, computing nothing): {load['time'] - load['birth']:.2f} s "
                         f"from its birth to loading this module, {load['cpu']:.2f} CPU s (its imports)")
    lines += [f"start-up of the computing processes: {totals['load_cpu']:.1f} CPU s in all (before the first check)",
              f"work: {cpu:.1f} CPU s ({totals['check_cpu']:.1f} in checks, outside their waits; "
              f"{totals['run_cpu']:.1f} in runs); pool busy {cpu / (len(workers) * wall):.0%} of "
              f"{len(workers)} x {wall:.1f} s"]
    if serial_seconds:
        lines.append(f"against the serial work {serial_seconds:.1f} s: {cpu / serial_seconds:.2f}x the CPU")
    lines.append("processes computing, per tenth of the run: " + " ".join(
        f"{_concurrency(work, start + wall * k / 10, start + wall * (k + 1) / 10):.1f}" for k in range(10)))
    lines.append(f"the {last} items that ended last (seconds from the start):")
    for e in sorted(work, key=lambda e: e["t1"])[-last:]:
        what = f"check {e['claim']}: {e['name'][:60]}" if e["event"] == "check" else f"run ({e['thread']})"
        lines.append(f"  {e['t0'] - start:7.1f} -> {e['t1'] - start:7.1f}  pid {e['pid']}  {what}")
    return "\n".join(lines)


def _union(spans: list[tuple[float, float]]) -> float:
    """Total length of a union of intervals (a check's runs overlap the check itself)."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _concurrency(work: list[dict], a: float, b: float) -> float:
    """Mean number of processes computing (in a check outside its waits, or a run) over ``[a, b]``, from CPU shares."""
    share = 0.0
    for e in work:
        overlap = min(b, e["t1"]) - max(a, e["t0"])
        if overlap > 0 and e["t1"] > e["t0"]:
            share += e["cpu"] * overlap / (e["t1"] - e["t0"])
    return share / (b - a)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="the file ATTNEB_POOL_TRACE named")
    parser.add_argument("--serial-seconds", type=float, help="the job's work on one core, for comparison")
    args = parser.parse_args()
    with open(args.trace) as stream:
        print(summary([json.loads(line) for line in stream if line.strip()], args.serial_seconds))
elif os.environ.get(_ENV):
    _install(os.environ[_ENV])
