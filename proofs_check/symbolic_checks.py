"""Symbolic evidence: each derivation of :mod:`theory` checked for the claims it bears on.

A derivation bears on the claims its typed-in :class:`attneb.theory.Claim` objects name (``ref``), plus
the toolkit's own claims (G1, S1) for the derivations that establish them.
:data:`DERIVATION_CLAIMS` spells the mapping out so that importing this module does not build the
derivations (seconds of sympy); a test keeps it equal to the refs. Each derivation is checked once
per run (kept in the run's :class:`Context`) and its check is registered under every claim it
bears on by :func:`register_derivation`, which a researcher's own module may call too.

The wrong theories a derivation check must reject are its claims, mutated one at a time
(:func:`attneb.theory.mutations.mutants`): the typed closed form times ``(1 + eps)``, plus ``eps`` times
a free symbol, with a changed coefficient, and so on. Each mutant replaces the derivation while
the check runs; a check that still passed would be a claim that holds by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from attneb import theory
from . import claims as _claims  # noqa: F401  (registers the claims these checks attach to)
from .registry import Alternative, Context, Evidence, alternative, check, swap

__all__ = ["BUILDERS", "BUILDERS_TARGET", "DERIVATION_CLAIMS", "TOOLKIT_REFS", "derivation_evidence", "derivation_refs",
           "register_derivation"]

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
    "anisotropic": ("G4",),
    "stability": ("S1",),
    "tweedie": ("C10",),
    "stage2": ("C7", "C8", "C9"),
}

#: Name -> function building the derivation. Read at call time, so that a mutant can stand in.
BUILDERS: dict[str, Callable[[], theory.Derivation]] = {}
#: The swap target of every mutant alternative: :data:`BUILDERS`, named from this module's own name.
BUILDERS_TARGET = f"{__name__}:BUILDERS"


def _checked(name: str, ctx: Context):
    derivation = BUILDERS[name]()
    key = ("derivation", name, id(derivation))
    if key not in ctx.cache:
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


def _mutant_alternatives(name: str) -> Callable[[], list[Alternative]]:
    @cache
    def build() -> list[Alternative]:
        """each claim of the derivation mutated in turn (theory.mutations.mutants)"""
        from attneb.theory import mutations  # building mutants needs the derivation anyway

        real = BUILDERS[name]()
        return [
            alternative(f"{label}: {mutation}", f"derivation '{name}' with {label} mutated ({mutation})",
                        swap(BUILDERS_TARGET,
                             lambda builders, m=mutant: {**builders, name: lambda: m}))
            for label, mutation, mutant in mutations.mutants(real, kinds=("claim",))
        ]

    return build


def register_derivation(name: str, build: Callable[[], theory.Derivation], claim_ids: Sequence[str]) -> None:
    """Register derivation ``build()`` as a check of every claim in ``claim_ids``.

    Its wrong theories are its claims mutated one at a time; the check fails when any step or
    claim fails. ``build`` should cache its result (it is called at every check).
    """
    if name in BUILDERS:
        raise ValueError(f"a derivation named {name!r} is already registered")
    BUILDERS[name] = build
    alternatives = _mutant_alternatives(name)
    for claim_id in claim_ids:
        check(
            claim_id, f"derivation '{name}' (sympy)",
            criterion="every step and every claim holds: reduced to 0 by sympy, or, where sympy cannot decide, at "
            "seeded random points in mpmath (40 digits, relative 1e-25), or, for items whose right side a sympy "
            "engine produced, by an independent route (mpmath quadrature/differentiation at 20 digits to a relative "
            "1e-15, sifting of Dirac masses, an antiderivative differentiated, a solution substituted back); "
            "numeric routes are reported as numeric, not as proofs",
            alternatives=alternatives,
        )(lambda ctx, n=name: derivation_evidence(n, ctx))


def derivation_refs(name: str) -> set[str]:
    """Claim ids derivation ``name`` bears on, read from the built derivation (slow: builds it)."""
    refs = {c.ref for c in theory.get_derivation(name).claims if c.ref}
    if name in TOOLKIT_REFS:
        refs.add(TOOLKIT_REFS[name])
    return refs


for _name, _ids in DERIVATION_CLAIMS.items():
    register_derivation(_name, lambda n=_name: theory.get_derivation(n), _ids)
