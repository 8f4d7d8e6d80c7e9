"""Shrunken E7 for the tests: the two-cluster prior, N = 1024, L = 4, six scored and two selection contexts (the
second comparison: one tuning and six fresh contexts, the quick design's for that prior).

The criteria are those of the real checks; at this size the decisions are those of their own seeds (fixed), which
pass.
"""

from attneb.proofs_check.topics.schedules import comparison

SMALL_DESIGN = {"priors": ("two-cluster",), "n": (1024,), "layers": (4,), "seeds": 6, "selection_seeds": 2}
SMALL_TUNED = {"cases": (("two-cluster", 1024, 4),), "seeds": 6, "tuning_seeds": 1}


def shrink_schedules(monkeypatch):
    monkeypatch.setattr(comparison, "design", lambda quick: dict(SMALL_DESIGN))
    monkeypatch.setattr(comparison, "tuned_design", lambda quick: dict(SMALL_TUNED))
