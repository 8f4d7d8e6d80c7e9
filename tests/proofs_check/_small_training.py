"""Shrunken E6 for the tests: one dimension, two noise levels, two seeds, 60 Adam steps, 16 evaluation contexts.

The criteria are those of the real checks; what training finds in 60 steps is not what it finds
in `attneb verify`, so tests of the questions T1-T3 test their decisions (on synthetic records),
their ability to fail, and that they run; not their answers.
"""

from attneb.proofs_check.topics.training import experiment

SMALL_DESIGN = {"priors": experiment.PRIORS, "dims": (1,), "sigma2": (0.5, 2.0), "seeds": 2, "steps": 60}


def shrink_training(monkeypatch):
    monkeypatch.setattr(experiment, "design", lambda quick: dict(SMALL_DESIGN))
    monkeypatch.setattr(experiment, "EVAL_CONTEXTS", 16)
