"""``report.html``: a verify report as one self-contained page, and how a report's pieces read.

:func:`write_html` turns a ``report.json`` dict (:func:`attneb.proofs_check.engine.report.report_dict`)
into ``report.html`` beside it: the provenance, a table of the claims, then each claim with its
statement and assumptions, the derivations that bear on it (each step a MathML relation from sympy's
presentation printer, with its reason), its checks (criterion, status, summary, the wrong theories
each must reject, size and power where a power analysis measured them) and its figures, which are
the PNGs of the report folder inlined as ``data:`` URIs. The page needs no network, no script and
no stylesheet but its own.

The derivations come from the registry (:data:`.derivations.CLAIM_DERIVATIONS` and
:data:`.derivations.BUILDERS`; load the content first, :func:`.content.load_default`). Building
them took sympy 31 s for all ten of :mod:`attneb.theory` (each in a fresh process, 2-core VM), so the check of each
derivation of the toolkit's own keeps its MathML page in the report folder as it runs, in whichever
process ran it (:mod:`.mathml`), under the source fingerprint and sympy's version; the page is
built here only where no check of this code kept it (a report without the claim's checks, or
derivations registered by a researcher's own module).

:func:`provenance_lines` says how the provenance reads; ``report.md`` uses it too.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from .derivations import BUILDERS, CLAIM_DERIVATIONS, toolkit_derivation
from .mathml import escape, keep_page, kept_page, page
from .power import GOAL_POWER, GOAL_SIZE
from .runner import NOT_RUN, status_label

__all__ = ["HTML_NAME", "html_text", "provenance_lines", "write_html"]

#: The page's file name in the report folder.
HTML_NAME = "report.html"

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2125; margin: 0 auto;
       max-width: 1250px; padding: 1.5em 2em 4em; background: #fff; }
h1 { font-size: 1.7em; margin: 0 0 .2em; } h2 { margin-top: 2.2em; border-bottom: 2px solid #dde2e6; }
h3 { margin: 1.6em 0 .4em; } h4 { margin: 1.2em 0 .3em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: .88em; }
pre { background: #f5f7f9; padding: .6em .8em; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { border: 1px solid #d4d9de; padding: .3em .55em; vertical-align: top; text-align: left; }
th { background: #eef1f4; }
.meta { color: #4b5560; }
table.provenance th { width: 9em; } table.provenance td { font-family: ui-monospace, monospace; font-size: .9em; }
.status { font-weight: 600; white-space: nowrap; padding: .05em .45em; border-radius: .3em; }
.st-pass { background: #dcf3e2; color: #145c2c; } .st-fail { background: #fbe0e0; color: #8a1414; }
.st-error { background: #8a1414; color: #fff; } .st-yes { background: #dde9fb; color: #163f80; }
.st-no { background: #fdf0d2; color: #7a4b00; } .st-other { background: #eceff2; color: #4b5560; }
section.claim { border-top: 1px solid #dde2e6; margin-top: 2em; }
.check { margin: .9em 0 .9em .2em; padding-left: .9em; border-left: 3px solid #dde2e6; }
.check.superseded { opacity: .75; }
.check ul { margin: .25em 0; }
.derivation { background: #fafbfc; border: 1px solid #e3e7eb; padding: .4em .9em; margin: .8em 0; }
.derivation table { width: 100%; } .derivation td.label { width: 5.5em; white-space: nowrap; color: #4b5560; }
.derivation td.reason { width: 28%; color: #33404c; } .derivation td.relation { overflow-x: auto; max-width: 0; }
math[display="block"] { margin: .2em 0; overflow-x: auto; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #e3e7eb; }
figcaption { color: #4b5560; font-size: .92em; }
.below { color: #8a1414; font-weight: 600; }
"""


def provenance_lines(origin: dict) -> list[tuple[str, str]]:
    """``report.json``'s ``provenance`` as ``(label, text)`` rows, for ``report.md`` and ``report.html``."""
    unknown = "not recorded"
    git = origin.get("git")
    if "git" not in origin:
        commit = unknown
    elif git is None:
        commit = "none (not run from a git checkout, or git unavailable)"
    else:
        commit = git["commit"] + (" (with uncommitted changes)" if git["dirty"] else "")
    cores = origin.get("cores")
    toolkit = f"attneb {origin['toolkit']}, source {origin.get('code', unknown)}" if "toolkit" in origin else \
        f"source {origin.get('code', unknown)}"
    return [
        ("toolkit", toolkit),
        ("git commit", commit),
        ("versions", ", ".join(f"{k} {origin[k]}" for k in ("python", "numpy", "scipy", "sympy") if k in origin)
         or unknown),
        ("command", origin.get("command") or unknown),
        ("cores", f"{cores['available']} available of {cores['total']}" if cores else unknown),
        ("run", f"{origin['started']} to {origin['finished']} (UTC)" if "started" in origin else
         f"ended {origin.get('finished', unknown)} (UTC); start {unknown}"),
        ("report layout", f"schema {origin.get('schema', 1)}"),
    ]


