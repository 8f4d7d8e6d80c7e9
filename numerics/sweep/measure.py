"""One task of a sweep: execute runs that share a batch and measure each into a row.

One run draws the batch of its seed (:func:`attneb.numerics.experiments.draw_batch`, so the batch is
the same in whichever process it is drawn), fits and applies its estimator and records the MSE,
the gap to the Bayes posterior mean, the Bayes risk (MMSE) and the excess risk ``MSE - MMSE``,
in-sample (the estimator denoises the batch it was fitted on) and out-of-sample (``oos_*``: it
denoises ``n`` fresh noisy queries of the same seed, :func:`attneb.numerics.experiments.draw_queries`,
drawn from an independent stream and not in the context; ``runtime_s`` times the in-sample work).
Runs that share a batch (same prior, ``sigma2``, ``n`` and seed) are executed together in one
task (:func:`run_batch`), which draws the batch once; the numbers are those of :func:`run_one`.
This is the code a worker process (or a dask worker) runs; it writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import platform
import time
from collections.abc import Sequence

import numpy as np

from .. import experiments as _experiments
from .. import priors as _priors
from .canonical import canonical_json
from .registry import ESTIMATORS, build_prior
from .spec import RunSpec


class RunFailed(RuntimeError):
    """A run raised; the message names the run (key and parameters) and the original error."""


@functools.lru_cache(maxsize=64)
def _mmse(prior_json: str, sigma2: float, n_mc: int, seed: int) -> _priors.RiskEstimate:
    prior = build_prior(json.loads(prior_json))
    return prior.mmse(sigma2, rng=np.random.default_rng(seed), n_mc=n_mc)


@functools.lru_cache(maxsize=1)
def _versions() -> dict:
    import scipy

    try:
        attneb = importlib.metadata.version("attneb")
    except importlib.metadata.PackageNotFoundError:
        attneb = "unknown"
    return {
        "attneb_version": attneb,
        "numpy_version": np.__version__,
        "scipy_version": scipy.__version__,
        "python_version": platform.python_version(),
    }


def run_one(spec: RunSpec) -> dict:
    """Execute one run and return its row (a dict with the keys of :data:`COLUMNS`)."""
    return run_batch([spec])[0]


def _fitted_along_paths(specs: Sequence[RunSpec], noisy) -> dict[str, tuple]:
    """``{key: (fitted estimator, its share of Stage 1's seconds)}`` for the two-stage runs of ``specs`` that share
    a Stage-1 path with another (:attr:`RunSpec.path_key`): each group is fitted by one
    :meth:`~attneb.numerics.estimators.TwoStageDenoiser.fit_depths`."""
    groups: dict[tuple, list[RunSpec]] = {}
    for spec in specs:
        if spec.path_key is not None:
            groups.setdefault(spec.path_key, []).append(spec)
    out = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        start = time.perf_counter()
        try:
            estimators = group[0].build_estimator().fit_depths(noisy, [spec.T for spec in group])
        except Exception as exc:  # noqa: BLE001 - re-raised with the runs named
            raise RunFailed(f"runs {', '.join(s.key[:12] for s in group)} ({group[0].describe()} and the other depths) "
                            f"failed: {type(exc).__name__}: {exc}") from exc
        share = (time.perf_counter() - start) / len(group)
        out.update({spec.key: (estimator, share) for spec, estimator in zip(group, estimators)})
    return out


def run_batch(specs: Sequence[RunSpec]) -> list[dict]:
    """Execute runs that share one batch (same prior, ``sigma2``, ``n``, seed): one row per run.

    The batch is drawn once; every row equals what :func:`run_one` gives for its spec. Two-stage runs that
    differ only in their depth ``T`` run Stage 1 along shared paths (the same numbers, fewer layers); each one's
    ``runtime_s`` then counts an equal share of those paths' time.
    Raises :class:`RunFailed` naming the run if an estimator raises.
    """
    specs = list(specs)
    if not specs:
        return []
    first = specs[0]
    if any(s.batch_key != first.batch_key for s in specs):
        raise ValueError("run_batch needs runs that share prior, sigma2, n and seed; group them by RunSpec.batch_key")
    prior = first.build_prior()
    clean, noisy = _experiments.draw_batch(prior, first.sigma2, first.n, first.seed)
    bayes = prior.posterior_mean(noisy, first.sigma2)
    q_clean, q_noisy = _experiments.draw_queries(prior, first.sigma2, first.n, first.seed)
    q_bayes = prior.posterior_mean(q_noisy, first.sigma2)
    fitted = _fitted_along_paths(specs, noisy)
    rows = []
    for spec in specs:
        try:
            risk = _mmse(canonical_json(spec.prior), spec.sigma2, spec.mmse_n_mc, spec.mmse_seed)
            start = time.perf_counter()
            if spec.key in fitted:
                estimator, stage_one = fitted[spec.key]
            else:
                estimator = spec.build_estimator(prior)
                context = clean if ESTIMATORS[spec.estimator].context == "clean" else noisy
                estimator.fit(context)
                stage_one = 0.0
            est = estimator.denoise(noisy)
            runtime = time.perf_counter() - start + stage_one
            oos = estimator.denoise(q_noisy)
        except Exception as exc:  # noqa: BLE001 - re-raised with the run named
            raise RunFailed(f"run {spec.key[:12]} ({spec.describe()}) failed: {type(exc).__name__}: {exc}") from exc
        mse = float(np.mean((est - clean) ** 2))
        oos_mse = float(np.mean((oos - q_clean) ** 2))
        layers = getattr(estimator, "n_layers_", None)
        rows.append(
            {
                "key": spec.key,
                "experiment": spec.experiment,
                "estimator": spec.estimator,
                "prior": spec.prior["family"],
                "dim": int(prior.dim),
                "sigma2": spec.sigma2,
                "n": spec.n,
                "seed": spec.seed,
                "h2": spec.h2,
                "T": spec.T,
                "eta": spec.eta,
                "method": spec.method,
                "n_layers": None if layers is None else int(layers),
                "mse": mse,
                "mmse": float(risk.value),
                "mmse_error": float(risk.error),
                "mmse_method": risk.method,
                "gap": float(np.mean((est - bayes) ** 2)),
                "excess": mse - float(risk.value),
                "oos_mse": oos_mse,
                "oos_gap": float(np.mean((oos - q_bayes) ** 2)),
                "oos_excess": oos_mse - float(risk.value),
                "runtime_s": runtime,
                "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
                **_versions(),
                "options": canonical_json(spec.options),
                "spec": spec.to_json(),
            }
        )
    return rows
