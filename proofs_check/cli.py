"""The ``attneb`` command line: a thin layer over :mod:`attneb.proofs_check.engine` and :mod:`attneb.theory`."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import attneb

__all__ = ["EXIT_CLOSED_PIPE", "EXIT_INTERRUPTED", "main", "run_command"]


def _reuse_other_code(args: argparse.Namespace) -> None:
    """``--reuse-other-code``: every store this process and its workers open reads results of other code."""
    from attneb.numerics.sweep import REUSE_VARIABLE

    if args.reuse_other_code:
        os.environ[REUSE_VARIABLE] = "1"


def _other_code_notice(command: str, paths: list[Path]) -> str | None:
    """A plain sentence when the stores at ``paths`` hold results computed by other code, else ``None``."""
    from attneb.numerics.sweep import ResultStore

    held = {}
    for path in paths:
        with ResultStore(path) as store:
            for codes in store.other_code().values():
                for code, n in codes.items():
                    held[code] = held.get(code, 0) + n
            current, reuse = store.code, store.reuse_other_code
    if not held:
        return None
    what = ", ".join(f"{n} by {code}" for code, n in sorted(held.items()))
    where = paths[0] if len(paths) == 1 else f"the {len(paths)} stores under {paths[0].parent}"
    if reuse:
        return (f"attneb {command}: {where} holds {sum(held.values())} results computed by other code ({what}); "
                f"--reuse-other-code: they are used where this code ({current}) has none, and the report says which")
    return (f"attneb {command}: {where} holds {sum(held.values())} results computed by other code ({what}); "
            f"this code ({current}) computes them again (--reuse-other-code would use them instead)")


def _verify(args: argparse.Namespace) -> int:
    _reuse_other_code(args)
    if args.workers > 1:
        from .engine.shared_pool import start_server

        start_server()  # its server imports the checks beside the imports below
    from .engine.content import load
    from .engine.power import analyse
    from .engine.report import claim_line, defects, git_state, power_line, write_report
    from .engine.runner import run

    mode = "quick" if args.quick else "full"
    out = Path(args.out)
    try:
        load(args.load)
        notice = _other_code_notice("verify", sorted(out.rglob("*.sqlite"))) if out.is_dir() else None
    except (ImportError, FileNotFoundError, ValueError) as exc:
        print(f"attneb verify: {exc}", file=sys.stderr)
        return 2
    if notice:
        print(notice, flush=True)
    say = _speaker(args)
    say(f"attneb verify ({mode}): checking claims, one line each as it completes")
    started, checkout = datetime.now(timezone.utc), git_state()
    start = time.perf_counter()
    cache: dict = {}
    try:
        results = run(args.only, quick=args.quick, out=out, workers=args.workers, cache=cache,
                      sources=args.load or (), superseded=args.superseded,
                      on_claim=lambda r: say(claim_line(r)))
    except ValueError as exc:
        print(f"attneb verify: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    power = None
    power_seconds = 0.0
    if args.power:
        write_report(results, out, quick=args.quick, seconds=seconds, started=started, git=checkout)
        say(f"power analysis ({mode}): every check under the true theory and each wrong one")
        start = time.perf_counter()
        replicates = {**({"seeds": args.replicates, "subsample": args.replicates} if args.replicates else {}),
                      **({"pool": args.pool} if args.pool else {})} or None
        power = analyse(args.only, quick=args.quick, out=out, workers=args.workers, cache=cache,
                        replicates=replicates, superseded=args.superseded,
                        on_check=lambda r: say(power_line(r)))
        power_seconds = time.perf_counter() - start
    report = write_report(results, out, quick=args.quick, seconds=seconds, power=power, power_seconds=power_seconds,
                          started=started, git=checkout)
    failed = defects(report)
    answered_no = [c["id"] for c in report["claims"] if c["question"] and c["status"] == "fail"]
    print(f"report: {out / 'report.html'}, report.md and report.json ({report['seconds']:.1f} s"
          + (f", power analysis {power_seconds:.1f} s)" if power is not None else ")"))
    if power is not None:
        weak = [f"{r.claim_id}: {r.check.name}" for r in power if not r.meets_goal and not r.answered_no]
        questions = sum(r.answered_no for r in power)
        print(f"power: {sum(r.meets_goal for r in power)} of {len(power) - questions} checks meet size <= 0.05 and "
              f"power >= 0.95 by their point estimates, {sum(r.meets_goal_at_95 for r in power)} by their 95% bounds"
              + (f"; below the goal: {'; '.join(weak)}" if weak else "")
              + (f"; {questions} more are checks of questions answered no (their size is the answer)"
                 if questions else ""))
    if answered_no:
        print(f"questions answered no (findings, see the report): {', '.join(answered_no)}")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("all checks passed" + (" (but for the questions answered no)" if answered_no else ""))
    return 0


def _derive(args: argparse.Namespace) -> int:
    from attneb import theory
    limit = theory.TIME_LIMIT if args.time_limit is None else args.time_limit
    say = _speaker(args)
    if args.name is None:
        say("derivations (building and checking each; sympy takes a few seconds apiece):")
        for name in theory.list_derivations():
            derivation = theory.get_derivation(name)
            report = derivation.check(time_limit=limit)
            status = "checked" if report.passed else "FAILED"
            counts = ", ".join(f"{n} {method}" for method, n in report.methods().items() if n)
            print(f"  {name:<12} {status:<8} ({counts})  {derivation.title}", flush=True)
        say("show one with: attneb derive NAME [--pretty | --plain | --latex]")
        return 0
    if args.name not in theory.list_derivations():
        print(f"attneb derive: unknown derivation {args.name!r}; known: {', '.join(theory.list_derivations())}",
              file=sys.stderr)
        return 2
    derivation = theory.get_derivation(args.name)
    items = len(derivation.steps) + len(derivation.claims)
    say(f"checking {args.name}: {len(derivation.steps)} steps and {len(derivation.claims)} claims, each as it "
        f"completes (at most {limit:g} s apiece)", file=sys.stderr)

    def progress(kind: str, index: int, method: str, seconds: float) -> None:
        done = index if kind == "step" else len(derivation.steps) + index
        say(f"  [{done}/{items}] {kind} {index}: {method} ({seconds:.1f} s)", file=sys.stderr)

    report = derivation.check(time_limit=limit, progress=progress)
    if args.latex:
        print(derivation.latex())
    else:
        print(derivation.to_text(pretty=args.pretty if args.pretty is not None else sys.stdout.isatty()))
    return 0 if report.passed else 1


def _show(args: argparse.Namespace) -> int:
    from .engine.content import load
    from .engine.show import claim_record, format_claim, format_index, read_report

    try:
        load(args.load)
    except (ImportError, FileNotFoundError, ValueError) as exc:
        print(f"attneb show: {exc}", file=sys.stderr)
        return 2
    if args.id is None:
        print(format_index(), end="")
        return 0
    report = read_report(args.report)
    if report is None and args.report != _DEFAULT_REPORT:
        print(f"attneb show: no report.json at {args.report}", file=sys.stderr)
        return 2
    try:
        record = claim_record(args.id, report=report, derivations=not args.no_derivations,
                              pretty=sys.stdout.isatty() if args.pretty is None else args.pretty)
    except ValueError as exc:
        print(f"attneb show: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(format_claim(record), end="")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from attneb.numerics.sweep import sweep_file

    _reuse_other_code(args)
    try:
        notice = _other_code_notice("sweep", [Path(args.store)]) if Path(args.store).is_file() else None
        if notice:
            print(notice, flush=True)
        summary = sweep_file(args.config, args.store, workers=1 if args.scheduler else args.workers, csv_path=args.csv,
                             scheduler=args.scheduler)
    except (ValueError, FileNotFoundError, ImportError, OSError) as exc:
        print(f"attneb sweep: {exc}", file=sys.stderr)
        return 2
    print(summary)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .engine.content import load_default
    from .engine.studies import STUDIES

    load_default()
    if args.name not in STUDIES:
        print(f"attneb plot: unknown experiment {args.name!r}; known: {', '.join(STUDIES)}", file=sys.stderr)
        return 2
    _reuse_other_code(args)
    out = Path(args.out) if args.out else Path(args.store).parent
    try:
        pngs = STUDIES[args.name].plot(Path(args.store), out, quick=args.quick)
    except (FileNotFoundError, LookupError) as exc:
        print(f"attneb plot: {exc}", file=sys.stderr)
        return 2
    say = _speaker(args)
    for png in pngs:
        say(f"{args.name}: {png} and {png.with_suffix('.pdf')}")
    return 0


#: Exit status after Ctrl-C: 128 + SIGINT, as the shell reports for a program that SIGINT ends.
EXIT_INTERRUPTED = 130

#: Exit status when the reader of the output goes away (``attneb derive | head``): 128 + SIGPIPE,
#: as the shell reports for a program that SIGPIPE ends.
EXIT_CLOSED_PIPE = 141

#: What each exit status of ``attneb`` means (every command's ``--help`` lists them).
EXIT_CODES = (
    (0, "success (for verify: every check passed; questions answered no are findings, not failures)"),
    (1, "a check failed or raised (verify), or a derivation did not check (derive)"),
    (2, "bad arguments or input: an unknown option, claim, derivation or experiment, a missing file"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); run the same command again to resume"),
    (EXIT_CLOSED_PIPE, "the reader of the output went away (attneb derive | head)"),
)

_EPILOG = "exit status:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


class _PlotHelp(argparse.Action):
    """``attneb plot --help``: lists the experiments that can be drawn, read from the registry (a few seconds)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .engine.content import load_default
        from .engine.studies import STUDIES

        load_default()
        parser.epilog = ("experiments:\n" + "\n".join(f"  {name:<4} {study.title}" for name, study in sorted(STUDIES.items()))
                         + "\n\n" + _EPILOG)
        parser.print_help()
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="print only results, warnings and errors: no progress lines or bars")
    command = {"parents": [common], "epilog": _EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}
    parser = argparse.ArgumentParser(
        prog="attneb",
        description="Verify 'Attention as In-Context Empirical Bayes' (arXiv:2605.29351): "
        "each claim of the paper against symbolic and numeric evidence.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"attneb {attneb.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = sub.add_parser(
        "verify", **command,
        help="run every registered check and write report.html, report.md and report.json",
        description="Run every registered check, print one line per claim (id, status, evidence), "
        "write report.html, report.md and report.json, and exit non-zero if any check fails.",
    )
    add_verify_arguments(verify)
    derive = sub.add_parser(
        "derive", **command,
        help="list the sympy derivations with their check status, or print one",
        description="Without NAME: list the derivations of theory/ and whether every step checks. "
        "With NAME: print its steps, the reason for each and how each was checked "
        "(symbolic = sympy reduced it to zero; numeric = mpmath at random points, not a proof).",
    )
    derive.add_argument("name", nargs="?", help="a derivation, e.g. depth_noise")
    form = derive.add_mutually_exclusive_group()
    form.add_argument("--pretty", dest="pretty", action="store_const", const=True,
                      help="print the math with sympy's unicode pretty printer (the default on a terminal)")
    form.add_argument("--plain", dest="pretty", action="store_const", const=False,
                      help="print one line of sympy text per relation (the default when the output is not a terminal)")
    form.add_argument("--latex", action="store_true", help="print LaTeX (an aligned block) instead of text")
    derive.add_argument("--time-limit", type=_positive_seconds, metavar="SECONDS",
                        help="CPU seconds per step or claim before its symbolic reduction is abandoned and its numeric "
                        "evaluation decides (default: attneb.theory.TIME_LIMIT)")
    derive.set_defaults(func=_derive)
    show = sub.add_parser(
        "show", **command,
        help="one claim with everything about it: statement, derivations, checks, wrong theories, figures, where",
        description="Without ID: list the claims, each with the file and line that registers it. With ID: the "
        "claim's statement and assumptions, the derivations that bear on it, each check with its criterion, its "
        "wrong theories and the functions it covers, and its figures, each with its file and line; with a report of "
        "an earlier 'attneb verify' (default ./attneb-report), each check's last verdict and, after --power, its "
        "size and power.",
    )
    show.add_argument("id", nargs="?", metavar="ID", help="a claim id, e.g. C6 (see 'attneb show')")
    show.add_argument("--report", default=_DEFAULT_REPORT,
                      help="report.json, or its folder, of an earlier verify (default: %(default)s, if it exists)")
    show.add_argument("--no-derivations", action="store_true",
                      help="name the derivations without building them (sympy takes seconds apiece)")
    printer = show.add_mutually_exclusive_group()
    printer.add_argument("--pretty", action="store_true", default=None,
                         help="derivation steps in sympy's unicode pretty printer (default on a terminal)")
    printer.add_argument("--plain", dest="pretty", action="store_false", help="derivation steps as plain text")
    show.add_argument("--json", action="store_true", help="print the record as JSON")
    show.add_argument("--load", nargs="+", metavar="MODULE",
                      help="import these modules or .py files first (claims of your own, as for 'attneb verify --load')")
    show.set_defaults(func=_show)
    sweep = sub.add_parser(
        "sweep", **command,
        help="run a declarative experiment (TOML) into a resumable SQLite store",
        description="Expand the experiment in CONFIG into runs and execute those not yet in the "
        "store; each finished run is written at once, so an interrupted sweep resumes where it stopped.",
    )
    sweep.add_argument("config", help="experiment file (TOML), e.g. examples/sweeps/two_cluster_recovery.toml")
    sweep.add_argument("--store", required=True, help="SQLite file for the results (created if missing)")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_positive_int, default=_cores(),
                       help="local worker processes (default: %(default)s, one per core; none with --scheduler); results do "
                       "not depend on it")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on an existing dask.distributed cluster, e.g. tcp://HOST:8786 (extra 'dist'); "
                       "this process writes the store as results arrive")
    sweep.add_argument("--csv", help="also export the experiment's rows to this CSV file")
    sweep.add_argument("--reuse-other-code", action="store_true", help=_REUSE_HELP)
    sweep.set_defaults(func=_sweep)
    plot = sub.add_parser(
        "plot", **{**command, "add_help": False},
        help="redraw an experiment's figures from stored results, without recomputing",
        description="Read the rows an earlier 'attneb verify' kept in its store (REPORT/results.sqlite) "
        "and redraw the figures of experiment NAME, each as PNG and PDF.",
    )
    plot.add_argument("-h", "--help", action=_PlotHelp, help="show this help, with the experiments, and exit")
    plot.add_argument("name", metavar="NAME", help="an experiment (listed below, by --help)")
    plot.add_argument("--store", required=True, help="the store of a verify run, e.g. attneb-report/results.sqlite")
    plot.add_argument("--quick", action="store_true", help="draw the results of 'verify --quick' (default: full)")
    plot.add_argument("--out", help="folder for the figures (default: the store's folder)")
    plot.add_argument("--reuse-other-code", action="store_true", help=_REUSE_HELP)
    plot.set_defaults(func=_plot)
    return parser


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attneb verify``."""
    parser.add_argument("--quick", action="store_true", help="smaller problems (about 5 minutes on 2 cores); still real checks")
    parser.add_argument("--out", default="attneb-report", help="report folder (default: ./attneb-report)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these claim ids (e.g. C1 C3)")
    parser.add_argument("--workers", type=_positive_int, default=_cores(),
                        help="worker processes, shared by the claims and the runs of their experiments: at most this "
                        "many compute at once (default: %(default)s, one per core); results do not depend on it")
    parser.add_argument("--power", action="store_true",
                        help="after the checks, measure each check's size (how often it fails under the true "
                        "theory) and power (how often it rejects each registered wrong theory) over replicates; "
                        "a table in report.md, the numbers in report.json")
    parser.add_argument("--replicates", type=_positive_int, metavar="R",
                        help="replicates per randomised check in the power analysis (default: 8/40 quick, "
                        "30/200 full, for checks with fresh seeds / seed subsets)")
    parser.add_argument("--pool", type=_positive_int, metavar="P",
                        help="in the power analysis, experiments simulate P times their seeds and replicates are "
                        "random subsets of that pool (default 3 quick, 4 full); the pool's P independent seed sets "
                        "bound the precision of their size and power")
    parser.add_argument("--load", nargs="+", metavar="MODULE",
                        help="import these modules or .py files first: they may register claims, checks and "
                        "alternatives of their own (see docs/extending.md)")
    parser.add_argument("--superseded", action="store_true",
                        help="also run (and, with --power, measure) the superseded checks: criteria replaced by later "
                        "ones, kept in the report for their history; by default each is listed as 'not run' with its "
                        "last result from the report it replaces")
    parser.add_argument("--reuse-other-code", action="store_true", help=_REUSE_HELP)
    parser.set_defaults(func=_verify)


_REUSE_HELP = ("use stored results that other code (an earlier version of the toolkit's source) computed, where this "
               "code has none; by default they are computed again (every stored result names its code)")


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the error names what is expected and what came)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text or repr(text)}")
    return value


def _positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text or repr(text)}")
    return value


def _speaker(args: argparse.Namespace) -> Callable[..., None]:
    """``print`` with flush for progress lines, or nothing under ``-q/--quiet``."""
    if args.quiet:
        return lambda *_, **__: None
    return functools.partial(print, flush=True)


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


#: Where ``attneb show`` looks for the last verify report unless told.
_DEFAULT_REPORT = "attneb-report"



#: What to run again after Ctrl-C, per command: the option that names where finished work was kept.
_RESUME = {"verify": "--out", "sweep": "--store"}


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; returns its exit status.

    Ctrl-C ends it with one line on stderr and :data:`EXIT_INTERRUPTED`, no traceback (finished runs are
    in the store, so the same command resumes); a closed stdout ends it quietly with :data:`EXIT_CLOSED_PIPE`.
    """
    if args.quiet:
        os.environ["TQDM_DISABLE"] = "1"  # progress bars, here and in the processes this one starts
    try:
        status = args.func(args)
        sys.stdout.flush()  # inside the try: a closed pipe may only show at this flush
        return status
    except KeyboardInterrupt:
        option = _RESUME.get(args.command)
        resume = f"; run the same command with the same {option} to resume" if option else ""
        print(f"attneb {args.command}: interrupted{resume}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the interpreter flushes stdout again at exit: point it at /dev/null so that it cannot fail
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``attneb`` console script; returns the exit status."""
    return run_command(build_parser().parse_args(argv))