#: A status (as :func:`.runner.status_label` reads it) -> the CSS class of its badge.
_STATUS_CLASSES = {"pass": "pass", "fail": "fail", "error": "error", "answer yes": "yes", "answer no": "no"}


def _status(question: bool, status: str) -> str:
    label = status_label(question, status)
    kind = _STATUS_CLASSES.get(label, "other")
    return f'<span class="status st-{kind}">{escape(label)}</span>'


class _Derivations:
    """The page of each derivation of the report: kept by its check (:func:`.mathml.kept_page`), else built here."""

    def __init__(self, folder: Path, enabled: bool):
        self.folder = folder
        self.enabled = enabled
        self.memo: dict[str, dict] = {}

    def get(self, name: str) -> dict:
        """``{"title", "html"}`` of derivation ``name``, or ``{"error"}`` when it is unknown or cannot be built."""
        if name not in self.memo:
            self.memo[name] = self._get(name)
        return self.memo[name]

    def _get(self, name: str) -> dict:
        if BUILDERS.get(name) is None:
            return {"error": f"derivation {name!r} is not registered in this process (load the content first)"}
        ours = toolkit_derivation(name)
        kept = kept_page(self.folder, name) if ours else None
        if kept is not None:
            return kept
        try:
            derivation = BUILDERS[name]()
        except Exception as exc:  # noqa: BLE001 - a derivation that cannot be built is reported, not fatal
            return {"error": f"could not be built: {type(exc).__name__}: {exc}"}
        if ours:
            keep_page(self.folder, name, derivation)
        return page(derivation)


def _inline(text: str) -> str:
    """Escaped text with markdown's ``**bold**`` and ```code``` made HTML."""
    text = escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _markdown_block(text: str) -> str:
    """The small markdown of an evidence's ``markdown`` (paragraphs and pipe tables) as HTML."""
    parts = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if lines and all(line.startswith("|") for line in lines):
            rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines
                    if not re.fullmatch(r"\|[\s:|-]+\|", line)]
            head, body = rows[0], rows[1:]
            parts.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
                         + "</table>")
        elif lines:
            parts.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "".join(parts)


