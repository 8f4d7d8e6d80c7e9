"""Evidence about the reference priors: Tweedie's formula (C10) and their Bayes risks."""

from __future__ import annotations

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
