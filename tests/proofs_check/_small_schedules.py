"""Shrunken E7 for the tests: the two-cluster prior, N = 1024, L = 4, six scored and two selection contexts.

The criteria are those of the real check; at this size the decision is that of its own seeds (fixed), which pass.
"""

from proofs_check import schedule_checks

SMALL_DESIGN = {"priors": ("two-cluster",), "n": (1024,), "layers": (4,), "seeds": 6, "selection_seeds": 2}


def shrink_schedules(monkeypatch):
    monkeypatch.setattr(schedule_checks, "design", lambda quick: dict(SMALL_DESIGN))