def _anchor(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


class _Figures:
    """The PNGs of the report folder, each inlined once, at the first check that drew it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.shown: dict[str, str] = {}

    def html(self, name: str, caption: str, where: str) -> str:
        anchor = "figure-" + _anchor(name)
        if name in self.shown:
            return (f'<p class="meta">Figure <a href="#{anchor}">{escape(name)}</a>: shown above, under '
                    f'{escape(self.shown[name])}.</p>')
        path = self.folder / name
        if path.suffix.lower() != ".png" or not path.is_file():
            return f'<p class="meta">Figure {escape(name)}: not in the report folder.</p>'
        self.shown[name] = where
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return (f'<figure id="{anchor}"><img src="data:image/png;base64,{data}" alt="{escape(caption)}">'
                f"<figcaption>{escape(name)}: {escape(caption)}</figcaption></figure>")

    def others(self) -> str:
        """The PNGs of the folder that no check of the report drew (from an earlier run), folded."""
        rest = sorted(p.name for p in self.folder.glob("*.png") if p.name not in self.shown)
        if not rest:
            return ""
        figures = "".join(self.html(name, "in the report folder; no check of this report drew it", "other figures")
                          for name in rest)
        return ("<h2>Other figures in the report folder</h2><details><summary>"
                f"{len(rest)} PNG files that no check of this report drew (from an earlier run)</summary>"
                f"{figures}</details>")


def _rate(entry: dict) -> str:
    text = f"{entry['rate']:.0f}" if entry.get("exact") else \
        f"{entry['rate']:.2f} [{entry['ci95'][0]:.2f}, {entry['ci95'][1]:.2f}]" if "ci95" in entry else \
        f"{entry['rate']:.2f}"
    return text + (f"; {entry['errors']} runs raised: not measured" if entry.get("errors") else "")


def _power(measured: dict | None) -> str:
    if measured is None:
        return ""
    rates = []
    for name, p in measured.get("power", {}).items():
        below = (p["rate"] < GOAL_POWER or p.get("errors")) and not measured.get("answered_no")
        mark = ' <span class="below">(below goal)</span>' if below else ""
        rates.append(f"<li>{escape(name)} ({escape(p.get('kind', ''))}): {escape(_rate(p))}{mark}</li>")
    effective = measured.get("effective_replicates")
    replicates = f"{measured['replicates']}" + (f" ({effective} independent)" if effective is not None else "")
    return (f"<li>size and power ({escape(replicates)} replicates; "
            f"goals: size &le; {GOAL_SIZE}, power &ge; {GOAL_POWER}):"
            f" size {escape(_rate(measured['size']))}"
            + (f"<ul>{''.join(rates)}</ul>" if rates else "; no wrong theory registered") + "</li>")


def _check(e: dict, claim: dict, measured: dict | None, figures: _Figures) -> str:
    superseded = "" if e["gating"] else "superseded, not gating; "
    kind = "" if e["status"] == NOT_RUN else f", {e.get('kind', 'error')}, {e['seconds']:.2f} s"
    head = (f"<h4>{escape(e['check'])}</h4><p class=\"meta\">{_status(False, e['status'])} "
            f"({escape(superseded)}{escape(e['status'])}{escape(kind)}; <code>{escape(e['where'])}</code>)</p>")
    detail = f"<p>{escape(e['summary'])}</p>" if e.get("summary") else \
        f"<pre>{escape(e.get('error', ''))}</pre>"
    items = []
    if e.get("criterion"):
        items.append(f"<li>criterion (fixed before the run): {escape(e['criterion'])}</li>")
    if e.get("note"):
        items.append(f"<li>note: {escape(e['note'])}</li>")
    if e.get("alternatives"):
        items.append("<li>wrong theories it must reject:<ul>"
                     + "".join(f"<li>{escape(a)}</li>" for a in e["alternatives"]) + "</ul></li>")
    items.append(_power(measured))
    block = _markdown_block(e["markdown"]) if e.get("markdown") else ""
    drawn = "".join(figures.html(f, e["check"], f"{claim['id']} · {e['check']}") for f in e.get("figures", ()))
    css = "check" if e["gating"] else "check superseded"
    return (f'<div class="{css}">{head}{detail}<ul>{"".join(items)}</ul>{block}{drawn}</div>')


def _claim(c: dict, power: dict[tuple[str, str], dict], derivations: _Derivations, figures: _Figures) -> str:
    kind = "question" if c["question"] else "claim"
    parts = [f'<section class="claim" id="claim-{_anchor(c["id"])}">',
             f"<h2>{escape(c['id'])}: {escape(c['title'])} {_status(c['question'], c['status'])}</h2>",
             f"<p>{escape(c['statement'])}</p>",
             f'<p class="meta">A {kind}, registered at <code>{escape(c["where"])}</code>; everything about it: '
             f"<code>attneb show {escape(c['id'])}</code>.</p>"]
    if c.get("assumptions"):
        parts.append("<p><strong>Assumptions:</strong></p><ul>"
                     + "".join(f"<li>{escape(a)}</li>" for a in c["assumptions"]) + "</ul>")
    if derivations.enabled:
        for name in CLAIM_DERIVATIONS.get(c["id"], ()):
            entry = derivations.get(name)
            if "error" in entry:
                parts.append(f'<div class="derivation"><h3>Derivation \'{escape(name)}\'</h3>'
                             f'<p class="meta">{escape(entry["error"])}</p></div>')
            else:
                parts.append(f'<div class="derivation"><h3>Derivation \'{escape(name)}\': {escape(entry["title"])}</h3>'
                             f'{entry["html"]}</div>')
    parts.append(f"<h3>Checks ({len(c['evidence'])})</h3>" if c["evidence"] else
                 "<p>No check is registered for this claim yet.</p>")
    parts += [_check(e, c, power.get((c["id"], e["check"])), figures) for e in c["evidence"]]
    return "".join(parts) + "</section>"


def _provenance(report: dict) -> str:
    origin = report.get("provenance")
    if origin is None:  # a report.json of the first layout
        origin = {"code": report.get("code", "?"), **report.get("versions", {}), "finished": report.get("created"),
                  "schema": 1}
    rows = "".join(f"<tr><th>{escape(label)}</th><td>{escape(text)}</td></tr>"
                   for label, text in provenance_lines(origin))
    return f'<table class="provenance">{rows}</table>'


def _stored(report: dict) -> str:
    stored = report.get("stored") or {}
    if stored.get("used"):
        return ("<p><strong>Results of other code were reused</strong> (<code>--reuse-other-code</code>); see "
                "<code>report.json</code>'s <code>stored</code>.</p>")
    if stored.get("held"):
        return ("<p>The stores hold results of other code; none was used: this code computed every result it "
                "reports.</p>")
    return ""


def _coverage(report: dict) -> str:
    coverage = report.get("coverage") or {}
    if not coverage:
        return ""
    rows = "".join(f"<tr><td><code>{escape(t)}</code></td><td>{'<br>'.join(escape(c) for c in checks)}</td></tr>"
                   for t, checks in coverage.items())
    text = ("<h2>Coverage: which checks a 1% error in each function fails</h2>"
            "<p>Declared by each check and measured by the power analysis (each is one of its wrong theories).</p>"
            f"<table><tr><th>function</th><th>checks</th></tr>{rows}</table>")
    if report.get("uncovered"):
        text += ("<p>Functions a quick verify calls (traced) that no check covers and no test checks apart: "
                 + ", ".join(f"<code>{escape(t)}</code>" for t in report["uncovered"]) + ".</p>")
    return text


def _power_summary(report: dict) -> str:
    power = report.get("power")
    if power is None:
        return ""
    return (f"<p>Size and power (<code>--power</code>, {power['seconds']:.0f} s): {power['meet_goal']} of "
            f"{len(power['checks'])} checks meet size &le; {GOAL_SIZE} and power &ge; {GOAL_POWER} by their point "
            f"estimates, {power['meet_goal_at_95']} by their 95% bounds; each check below shows its own.</p>")


def html_text(report: dict, folder: Path | str, *, derivations: bool = True) -> str:
    """``report`` (a ``report.json`` dict) as one self-contained HTML page; figures are read from ``folder``.

    ``derivations=False`` leaves the derivations out (no sympy at all).
    """
    folder = Path(folder)
    claims = list(report.get("claims", ()))
    power = {(p["claim"], p["check"]): p for p in report.get("power", {}).get("checks", ())}
    kept = _Derivations(folder, derivations)
    figures = _Figures(folder)
    summary = "".join(
        f'<tr><td><a href="#claim-{_anchor(c["id"])}">{escape(c["id"])}</a></td>'
        f"<td><strong>{escape(c['title'])}.</strong> {escape(c['statement'])}</td>"
        f"<td>{_status(c['question'], c['status'])}</td></tr>" for c in claims)
    body = "".join(_claim(c, power, kept, figures) for c in claims)
    questions = any(c["question"] for c in claims)
    title = f"attneb verify report ({report.get('mode', '?')}, {report.get('created', '')})"
    verdict = "every claim passes or is a question answered" if report.get("passed") else "some claim FAILED"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>attneb verify report</h1><p class=\"meta\">{escape(report.get('mode', '?'))} mode · created "
        f"{escape(report.get('created', '?'))} · {float(report.get('seconds', 0)):.1f} s · {escape(verdict)}</p>",
        "<h2>Provenance</h2>", _provenance(report), _stored(report), _power_summary(report),
        f'<h2>Claims</h2><table class="claims"><thead><tr><th>claim</th><th>statement</th><th>status</th></tr></thead>'
        f"<tbody>{summary}</tbody></table>",
        ("<p>Claims answered <em>yes</em>/<em>no</em> are questions put to an experiment (criteria fixed before the "
         "run): <em>no</em> is a finding about the theory, reported with its numbers, not a defect.</p>")
        if questions else "",
        body, figures.others(), _coverage(report),
        "</body></html>\n",
    ])


def write_html(report: dict, out: Path | str, *, derivations: bool = True) -> Path:
    """Write ``report`` (a ``report.json`` dict) as ``report.html`` into ``out``, beside its figures; return its path.

    Works as well from a stored ``report.json`` (``json.loads``) after the content is loaded
    (:func:`attneb.proofs_check.engine.content.load_default`, for the derivations)::

        content.load_default()
        write_html(json.loads(Path("attneb-report/report.json").read_text()), "attneb-report")
    """
    out = Path(out)
    path = out / HTML_NAME
    path.write_text(html_text(report, out, derivations=derivations), encoding="utf-8")
    return path
