"""How much of each check's CPU time ``numpy.exp`` takes: the floor that exact kernel sums set on this machine.

Usage:
    ATTNEB_EXP_TRACE=exp.jsonl attneb verify --quick --workers 1 --load benchmarks/exp_share.py [...]
    python benchmarks/exp_share.py exp.jsonl

Loaded by ``verify`` with ``ATTNEB_EXP_TRACE`` set, it replaces ``numpy.exp`` by a function that calls the real
ufunc and adds up, per process, the values it was given (``out.size`` of its result) and the wall seconds spent
inside it; and it wraps :func:`attneb.proofs_check.engine.runner.run_check` to append one JSON line per check:
claim, check, CPU seconds of the check (with ``--workers 1`` its runs are computed inside it) and the
exponentials and their seconds during it. Code that bound the ufunc before the module was loaded
(``from numpy import exp`` at import time, a function compiled by numba) is not counted, so the share is a lower
bound. Without the variable, loading it does nothing.

Run as a script, it prints one row per check of at least ``--min-seconds`` CPU seconds, sorted by cost: CPU s,
exponentials (10^6), seconds in them, their share, and ns per value; then the totals. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import time

_ENV = "ATTNEB_EXP_TRACE"


def _install(path: str) -> None:
    import numpy as np

    import attneb.proofs_check.engine.runner as runner
    from attneb.proofs_check.engine.registry import CLAIMS

    real = np.exp
    tally = {"values": 0, "seconds": 0.0}

    def counted_exp(*args, **kwargs):
        start = time.perf_counter()
        result = real(*args, **kwargs)
        tally["seconds"] += time.perf_counter() - start
        tally["values"] += int(np.size(result))
        return result

    np.exp = counted_exp
    stream = open(path, "a", buffering=1)
    run_check = runner.run_check

    def claim_of(chk) -> str:  # read when the check runs: the claims are registered after this module loads
        return next((claim_id for claim_id, claim in CLAIMS.items() if any(c is chk for c in claim.checks)), "?")

    def traced_check(chk, ctx):
        values, seconds, cpu = tally["values"], tally["seconds"], time.process_time()
        try:
            return run_check(chk, ctx)
        finally:
            stream.write(json.dumps({"pid": os.getpid(), "claim": claim_of(chk), "check": chk.name,
                                     "cpu": time.process_time() - cpu, "exp_values": tally["values"] - values,
                                     "exp_seconds": tally["seconds"] - seconds}) + "\n")

    runner.run_check = traced_check


if os.environ.get(_ENV) and __name__ != "__main__":
    _install(os.environ[_ENV])


def table(rows: list[dict], min_seconds: float = 1.0) -> str:
    """The markdown table of a trace's ``rows`` (see the module's docstring)."""
    lines = ["| claim | check | CPU s | exp values (10^6) | s in exp | share | ns per value |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: -r["cpu"]):
        if r["cpu"] < min_seconds:
            continue
        per_value = 1e9 * r["exp_seconds"] / r["exp_values"] if r["exp_values"] else float("nan")
        lines.append(f"| {r['claim']} | {r['check'][:70]} | {r['cpu']:.1f} | {r['exp_values'] / 1e6:.0f} | "
                     f"{r['exp_seconds']:.1f} | {r['exp_seconds'] / max(r['cpu'], 1e-9):.0%} | {per_value:.1f} |")
    cpu = sum(r["cpu"] for r in rows)
    seconds = sum(r["exp_seconds"] for r in rows)
    values = sum(r["exp_values"] for r in rows)
    lines.append(f"| all | {len(rows)} checks | {cpu:.1f} | {values / 1e6:.0f} | {seconds:.1f} | "
                 f"{seconds / max(cpu, 1e-9):.0%} | {1e9 * seconds / max(values, 1):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="the JSON-lines file ATTNEB_EXP_TRACE named")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="leave out checks cheaper than this")
    args = parser.parse_args(argv)
    with open(args.trace) as stream:
        rows = [json.loads(line) for line in stream if line.strip()]
    if not rows:
        raise SystemExit(f"{args.trace} holds no check: was {_ENV} set and the module loaded?")
    print(table(rows, args.min_seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
