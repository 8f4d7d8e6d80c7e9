"""G6's predicted gap against E1's measured gaps, N by N, with its consequences along the schedules (reported).

Reads E1's two-stage rows (the Gaussian, the two clusters, the sphere in R^3) from the store of a ``verify`` run and
computes, at each of their ``(N, h2, T, eta)``, the terms of question G6 (:mod:`attneb.proofs_check.topics.predicted_gap`:
bias over the mean field's refined tokens to all orders, Stage-2 variance, amplified fluctuations; no constant fitted)
and the band of their neglected orders, exactly as G6 does. It prints a markdown table: prior, schedule, N, each
term, the prediction and its band, whether G6 decides the point (``N >= 10 N_c``), the measured gap in-sample and on
fresh queries (mean over seeds and its 95% t-interval) and their ratios to the prediction, the term that dominates,
the prediction's local log-log slope along the schedule and the factor on N that would halve it at that slope. For
the 1-D priors it adds the bias to first order in ``h2`` (:func:`attneb.theory.gap.bias`, the derivation's leading
term), which G6 does not use. ``--figure F`` draws the gaps against N with the prediction, its band and each term.
``--wrong-theories`` prints instead, for the derived terms and each wrong theory registered beside G6, how many of
the points it decides (per prior) lie outside its band: what G6's rule sees of each wrong theory on the stored runs.

Usage::

    attneb verify --out REPORT                      # E1's full runs (or --quick, then --quick here)
    python benchmarks/gap_table.py --store REPORT/results.sqlite [--quick] [--schedule log power] [--figure gap.png]
    python benchmarks/gap_table.py --store REPORT/results.sqlite [--quick] --wrong-theories
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

import numpy as np

from attneb.numerics.sweep import ResultStore
from attneb.numerics.sweep.spec import H2Schedule
from attneb.proofs_check.engine.registry import CLAIMS, Context
from attneb.proofs_check.engine.replication import stored_if_run
from attneb.proofs_check.topics import predicted_gap as g6
from attneb.proofs_check.topics.designs import SCHEDULES, SIGMA2
from attneb.proofs_check.topics.stage2 import recovery
from attneb.theory import gap


def predicted(prior: str, schedule: str, n: float, eta: float = 0.05) -> float:
    """G6's predicted gap at ``n`` tokens along E1's ``schedule`` (its ``h2``, ``T = T*``, Euler step ``eta``)."""
    h2 = H2Schedule.parse(SCHEDULES[schedule][1]).at(max(2, round(n)))[0]
    depth = SIGMA2 / (2 * h2)
    record = g6.mean_field_bias(prior, h2, depth, eta)
    return g6.predicted_terms(prior, h2, depth, eta, max(1, round(n)), record)["gap"]


def local_slope(prior: str, schedule: str, n: int, eta: float = 0.05) -> float:
    """d log G / d log N of the predicted gap along the schedule, by a central difference over ``N 2^(+-1/4)``."""
    up, down = predicted(prior, schedule, n * 2**0.25, eta), predicted(prior, schedule, n * 2**-0.25, eta)
    return float(np.log(up / down) / np.log(2**0.5))


def table(store_path: Path, quick: bool, schedules: list[str]) -> list[dict]:
    """G6's points of E1's stored rows (those of ``schedules``), each with its slope, halving factor and, in 1-D, the
    first-order bias."""
    with ResultStore(store_path, reuse_other_code=True) as store:
        rows = stored_if_run(recovery.recovery_configs(quick), store)
    rows = {part: part_rows for part, part_rows in rows.items() if part.rsplit("-", 1)[1] in schedules}
    with tempfile.TemporaryDirectory() as scratch:
        result = g6.predictions(Context(quick=quick, out=Path(scratch)), g6.points(rows))
    for p in result:
        schedule = p["part"].rsplit("-", 1)[1]
        p["dominant"] = max(("bias", "variance", "fluctuation"), key=p.get)
        p["slope"] = local_slope(p["prior"], schedule, p["n"], p["eta"])
        p["first_order_bias"] = (gap.bias(*g6.MIXTURES[p["prior"]], SIGMA2, p["h2"], p["T"])
                                 if p["prior"] in g6.MIXTURES else None)
    return result


def wrong_theory_counts(store_path: Path, quick: bool) -> dict[str, dict[str, tuple[int, int]]]:
    """``{theory: {prior: (points outside the band, points decided)}}`` for the derived terms (``"derived"``) and
    each wrong theory of G6, on E1's stored rows (each theory's own ``N_c`` decides which points count)."""
    with ResultStore(store_path, reuse_other_code=True) as store:
        rows = stored_if_run(recovery.recovery_configs(quick), store)
    [chk] = CLAIMS["G6"].checks
    counts = {}
    with tempfile.TemporaryDirectory() as scratch:
        for theory in [None, *chk.wrong_theories()]:
            with (theory.applied() if theory else contextlib.nullcontext()):
                result = g6.predictions(Context(quick=quick, out=Path(scratch)), g6.points(rows))
            decided = [p for p in result if p["decided"]]
            counts["derived" if theory is None else theory.name] = {
                prior: (sum(not p["passed"] for p in decided if p["prior"] == prior),
                        sum(p["prior"] == prior for p in decided)) for prior in ("gaussian", "clusters", "sphere")}
    return counts


def _halving(slope: float) -> str:
    """The factor on N that halves the predicted gap at this local slope: 2^(-1/slope) (never, for a slope >= 0)."""
    return f"{2 ** (-1 / slope):.3g}" if slope < 0 else "never"


def _interval(values) -> str:
    return f"{values[0]:.2e} [{values[1]:.2e}, {values[2]:.2e}]"


def print_table(result: list[dict]) -> None:
    head = ("| prior | schedule | N | h2 | decided | bias | variance | fluctuation | predicted [band] | gap (95%) | ratio | "
            "fresh (95%) | ratio | dominant | local slope | N x to halve | first-order bias |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for p in result:
        first = "" if p["first_order_bias"] is None else f"{p['first_order_bias']:.2e}"
        prior, schedule = p["part"].rsplit("-", 1)
        print(f"| {prior} | {schedule} | {p['n']} | {p['h2']:.4f} | {'yes' if p['decided'] else 'no'} | "
              f"{p['bias']:.2e} | {p['variance']:.2e} | {p['fluctuation']:.2e} | {p['gap']:.2e} [{p['low']:.2e}, "
              f"{p['high']:.2e}] | {_interval(p['measured'])} | {p['measured'][0] / p['gap']:.2f} | "
              f"{_interval(p['fresh'])} | {p['fresh'][0] / p['gap']:.2f} | {p['dominant']} | {p['slope']:.2f} | "
              f"{_halving(p['slope'])} | {first} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="results.sqlite of a verify run")
    parser.add_argument("--quick", action="store_true", help="read the quick mode's E1 runs (default: full)")
    parser.add_argument("--schedule", nargs="+", default=["log", "power"], choices=["log", "power"])
    parser.add_argument("--figure", type=Path, help="write the figure here (PNG)")
    parser.add_argument("--wrong-theories", action="store_true",
                        help="count, per theory, the decided points outside its band, instead of the table")
    args = parser.parse_args(argv)
    if args.wrong_theories:
        for theory, per_prior in wrong_theory_counts(args.store, args.quick).items():
            print(f"{theory}: " + ", ".join(f"{prior} {out}/{n} out" for prior, (out, n) in per_prior.items()))
        return 0
    result = table(args.store, args.quick, args.schedule)
    if not result:
        parser.error(f"{args.store} holds no E1 two-stage rows of the {'quick' if args.quick else 'full'} mode")
    print_table(result)
    if args.figure:
        g6.plot_predicted_gap(result).savefig(args.figure, dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
