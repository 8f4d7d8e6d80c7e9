"""Which public functions of :mod:`attneb.numerics` and :mod:`attneb.theory` a ``verify`` run calls.

:func:`traced_run` runs checks (:func:`attneb.proofs_check.engine.runner.run`, one process) under a
profile hook (:func:`sys.setprofile`, and :func:`threading.setprofile` for the threads started
meanwhile) that notes every function of those two packages that starts running. Each is then
named as a ``covers=`` target names it, ``"package.module:qualname"``, and kept when it is public:
no part of its module path or qualified name begins with an underscore (``__call__`` excepted),
and it is not a function nested in another (``<locals>``) nor a lambda or comprehension, which no
target can name. A method is named after the class of the object it was called on
(``priors:Gaussian.posterior_mean``, although :class:`~attneb.numerics.priors.Prior` defines it)
when that class belongs to the two packages and its attribute is that very function: a 1% error
swapped into that target (:func:`attneb.proofs_check.engine.registry.scaled_output`) reaches exactly
that call. Otherwise (a ``super()`` call, an object of another package) it is named after the
class that defines it.

The run's report folder must be empty: a filled store makes the runs load instead of compute, and
the computing functions would go unseen. The hook slows the checks down, most where Python calls
are many and short: C1 and C3 (sympy derivations) took 13-22 s untraced and 58-64 s traced (a
Python call for every call, return and C call; :mod:`cProfile`, in C, took 34 s but does not see
the object a method was called on; ``sys.setprofile`` and ``sys.settrace`` cost the same), and the
whole quick run took 1216 s traced, on a 2-core VM shared with other jobs
(``benchmarks/trace_report_functions.py`` measures both). A check with a time limit on its own CPU
seconds may therefore stop earlier than it would untraced, and miss what it would have called after.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType

from attneb import numerics, theory

from .runner import ClaimResult, run, select

__all__ = ["IMPORT", "PACKAGES", "Recorder", "is_public", "module_name", "recording", "traced_run"]

#: The packages whose functions are traced.
PACKAGES = (numerics, theory)
#: What :func:`traced_run` names the calls made while the content registers its claims (imports).
IMPORT = "import"


def module_name(filename: str) -> str | None:
    """The dotted name of the module of :data:`PACKAGES` in file ``filename``, or ``None`` if it is in none."""
    path = Path(filename)
    for package in PACKAGES:
        for folder in package.__path__:
            if path.is_relative_to(folder):
                parts = path.relative_to(folder).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                return ".".join((package.__name__, *parts))
    return None


def is_public(module: str, qualname: str) -> bool:
    """True when neither the module path nor the qualified name has a private part (``__call__`` aside), nor a
    ``<locals>``, ``<lambda>``, comprehension or ``<module>`` part."""
    parts = (*module.split("."), *qualname.split("."))
    return all(part == "__call__" or not (part.startswith("_") or part.startswith("<")) for part in parts)


def _function_code(attribute) -> CodeType | None:
    """The code object behind a class attribute (a function, static or class method, property getter)."""
    if isinstance(attribute, (staticmethod, classmethod)):
        attribute = attribute.__func__
    elif isinstance(attribute, property):
        attribute = attribute.fget
    code = getattr(inspect.unwrap(attribute), "__code__", None) if callable(attribute) else None
    return code if isinstance(code, CodeType) else None


@dataclass
class Recorder:
    """A profile hook that keeps the code objects of :data:`PACKAGES` that start running.

    Attributes
    ----------
    functions : set of code
        Code called with no ``self`` or ``cls`` first argument.
    receivers : set of (code, type)
        Code called with a ``self`` or ``cls`` first argument, with the class of that argument.
    """

    functions: set = field(default_factory=set)
    receivers: set = field(default_factory=set)
    _inside: dict = field(default_factory=dict, init=False, repr=False)

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        inside = self._inside.get(code.co_filename)
        if inside is None:
            inside = self._inside[code.co_filename] = module_name(code.co_filename) is not None
        if not inside:
            return
        if code.co_argcount and code.co_varnames[0] in ("self", "cls"):
            first = frame.f_locals.get(code.co_varnames[0])
            self.receivers.add((code, first if isinstance(first, type) else type(first)))
        else:
            self.functions.add(code)

    def take(self) -> list[str]:
        """The public functions called since the last :meth:`take`, sorted, as ``"package.module:qualname"``.

        A class body (run when its module is imported) is not a function and is left out.
        """
        called = [(code, None) for code in self.functions] + list(self.receivers)
        self.functions, self.receivers = set(), set()
        named = set()
        for code, cls in called:
            if not code.co_flags & inspect.CO_OPTIMIZED:
                continue
            module, qualname = module_name(code.co_filename), code.co_qualname
            if (cls is not None and _in_packages(cls.__module__)
                    and _function_code(inspect.getattr_static(cls, code.co_name, None)) is code):
                module, qualname = cls.__module__, f"{cls.__qualname__}.{code.co_name}"
            if is_public(module, qualname):
                named.add(f"{module}:{qualname}")
        return sorted(named)


def _in_packages(module: str) -> bool:
    """True when the module named ``module`` is one of :data:`PACKAGES` or in one."""
    return any(module == package.__name__ or module.startswith(package.__name__ + ".") for package in PACKAGES)


@contextmanager
def recording() -> Iterator[Recorder]:
    """Within the block, every call of a function of :data:`PACKAGES` in this thread, or in a thread started in
    the block, is recorded in the :class:`Recorder` it yields; the hooks that were set before are put back after."""
    recorder = Recorder()
    saved = sys.getprofile(), threading.getprofile()
    threading.setprofile(recorder)
    sys.setprofile(recorder)
    try:
        yield recorder
    finally:
        sys.setprofile(saved[0])
        threading.setprofile(saved[1])


def traced_run(ids: Iterable[str] | None = None, *, out: Path,
               quick: bool = True) -> tuple[dict[str, list[str]], list[ClaimResult]]:
    """Run the checks of claims ``ids`` (default: all) in this process and record the public functions they call.

    Parameters
    ----------
    ids : iterable of str, optional
        Claim ids (default: every claim).
    out : pathlib.Path
        The run's report folder; it must be empty or missing (a filled store would make the
        runs load instead of compute).
    quick : bool
        The quick mode of ``verify`` (default) or the full one.

    Returns
    -------
    called : dict
        Each public function called (``"package.module:qualname"``, sorted) -> the claims
        during whose checks it was called, in run order, with :data:`IMPORT` first when it was
        called while the content was imported. A function whose results are cached in the
        process is listed under the first claim only.
    results : list of ClaimResult
        The run's outcomes.
    """
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"out == {os.fspath(out)!r} holds files; a traced run needs an empty folder (stored runs "
                         "would be loaded, not computed). Pass a fresh folder.")
    called = defaultdict(list)

    def note(by: str) -> None:
        for target in recorder.take():
            called[target].append(by)

    with recording() as recorder:
        select(ids)
        note(IMPORT)
        results = run(ids, quick=quick, out=out, workers=1, on_claim=lambda result: note(result.claim.id))
    return dict(sorted(called.items())), results
