"""The experiments of `attneb verify` run here on shrunken configurations (few small N, few seeds).

Every test of this package sees them, so that a verify run takes seconds; the pass criteria are
those of the real checks, and the real sizes run in `attneb verify` itself. Each module's
shrinking lives beside its tests: `_small_convergence.py` (E1, E2, E4, E5), `_small_stability.py`
(E3 and the particle checks), `_small_training.py` (E6), `_small_schedules.py` (E7) and
`_small_heavy_tails.py` (H1's depth check).
"""

import pytest

from attneb.proofs_check.engine import content
from attneb.proofs_check.topics.stability import dimension

from ._small_convergence import shrink_convergence
from ._small_heavy_tails import shrink_heavy_tails
from ._small_schedules import shrink_schedules
from ._small_stability import shrink_stability
from ._small_training import shrink_training

content.load_default()  # every claim of the toolkit, as attneb verify registers them


@pytest.fixture(autouse=True)
def small_experiments(monkeypatch):
    shrink_convergence(monkeypatch)
    shrink_stability(monkeypatch)
    shrink_training(monkeypatch)
    shrink_schedules(monkeypatch)
    shrink_heavy_tails(monkeypatch)
    # S1's threshold checks: 2-D runs at N = 8192 (2.4 N_c(2); below N_c the ratio falls out of its band), 6
    # seeds, the same runs for both (seeds from 3000: 6 s); their slope tests need several N and many seeds (quick:
    # 40 2-D runs, 70 s): decided on synthetic runs in test_dimension_checks.py, not here
    small = {"n": {2: [8192]}, "seeds": {2: 6}, "slope": {}}
    monkeypatch.setattr(dimension, "threshold_design", lambda quick: small)
    monkeypatch.setattr(dimension, "successor_design", lambda quick: small)
    monkeypatch.setattr(dimension, "control_design", lambda quick: small)
    monkeypatch.setattr(dimension, "SUCCESSOR_SEED_START", dimension.THRESHOLD_SEED_START)
    monkeypatch.setattr(dimension, "CONTROL_SEED_START", dimension.THRESHOLD_SEED_START)
