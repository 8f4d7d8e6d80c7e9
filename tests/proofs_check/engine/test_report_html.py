"""``report.html``: one self-contained page, checked by parsing it and by rendering it in headless Chromium.

The report is a small one written by ``write_report`` after a real run of three toy claims: one whose
check draws a figure (matplotlib) and whose statement needs escaping, a question answered no, and one
that carries derivation 'depth_ode' (the quickest of :mod:`attneb.theory` to build, about 1 s).
The browser tests skip where no ``chromium`` is on the PATH (CI installs Debian's, ``.ci/run``).
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib import image  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

from attneb.numerics.sweep import source_fingerprint  # noqa: E402
from attneb.proofs_check.engine import derivations, mathml  # noqa: E402
from attneb.proofs_check.engine.registry import CLAIMS, Context, Evidence, check, claim  # noqa: E402
from attneb.proofs_check.engine.report import write_report  # noqa: E402
from attneb.proofs_check.engine.mathml import MATHML_NAMESPACE, PAGES_FOLDER  # noqa: E402
from attneb.proofs_check.engine.report_html import html_text  # noqa: E402
from attneb.proofs_check.engine.runner import run  # noqa: E402

IDS = ("Z61", "Z62", "Z63")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium on the PATH (Debian: apt-get install chromium)")
#: Seconds each chromium call may take.
BROWSER_TIMEOUT = 60


def _draw(ctx) -> Evidence:
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x ** 2, label="x^2")
    ax.legend()
    ctx.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(ctx.out / "Z61_toy.png", dpi=60)
    return Evidence(True, "identity", "drew a parabola <&> checked", figures=("Z61_toy.png",),
                    markdown="| a | b |\n|---|---|\n| 1 | 2 |")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """``(report dict, report folder)`` of the toy run; the toy claims are unregistered afterwards."""
    saved_claims, saved_builders = set(CLAIMS), dict(derivations.BUILDERS)
    saved_links = {k: list(v) for k, v in derivations.CLAIM_DERIVATIONS.items()}
    try:
        claim("Z61", "a toy with a figure", "x < y & z > w: a statement that needs <escaping>",
              ("a toy assumption",))
        check("Z61", "draws a figure", criterion="always passes",
              alternatives=())(_draw)
        claim("Z62", "a toy question", "does the toy answer no?", question=True)
        check("Z62", "answers no", criterion="always fails")(lambda ctx: Evidence(False, "identity", "no"))
        claim("Z63", "a toy with a derivation", "the depth ODE's Euler steps have local error O(eta^2)")
        derivations.register_derivation("depth_ode", derivations.theory_derivation("depth_ode"), ["Z63"])
        out = tmp_path_factory.mktemp("report")
        results = run(list(IDS), quick=True, out=out)
        written = write_report(results, out, quick=True, seconds=1.0)
        yield written, out
    finally:
        for cid in set(CLAIMS) - saved_claims:
            del CLAIMS[cid]
        derivations.BUILDERS.clear()
        derivations.BUILDERS.update(saved_builders)
        derivations.CLAIM_DERIVATIONS.clear()
        derivations.CLAIM_DERIVATIONS.update(saved_links)


class _Page(HTMLParser):
    """Tags with their attributes, the text of each claim's section, and the claims table's rows."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.section: str | None = None
        self.maths: dict[str, int] = {}
        self.table: str | None = None
        self.rows = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "section" and attributes.get("id", "").startswith("claim-"):
            self.section = attributes["id"].removeprefix("claim-")
        if tag == "math" and self.section:
            self.maths[self.section] = self.maths.get(self.section, 0) + 1
        if tag == "table":
            self.table = attributes.get("class")
        if tag == "tr" and self.table == "claims":
            self.rows += 1

    def handle_endtag(self, tag):
        if tag == "section":
            self.section = None
        if tag == "table":
            self.table = None


def _parsed(out: Path) -> tuple[str, _Page]:
    text = (out / "report.html").read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    page.close()
    return text, page


def test_the_page_parses_and_holds_every_claim_figure_and_derivation(report):
    written, out = report
    text, page = _parsed(out)
    assert page.rows == 1 + len(written["claims"]) == 1 + len(IDS)  # the header row, then one per claim
    images = [attributes["src"] for tag, attributes in page.tags if tag == "img"]
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 1 and len(images) == len(pngs)
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.removeprefix("data:image/png;base64,"), validate=True).startswith(PNG_SIGNATURE)
    assert base64.b64decode(images[0].split(",", 1)[1]) == pngs[0].read_bytes()
    with_derivations = [c for c in IDS if derivations.CLAIM_DERIVATIONS.get(c)]
    assert with_derivations == ["Z63"]
    assert all(page.maths.get(c, 0) >= 1 for c in with_derivations)
    assert all(attributes.get("xmlns") == MATHML_NAMESPACE for tag, attributes in page.tags if tag == "math")
    assert "answer no" in text and ">pass<" in text


def test_the_page_needs_no_network_and_no_script(report):
    _, out = report
    text, page = _parsed(out)
    for tag, attributes in page.tags:
        for name in ("src", "href", "action", "srcset", "poster"):
            value = attributes.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value), f"<{tag} {name}={value[:80]!r}>"
    assert {tag for tag, _ in page.tags}.isdisjoint({"script", "link", "iframe", "object", "embed"})
    assert "@import" not in text and "url(" not in text
    assert re.findall(r"https?://[^\s\"'<>]+", text.replace(MATHML_NAMESPACE, "")) == []


