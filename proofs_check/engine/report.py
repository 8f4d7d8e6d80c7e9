"""Write the results of a verify run (and of its power analysis) as ``report.json`` and ``report.md``."""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy
import sympy

from attneb.numerics import sweep
from attneb.numerics.sweep import provenance

from .coverage import coverage_map, uncovered
from .power import GOAL_POWER, GOAL_SIZE, CheckPower
from .runner import NOT_RUN, CheckResult, ClaimResult

__all__ = ["claim_line", "defects", "last_runs", "power_line", "report_dict", "status_label", "stored_code",
           "write_report"]


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


def status_label(claim_id_question: bool, status: str) -> str:
    """How a status reads: a question's ``pass``/``fail`` is its answer, ``yes``/``no``."""
    if claim_id_question and status in ("pass", "fail"):
        return "answer " + ("yes" if status == "pass" else "no")
    return status


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


def report_dict(results: list[ClaimResult], *, quick: bool, seconds: float,
                power: list[CheckPower] | None = None, power_seconds: float = 0.0, stored: dict | None = None,
                previous: dict[tuple[str, str], dict] | None = None) -> dict:
    """The JSON report: run metadata, one object per claim under ``claims``, the coverage map,
    (after a power analysis) ``power`` and, given ``stored`` (:func:`stored_code`), which code
    computed the stored results. A check not run shows its last run from ``previous``
    (:func:`last_runs`) where there is one."""
    report = {
        "tool": "attneb verify",
        "mode": "quick" if quick else "full",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 3),
        "code": provenance.source_fingerprint(),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "sympy": sympy.__version__,
        },
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


def _markdown(report: dict) -> str:
    lines = [
        "# attneb verify report",
        "",
        f"Mode: {report['mode']} · created {report['created']} · {report['seconds']:.1f} s · "
        f"code {report['code']} · " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        *_stored_markdown(report.get("stored", {"used": {}, "held": {}})),
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
                 power: list[CheckPower] | None = None, power_seconds: float = 0.0) -> dict:
    """Write ``report.json`` and ``report.md`` into ``out`` (created if needed); return the dict.

    The report says which code computed the results stored under ``out`` (:func:`stored_code`);
    a check not run shows its last run from the ``report.json`` it replaces, if that was of the
    same mode.
    """
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "report.json"
    earlier = json.loads(previous.read_text()) if previous.is_file() else {}
    report = report_dict(results, quick=quick, seconds=seconds, power=power, power_seconds=power_seconds,
                         stored=stored_code(out),
                         previous=last_runs(earlier) if earlier.get("mode") == ("quick" if quick else "full") else None)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    (out / "report.md").write_text(_markdown(report))
    return report
