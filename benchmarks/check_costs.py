"""Cost and power of every gating check: CPU seconds (quick, full) beside size and power (issue 24, item 2).

Reads the ``report.json`` of ``attneb verify --workers 1`` runs (with one worker every check's work runs in one
process, so its ``cpu_seconds`` are all of it; a check that reuses what an earlier check of the same process
computed, or stored, is charged only for its own part) and, optionally, the ``report.json`` of a ``--power`` run.
Prints a markdown table, one row per gating check: CPU seconds in each mode given, size, the smallest power over
its wrong theories (and which), and power per CPU second (smallest power / quick CPU seconds).

Usage::

    attneb verify --quick --workers 1 --out /tmp/cost-quick
    attneb verify --quick --power --out /tmp/power-quick          # optional
    python benchmarks/check_costs.py --quick /tmp/cost-quick/report.json --power /tmp/power-quick/report.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _load(path: str | None) -> dict | None:
    if path is None:
        return None
    data = json.loads(Path(path).read_text())
    if "claims" not in data:
        raise ValueError(f"{path} is not an attneb report.json (no 'claims')")
    return data


def cpu_seconds(report: dict | None) -> dict[tuple[str, str], float]:
    """``{(claim, check): cpu_seconds}`` of the gating checks that ``report`` ran."""
    if report is None:
        return {}
    return {(c["id"], e["check"]): e.get("cpu_seconds", float("nan")) for c in report["claims"]
            for e in c["evidence"] if e["gating"] and e["status"] != "not run"}


def power_rows(report: dict | None) -> dict[tuple[str, str], dict]:
    """``{(claim, check): power entry}`` of a ``--power`` report."""
    if report is None or "power" not in report:
        return {}
    return {(p["claim"], p["check"]): p for p in report["power"]["checks"]}


def table(quick: dict | None, full: dict | None, power: dict | None, width: int = 60) -> str:
    """The markdown table of the gating checks found in ``quick`` or ``full`` (both ``report.json`` dicts)."""
    q, f, p = cpu_seconds(quick), cpu_seconds(full), power_rows(power)
    lines = ["| claim | check | CPU s quick | CPU s full | size | least power (against) | power per quick CPU s |",
             "|---|---|---:|---:|---:|---|---:|"]
    for key in sorted(set(q) | set(f), key=lambda k: (-q.get(k, 0.0), k)):
        claim, check = key
        entry = p.get(key)
        size = least = per_second = ""
        if entry is not None:
            size = f"{entry['size']['rate']:.2f}"
            rates = {name: r["rate"] for name, r in entry["power"].items()}
            if rates:
                weakest = min(rates, key=rates.get)
                least = f"{rates[weakest]:.2f} ({weakest[:40]})"
                if key in q and q[key] > 0:
                    per_second = f"{rates[weakest] / q[key]:.3g}"
        name = check if len(check) <= width else check[:width - 3] + "..."
        lines.append(f"| {claim} | {name} | {_seconds(q.get(key))} | {_seconds(f.get(key))} | {size} | {least} "
                     f"| {per_second} |")
    total_q, total_f = sum(q.values()), sum(f.values())
    lines.append(f"| all | {len(set(q) | set(f))} gating checks | {total_q:.0f} | {total_f:.0f} | | | |")
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", help="report.json of 'attneb verify --quick --workers 1'")
    parser.add_argument("--full", help="report.json of 'attneb verify --workers 1'")
    parser.add_argument("--power", help="report.json of a --power run (its size and power columns)")
    args = parser.parse_args(argv)
    if args.quick is None and args.full is None:
        parser.error("give --quick, --full or both")
    print(table(_load(args.quick), _load(args.full), _load(args.power)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
