"""What every experiment's figure shares: axis labels, intervals over seeds, colours, saving as PNG and PDF.

The figures themselves live with their topics (``attneb.proofs_check.topics.*``); each draws from
stored numbers, never recomputing them. Error bars are 95% t-intervals over seeds.

Figures are :class:`matplotlib.figure.Figure` objects made without :mod:`matplotlib.pyplot`: no
module of the toolkit imports pyplot or calls :func:`matplotlib.use`, so importing it leaves a
notebook's backend as it was, and a figure is written only where :func:`save` is called
(:meth:`attneb.proofs_check.engine.studies.Study.plot`).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from attneb.numerics import stats

GAP_LABEL = r"gap to Bayes $\|\hat x - E[x|\tilde x]\|^2/d$ (squared data units)"
N_LABEL = "context size N (tokens)"


def grouped_intervals(rows, x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of ``y`` over seeds at each value of ``x``, with the half-width of a 95% t-interval."""
    groups = defaultdict(list)
    for row in rows:
        groups[row[x]].append(row[y])
    xs = np.array(sorted(groups))
    means, halves = [], []
    for value in xs:
        ys = groups[value]
        if len(ys) >= 2:
            iv = stats.mean_interval(ys)
            means.append(iv.estimate)
            halves.append(iv.high - iv.estimate)
        else:
            means.append(ys[0])
            halves.append(0.0)
    return xs, np.array(means), np.array(halves)


def save(fig: Figure, folder: Path, name: str) -> Path:
    """Write ``fig`` as ``folder/name.png`` (120 dpi) and ``folder/name.pdf``; return the PNG path.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    folder : pathlib.Path
        Created if missing.
    name : str
        File name without suffix.

    Returns
    -------
    pathlib.Path
        ``folder/name.png``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"{name}.png"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    fig.savefig(folder / f"{name}.pdf", bbox_inches="tight")
    return png


def colour_cycle() -> list[str]:
    """The colours of matplotlib's property cycle, in order."""
    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def loglog(ax, xlabel=N_LABEL, ylabel=GAP_LABEL) -> None:
    """Log-log axes (base 2 in ``N``) with the gap-against-N labels."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
