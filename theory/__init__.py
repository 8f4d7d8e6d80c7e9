"""Symbolic derivations (sympy) of the theory behind the two-stage attention denoiser.

Each topic module builds one :class:`~attneb.theory.derivation.Derivation` whose
steps and claimed forms (:class:`~attneb.theory.derivation.ClaimedForm`: closed forms
typed in, each naming its quantity) are checked by sympy (or, where sympy cannot
decide, by mpmath at random points, reported as numeric) and printed as LaTeX,
text or unicode math. The registry builds them lazily by name::

    >>> import theory
    >>> theory.list_derivations()[:3]
    ['attention', 'depth_ode', 'energy']
    >>> report = theory.get_derivation("depth_noise").check()  # doctest: +SKIP

Evaluators of the derived closed forms live in :mod:`attneb.theory.depth_noise` and
:mod:`attneb.theory.stability`; :mod:`attneb.theory.second_order` predicts the token cumulants under the
``mean_field`` derivation's PDE to second order. :mod:`attneb.theory.mutations` makes broken copies of a
derivation (one step or claim changed at a time) that its check must fail.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from .derivation import TIME_LIMIT, CheckReport, ClaimedForm, Derivation, Step, StepCheck

__all__ = [
    "DERIVATIONS",
    "TIME_LIMIT",
    "CheckReport",
    "ClaimedForm",
    "Derivation",
    "Step",
    "StepCheck",
    "derivation_module",
    "get_derivation",
    "list_derivations",
]

# registry name -> module whose ``derivation()`` builds it; in reading order
_MODULES = {
    "attention": "attention",
    "depth_ode": "depth_ode",
    "energy": "energy",
    "mean_field": "mean_field",
    "depth_noise": "depth_noise",
    "gaussian": "gaussian",
    "anisotropic": "anisotropic",
    "stability": "stability",
    "tweedie": "tweedie",
    "stage2": "stage2",
}


class _Registry(Mapping):
    """Read-only mapping name -> Derivation, built on first access and cached."""

    def __getitem__(self, name: str) -> Derivation:
        if name not in _MODULES:
            raise KeyError(f"unknown derivation {name!r}; known: {', '.join(_MODULES)}")
        return derivation_module(name).derivation()

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)

    def __repr__(self) -> str:
        return f"<derivation registry: {', '.join(_MODULES)}>"


DERIVATIONS: Mapping[str, Derivation] = _Registry()


def list_derivations() -> list[str]:
    """Names of the registered derivations, in reading order."""
    return list(_MODULES)


def get_derivation(name: str) -> Derivation:
    """Build (once) and return the derivation called ``name``; ``KeyError`` if unknown."""
    return DERIVATIONS[name]


def derivation_module(name: str):
    """The module whose ``derivation()`` builds derivation ``name`` (its evaluators live there too); ``KeyError`` if unknown."""
    if name not in _MODULES:
        raise KeyError(f"unknown derivation {name!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(f".{_MODULES[name]}", __name__)
