"""The E6 figures, drawn from stored runs (never recomputed here).

* ``E6_bandwidths``: learned bandwidth over ``sigma2``, layer by layer (Stage 1, then Stage 2),
  against the construction's (``h2/sigma2 = 1/4`` in Stage 1, 1 in Stage 2), one panel per prior;
* ``E6_depth_budget``: the depth budget ``2 sum_l eta_l h2_l`` against ``sigma2``, seeds as points,
  with the depth-noise relation's line, one panel per prior;
* ``E6_training``: training curves (loss per coordinate) of the first seed of every case, with the
  Bayes, construction and ``L = 0`` risks of that run as horizontal lines.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.figure import Figure

from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.plotting import colour_cycle
from attneb.proofs_check.engine.studies import mode_name, study
from attneb.proofs_check.topics.training import experiment


@study("E6", "trained networks: learned bandwidths and depth budget, training curves",
       claims=("T1", "T2", "T3"), files=("E6_bandwidths", "E6_depth_budget", "E6_training"))
def draw_trained(store: ResultStore, quick: bool) -> tuple[Figure, Figure, Figure]:
    records = store.records(mode_name("E6", "runs", quick))
    d = experiment.design(quick)
    runs = [records[experiment.run_key(*args)] for args in experiment.wanted_runs(d) if experiment.run_key(*args) in records]
    if not runs:
        raise LookupError(f"{store.path} holds no E6 runs of the {'quick' if quick else 'full'} mode; run "
                          "'attneb verify' to compute them")
    return plot_trained(runs, construction_ratio=experiment.construction_h2(1.0),
                        budget=experiment.predicted_depth_budget)


def _by_prior(runs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for run in runs:
        out.setdefault(run["prior"], []).append(run)
    return out


def plot_trained(runs: list[dict], *, construction_ratio: float,
                 budget: Callable[[float], float]) -> tuple[Figure, Figure, Figure]:
    """Draw the three E6 figures.

    Parameters
    ----------
    runs : list of dict
        Records of :func:`attneb.proofs_check.topics.training.experiment.run_training`.
    construction_ratio : float
        The construction's Stage-1 ``h2 / sigma2``.
    budget : callable
        The predicted depth budget as a function of ``sigma2``.

    Returns
    -------
    tuple of matplotlib.figure.Figure
        The learned bandwidths, the depth budget and the training curves (``E6_bandwidths``,
        ``E6_depth_budget``, ``E6_training``).
    """
    colours = colour_cycle()
    priors = _by_prior(runs)
    sigma2s = sorted({run["sigma2"] for run in runs})
    colour = {s: colours[i % len(colours)] for i, s in enumerate(sigma2s)}
    markers = {1: "o", 2: "s", 3: "^"}

    bandwidths = Figure(figsize=(5.5 * len(priors), 4), layout="constrained")
    axes = bandwidths.subplots(1, len(priors), squeeze=False)
    for ax, (prior, chosen) in zip(axes[0], priors.items()):
        layers = len(chosen[0]["stage1_h2"])
        for run in chosen:
            ratios = np.array(run["stage1_h2"] + [run["stage2_h2"]]) / run["sigma2"]
            jitter = 0.06 * (run["seed"] - 1.5) + 0.03 * (run["d"] - 1.5)
            ax.plot(np.arange(layers + 1) + jitter, ratios, markers.get(run["d"], "o"), color=colour[run["sigma2"]],
                    alpha=0.7, ms=4)
        ax.hlines(construction_ratio, -0.3, layers - 0.7, colors="k", linestyles="--",
                  label=f"construction, Stage 1 ({construction_ratio:g})")
        ax.hlines(1.0, layers - 0.3, layers + 0.3, colors="k", linestyles=":", label="construction, Stage 2 (1)")
        for s in sigma2s:
            ax.plot([], [], "o", color=colour[s], label=f"sigma2 = {s:g}")
        ax.set_yscale("log")
        ax.set_xticks(range(layers + 1), [f"layer {l + 1}" for l in range(layers)] + ["Stage 2"])
        ax.set_ylabel("learned bandwidth / sigma2")
        ax.set_title(f"{prior} prior (circles d = 1, squares d = 2)")
        ax.legend(fontsize=7)

    depth_budget = Figure(figsize=(5.5 * len(priors), 4), layout="constrained")
    axes = depth_budget.subplots(1, len(priors), squeeze=False)
    grid = np.linspace(0, max(sigma2s) * 1.05, 50)
    for ax, (prior, chosen) in zip(axes[0], priors.items()):
        for run in chosen:
            ax.plot(run["sigma2"] * (1 + 0.02 * (run["seed"] - 1.5)), run["budget"], markers.get(run["d"], "o"),
                    color=colour[run["sigma2"]], alpha=0.7, ms=4)
        ax.plot(grid, [budget(s) if s > 0 else 0.0 for s in grid], "k--", label="depth-noise relation 2 h2 T* = sigma2")
        ax.axhline(0, color="0.7", lw=0.8)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xlabel("sigma2")
        ax.set_ylabel("depth budget 2 sum_l eta_l h2_l (symlog)")
        ax.set_title(f"{prior} prior (circles d = 1, squares d = 2)")
        ax.legend(fontsize=7)

    cases = [run for run in runs if run["seed"] == 0]
    columns = len(sigma2s)
    rows = max(1, int(np.ceil(len(cases) / columns)))
    training = Figure(figsize=(3.2 * columns, 2.6 * rows), layout="constrained")
    axes = training.subplots(rows, columns, squeeze=False)
    for ax, run in zip(axes.ravel(), cases):
        curve = np.asarray(run["curve"])
        window = len(run["curve"]) and run["steps"] // len(run["curve"])
        ax.plot((np.arange(curve.size) + 0.5) * window, curve, lw=1, label="training loss")
        for name, style in (("bayes", "k-"), ("constructed", "r--"), ("stage2_only", "g:")):
            label = {"bayes": "Bayes", "constructed": "construction", "stage2_only": "L = 0"}[name]
            ax.axhline(float(np.mean(run["risks"][name])), color=style[0], ls=style[1:], lw=1, label=label)
        levels = [float(np.mean(run["risks"][name])) for name in ("bayes", "constructed", "stage2_only")]
        ax.set_ylim(0.95 * levels[0], 1.25 * max(levels[1:] + [float(curve[-1])] if curve.size else levels[1:]))
        ax.set_title(f"{run['prior']}, d = {run['d']}, sigma2 = {run['sigma2']:g}", fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(cases):]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=6)
    return bandwidths, depth_budget, training
