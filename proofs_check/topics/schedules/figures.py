"""The E7 figures, drawn from stored runs (never recomputed here).

* ``E7_gaps``: gap to Bayes against ``N`` (log-log) of the paper's fixed bandwidth, the fixed bandwidth at its
  best ``h2``, the annealed flow at its best ``c``, the oracle reverse flow and Stage 2 over the clean tokens
  (ideal), one panel per prior (columns) and depth ``L`` (rows); error bars are 95% t-intervals over seeds;
* ``E7_selection``: the selection runs' mean gap against the grid's ratio (``h2 / sigma2`` for the fixed
  bandwidth, ``c = h_l / s_l`` for the annealed flow) at the largest ``N``, the chosen ratios marked.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from attneb.numerics import stats
from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.plotting import GAP_LABEL, N_LABEL, colour_cycle
from attneb.proofs_check.engine.studies import study
from attneb.proofs_check.topics.schedules.comparison import stored_cases


@study("E7", "explicit-schedule comparators: fixed bandwidth, annealed flow and oracle reverse flow at equal depth",
       claims=("A1",), files=("E7_gaps", "E7_selection"))
def draw_schedules(store: ResultStore, quick: bool) -> tuple[Figure, Figure]:
    return plot_schedules(stored_cases(store, quick))


LABELS = {"paper": "fixed h2, paper's schedule", "fixed": "fixed h2, best on the grid",
          "annealed": "annealed h_l = c s_l, best c", "oracle": "oracle reverse flow",
          "ideal": "Stage 2 over the clean tokens (ideal)"}


STYLES = {"paper": ":", "fixed": "-", "annealed": "-", "oracle": "--", "ideal": "-."}


def plot_schedules(cases: dict) -> tuple[Figure, Figure]:
    """Draw the two E7 figures.

    Parameters
    ----------
    cases : dict
        ``(prior, N, L) -> {"selection": [...], "chosen": (h2 / sigma2, c), "runs": [scored records]}``, as
        :func:`attneb.proofs_check.topics.schedules.comparison.stored_cases` returns them.

    Returns
    -------
    tuple of matplotlib.figure.Figure
        The gaps against ``N`` and the selection runs (``E7_gaps``, ``E7_selection``).
    """
    priors = list(dict.fromkeys(p for p, _, _ in cases))
    layers = sorted({L for _, _, L in cases})
    ns = sorted({n for _, n, _ in cases})
    colours = dict(zip(LABELS, colour_cycle()))
    gaps = Figure(figsize=(4.6 * len(priors), 3.6 * len(layers)), layout="constrained")
    axes = gaps.subplots(len(layers), len(priors), squeeze=False, sharex=True)
    for i, L in enumerate(layers):
        for j, prior in enumerate(priors):
            ax = axes[i, j]
            for k, name in enumerate(LABELS):
                intervals = [stats.mean_interval([run["gaps"][name] for run in cases[(prior, n, L)]["runs"]])
                             for n in ns]
                means = np.array([iv.estimate for iv in intervals])
                errors = np.array([[iv.estimate - max(iv.low, 0.1 * iv.estimate) for iv in intervals],
                                   [iv.high - iv.estimate for iv in intervals]])
                ax.errorbar(np.array(ns) * (1 + 0.04 * (k - 2)), means, yerr=errors, fmt="o" + STYLES[name],
                            color=colours[name], ms=3, lw=1, capsize=2, label=LABELS[name])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{prior}, L = {L}", fontsize=9)
            ax.set_xlabel(N_LABEL, fontsize=8)
            ax.set_ylabel(GAP_LABEL if j == 0 else "", fontsize=7)
    axes[0, 0].legend(fontsize=7)

    largest = ns[-1]
    selection = Figure(figsize=(4.6 * len(priors), 3.4), layout="constrained")
    axes = selection.subplots(1, len(priors), squeeze=False)
    for ax, prior in zip(axes[0], priors):
        for k, L in enumerate(layers):
            case = cases[(prior, largest, L)]
            for part, marker, chosen in (("fixed", "o-", case["chosen"][0]), ("annealed", "s--", case["chosen"][1])):
                ratios = [r for r, _ in case["selection"][0][part]]
                means = np.mean([[g for _, g in record[part]] for record in case["selection"]], axis=0)
                colour = colour_cycle()[k]
                ax.plot(ratios, means, marker, color=colour, ms=3, lw=1, label=f"{part}, L = {L}")
                ax.plot([chosen], [means[ratios.index(chosen)]], marker[0], color=colour, ms=9, mfc="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("h2 / sigma2 (fixed) or c = h_l / s_l (annealed)", fontsize=8)
        ax.set_ylabel("mean gap to Bayes over the selection contexts", fontsize=7)
        ax.set_title(f"{prior}, N = {largest} (chosen: open markers)", fontsize=9)
        ax.legend(fontsize=7)
    return gaps, selection
