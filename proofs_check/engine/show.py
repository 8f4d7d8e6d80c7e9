"""``attneb show ID``: one claim with everything about it, and the file and line of each piece.

A claim's record (:func:`claim_record`) gathers its statement and assumptions, the derivations
that bear on it, each check with its criterion, its wrong theories and the functions it covers, its
figures, and, where a report of an earlier ``attneb verify`` is at hand, each check's last verdict
and its measured size and power. Every piece carries ``where``: ``path:line`` of the code that
registers or computes it, relative to the folder that holds the toolkit's packages (``theory/``,
``numerics/``, ``proofs_check/``), so that a reader opens one file per piece.
:func:`format_claim` prints a record; ``report.md``'s "where" column comes from the same
:func:`attneb.proofs_check.engine.registry.Claim` fields.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import content
from .derivations import BUILDERS, CLAIM_DERIVATIONS
from .registry import CLAIMS, resolve, source_of
from .studies import STUDIES

__all__ = ["claim_record", "format_claim", "format_index", "read_report"]


def read_report(path: Path | str) -> dict | None:
    """The ``report.json`` at ``path`` (a file, or a report folder), or None where there is none."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _last_results(report: dict | None, claim_id: str) -> tuple[dict, dict, str]:
    """``({check: evidence}, {check: power entry}, mode)`` of ``claim_id`` in ``report`` (empty without one)."""
    if report is None:
        return {}, {}, ""
    evidence = {e["check"]: e for c in report["claims"] if c["id"] == claim_id for e in c["evidence"]}
    power = {p["check"]: p for p in report.get("power", {}).get("checks", []) if p["claim"] == claim_id}
    return evidence, power, report.get("mode", "")


def _covered_where(target: str) -> str:
    try:
        owner, attribute = resolve(target)
        return source_of(getattr(owner, attribute))
    except (ImportError, AttributeError, ValueError, TypeError):
        return ""


def _derivation(name: str, *, pretty: bool, steps: bool) -> dict:
    """The derivation registered as ``name`` (:data:`BUILDERS`): where it is built and, with ``steps``, its text."""
    build = BUILDERS[name]
    record = {"name": name, "where": getattr(build, "source", None) or source_of(build)}
    if steps:
        derivation = build()
        record |= {"title": derivation.title, "claims": [c.statement for c in derivation.claims],
                   "text": derivation.to_text(pretty=pretty)}
    return record


def claim_record(claim_id: str, *, report: dict | None = None, derivations: bool = True, pretty: bool = False) -> dict:
    """Everything about claim ``claim_id``, each piece with its ``where`` (``path:line``).

    Parameters
    ----------
    claim_id : str
        A registered claim (``"C6"``); the toolkit's own claims are loaded first.
    report : dict, optional
        A ``report.json`` (:func:`read_report`): each check's last verdict and, after a power
        analysis, its size and power.
    derivations : bool
        Build the derivations that bear on the claim and include their steps (sympy takes seconds).
    pretty : bool
        Derivation steps in sympy's unicode pretty printer, not plain text.
    """
    content.load_default()
    if claim_id not in CLAIMS:
        raise ValueError(f"unknown claim id {claim_id!r}; known: {', '.join(CLAIMS)}")
    claim = CLAIMS[claim_id]
    evidence, power, mode = _last_results(report, claim_id)
    checks = []
    for chk in claim.checks:
        last = evidence.get(chk.name)
        measured = power.get(chk.name)
        checks.append({
            "name": chk.name,
            "gating": chk.gating,
            "criterion": chk.criterion,
            "note": chk.note,
            "replication": chk.replication,
            "where": chk.source,
            "wrong_theories": chk.describe_alternatives(),
            "wrong_theories_where": sorted({a.source for a in chk.alternatives if a.source})
            if not callable(chk.alternatives) else [],
            "covers": [{"target": t, "where": _covered_where(t)} for t in chk.covers],
            "last": None if last is None else {"mode": mode, "status": last["status"],
                                               "summary": last.get("summary") or last.get("error", "")},
            "power": None if measured is None else {
                "mode": mode, "size": measured["size"]["rate"], "replicates": measured["replicates"],
                "power": {name: p["rate"] for name, p in measured["power"].items()}},
        })
    return {
        "id": claim.id,
        "title": claim.title,
        "question": claim.question,
        "statement": claim.statement,
        "assumptions": list(claim.assumptions),
        "where": claim.source,
        "derivations": [_derivation(name, pretty=pretty, steps=derivations)
                        for name in CLAIM_DERIVATIONS.get(claim_id, ())],
        "checks": checks,
        "figures": [{"study": s.name, "title": s.title, "where": source_of(s.draw)}
                    for s in STUDIES.values() if claim_id in s.claims],
        "report": None if report is None else {"mode": mode, "created": report.get("created", "")},
    }


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def format_claim(record: dict) -> str:
    """``record`` (:func:`claim_record`) as text: statement, derivations, checks, figures, each with its where."""
    kind = "question" if record["question"] else "claim"
    lines = [f"{record['id']}: {record['title']} ({kind}; {record['where']})", "", record["statement"]]
    if record["assumptions"]:
        lines += ["", "Assumptions: " + "; ".join(record["assumptions"]) + "."]
    if record["report"] is None:
        lines += ["", "No report at hand: run 'attneb verify' (or pass --report) for the last verdicts."]
    else:
        lines += ["", f"Last verdicts from the {record['report']['mode']} report of {record['report']['created']}."]
    for d in record["derivations"]:
        title = f": {d['title']}" if "title" in d else ""
        lines += ["", f"Derivation '{d['name']}'{title} ({d['where']})"]
        if "text" in d:
            lines.append(_indent(d["text"]))
    lines += ["", f"Checks ({len(record['checks'])}):"]
    for c in record["checks"]:
        superseded = "" if c["gating"] else " [superseded, not gating]"
        lines += ["", f"  - {c['name']}{superseded}", f"    where: {c['where']}"]
        if c["last"] is not None:
            last = c["last"]
            lines.append(f"    last verdict ({last['mode']}): {last['status'].upper()}: {last['summary']}")
        if c["criterion"]:
            lines.append(f"    criterion: {c['criterion']}")
        if c["note"]:
            lines.append(f"    note: {c['note']}")
        if c["wrong_theories"]:
            where = f" (defined at {', '.join(c['wrong_theories_where'])})" if c["wrong_theories_where"] else ""
            lines.append(f"    must reject{where}: " + "; ".join(c["wrong_theories"]))
        if c["power"] is not None:
            p = c["power"]
            rates = ", ".join(f"{name} {rate:.2f}" for name, rate in p["power"].items()) or "no wrong theory"
            lines.append(f"    size and power ({p['mode']}, {p['replicates']} replicates): "
                         f"size {p['size']:.2f}; {rates}")
        for cover in c["covers"]:
            lines.append(f"    covers {cover['target']} ({cover['where']})")
    if record["figures"]:
        lines += ["", "Figures (redraw with 'attneb plot NAME --store REPORT/results.sqlite'):"]
        lines += [f"  - {f['study']}: {f['title']} ({f['where']})" for f in record["figures"]]
    return "\n".join(lines) + "\n"


def format_index() -> str:
    """One line per registered claim: id, kind, title and where it is registered."""
    content.load_default()
    width = max(len(c.title) for c in CLAIMS.values())
    lines = [f"{c.id:<4} {'question' if c.question else 'claim':<8} {c.title:<{width}}  {c.source}"
             for c in CLAIMS.values()]
    return "\n".join(lines) + "\nshow one with: attneb show ID\n"
