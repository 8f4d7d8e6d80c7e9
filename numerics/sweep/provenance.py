"""Which code computed a stored result: a fingerprint of the toolkit's source.

A store (:class:`attneb.numerics.sweep.ResultStore`) writes :func:`source_fingerprint` beside
every run and record, and by default reads back only those of the code that is running, so a
result computed before a change of the code is never reused without being asked for
(:data:`REUSE_VARIABLE`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["REUSE_VARIABLE", "UNRECORDED", "reuse_other_code", "source_fingerprint"]

#: The packages whose source the fingerprint reads (the ``attneb`` namespace and its three parts).
PACKAGES = ("attneb", "attneb.theory", "attneb.numerics", "attneb.proofs_check")
#: The code of a result stored before stores recorded it.
UNRECORDED = "unrecorded"
#: Environment variable that, set to ``1``, lets every store opened without an explicit
#: ``reuse_other_code`` use results of other code (``attneb verify --reuse-other-code`` sets it,
#: so that its worker processes inherit it).
REUSE_VARIABLE = "ATTNEB_REUSE_OTHER_CODE"


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """The installed version and a hash of the toolkit's source: ``"0.1.0+src.3f9a1c0e2b7d"``.

    The hash is the sha256 of every ``.py`` file of :data:`PACKAGES`, each named by its path
    inside its package (``attneb.numerics/kernels.py``), in sorted order: the same for a wheel
    and an editable install of the same source, different after any change to a source file
    (comments included). Read once per process, when this module is first imported: the fingerprint
    names the source as it was when the toolkit was loaded, whatever changes on disk while a run goes
    on, and the processes forked from one that imported it (``verify``'s pool) inherit it.
    """
    digest = hashlib.sha256()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            root = Path(folder)
            nested = [p for p in root.rglob("*.py") if name != "attneb" or p.parent == root]
            for path in sorted(nested, key=lambda p: p.relative_to(root).as_posix()):
                digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
                digest.update(path.read_bytes())
                digest.update(b"\0")
    try:
        release = version("attneb")
    except PackageNotFoundError:
        release = "0+unknown"
    return f"{release}+src.{digest.hexdigest()[:12]}"


def reuse_other_code() -> bool:
    """Whether :data:`REUSE_VARIABLE` asks stores to use results of other code (``"1"``; ``"0"`` or unset: no)."""
    value = os.environ.get(REUSE_VARIABLE, "0")
    if value not in ("0", "1"):
        raise ValueError(f"{REUSE_VARIABLE} == {value!r}; must be '0' or '1'")
    return value == "1"


source_fingerprint()  # now, as the toolkit is loaded (see its docstring)
