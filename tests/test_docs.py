"""The README and docs/ stay in step with the registry: every claim has its section and its line, every
finding names a check that exists, every file they cite is in the repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attneb.proofs_check.engine import content, derivations
from attneb.proofs_check.engine.registry import CLAIMS as REGISTERED

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
THEORY = (ROOT / "docs" / "theory.md").read_text()
PAGES = {path.relative_to(ROOT): path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}

content.load_default()
#: The toolkit's own claims in the order a fresh ``attneb verify`` reports them: registered by its topics in a
#: fresh interpreter (in this one, other tests may have imported the topics in another order, or registered
#: claims of their own).
ORDER = json.loads(subprocess.run(
    [sys.executable, "-c", "import json; from attneb.proofs_check.engine import content, registry; "
     "content.load_default(); print(json.dumps(list(registry.CLAIMS)))"],
    check=True, capture_output=True, text=True).stdout)
CLAIMS = {cid: REGISTERED[cid] for cid in ORDER}


def _sections() -> dict[str, str]:
    parts = re.split(r"^### (\w+): ", THEORY, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_readme_is_a_first_page():
    assert len(README.splitlines()) <= 150


def test_the_readme_has_one_line_per_claim():
    rows = re.findall(r"^\| (\w+) \|", README, flags=re.M)
    assert [r for r in rows if r in CLAIMS] == list(CLAIMS)


def test_theory_has_a_section_per_claim_with_its_statement():
    sections = _sections()
    assert list(sections) == list(CLAIMS)
    for claim_id, text in sections.items():
        assert CLAIMS[claim_id].statement in text, claim_id


@pytest.mark.parametrize("claim_id", list(CLAIMS))
def test_every_finding_names_a_check_of_its_claim(claim_id):
    found = _sections()[claim_id].split("*Found:*", 1)[1]
    names = [c.name for c in CLAIMS[claim_id].checks] + derivations.CLAIM_DERIVATIONS.get(claim_id, [])
    cited = re.findall(r"`([^`]+)`", found)
    assert any(any(name.startswith(c) for name in names) for c in cited), f"{claim_id}: no check named in {found!r}"
    for c in cited:
        if re.match(r"E\d", c):  # an experiment's check, by the first words of its name
            assert any(name.startswith(c) for name in names), f"{claim_id}: no check of it is named {c!r}"


def test_no_placeholder_is_left():
    for page, text in PAGES.items():
        assert not re.search(r"\bFULL_\w+|\bTODO\b|CLAIMS_TABLE|CLAIM_SECTIONS", text), page


def test_every_cited_file_exists():
    for page, text in PAGES.items():
        for path in re.findall(r"`((?:theory|numerics|proofs_check|tests|benchmarks|examples|docs)/[\w/.]+\.(?:py|md|toml|sh))",
                               text):
            assert (ROOT / path).exists(), f"{page} cites {path}"
        for link in re.findall(r"\]\(((?!https?:)[^)#]+)\)", text):
            assert (ROOT / page).parent.joinpath(link).exists(), f"{page} links to {link}"
