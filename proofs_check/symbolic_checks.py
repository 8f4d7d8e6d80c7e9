"""Symbolic evidence: each derivation of :mod:`theory` checked for the claims it bears on.

A derivation bears on the claims its typed-in :class:`theory.Claim` objects name
(``ref``), plus the toolkit's own claims (G1, S1) for the derivations that establish
them. :data:`DERIVATION_CLAIMS` spells the mapping out so that importing this module
does not build the derivations (seconds of sympy); a test keeps it equal to the refs.
Each derivation is checked once per run (kept in the run's :class:`Context`) and its
check is registered under every claim it bears on.
"""

from __future__ import annotations

import theory

from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Context, Evidence, check

#: Derivations whose claims carry no paper id, and the toolkit claim they bear on.
TOOLKIT_REFS = {"stability": "S1", "gaussian": "G1"}

#: Claim ids each derivation bears on: the refs of its claims, plus TOOLKIT_REFS.
DERIVATION_CLAIMS = {
    "attention": ("C1", "C2"),
    "depth_ode": ("C3",),
    "energy": ("C4",),
    "mean_field": ("C5",),
    "depth_noise": ("C5", "C6"),
    "gaussian": ("C6", "C8", "G1"),
    "stability": ("S1",),
    "tweedie": ("C10",),
    "stage2": ("C7", "C8", "C9"),
}


def _checked(name: str, ctx: Context):
    key = ("derivation", name)
    if key not in ctx.cache:
        derivation = theory.get_derivation(name)
        ctx.cache[key] = (derivation, derivation.check())
    return ctx.cache[key]


def derivation_evidence(name: str, ctx: Context) -> Evidence:
    """Check derivation ``name``: passed when every step and claim is verified (symbolically or numerically)."""
    derivation, report = _checked(name, ctx)
    counts = report.methods()
    failed = [f"{e.kind} {e.index} ({e.reason})" for e in report.entries if not e.passed]
    claims = [c.statement for c in derivation.claims]
    how = f"{counts['symbolic']} symbolic"
    if counts["numeric"]:
        how += f", {counts['numeric']} numeric (mpmath at random points, not a proof)"
    if counts["failed"]:
        how += f", {counts['failed']} failed"
    summary = f"derivation '{name}': {len(report.entries)} steps and claims checked, {how}"
    if failed:
        summary += "; FAILED: " + "; ".join(failed)
    return Evidence(
        passed=report.passed,
        kind="numeric" if counts["numeric"] else "symbolic",
        summary=summary,
        data={"derivation": name, "methods": counts, "claims": claims, "failed": failed},
    )


def derivation_refs(name: str) -> set[str]:
    """Claim ids derivation ``name`` bears on, read from the built derivation (slow: builds it)."""
    refs = {c.ref for c in theory.get_derivation(name).claims if c.ref}
    if name in TOOLKIT_REFS:
        refs.add(TOOLKIT_REFS[name])
    return refs


for _name, _ids in DERIVATION_CLAIMS.items():
    for _id in _ids:
        check(_id, f"derivation '{_name}' (sympy)")(lambda ctx, name=_name: derivation_evidence(name, ctx))
