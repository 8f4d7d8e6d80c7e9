"""The experiments of `attneb verify` run here on shrunken configurations (few small N, few seeds).

Every test of this package sees them, so that a verify run takes seconds; the pass criteria are
those of the real checks, and the real sizes run in `attneb verify` itself. Each module's
shrinking lives beside its tests: `_small_convergence.py` (E1, E2, E4, E5), `_small_stability.py`
(E3 and the particle checks), `_small_training.py` (E6) and `_small_schedules.py` (E7).
"""

import pytest

from ._small_convergence import shrink_convergence
from ._small_schedules import shrink_schedules
from ._small_stability import shrink_stability
from ._small_training import shrink_training


@pytest.fixture(autouse=True)
def small_experiments(monkeypatch):
    shrink_convergence(monkeypatch)
    shrink_stability(monkeypatch)
    shrink_training(monkeypatch)
    shrink_schedules(monkeypatch)
