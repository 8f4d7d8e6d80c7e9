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
    _shrink(monkeypatch, convergence_checks, "recovery_configs", n=[128, 512, 2048], seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, convergence_checks, "depth_configs", n=[512], seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, convergence_checks, "table_configs", parts=("clusters", "box"), n=[128, 512],
            seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, convergence_checks, "clean_configs", n=[128, 512, 2048], seeds={"start": 0, "count": 3})
    monkeypatch.setattr(stability_checks, "sizes", lambda quick: ([300, 600], 4))


