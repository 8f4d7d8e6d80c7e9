"""Symbolic evidence: a derivation of :mod:`attneb.theory` checked as a check of the claims it bears on.

Each topic registers, for its own claims, the derivations that bear on them
(:func:`register_derivation`, which a researcher's own module may call too); a test keeps these
registrations equal to the refs of the derivations' typed-in claims. Registering does not build the
derivation (seconds of sympy): it is built and checked once per run, when its first check runs, and
kept in the run's :class:`~attneb.proofs_check.engine.registry.Context`.

The wrong theories a derivation check must reject are its claims, mutated one at a time
(:func:`attneb.theory.mutations.mutants`): the typed closed form times ``(1 + eps)``, plus ``eps`` times
a free symbol, with a changed coefficient, and so on. Each mutant replaces the derivation while
the check runs; a check that still passed would be a claim that holds by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from attneb import theory

from .mathml import keep_page
from .registry import Alternative, Context, Evidence, alternative, check, source_of, swap

#: Name -> function building the derivation. Read at call time, so that a mutant can stand in.
BUILDERS: dict[str, Callable[[], theory.Derivation]] = {}
#: Name -> the time limit of each item's check, seconds (:meth:`attneb.theory.Derivation.check`).
TIME_LIMITS: dict[str, float | None] = {}
#: Name -> the function registered to build it (BUILDERS' entry unless a mutant stands in for it).
_REGISTERED: dict[str, Callable[[], theory.Derivation]] = {}
#: Claim id -> the names of the derivations registered as its checks, in order.
CLAIM_DERIVATIONS: dict[str, list[str]] = {}
#: The swap target of every mutant alternative: :data:`BUILDERS`, named from this module's own name.
BUILDERS_TARGET = f"{__name__}:BUILDERS"


def _checked(name: str, ctx: Context):
    derivation = BUILDERS[name]()
    key = ("derivation", name, id(derivation))
    if key not in ctx.cache:
        ctx.cache[key] = (derivation, derivation.check(time_limit=TIME_LIMITS[name]))
    return ctx.cache[key]


def derivation_evidence(name: str, ctx: Context) -> Evidence:
    """Check derivation ``name``: passed when every step and claim is verified (symbolically or numerically)."""
    derivation, report = _checked(name, ctx)
    if toolkit_derivation(name):
        keep_page(ctx.out, name, derivation)  # for report.html, which so need not build it again
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


@cache
def _mutant_alternatives(name: str) -> Callable[[], list[Alternative]]:
    """The wrong theories of derivation ``name``, built once when first needed, shared by every claim it bears on."""
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


@cache
def theory_derivation(name: str) -> Callable[[], theory.Derivation]:
    """The builder of :mod:`attneb.theory`'s derivation ``name`` (one function per name, so that topics share it)."""
    if name not in theory.list_derivations():
        raise ValueError(f"unknown derivation {name!r}; known: {', '.join(theory.list_derivations())}")

    def build() -> theory.Derivation:
        return theory.get_derivation(name)

    build.source = source_of(theory.derivation_module(name).derivation)
    return build


def toolkit_derivation(name: str) -> bool:
    """Whether ``BUILDERS[name]`` is the toolkit's own, as registered: not a mutant standing in for it, nor a
    researcher's derivation (whose code the toolkit's source fingerprint does not cover)."""
    build = BUILDERS.get(name)
    return build is not None and build is _REGISTERED.get(name) and \
        (getattr(build, "__module__", "") or "").startswith("attneb.")


def register_derivation(name: str, build: Callable[[], theory.Derivation], claim_ids: Sequence[str], *,
                        time_limit: float | None = theory.TIME_LIMIT) -> None:
    """Register derivation ``build()`` as a check of every claim in ``claim_ids``.

    Its wrong theories are its claims mutated one at a time; the check fails when any step or
    claim fails. ``build`` should cache its result (it is called at every check). ``time_limit``
    bounds the check of each item, in seconds (past it sympy's reductions are abandoned and the
    numeric evaluation decides; None: no limit). A derivation that bears on claims of several
    topics is registered by each, with the same ``build`` (:func:`theory_derivation` for those of
    :mod:`attneb.theory`); another ``build`` under a name already taken is an error.
    """
    if BUILDERS.setdefault(name, build) is not build:
        raise ValueError(f"a different derivation named {name!r} is already registered")
    _REGISTERED[name] = build
    TIME_LIMITS[name] = time_limit
    alternatives = _mutant_alternatives(name)
    for claim_id in claim_ids:
        CLAIM_DERIVATIONS.setdefault(claim_id, []).append(name)
        check(
            claim_id, f"derivation '{name}' (sympy)",
            criterion="every step and every claim holds: reduced to 0 by sympy, or, where sympy cannot decide, at "
            "seeded random points in mpmath (40 digits, relative 1e-25), or, for items whose right side a sympy "
            "engine produced, by an independent route (mpmath quadrature/differentiation at 20 digits to a relative "
            "1e-15, sifting of Dirac masses, an antiderivative differentiated, a solution substituted back); "
            "numeric routes are reported as numeric, not as proofs",
            alternatives=alternatives,
            source=getattr(build, "source", None) or source_of(build),
        )(_derivation_check(name))


def _derivation_check(name: str) -> Callable[[Context], Evidence]:
    """The function of derivation ``name``'s checks; :func:`derivation_of` reads the name back."""
    def run(ctx: Context) -> Evidence:
        return derivation_evidence(name, ctx)

    run.derivation = name
    return run


def derivation_of(chk) -> str | None:
    """The derivation a check checks (one registered by :func:`register_derivation`), else None."""
    return getattr(chk.func, "derivation", None)
