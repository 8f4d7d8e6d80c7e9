"""Derivations as MathML: sympy's presentation printer, one derivation as an HTML table, and the pages kept.

:func:`derivation_html` renders an :class:`attneb.theory.Derivation` (its symbols, each step's relation
with its reason, each claimed form, the results) for ``report.html``. Rendering needs the built
derivation (seconds of sympy each), so the check of a derivation of the toolkit's own keeps its page
in the report folder as it runs (:func:`keep_page`, in whichever process ran the check), under the
source fingerprint and sympy's version, and the report reads it back (:func:`kept_page`) instead of
building the derivation again in its own process.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import sympy as sp
from sympy.printing.mathml import MathMLPresentationPrinter

from attneb.numerics.sweep import provenance

__all__ = ["MATHML_NAMESPACE", "PAGES_FOLDER", "derivation_html", "escape", "keep_page", "kept_page", "math",
           "page"]

MATHML_NAMESPACE = "http://www.w3.org/1998/Math/MathML"
#: The folder of the report folder where the pages of the toolkit's derivations are kept, one file each.
PAGES_FOLDER = ".derivations"


def escape(text) -> str:
    """``text`` (any object, as ``str``) with ``&``, ``<``, ``>`` and both quotes escaped for HTML."""
    return html.escape(str(text), quote=True)



class _Printer(MathMLPresentationPrinter):
    """sympy's presentation MathML, with ``O(x)`` and ``f|_{x=a}`` for sympy 1.14's ``order(...)`` and ``subs(...)``."""

    def _element(self, tag: str, *children, text: str | None = None):
        node = self.dom.createElement(tag)
        if text is not None:
            node.appendChild(self.dom.createTextNode(text))
        for child in children:
            node.appendChild(child)
        return node

    def _print_Order(self, e):
        inside = [self._print(e.expr)]
        if e.point and any(point != 0 for point in e.point):
            inside += [self._element("mo", text=";")] + [
                self._element("mrow", self._print(v), self._element("mo", text="\u2192"), self._print(point))
                for v, point in zip(e.variables, e.point)]
        return self._element("mrow", self._element("mi", text="O"), self._element("mo", text="("), *inside,
                             self._element("mo", text=")"))

    def _print_Subs(self, e):
        expr, old, new = e.args
        at = self._element("mrow")
        for i, (variable, value) in enumerate(zip(old, new)):
            if i:
                at.appendChild(self._element("mo", text=","))
            at.appendChild(self._element("mrow", self._print(variable), self._element("mo", text="="),
                                         self._print(value)))
        bar = self._element("mrow", self._element("mo", text="("), self._print(expr), self._element("mo", text=")"))
        return self._element("msub", self._element("mrow", bar, self._element("mo", text="|")), at)


def math(expr, *, display: str = "block") -> str:
    """``expr`` (a sympy expression or relation) as a ``<math>`` element from sympy's presentation printer.

    An expression the printer cannot handle is shown as sympy's plain text in ``<code>``.
    """
    try:
        body = _Printer().doprint(expr)
    except Exception as exc:  # noqa: BLE001 - a printer gap must not cost the report
        return f"<code>{escape(sp.sstr(expr))}</code> <small>(no MathML: {escape(type(exc).__name__)})</small>"
    return f'<math xmlns="{MATHML_NAMESPACE}" display="{display}">{body}</math>'


def _symbol(symbol) -> str:
    text = math(symbol, display="inline")
    if symbol.is_integer and symbol.is_positive:
        return text + " integer &ge; 1"
    for flag, words in (("positive", "&gt; 0"), ("nonnegative", "&ge; 0"), ("real", "real")):
        if getattr(symbol, f"is_{flag}"):
            return f"{text} {words}"
    return text


def _row(label: str, relation, reason: str, extra: str = "") -> str:
    return (f'<tr><td class="label">{escape(label)}</td><td class="relation">{math(relation)}{extra}</td>'
            f'<td class="reason">{escape(reason)}</td></tr>')


def derivation_html(derivation) -> str:
    """One :class:`attneb.theory.Derivation` as HTML: its symbols, then one row per step, claimed form and result.

    A step shows its relation and reason; a claimed form ``name relation typed`` with its statement,
    and, folded, ``name = derived`` (what sympy computed) and the relations it was given.
    """
    rows = []
    for kind, index, item in derivation.items():
        given = "".join(math(g) for g in item.given)
        if kind == "step":
            folded = f"<details><summary>given</summary>{given}</details>" if given else ""
            rows.append(_row(f"({index})", item.eq, item.reason, folded))
        else:
            shown = type(item.eq)(item.name, item.typed, evaluate=False)
            folded = (f"<details><summary>derived by sympy</summary>"
                      f"{math(sp.Eq(item.name, item.derived, evaluate=False))}"
                      + (f"<p>given:</p>{given}" if given else "") + "</details>")
            rows.append(_row(f"[claim {item.ref or index}]", shown, item.reason, folded))
    rows += [_row("result", eq, "derived") for eq in derivation.results]
    symbols = ", ".join(_symbol(s) for s in derivation.symbols)
    return (f'<p class="meta">Symbols: {symbols}</p>' if symbols else "") + \
        '<table><tr><th></th><th>relation</th><th>reason</th></tr>' + "".join(rows) + "</table>"




#: id(derivation) -> (derivation, its HTML): a derivation object rendered once per process.
_RENDERED: dict[int, tuple[object, str]] = {}


def _rendered(derivation) -> str:
    kept = _RENDERED.get(id(derivation))
    if kept is None or kept[0] is not derivation:
        kept = _RENDERED[id(derivation)] = (derivation, derivation_html(derivation))
    return kept[1]


# ------------------------------------------------------------------------------------------ pieces


def page(derivation) -> dict:
    """``{"title", "html"}`` of a built derivation (its HTML rendered once per process)."""
    return {"title": derivation.title, "html": _rendered(derivation)}


def _key() -> str:
    return f"{provenance.source_fingerprint()} sympy {sp.__version__}"


def _page_path(out: Path | str, name: str) -> Path:
    return Path(out) / PAGES_FOLDER / f"{name}.json"


def kept_page(out: Path | str, name: str) -> dict | None:
    """The page of derivation ``name`` kept in report folder ``out`` by this code and sympy, else None."""
    try:
        kept = json.loads(_page_path(out, name).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != _key():
        return None
    return {"title": kept["title"], "html": kept["html"]}


def keep_page(out: Path | str, name: str, derivation) -> None:
    """Keep the page of ``derivation`` (the toolkit's own, as registered under ``name``) in report folder ``out``.

    Nothing is done when this code's page is there already; the file is written whole (a temporary
    file renamed), so concurrent checks in several processes cannot leave half a page. Callers make
    sure that ``derivation`` is the toolkit's own, not a mutant standing in for it.
    """
    if kept_page(out, name) is not None:
        return
    path = _page_path(out, name)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({"key": _key(), **page(derivation)}))
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
