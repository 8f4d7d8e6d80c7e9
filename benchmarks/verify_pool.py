"""Wall time of ``attneb verify`` against the number of workers, the processes it starts, and whether the reports agree.

Usage: python benchmarks/verify_pool.py [--workers 1,2,16] [--full] [--only C1 S1 ...] [--timeout 600]

For each worker count, runs ``python -m attneb verify --quick --workers W`` (``--full``: the full
job) into a fresh temporary folder, samples every 0.5 s how many processes it has started
(descendants, from ``/proc``; the fork server and the resource tracker counted), and prints the wall time, the most
processes seen and the peak resident memory of the largest one. Then it compares the reports:
every check's status and summary must be the same for every worker count (``verify`` promises
results that do not depend on ``--workers``). Worker counts above the cores of this machine are
run too (oversubscribed), and say so. Nothing is asserted beyond the comparison, whose failure
sets the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def resident_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def timed_verify(workers: int, full: bool, only: list[str], timeout: float, out: Path) -> dict:
    """Run verify once; its wall time, exit code, most descendant processes and largest resident memory."""
    command = [sys.executable, "-m", "attneb", "verify", "--workers", str(workers), "--out", str(out)]
    command += [] if full else ["--quick"]
    command += ["--only", *only] if only else []
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    most, rss = 0, 0
    while process.poll() is None:
        if time.perf_counter() - start > timeout:
            process.kill()
            process.wait()
            return {"workers": workers, "seconds": None, "code": "timeout", "processes": most, "rss_mib": rss / 1024}
        below = descendants(process.pid)
        most = max(most, len(below))
        rss = max([rss, resident_kib(process.pid), *(resident_kib(p) for p in below)])
        time.sleep(0.5)
    return {"workers": workers, "seconds": time.perf_counter() - start, "code": process.returncode,
            "processes": most, "rss_mib": rss / 1024}


def summaries(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    return {(c["id"], e["check"]): (e["status"], e["summary"]) for c in report["claims"] for e in c["evidence"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: 1,2)")
    parser.add_argument("--full", action="store_true", help="the full job instead of --quick")
    parser.add_argument("--only", nargs="+", default=[], metavar="ID", help="claim ids (default: all)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed to each verify")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",") if w]
    cores = len(os.sched_getaffinity(0))
    print(f"machine: {os.uname().machine}, {cores} cores for this process; verify {'full' if args.full else 'quick'}"
          f"{' --only ' + ' '.join(args.only) if args.only else ''}")
    reports, code = {}, 0
    with tempfile.TemporaryDirectory(prefix="attneb-verify-pool-") as scratch:
        for workers in counts:
            out = Path(scratch) / f"workers-{workers}"
            row = timed_verify(workers, args.full, args.only, args.timeout, out)
            seconds = "timed out" if row["seconds"] is None else f"{row['seconds']:.1f} s"
            note = " (more workers than cores)" if workers > cores else ""
            print(f"workers {workers:3d}{note}: {seconds}, exit code {row['code']}, at most {row['processes']} "
                  f"processes below verify, largest resident {row['rss_mib']:.0f} MiB", flush=True)
            if (out / "report.json").is_file() and row["seconds"] is not None:
                reports[workers] = summaries(out)
        if len(reports) > 1:
            first, *others = reports
            differing = {w: [k for k in reports[first] if reports[w].get(k) != reports[first][k]] for w in others}
            for w, keys in differing.items():
                print(f"workers {w} against {first}: {len(keys)} of {len(reports[first])} checks differ"
                      f"{': ' + str(keys[:3]) if keys else ''}")
                code = code or (1 if keys else 0)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
