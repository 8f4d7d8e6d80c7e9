"""Write the results of a verify run as ``report.json`` and ``report.md``."""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy
import sympy

from .runner import ClaimResult

__all__ = ["claim_line", "report_dict", "write_report"]


def _evidence_text(result: ClaimResult) -> str:
    parts = []
    for c in result.checks:
        if c.evidence is not None:
            parts.append(c.evidence.summary)
        else:
            parts.append(f"{c.name}: raised {c.error.strip().splitlines()[-1]}")
    return " | ".join(parts) if parts else "no check registered yet"


def claim_line(result: ClaimResult) -> str:
    """One line per claim: id, status, evidence."""
    return f"{result.claim.id:<4} {result.status.upper():<9} {_evidence_text(result)}"


def report_dict(results: list[ClaimResult], *, quick: bool, seconds: float) -> dict:
    """The JSON report: run metadata and, under ``claims``, one object per claim."""
    return {
        "tool": "attneb verify",
        "mode": "quick" if quick else "full",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 3),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "sympy": sympy.__version__,
        },
        "passed": all(r.status in ("pass", "unchecked") for r in results),
        "claims": [
            {
                "id": r.claim.id,
                "title": r.claim.title,
                "statement": r.claim.statement,
                "assumptions": list(r.claim.assumptions),
                "status": r.status,
                "evidence": [
                    {
                        "check": c.name,
                        "status": c.status,
                        "seconds": round(c.seconds, 3),
                        **(asdict(c.evidence) if c.evidence is not None else {"error": c.error}),
                    }
                    for c in r.checks
                ],
            }
            for r in results
        ],
    }


def _markdown(report: dict) -> str:
    lines = [
        "# attneb verify report",
        "",
        f"Mode: {report['mode']} · created {report['created']} · {report['seconds']:.1f} s · "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        "",
        "| claim | status | title |",
        "|---|---|---|",
    ]
    lines += [f"| {c['id']} | {c['status']} | {c['title']} |" for c in report["claims"]]
    for c in report["claims"]:
        lines += ["", f"## {c['id']}: {c['title']} — {c['status']}", "", c["statement"], ""]
        if c["assumptions"]:
            lines += ["Assumptions: " + "; ".join(c["assumptions"]) + ".", ""]
        if not c["evidence"]:
            lines.append("No check is registered for this claim yet.")
        for e in c["evidence"]:
            detail = e.get("summary") or "raised:\n\n```\n" + e["error"] + "```"
            lines.append(f"- **{e['check']}** ({e['status']}, {e.get('kind', 'error')}, {e['seconds']:.2f} s): {detail}")
            if e.get("markdown"):
                lines += ["", e["markdown"], ""]
            for figure in e.get("figures", ()):
                lines += ["", f"![{e['check']}]({figure})", ""]
    return "\n".join(lines) + "\n"


def write_report(results: list[ClaimResult], out: Path, *, quick: bool, seconds: float) -> dict:
    """Write ``report.json`` and ``report.md`` into ``out`` (created if needed); return the dict."""
    out.mkdir(parents=True, exist_ok=True)
    report = report_dict(results, quick=quick, seconds=seconds)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    (out / "report.md").write_text(_markdown(report))
    return report
