"""Write the results of a verify run (and of its power analysis) as ``report.json``, ``report.md`` and ``report.html``.

``report.json`` opens with ``provenance`` (:func:`run_provenance`): the layout's :data:`SCHEMA`, the
toolkit's version and source fingerprint, the git commit of the checkout it was imported from, the
versions of Python, numpy, scipy and sympy, the command line, the cores, and when the run started and
ended. ``report.html`` (:mod:`.report_html`) is the same report as one self-contained page.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import scipy
import sympy

import attneb
from attneb.numerics import sweep
from attneb.numerics.sweep import provenance

from .coverage import coverage_map, uncovered
from .power import GOAL_POWER, GOAL_SIZE, CheckPower
from .report_html import provenance_lines, write_html
from .runner import NOT_RUN, CheckResult, ClaimResult, status_label

__all__ = ["SCHEMA", "claim_line", "defects", "git_state", "last_runs", "power_line", "provenance_lines", "report_dict",
           "run_provenance", "status_label", "stored_code", "write_report"]

#: The version of ``report.json``'s layout, raised whenever a key is moved, renamed or removed (adding
#: one does not raise it). 1: the layout before ``provenance``; 2: ``provenance`` added (the keys
#: ``created``, ``seconds``, ``code`` and ``versions`` kept beside it).
SCHEMA = 2
#: Seconds each ``git`` call of :func:`git_state` may take.
GIT_TIMEOUT = 10.0


def _evidence_text(result: ClaimResult) -> str:
    parts = []
    for c in result.checks:
        prefix = "" if c.check.gating else "[superseded] "
        if c.status == NOT_RUN:
            parts.append(f"{prefix}{c.name}: not run")
        elif c.evidence is not None:
            parts.append(prefix + c.evidence.summary)
        else:
            parts.append(f"{prefix}{c.name}: raised {c.error.strip().splitlines()[-1]}")
    return " | ".join(parts) if parts else "no check registered yet"


def claim_line(result: ClaimResult) -> str:
    """One line per claim: id, status (a question's answer), evidence."""
    return f"{result.claim.id:<4} {status_label(result.claim.question, result.status).upper():<9} " \
           f"{_evidence_text(result)}"


def defects(report: dict) -> list[str]:
    """Ids of the claims that failed or raised; a question answered "no" is a finding, not a defect."""
    return [c["id"] for c in report["claims"]
            if c["status"] == "error" or (c["status"] == "fail" and not c["question"])]


def _verdict(meets: bool, at_95: bool) -> str:
    return "goal at 95%" if at_95 else "goal (point)" if meets else "BELOW GOAL"


def power_line(result: CheckPower) -> str:
    """One line per check of a power analysis: size, and the power against each alternative."""
    def one(name, rate):
        return f"{name} {rate.rate:.2f}" + (f" ({len(rate.errors)} runs raised: not measured)" if rate.errors else "")

    powers = ", ".join(one(name, rate) for name, (_, rate) in result.power.items()) or "no alternative"
    verdict = "ANSWERED NO" if result.answered_no else _verdict(result.meets_goal, result.meets_goal_at_95)
    return (f"{result.claim_id:<4} {verdict:<13} {result.check.name[:60]}: "
            f"size {result.size.rate:.2f} ({result.replicates} replicates, {result.size.effective} independent); "
            f"power: {powers}")


def _power_dict(results: list[CheckPower], seconds: float) -> dict:
    return {
        "goal": {"power": GOAL_POWER, "size": GOAL_SIZE},
        "seconds": round(seconds, 3),
        "meet_goal": sum(r.meets_goal for r in results),
        "meet_goal_at_95": sum(r.meets_goal_at_95 for r in results),
        "checks": [r.to_dict() for r in results],
    }


def stored_code(out: Path) -> dict:
    """Which code computed the results stored under ``out`` (every ``*.sqlite`` in it, the power analysis's too).

    Returns ``{"code": the running code's fingerprint, "reuse_other_code": whether stores read
    results of other code, "used": {store: {experiment: {code: count}}} of the results of other
    code that the stores read, "held": {store: {experiment: {code: count}}} of all results of
    other code they hold}``; stores are named by their path relative to ``out``.
    """
    current, used, held = provenance.source_fingerprint(), {}, {}
    for path in sorted(Path(out).rglob("*.sqlite")):
        name = path.relative_to(out).as_posix()
        with sweep.ResultStore(path) as store:
            other = {e: {c: n for c, n in codes.items() if c != current} for e, codes in store.provenance().items()}
            if any(other.values()):
                used[name] = {e: codes for e, codes in other.items() if codes}
            other_code = store.other_code()
            if other_code:
                held[name] = other_code
    return {"code": current, "reuse_other_code": provenance.reuse_other_code(), "used": used, "held": held}


def last_runs(report: dict) -> dict[tuple[str, str], dict]:
    """The last result of every check that ``report`` ran or remembers: ``{(claim, check): last run}``.

    A last run is ``{"status", "summary", "mode", "created", "code"}``: the check's own result in
    ``report``, or, for a check it did not run, the last run it carried over.
    """
    found = {}
    for c in report.get("claims", ()):
        for e in c["evidence"]:
            if e["status"] != NOT_RUN:
                found[c["id"], e["check"]] = {"status": e["status"], "summary": e.get("summary") or e.get("error", ""),
                                              "mode": report["mode"], "created": report["created"],
                                              "code": report.get("code", "unrecorded")}
            elif e.get("last_run"):
                found[c["id"], e["check"]] = e["last_run"]
    return found


def _outcome(c: CheckResult, last: dict | None) -> dict:
    """A check's result for the report: its evidence, its error, or (not run) its last run where there is one."""
    if c.status == NOT_RUN:
        text = "not run (superseded; `attneb verify --superseded` runs it)"
        if last is None:
            return {"summary": text + "; no earlier result at hand"}
        return {"summary": f"{text}; last run {last['created']} ({last['mode']}, code {last['code']}): "
                           f"{last['status']}: {last['summary']}", "last_run": last}
    return asdict(c.evidence) if c.evidence is not None else {"error": c.error}


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT,
                          check=True, stdin=subprocess.DEVNULL)


