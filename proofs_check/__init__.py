"""Ties each claim of the paper to its evidence: claims, checks, wrong theories, and ``attneb verify``.

The public API, for a researcher's own claims (see ``docs/extending.md``)::

    from attneb.proofs_check import Evidence, alternative, check, claim, register_derivation, swap

- :func:`claim` registers a claim (or a question); :func:`check` registers a check of it, with its
  criterion, the wrong theories it must reject (:func:`alternative` of :func:`swap` s) and the
  functions it covers; a check returns :class:`Evidence`;
- :func:`register_derivation` registers a derivation of :mod:`attneb.theory` (or one's own) as a
  check of the claims it bears on, its mutants as wrong theories.

:mod:`.engine` runs them (``attneb verify``, :func:`attneb.proofs_check.engine.runner.run`);
:mod:`.topics` holds the toolkit's own claims, one module or folder per theory topic.
"""

from .engine.derivations import register_derivation
from .engine.registry import (
    CLAIMS,
    Alternative,
    Check,
    Claim,
    Context,
    Evidence,
    Swap,
    alternative,
    check,
    claim,
    scaled_output,
    swap,
)

__all__ = [
    "CLAIMS",
    "Alternative",
    "Check",
    "Claim",
    "Context",
    "Evidence",
    "Swap",
    "alternative",
    "check",
    "claim",
    "register_derivation",
    "scaled_output",
    "swap",
]
