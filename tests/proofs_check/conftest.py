"""The experiments of `attneb verify` run here on shrunken configurations (few small N, few seeds).

Every test of this package sees them, so that a verify run takes seconds; the pass criteria are
those of the real checks, and the real sizes run in `attneb verify` itself.
"""

import pytest

from proofs_check import convergence_checks, stability_checks


def _shrink(monkeypatch, module, name, parts=None, **changes):
    real = getattr(module, name)

    def small(quick):
        return {part: {**config, **changes} for part, config in real(quick).items() if parts is None or part in parts}

    monkeypatch.setattr(module, name, small)


@pytest.fixture(autouse=True)
def small_experiments(monkeypatch):
    real_recovery = convergence_checks.recovery_configs
    monkeypatch.setattr(convergence_checks, "recovery_configs", lambda quick: {
        # the power schedule keeps its N: the largest, 131072, is below N_c, as the scope check needs
        "clusters-power": real_recovery(quick)["clusters-power"],
        "gaussian-log": {**real_recovery(quick)["gaussian-log"], "n": [256, 1024, 4096], "seeds": {"start": 0, "count": 3}},
    })
    _shrink(monkeypatch, convergence_checks, "depth_configs", n=[4096], seeds={"start": 0, "count": 4})
    _shrink(monkeypatch, convergence_checks, "table_configs", parts=("clusters", "box"), n=[128, 512],
            seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, convergence_checks, "clean_configs", n=[128, 512, 2048], seeds={"start": 0, "count": 3})
    monkeypatch.setattr(stability_checks, "sizes", lambda quick: ([300, 600, 8000], 3))


