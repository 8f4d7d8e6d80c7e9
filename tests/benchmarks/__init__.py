"""Tests of the scripts in ``benchmarks/`` (not a package of the toolkit): :func:`load_script` imports one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module, registered in ``sys.modules`` (so that its dataclasses
    resolve their annotations through it)."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
