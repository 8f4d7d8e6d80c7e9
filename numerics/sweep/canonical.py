"""Canonical JSON: the one text form of run specs, their keys, options and stored records.

Sorted keys, no whitespace, floats by ``repr`` (the shortest string that round-trips), no nan or
inf; numpy scalars and arrays and tuples become plain Python numbers and lists first. Two equal
specs give the same text in every process and on every machine, hence the same sha256 key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np


def plain(value):
    """``value`` with numpy scalars/arrays and tuples turned into JSON-ready Python objects."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, floats by ``repr`` (shortest round-trip), no nan/inf."""
    return json.dumps(plain(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
