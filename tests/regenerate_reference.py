"""Regenerate the pinned reference values ``tests/data/convergence_reference.json``.

Run ONLY on purpose, after an intended change of the numerics (a new solver default, a changed
kernel, a changed sampler), and commit the new file together with that change, saying why::

    python -m tests.regenerate_reference

``tests/numerics/test_convergence_properties.py::test_pinned_reference_values`` recomputes every
configuration below and compares with the file; a mismatch there means the numbers changed, which
is a regression unless the change was intended. Never regenerate to make that test pass without
knowing which change moved the numbers.

Each configuration is small (one seeded batch, N = 256) and fixes everything: the prior, ``sigma2``,
``h2``, ``N`` and the seed; ``T`` is the depth-noise rule ``sigma2 / (2 h2)`` (``T=None``).
"""

from __future__ import annotations

import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np
import scipy

from attneb.numerics.estimators import OracleBayes, StageTwoOnly, TwoStageDenoiser
from attneb.numerics.experiments import risk_records
from attneb.numerics.priors import GaussianMixture, UniformBox, UniformSphere

PATH = Path(__file__).parent / "data" / "convergence_reference.json"
COMMAND = "python -m tests.regenerate_reference"
FORMAT_VERSION = 1


def _h2(sigma2: float, n: int) -> float:
    """The schedule of the property tests, ``h2 = sigma2 * n**(-1/4)``."""
    return sigma2 * n ** -0.25


# name -> (constructor of the prior, sigma2, n, seed); h2 follows from _h2.
CONFIGS = {
    "two-cluster-1d": (lambda: GaussianMixture([[-2.0], [2.0]], [0.5, 0.5], var=0.1), 1.0, 256, 0),
    "box-1d": (lambda: UniformBox([0.0], [2.0]), 0.25, 256, 1),
    "circle-2d": (lambda: UniformSphere(2, 1.0), 0.2, 256, 2),
}


def compute(name: str) -> dict:
    """Configuration ``name`` and, per estimator, the gap to Bayes and the MSE on its batch."""
    make_prior, sigma2, n, seed = CONFIGS[name]
    prior = make_prior()
    h2 = _h2(sigma2, n)
    estimators = {
        "two-stage": TwoStageDenoiser(sigma2, h2),
        "stage-two-only": StageTwoOnly(sigma2),
        "oracle": OracleBayes(prior, sigma2),
    }
    records = risk_records(estimators, prior, sigma2, n, [seed])
    return {
        "prior": repr(prior),
        "sigma2": sigma2,
        "h2": h2,
        "T": sigma2 / (2.0 * h2),
        "n": n,
        "seed": seed,
        "results": {r.estimator: {"gap": r.gap, "mse": r.mse} for r in records},
    }


def build() -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "metadata": {
            "command": COMMAND,
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "platform": platform.platform(),
            "note": "regenerate only for intended numerical changes; see tests/regenerate_reference.py",
        },
        "configs": {name: compute(name) for name in CONFIGS},
    }


def main() -> None:
    data = build()
    PATH.parent.mkdir(parents=True, exist_ok=True)
    PATH.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"wrote {PATH} ({len(data['configs'])} configurations)")


if __name__ == "__main__":
    main()
