"""Wall time of checking every claim mutant of every derivation, and whether the verdicts hold.

Usage: python benchmarks/derivation_mutants.py [--only NAME ...] [--json OUT] [--compare BEFORE.json]

For each derivation of ``attneb.theory``: check it (every item's method and detail are kept),
then check every mutant of its claims (``theory.mutations.mutants(derivation, kinds=("claim",))``,
then ``mutant.check()``, as ``attneb verify --power`` does with its wrong theories) and time
each. Prints, per derivation, the number of mutants, the total and the slowest wall time and
how many mutants were rejected. ``--json`` writes the measurements; ``--compare`` reads those of
an earlier run (another version of the code) and prints both side by side, and whether the real
derivations' per-item methods and details are the same in both. One process, derivations in
registry order, each real check before its mutants (sympy's cache is then as warm in both runs).
Nothing is asserted; the exit status is 1 when a mutant passes, a real derivation fails, or (with
``--compare``) a real item's method or detail changed.

To measure another version of ``theory/`` (the one before a change), copy it beside the package's
own ``__init__``, as ``DIR/attneb/theory`` next to a copy of ``src/attneb``, and run this script with
``PYTHONPATH=DIR`` (it then imports that copy instead of the editable install) and ``--json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from attneb import theory
from attneb.theory import mutations


def measure(name: str) -> dict:
    """The real check of derivation ``name`` and the timed checks of its claim mutants."""
    derivation = theory.get_derivation(name)
    start = time.perf_counter()
    report = derivation.check()
    seconds = time.perf_counter() - start
    items = [[e.kind, e.index, e.method, e.detail] for e in report.entries]
    found = []
    for label, mutation, mutant in mutations.mutants(derivation, kinds=("claim",)):
        start = time.perf_counter()
        rejected = not mutant.check().passed
        found.append({"label": label, "mutation": mutation, "seconds": time.perf_counter() - start,
                      "rejected": rejected})
    return {"passed": report.passed, "seconds": seconds, "items": items, "mutants": found}


def row(name: str, result: dict) -> str:
    times = [m["seconds"] for m in result["mutants"]]
    slowest = max(result["mutants"], key=lambda m: m["seconds"], default=None)
    rejected = sum(m["rejected"] for m in result["mutants"])
    where = f"{slowest['label']} {slowest['mutation']}" if slowest else "-"
    return (f"{name:<12} {len(times):>4} {sum(times):>9.1f} {max(times, default=0.0):>9.1f}  "
            f"{rejected:>3}/{len(times):<3} {'yes' if result['passed'] else 'NO':<4} {where}")


HEADER = f"{'derivation':<12} {'mut':>4} {'total s':>9} {'slowest':>9}  {'rejected':<7} real slowest mutant"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="derivations to measure (default: all)")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--compare", type=Path, help="measurements of an earlier run, printed beside these")
    args = parser.parse_args(argv)
    names = args.only or theory.list_derivations()
    print(f"python {platform.python_version()} on {platform.node()}; claim mutants checked with mutant.check()",
          flush=True)
    print(HEADER, flush=True)
    results = {}
    for name in names:
        results[name] = measure(name)
        print(row(name, results[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    bad = [f"{n}: real derivation fails" for n, r in results.items() if not r["passed"]]
    bad += [f"{n}: {m['label']} {m['mutation']} passes" for n, r in results.items() for m in r["mutants"]
            if not m["rejected"]]
    if args.compare:
        before = json.loads(args.compare.read_text())
        print(f"\nbefore ({args.compare}) -> after: total and slowest mutant, seconds")
        print(f"{'derivation':<12} {'mut':>4} {'total before':>13} {'after':>8} {'slowest before':>15} {'after':>8}")
        for name in names:
            if name not in before:
                continue
            old, new = before[name]["mutants"], results[name]["mutants"]
            print(f"{name:<12} {len(new):>4} {sum(m['seconds'] for m in old):>13.1f} "
                  f"{sum(m['seconds'] for m in new):>8.1f} {max(m['seconds'] for m in old):>15.1f} "
                  f"{max(m['seconds'] for m in new):>8.1f}")
            if [m["label"] + m["mutation"] for m in old] != [m["label"] + m["mutation"] for m in new]:
                bad.append(f"{name}: not the same mutants as before")
            if before[name]["items"] != results[name]["items"]:
                changed = [(o, n) for o, n in zip(before[name]["items"], results[name]["items"]) if o != n]
                bad.append(f"{name}: real items changed: {changed}")
        common = [n for n in names if n in before]
        totals = [sum(m["seconds"] for n in common for m in run[n]["mutants"]) for run in (before, results)]
        print(f"{'all':<12} {'':>4} {totals[0]:>13.1f} {totals[1]:>8.1f}")
    for line in bad:
        print("PROBLEM:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
