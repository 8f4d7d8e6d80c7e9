"""The engine's content: the modules that register claims, checks and studies, named, never imported statically.

As pytest's engine names its default plugins, the engine knows the toolkit's own claims only as
:data:`DEFAULT_CONTENT`, a tuple of module names in reading order, and imports them by name
(:func:`load_default`); a researcher's own modules and files are loaded the same way
(:func:`load`, ``attneb verify --load``). Importing a content module registers its claims, their
checks (with criteria and wrong theories) and its studies (figures) in
:data:`attneb.proofs_check.engine.registry.CLAIMS` and
:data:`attneb.proofs_check.engine.studies.STUDIES`; the report lists claims in the order they were
registered.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["DEFAULT_CONTENT", "TOPICS", "load", "load_default"]

#: The package of the toolkit's content, one module or folder per theory topic.
TOPICS = f"{__name__.rsplit('.', 2)[0]}.topics"
#: The toolkit's own content, in reading order: each topic registers its claims, their checks and
#: its figures (the names of :mod:`attneb.theory`'s modules where the topic has a derivation).
DEFAULT_CONTENT: tuple[str, ...] = tuple(f"{TOPICS}.{topic}" for topic in (
    "attention", "depth_ode", "energy", "mean_field", "depth_noise", "stage2", "tweedie", "gaussian", "stability",
    "anisotropic", "second_order", "predicted_gap", "training", "schedules",
))


def load(sources: Sequence[str] | None) -> None:
    """Import the modules (dotted names) or files (``path/to/file.py``) that register claims and checks.

    A module already imported is not imported again; a file is executed at each call (as module
    ``attneb_user_<stem>``). Raises ``FileNotFoundError`` for a missing file and ``ImportError``
    for a module that cannot be imported.
    """
    for source in sources or ():
        if source.endswith(".py") or Path(source).is_file():
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"--load {source!r}: no such file")
            spec = importlib.util.spec_from_file_location(f"attneb_user_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(source)


def load_default() -> None:
    """Import :data:`DEFAULT_CONTENT` (once per process): every claim, check and study of the toolkit."""
    load(DEFAULT_CONTENT)
