"""Shrunken configurations of E3 (and the particle checks) for the tests."""

from proofs_check import stability_checks


def shrink_stability(monkeypatch):
    monkeypatch.setattr(stability_checks, "sizes", lambda quick: ([300, 600, 8000], 3))
