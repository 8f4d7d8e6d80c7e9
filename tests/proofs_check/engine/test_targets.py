"""Every name a wrong theory swaps, a check covers or the coverage map lists resolves to a real attribute.

A swap whose target names nothing would fail when the alternative is applied, and a moved module
would silently change a power figure; this test fails first, naming the target.
"""

from __future__ import annotations

import pytest

from attneb.proofs_check.engine.coverage import REPORT_FUNCTIONS
from attneb.proofs_check.engine.derivations import BUILDERS_TARGET
from attneb.proofs_check.engine.registry import CLAIMS, resolve


def _targets() -> dict[str, str]:
    """Target -> where it is named (the first place)."""
    found: dict[str, str] = {}
    for claim in CLAIMS.values():
        for chk in claim.checks:
            where = f"{claim.id}: {chk.name}"
            for target in chk.covers:
                found.setdefault(target, f"{where} (covers)")
            if callable(chk.alternatives):  # derivation mutants, built on demand: they all swap BUILDERS
                found.setdefault(BUILDERS_TARGET, f"{where} (mutants)")
                continue
            for alt in chk.alternatives:
                for s in alt.swaps:
                    found.setdefault(s.target, f"{where} (alternative {alt.name!r})")
    for target in REPORT_FUNCTIONS:
        found.setdefault(target, "REPORT_FUNCTIONS (traced)")
    return found


TARGETS = _targets()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_target_resolves(target):
    owner, attribute = resolve(target)
    assert hasattr(owner, attribute), TARGETS[target]


def test_targets_were_found():
    assert len(TARGETS) > 100