def test_text_is_escaped_and_the_provenance_shown(report):
    written, out = report
    text, _ = _parsed(out)
    assert html.escape("x < y & z > w: a statement that needs <escaping>") in text
    assert "<escaping>" not in text and "drew a parabola &lt;&amp;&gt; checked" in text
    origin = written["provenance"]
    assert html.escape(origin["code"]) in text and html.escape(origin["started"]) in text
    assert "a toy assumption" in text and "<td>1</td><td>2</td>" in text  # assumptions; the evidence's markdown table


def test_the_check_keeps_the_derivation_page_and_the_report_reads_it(report):
    written, out = report
    kept = json.loads((out / PAGES_FOLDER / "depth_ode.json").read_text())  # kept by the check, as it ran
    assert kept["key"].startswith(source_fingerprint()) and "<math" in kept["html"]
    sentinel = {**kept, "html": "<p>the kept page</p>"}
    (out / PAGES_FOLDER / "depth_ode.json").write_text(json.dumps(sentinel))
    try:
        assert "<p>the kept page</p>" in html_text(written, out)  # read back, not built again
    finally:
        (out / PAGES_FOLDER / "depth_ode.json").write_text(json.dumps(kept))
    assert "<math" not in html_text(written, out, derivations=False).split('id="claim-Z63"')[1]


def test_a_page_of_other_code_or_of_a_mutant_is_not_used(report, tmp_path, monkeypatch):
    written, out = report
    stale = json.loads((out / PAGES_FOLDER / "depth_ode.json").read_text())
    (tmp_path / PAGES_FOLDER).mkdir()
    (tmp_path / PAGES_FOLDER / "depth_ode.json").write_text(json.dumps({**stale, "key": "other code",
                                                                        "html": "<p>stale</p>"}))
    assert mathml.kept_page(tmp_path, "depth_ode") is None
    assert "<p>stale</p>" not in html_text(written, tmp_path)
    registered = derivations.BUILDERS["depth_ode"]
    monkeypatch.setitem(derivations.BUILDERS, "depth_ode", lambda: registered())  # a stand-in, as a mutant is
    assert not derivations.toolkit_derivation("depth_ode")
    monkeypatch.setattr(mathml, "keep_page", lambda *args: pytest.fail("kept the page of a stand-in"))
    monkeypatch.setattr(derivations, "keep_page", mathml.keep_page)
    derivations.derivation_evidence("depth_ode", Context(quick=True, out=tmp_path / "mutant", workers=1, cache={}))
    assert not (tmp_path / "mutant" / PAGES_FOLDER).exists()


def test_size_and_power_show_where_measured(report):
    written, out = report
    name = written["claims"][0]["evidence"][0]["check"]
    rate = {"rate": 0.0, "ci95": [0.0, 0.1], "exact": False, "errors": 0}
    power = {"seconds": 2.0, "meet_goal": 0, "meet_goal_at_95": 0, "checks": [
        {"claim": "Z61", "check": name, "replicates": 30, "effective_replicates": 30, "size": rate,
         "power": {"a wrong theory": {**rate, "rate": 0.5, "kind": "implementation"}}, "answered_no": False}]}
    text = html_text({**written, "power": power}, out, derivations=False)
    assert "size and power (30 (30 independent) replicates" in text
    assert "a wrong theory (implementation): 0.50 [0.00, 0.10] <span class=\"below\">(below goal)</span>" in text


# ------------------------------------------------------------------------------------------ in Chromium

#: Injected into a copy of the page (the report itself has no script): records errors from the start,
#: and on load writes each image's natural width, the claims table's rows and the width of each
#: unfolded <math> into <pre id="probe">.
PROBE = """<script>
window.probeErrors = [];
window.addEventListener("error", e => window.probeErrors.push(e.message || ("failed to load " +
  ((e.target && (e.target.src || e.target.href)) || "a resource").slice(0, 80))), true);
const originalError = console.error;
console.error = (...args) => { window.probeErrors.push(args.join(" ")); originalError(...args); };
window.addEventListener("load", () => {
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    errors: window.probeErrors,
    images: Array.from(document.images, i => i.naturalWidth),
    rows: document.querySelectorAll("table.claims tbody tr").length,
    maths: Array.from(document.getElementsByTagName("math")).filter(m => !m.closest("details"))
      .map(m => m.getBoundingClientRect().width),
  });
  document.body.appendChild(probe);
});
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=BROWSER_TIMEOUT, check=False)


@needs_chromium
def test_chromium_renders_the_table_every_figure_and_the_mathml(report, tmp_path):
    written, out = report
    page = (out / "report.html").read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    done = _chromium("--dump-dom", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                     probed.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, "the probe did not run: " + done.stdout[-500:]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["errors"] == []
    assert probe["rows"] == len(written["claims"])
    assert len(probe["images"]) == len(list(out.glob("*.png"))) and all(w > 0 for w in probe["images"])
    assert probe["maths"] and all(w > 0 for w in probe["maths"])
    # Chromium prints each console message as "INFO:CONSOLE:<line>] "<text>"" whatever its level (an
    # uncaught exception reads "Uncaught ..."); the page writes none, so any is an error.
    console = [line for line in done.stderr.splitlines()
               if "CONSOLE" in line or "Uncaught" in line or "Failed to load" in line]
    assert console == []


@needs_chromium
def test_chromium_screenshot_is_not_blank(report, tmp_path):
    _, out = report
    shot = tmp_path / "report_html.png"
    done = _chromium("--window-size=1200,1600", f"--screenshot={shot}", (out / "report.html").as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    if os.environ.get("ATTNEB_SCREENSHOT_DIR"):
        keep = Path(os.environ["ATTNEB_SCREENSHOT_DIR"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / shot.name)
    print(f"screenshot of report.html: {shot}")
    assert shot.read_bytes().startswith(PNG_SIGNATURE)
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (1600, 1200)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 50 and pixels.std() > 0.02  # text, tables and a figure, not one colour