def git_state(folder: Path | str | None = None) -> dict | None:
    """The git commit of the checkout that holds ``folder`` and whether its tracked files differ from it.

    ``folder`` defaults to the folder this module was imported from, so that the answer names the
    source that ran. Returns ``{"commit": sha, "dirty": bool}`` (dirty: a tracked file modified, staged
    or not, as ``git describe --dirty`` counts it; untracked files do not count), or None where
    ``folder`` is not in a git checkout, its files are not tracked there (a wheel installed into a
    virtual environment that sits inside a checkout), git is absent, or it fails or takes longer
    than :data:`GIT_TIMEOUT` seconds. Never raises.
    """
    here = Path(__file__).resolve()
    folder = here.parent if folder is None else Path(folder).resolve()
    try:
        tracked = _git(folder, "ls-files", "--", ".").stdout.strip()
        if not tracked:
            return None
        commit = _git(folder, "rev-parse", "HEAD").stdout.strip()
        changes = _git(folder, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return {"commit": commit, "dirty": bool(changes)}


def _command_line(argv: list[str]) -> str:
    """``argv`` as one shell-quoted line; the console script's path reads ``attneb``, a package's
    ``.../NAME/__main__.py`` (``python -m NAME``) reads ``python -m NAME``."""
    if not argv:
        return ""
    first = Path(argv[0])
    if first.name == "attneb":
        head = ["attneb"]
    elif first.name == "__main__.py" and first.parent.name:
        head = ["python", "-m", first.parent.name]
    else:
        head = [argv[0]]
    return shlex.join(head + list(argv[1:]))


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def run_provenance(*, seconds: float, started: datetime | None = None, finished: datetime | None = None,
                   git: dict | None = None) -> dict:
    """What produced a report: the layout's :data:`SCHEMA`, the code, its environment, the command and the times.

    Parameters
    ----------
    seconds : float
        How long the run took; with ``started`` None, the start is ``finished - seconds``.
    started, finished : datetime, optional
        When the run started and ended (``finished`` defaults to now). A naive datetime is read as
        local time; both are written in UTC, ISO 8601, to the second.
    git : dict, optional
        The checkout's :func:`git_state` when the run started (``attneb verify`` reads it then, so that a
        commit made during a long run is not named as the code that ran); None: read it now.
    """
    finished = datetime.now(timezone.utc) if finished is None else finished
    started = finished - timedelta(seconds=seconds) if started is None else started
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        available = os.cpu_count()
    return {
        "schema": SCHEMA,
        "toolkit": attneb.__version__,
        "code": provenance.source_fingerprint(),
        "git": git_state() if git is None else git,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "sympy": sympy.__version__,
        "command": _command_line(sys.argv),
        "cores": {"available": available, "total": os.cpu_count()},
        "started": _utc(started),
        "finished": _utc(finished),
    }


def report_dict(results: list[ClaimResult], *, quick: bool, seconds: float,
                power: list[CheckPower] | None = None, power_seconds: float = 0.0, stored: dict | None = None,
                previous: dict[tuple[str, str], dict] | None = None, started: datetime | None = None,
                git: dict | None = None) -> dict:
    """The JSON report: its ``provenance`` (:func:`run_provenance`), run metadata, one object per claim
    under ``claims``, the coverage map, (after a power analysis) ``power`` and, given ``stored``
    (:func:`stored_code`), which code computed the stored results. A check not run shows its last
    run from ``previous`` (:func:`last_runs`) where there is one.

    ``started`` is when the run began and ``git`` the checkout's state then (``attneb verify`` passes both; see
    :func:`run_provenance`); without ``started`` the start is taken
    as ``seconds + power_seconds`` before now. ``created``, ``code`` and ``versions`` repeat what
    ``provenance`` says, for the readers of the earlier layout.
    """
    finished = datetime.now(timezone.utc)
    origin = run_provenance(seconds=seconds + power_seconds, started=started, finished=finished, git=git)
    report = {
        "provenance": origin,
        "tool": "attneb verify",
        "mode": "quick" if quick else "full",
        "created": origin["finished"],
        "seconds": round(seconds, 3),
        "code": origin["code"],
        "versions": {key: origin[key] for key in ("python", "numpy", "scipy", "sympy")},
        "passed": all(r.status in ("pass", "unchecked") or (r.claim.question and r.status == "fail") for r in results),
        "claims": [
            {
                "id": r.claim.id,
                "title": r.claim.title,
                "statement": r.claim.statement,
                "assumptions": list(r.claim.assumptions),
                "status": r.status,
                "question": r.claim.question,
                "where": r.claim.source,
                "evidence": [
                    {
                        "check": c.name,
                        "status": c.status,
                        "gating": c.check.gating,
                        "criterion": c.check.criterion,
                        "note": c.check.note,
                        "replication": c.check.replication,
                        "where": c.check.source,
                        "alternatives": c.check.describe_alternatives(),
                        "seconds": round(c.seconds, 3),
                        "cpu_seconds": round(c.cpu_seconds, 3),
                        **_outcome(c, (previous or {}).get((r.claim.id, c.name))),
                    }
                    for c in r.checks
                ],
            }
            for r in results
        ],
        "coverage": coverage_map(),
        "uncovered": uncovered(),
    }
    if power is not None:
        report["power"] = _power_dict(power, power_seconds)
    if stored is not None:
        report["stored"] = stored
    return report


def _rate(entry: dict) -> str:
    text = f"{entry['rate']:.0f}" if entry["exact"] else \
        f"{entry['rate']:.2f} [{entry['ci95'][0]:.2f}, {entry['ci95'][1]:.2f}]"
    return text + (f"; {entry['errors']} runs raised: not measured" if entry["errors"] else "")


def _power_markdown(power: dict) -> list[str]:
    lines = [
        "", "## Size and power of every check", "",
        f"Each check was run under the true theory and under each registered wrong theory, over replicates of its "
        f"randomness. Size: how often it fails under the truth (goal <= {GOAL_SIZE}); power: how often it fails "
        f"(rejects) under the wrong theory (goal >= {GOAL_POWER}); a run that raised is not counted as a rejection. "
        "Intervals are Clopper-Pearson 95% over the independent replicates (for subsampled checks, over the "
        "independent seed sets of the pool, so they are wide); deterministic checks have one run per theory. "
        f"{power['meet_goal']} of {len(power['checks'])} checks meet both goals by their point estimates, "
        f"{power['meet_goal_at_95']} by their 95% bounds ({power['seconds']:.0f} s).",
        "", "| claim | check | replicates (independent) | size | wrong theory (kind) | power |", "|---|---|---|---|---|---|",
    ]
    for c in power["checks"]:
        first = (f"| {c['claim']} | {c['check']} | {c['replicates']} ({c['effective_replicates']}) | "
                 f"{_rate(c['size'])} |")
        if not c["power"]:
            lines.append(first + " (none registered) | |")
        for i, (name, p) in enumerate(c["power"].items()):
            mark = "" if (p["rate"] >= GOAL_POWER and not p["errors"]) or c["answered_no"] else " **(below goal)**"
            lead = first if i == 0 else "| | | | |"
            lines.append(f"{lead} {name} ({p['kind']}) | {_rate(p)}{mark} |")
    answered_no = [c for c in power["checks"] if c["answered_no"]]
    if answered_no:
        lines += ["", "Checks of questions answered *no* fail on the measured data, so their size (1) is the answer and "
                  "their power is not informative: " + "; ".join(f"{c['claim']} · {c['check']}" for c in answered_no)
                  + "."]
    weak = [c for c in power["checks"] if not c["meets_goal"] and not c["answered_no"]]
    if weak:
        lines += ["", "What these checks cannot tell apart (power below the goal or not measured, or size above it):", ""]
        for c in weak:
            if c["build_error"]:
                what = c["build_error"]
            elif not c["power"]:
                what = "no wrong theory registered"
            elif c["weak_against"]:
                what = "weak against: " + ", ".join(c["weak_against"])
            else:
                what = "rejects every wrong theory registered"
            size = " (above the goal)" if c["size"]["rate"] > GOAL_SIZE else ""
            lines.append(f"- {c['claim']} · {c['check']}: size {c['size']['rate']:.2f}{size}; {what}")
    return lines


def _count(by_experiment: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{experiment}: " + ", ".join(f"{n} of {code}" for code, n in codes.items())
                     for experiment, codes in by_experiment.items())


def _stored_markdown(stored: dict) -> list[str]:
    """Which stored results came from other code: the ones used, or the ones held and computed again."""
    if stored["used"]:
        return ["", "**Results of other code were reused** (`--reuse-other-code`): " + " · ".join(
            f"`{store}`: {_count(experiments)}" for store, experiments in stored["used"].items())
                + f". Every other stored result was computed by this code ({stored['code']}).", ""]
    if stored["held"]:
        held = sum(n for experiments in stored["held"].values() for codes in experiments.values() for n in codes.values())
        return ["", f"The stores hold {held} results of other code (" + " · ".join(
            f"`{store}`: {_count(experiments)}" for store, experiments in stored["held"].items())
                + "); none was used: this code computed every result it reports.", ""]
    return []


def _provenance_markdown(report: dict) -> list[str]:
    if "provenance" not in report:
        return []
    return ["", "## Provenance", ""] + [f"- {label}: `{text}`" if label == "command" else f"- {label}: {text}"
                                        for label, text in provenance_lines(report["provenance"])]


def _markdown(report: dict) -> str:
    lines = [
        "# attneb verify report",
        "",
        f"Mode: {report['mode']} · created {report['created']} · {report['seconds']:.1f} s · "
        f"code {report['code']} · " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        *_stored_markdown(report.get("stored", {"used": {}, "held": {}})),
        *_provenance_markdown(report),
        "",
        "| claim | status | title | where |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c['id']} | {status_label(c['question'], c['status'])} | {c['title']} | `{c['where']}` |"
              for c in report["claims"]]
    if any(c["question"] for c in report["claims"]):
        lines += ["", "Claims answered *yes*/*no* are questions the toolkit puts to an experiment (criteria fixed "
                  "before the run): *no* is a finding about the theory, reported with its numbers, not a defect; "
                  "`attneb verify` exits non-zero only for the other claims."]
    for c in report["claims"]:
        kind = "question, " if c["question"] else ""
        lines += ["", f"## {c['id']}: {c['title']} — {kind}{status_label(c['question'], c['status'])}", "",
                  c["statement"], "", f"Registered at `{c['where']}`; everything about it: `attneb show {c['id']}`.", ""]
        if c["assumptions"]:
            lines += ["Assumptions: " + "; ".join(c["assumptions"]) + ".", ""]
        if not c["evidence"]:
            lines.append("No check is registered for this claim yet.")
        for e in c["evidence"]:
            detail = e.get("summary") or "raised:\n\n```\n" + e["error"] + "```"
            superseded = "" if e["gating"] else "superseded, not gating; "
            kind = "" if e["status"] == NOT_RUN else f", {e.get('kind', 'error')}, {e['seconds']:.2f} s"
            lines.append(f"- **{e['check']}** ({superseded}{e['status']}{kind}; `{e['where']}`): {detail}")
            if e["criterion"]:
                lines.append(f"  - criterion (fixed before the run): {e['criterion']}")
            if e["note"]:
                lines.append(f"  - note: {e['note']}")
            if e["alternatives"]:
                lines.append("  - must reject: " + "; ".join(e["alternatives"]))
            if e.get("markdown"):
                lines += ["", e["markdown"], ""]
            for figure in e.get("figures", ()):
                lines += ["", f"![{e['check']}]({figure})", ""]
    if "power" in report:
        lines += _power_markdown(report["power"])
    lines += ["", "## Coverage: which checks a 1% error in each function fails", "",
              "Declared by each check and measured by the power analysis (each is one of its wrong theories).", "",
              "| function | checks |", "|---|---|"]
    lines += [f"| `{target}` | {'; '.join(checks)} |" for target, checks in report["coverage"].items()]
    if report["uncovered"]:
        lines += ["", "Functions a quick verify calls (traced) that no check covers and no test checks apart "
                  "(`coverage.TESTED_APART`): " + ", ".join(f"`{t}`" for t in report["uncovered"]) + "."]
    return "\n".join(lines) + "\n"


def write_report(results: list[ClaimResult], out: Path, *, quick: bool, seconds: float,
                 power: list[CheckPower] | None = None, power_seconds: float = 0.0,
                 started: datetime | None = None, derivations: bool = True, git: dict | None = None) -> dict:
    """Write ``report.json``, ``report.md`` and ``report.html`` into ``out`` (created if needed); return the dict.

    The report says which code computed the results stored under ``out`` (:func:`stored_code`);
    a check not run shows its last run from the ``report.json`` it replaces, if that was of the
    same mode. ``started``, ``git``: when the run began and the checkout's state then (see :func:`report_dict`).
    ``derivations=False`` leaves the derivations out of ``report.html`` (:func:`.report_html.write_html`), which
    otherwise shows those that bear on each claim as MathML.
    """
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "report.json"
    earlier = json.loads(previous.read_text()) if previous.is_file() else {}
    report = report_dict(results, quick=quick, seconds=seconds, power=power, power_seconds=power_seconds,
                         stored=stored_code(out), started=started, git=git,
                         previous=last_runs(earlier) if earlier.get("mode") == ("quick" if quick else "full") else None)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    (out / "report.md").write_text(_markdown(report))
    write_html(report, out, derivations=derivations)
    return report
