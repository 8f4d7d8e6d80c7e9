"""attneb: symbolic-numeric verification of *Attention as In-Context Empirical Bayes* (arXiv:2605.29351).

Three subpackages, imported on first use::

    >>> import attneb
    >>> attneb.theory.list_derivations()[:2]     # sympy derivations as data
    ['attention', 'depth_ode']
    >>> attneb.numerics.estimators               # doctest: +ELLIPSIS
    <module 'attneb.numerics.estimators' ...>

- :mod:`attneb.theory`: the derivations (continuous-depth ODE, mean field, depth-noise relation, ...)
  and the evaluators of their closed forms;
- :mod:`attneb.numerics`: kernel sums, Stage 1 particle flow, estimators, priors, experiments;
- :mod:`attneb.proofs_check`: the claims, their checks and wrong theories, and ``attneb verify``.

The command line is ``attneb`` (or ``python -m attneb``); ``attneb --help`` lists its commands.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attneb")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "numerics", "proofs_check", "theory"]

_SUBPACKAGES = ("numerics", "proofs_check", "theory")


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBPACKAGES))
