"""The ``attneb`` command line: a thin layer over :mod:`proofs_check.runner`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _verify(args: argparse.Namespace) -> int:
    from .report import claim_line, write_report
    from .runner import run

    mode = "quick" if args.quick else "full"
    print(f"attneb verify ({mode}): checking claims, one line each as it completes", flush=True)
    start = time.perf_counter()
    try:
        results = run(args.only, quick=args.quick, out=Path(args.out), on_claim=lambda r: print(claim_line(r), flush=True))
    except ValueError as exc:
        print(f"attneb verify: {exc}", file=sys.stderr)
        return 2
    report = write_report(results, Path(args.out), quick=args.quick, seconds=time.perf_counter() - start)
    failed = [c["id"] for c in report["claims"] if c["status"] in ("fail", "error")]
    print(f"report: {Path(args.out) / 'report.md'} and report.json ({report['seconds']:.1f} s)")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("all checks passed")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from numerics.sweep import sweep_file

    try:
        summary = sweep_file(args.config, args.store, workers=args.workers, csv_path=args.csv)
    except (ValueError, FileNotFoundError) as exc:
        print(f"attneb sweep: {exc}", file=sys.stderr)
        return 2
    print(summary)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attneb",
        description="Verify 'Attention as In-Context Empirical Bayes' (arXiv:2605.29351): "
        "each claim of the paper against symbolic and numeric evidence.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = sub.add_parser(
        "verify",
        help="run every registered check and write report.json / report.md",
        description="Run every registered check, print one line per claim (id, status, evidence), "
        "write report.json and report.md, and exit non-zero if any check fails.",
    )
    add_verify_arguments(verify)
    sweep = sub.add_parser(
        "sweep",
        help="run a declarative experiment (TOML) into a resumable SQLite store",
        description="Expand the experiment in CONFIG into runs and execute those not yet in the "
        "store; each finished run is written at once, so an interrupted sweep resumes where it stopped.",
    )
    sweep.add_argument("config", help="experiment file (TOML), e.g. examples/sweeps/two_cluster_recovery.toml")
    sweep.add_argument("--store", required=True, help="SQLite file for the results (created if missing)")
    sweep.add_argument("--workers", type=int, default=1, help="worker processes (results do not depend on it)")
    sweep.add_argument("--csv", help="also export the experiment's rows to this CSV file")
    sweep.set_defaults(func=_sweep)
    return parser


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attneb verify`` (also those of ``python -m proofs_check``)."""
    parser.add_argument("--quick", action="store_true", help="smaller problems (under two minutes); still real checks")
    parser.add_argument("--out", default="attneb-report", help="report folder (default: ./attneb-report)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these claim ids (e.g. C1 C3)")
    parser.set_defaults(func=_verify)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``attneb`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
