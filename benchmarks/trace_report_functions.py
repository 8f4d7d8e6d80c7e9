"""Trace which public functions of ``attneb.numerics`` and ``attneb.theory`` a quick ``verify`` calls.

Usage:
    python benchmarks/trace_report_functions.py                     # every claim, writes the committed file
    python benchmarks/trace_report_functions.py --only C1 C3        # a trial: prints, writes nothing
    python benchmarks/trace_report_functions.py --only C1 C3 --untraced     # the same run without the hook

Runs the checks in one process (``workers=1``, a fresh temporary report folder, so every run
computes) under the profile hook of :mod:`attneb.proofs_check.engine.trace`, prints the functions
found and how long it took, and writes them with the commit, date and command to ``--out``
(default: the file the coverage map reads, :data:`attneb.proofs_check.engine.coverage.TRACED_FILE`,
when every claim was traced; nothing with ``--only`` unless ``--out`` is given). ``--untraced`` runs
the same claims without the hook and prints only the time, for the hook's overhead (in a process of its
own: a second run in one process would find caches filled).

The record: ``command``; ``commit`` and ``uncommitted_changes`` (whether tracked files differed from it:
the trace is of the working tree); ``date``; ``machine``; ``mode``; ``claims`` with their statuses
(``claim_status``); ``seconds``; and ``functions``, each public function called -> the claims during
whose checks it was called (``"import"``: while the content registered its claims).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attneb.proofs_check.engine.coverage import TRACED_FILE
from attneb.proofs_check.engine.runner import run
from attneb.proofs_check.engine.trace import traced_run

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _timed(function, *args, **kwargs) -> tuple[object, float]:
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    """Trace, print and write; returns the record written (or that would be), or the untraced run's time."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="claim ids to run (a trial; default: every claim)")
    parser.add_argument("--out", type=Path, help=f"JSON file to write (default: {TRACED_FILE} for a run of "
                                                 "every claim, none with --only)")
    parser.add_argument("--untraced", action="store_true", help="run the claims without the hook; print the time")
    args = parser.parse_args(argv)
    out = args.out if args.out is not None or args.only else TRACED_FILE

    if args.untraced:
        with tempfile.TemporaryDirectory(prefix="attneb-trace-") as folder:
            results, seconds = _timed(run, args.only, quick=True, out=Path(folder) / "report", workers=1)
        print(f"{len(results)} claims in {seconds:.1f} s untraced")
        return {"claims": [r.claim.id for r in results], "seconds": round(seconds, 1)}
    with tempfile.TemporaryDirectory(prefix="attneb-trace-") as folder:
        (called, results), seconds = _timed(traced_run, args.only, out=Path(folder) / "report", quick=True)
    command = ["python", "benchmarks/trace_report_functions.py", *(sys.argv[1:] if argv is None else argv)]
    record = {
        "command": shlex.join(command),
        "commit": _git("rev-parse", "HEAD"),
        "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "mode": "quick",
        "claims": [r.claim.id for r in results],
        "claim_status": {r.claim.id: r.status for r in results},
        "seconds": round(seconds, 1),
        "functions": called,
    }
    print("\n".join(f"{target}  ({', '.join(by)})" for target, by in called.items()))
    print(f"{len(called)} public functions of numerics and theory called by {len(results)} claims "
          f"({', '.join(f'{r.claim.id} {r.status}' for r in results)}) in {seconds:.1f} s traced")
    if out is not None:
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {out}")
    return record


if __name__ == "__main__":
    main()
