"""Figures of the experiments, drawn from stored numbers (never recomputed here).

Each ``plot_*`` function takes rows of a sweep (dicts, as :meth:`attneb.numerics.sweep.ResultStore.rows`
returns them) or stored records and writes ``NAME.png`` and ``NAME.pdf`` into a folder,
returning the PNG's path. Error bars are 95% t-intervals over seeds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from attneb.numerics import stats  # noqa: E402

__all__ = [
    "grouped_intervals", "plot_clean_context", "plot_depth_sweep", "plot_estimator_table", "plot_recovery", "save",
]

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


def save(fig, folder: Path, name: str) -> Path:
    """Write ``fig`` as ``folder/name.png`` and ``.pdf``; return the PNG path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"{name}.png"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    fig.savefig(folder / f"{name}.pdf", bbox_inches="tight")
    plt.close(fig)
    return png


def _colours():
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _loglog(ax, xlabel=N_LABEL, ylabel=GAP_LABEL):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


def plot_recovery(panels: dict[str, dict[str, list[dict]]], folder: Path, name: str = "E1_recovery") -> Path:
    """E1: gap to Bayes against N (log-log), one panel per prior, one colour per bandwidth schedule.

    Solid: two-stage at ``T = T*`` (in-sample gap); dashed: two-stage on fresh noisy queries; dotted:
    Stage 2 alone. A vertical line of the schedule's colour marks where ``N`` crosses the stability
    bound ``N_c`` (S1), if it does.
    """
    from attneb.theory import stability

    cols = min(3, len(panels))
    n_rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(n_rows, cols, figsize=(5.0 * cols, 4.4 * n_rows), squeeze=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax, (prior, schedules) in zip(axes.flat, panels.items()):
        for (schedule, rows), colour in zip(schedules.items(), _colours()):
            for estimator, column, style, what in (("two-stage", "gap", "-o", "two-stage"),
                                                   ("two-stage", "oos_gap", "--^", "two-stage, fresh queries"),
                                                   ("stage-two-only", "gap", ":s", "L = 0")):
                sub = [r for r in rows if r["estimator"] == estimator]
                n, mean, half = grouped_intervals(sub, "n", column)
                ax.errorbar(n, mean, yerr=half, fmt=style, color=colour, capsize=3, ms=4, label=f"{what}, {schedule}")
            two = [r for r in rows if r["estimator"] == "two-stage"]
            ratio = [(r["n"], r["n"] / stability.token_scaling(r["sigma2"], r["h2"])) for r in two]
            crossing = [n for n, q in sorted(ratio) if q < 1]
            if crossing:
                ax.axvline(crossing[0], color=colour, ls="--", lw=1, label=f"first N < N_c ({schedule})")
        _loglog(ax)
        ax.set_title(prior, fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("E1: recovery with T = sigma2/(2 h2) along the bandwidth schedules (mean, 95% CI over seeds)",
                 fontsize=10)
    fig.tight_layout()
    return save(fig, folder, name)


def plot_depth_sweep(rows_by_part: dict[str, list[dict]], cases: dict[str, dict], folder: Path,
                     name: str = "E2_depth") -> Path:
    """E2: gap to Bayes on fresh queries against the depth offset T - T*, and the extrapolated minimiser.

    ``rows_by_part`` are the E2 rows per ``"tau2=..-h2=.."`` part; ``cases`` (from
    :func:`attneb.proofs_check.convergence_checks.depth_cases`) gives, per part, ``tau2``, ``h2``, T* (``leading``),
    T_G (``exact``) and the minimisers (``oos``: per N and extrapolated, with its interval). Left: one
    panel per tau2, mean gap over seeds per (h2, N) (solid: largest N), dotted at T*, dashed at T_G, the
    band T* + [0.75, 1.25] (T_G - T*) shaded. Right: each N's minimiser against N^(-1/2) in units of
    T_G - T*, the fitted line and the interval of T_inf at N^(-1/2) = 0.
    """
    tau2s = sorted({c["tau2"] for c in cases.values()}, reverse=True)
    fig, axes = plt.subplots(1, len(tau2s) + 1, figsize=(5.2 * (len(tau2s) + 1), 4.4), squeeze=False)
    colours = dict(zip(sorted({c["h2"] for c in cases.values()}, reverse=True), _colours()))
    for ax, tau2 in zip(axes.flat, tau2s):
        for part, case in cases.items():
            if case["tau2"] != tau2:
                continue
            rows = rows_by_part[part]
            ns = sorted({r["n"] for r in rows})
            for n in ns:
                T, mean, half = grouped_intervals([r for r in rows if r["n"] == n], "T", "oos_gap")
                ax.errorbar(T - case["leading"], mean, yerr=half, fmt="-o" if n == ns[-1] else "--", ms=2.5, capsize=2,
                            color=colours[case["h2"]], alpha=1.0 if n == ns[-1] else 0.45,
                            label=f"h2 = {case['h2']:g}, N = {n}")
            c_g = case["exact"] - case["leading"]
        ax.axvline(0.0, color="k", ls=":", lw=1, label="T*")
        ax.axvline(c_g, color="k", ls="--", lw=1, label="T_G")
        ax.axvspan(0.75 * c_g, 1.25 * c_g, color="grey", alpha=0.12, label="T* + [0.75, 1.25] (T_G - T*)")
        ax.set_yscale("log")
        ax.set_xlabel("depth beyond T*, T - T* (depth-time units)")
        ax.set_ylabel("gap to Bayes on fresh queries (squared data units)")
        ax.set_title(f"Gaussian prior, tau2 = {tau2:g}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    ax = axes.flat[-1]
    for (part, case), marker in zip(cases.items(), "osD^v<>"):
        m = case["oos"]
        c_g = case["exact"] - case["leading"]
        x = np.asarray(m["ns"], dtype=float) ** -0.5
        y = (np.asarray(m["per_n"]) - case["leading"]) / c_g
        err = 1.96 * np.asarray(m["per_n_se"]) / c_g
        colour = colours[case["h2"]]
        ax.errorbar(x, y, yerr=err, fmt=marker, color=colour, capsize=3, ms=4,
                    label=f"tau2 = {case['tau2']:g}, h2 = {case['h2']:g}")
        line = np.linspace(0.0, x.max(), 20)
        ax.plot(line, (m["T_inf"] - m["slope_b"] * line - case["leading"]) / c_g, ":", color=colour, lw=1)
        low, high = ((v - case["leading"]) / c_g for v in m["ci"])
        ax.errorbar([0.0], [(m["T_inf"] - case["leading"]) / c_g], yerr=[[(m["T_inf"] - case["leading"]) / c_g - low],
                    [high - (m["T_inf"] - case["leading"]) / c_g]], fmt=marker, color=colour, capsize=5, mfc="white")
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.axhspan(0.75, 1.25, color="grey", alpha=0.12)
    ax.axhline(0.0, color="k", ls=":", lw=1)
    ax.set_xlabel("N^(-1/2)")
    ax.set_ylabel("(T_min - T*) / (T_G - T*)")
    ax.set_title("minimiser per N (95% bootstrap), fit T_inf - b N^(-1/2),\nopen marker: T_inf with its interval",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)
    fig.suptitle("E2: risk-minimising depth against T* = sigma2/(2 h2) (dotted) and T_G (dashed)", fontsize=10)
    fig.tight_layout()
    return save(fig, folder, name)


def plot_estimator_table(rows_by_prior: dict[str, list[dict]], folder: Path, name: str = "E4_estimators") -> Path:
    """E4: excess risk against N, one panel per prior, one line per estimator."""
    labels = list(rows_by_prior)
    cols = 3
    n_rows = (len(labels) + cols - 1) // cols
    fig, axes = plt.subplots(n_rows, cols, figsize=(12, 3.5 * n_rows), squeeze=False)
    estimators = sorted({r["estimator"] for rows in rows_by_prior.values() for r in rows})
    colour = dict(zip(estimators, _colours()))
    for ax, label in zip(axes.flat, labels):
        rows = rows_by_prior[label]
        for estimator in estimators:
            sub = [r for r in rows if r["estimator"] == estimator]
            n, mean, half = grouped_intervals(sub, "n", "excess")
            ax.errorbar(n, mean, yerr=half, fmt="-o", ms=3, capsize=2, color=colour[estimator], label=estimator)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(N_LABEL)
        ax.set_ylabel("excess risk MSE - MMSE (per coordinate)")
        ax.set_title(label, fontsize=9)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(labels):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("E4: excess risk (mean, 95% CI over seeds); h2 = (4 sigma2/e)/log N, T = T*", fontsize=10)
    fig.tight_layout()
    return save(fig, folder, name)


def plot_clean_context(rows_by_prior: dict[str, list[dict]], folder: Path, name: str = "E5_clean_context") -> Path:
    """E5: gap to Bayes of one attention step over clean draws, against N, with a N^-1 guide."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (label, rows), colour in zip(rows_by_prior.items(), _colours()):
        n, mean, half = grouped_intervals(rows, "n", "gap")
        ax.errorbar(n, mean, yerr=half, fmt="-o", color=colour, capsize=3, ms=4, label=label)
        ax.plot(n, mean[0] * n[0] / n, ":", color=colour, lw=1)
    _loglog(ax)
    ax.set_title("E5: clean context, one step of bandwidth sigma2 (dotted: slope -1)", fontsize=10)
    ax.legend(fontsize=8)
    return save(fig, folder, name)
