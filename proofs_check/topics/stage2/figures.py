"""Figures of the experiments, drawn from stored numbers (never recomputed here).

Each ``plot_*`` function takes rows of a sweep (dicts, as :meth:`attneb.numerics.sweep.ResultStore.rows`
returns them) and returns a :class:`matplotlib.figure.Figure`, writing nothing (``attneb plot`` and the
checks save it through :meth:`attneb.proofs_check.engine.studies.Study.plot`). Error bars are 95%
t-intervals over seeds.
"""

from __future__ import annotations

from collections import defaultdict

from matplotlib.figure import Figure

from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.plotting import N_LABEL, colour_cycle, grouped_intervals, loglog
from attneb.proofs_check.engine.replication import stored, stored_if_run
from attneb.proofs_check.engine.studies import study
from attneb.proofs_check.topics.designs import RECOVERY_PRIORS, SCHEDULES, STUDENT_T_PRIORS, TABLE_PRIORS, labelled
from attneb.proofs_check.topics.stage2 import estimator_table, recovery
from attneb.theory import stability


def recovery_panels(rows_by_part):
    panels = defaultdict(dict)
    for part, rows in rows_by_part.items():
        prior, schedule = part.rsplit("-", 1)
        panels[{**RECOVERY_PRIORS, **STUDENT_T_PRIORS}[prior][0]][SCHEDULES[schedule][0]] = rows
    return dict(panels)


@study("E1", "gap to Bayes vs N along two bandwidth schedules, T = T* (C8, S1); Student-t priors along the first",
       claims=("C8", "H1"), files=("E1_recovery",))
def draw_recovery(store: ResultStore, quick: bool) -> tuple[Figure]:
    rows = {**stored_if_run(recovery.recovery_configs(quick), store), **stored_if_run(recovery.student_recovery_configs(quick), store)}
    if not rows:  # panels of what has run: C8's priors, H1's, or both ('attneb verify --only H1' runs H1's alone)
        names = [c["name"] for c in (*recovery.recovery_configs(quick).values(), *recovery.student_recovery_configs(quick).values())]
        raise LookupError(f"{store.path} holds no rows of {', '.join(names)}; run 'attneb verify' (with --quick for "
                          "the quick mode) to compute them")
    return (plot_recovery(recovery_panels(rows)),)


@study("E4", "excess risk of every estimator on the six reference priors and two Student-t priors vs N (C9)",
       claims=("C9", "H1"), files=("E4_estimators",))
def draw_table(store: ResultStore, quick: bool) -> tuple[Figure]:
    rows = {**labelled(stored(estimator_table.table_configs(quick), store), TABLE_PRIORS),
            **labelled(stored_if_run(estimator_table.student_table_configs(quick), store), STUDENT_T_PRIORS)}
    return (plot_estimator_table(rows),)


def plot_recovery(panels: dict[str, dict[str, list[dict]]]) -> Figure:
    """E1: gap to Bayes against N (log-log), one panel per prior, one colour per bandwidth schedule.

    Solid: two-stage at ``T = T*`` (in-sample gap); dashed: two-stage on fresh noisy queries; dotted:
    Stage 2 alone. A vertical line of the schedule's colour marks where ``N`` crosses the stability
    bound ``N_c`` (S1), if it does. ``panels`` maps a prior's label to its rows per schedule label
    (:func:`recovery_panels`). Returns the figure.
    """

    cols = min(3, len(panels))
    n_rows = (len(panels) + cols - 1) // cols
    fig = Figure(figsize=(5.0 * cols, 4.4 * n_rows))
    axes = fig.subplots(n_rows, cols, squeeze=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax, (prior, schedules) in zip(axes.flat, panels.items()):
        for (schedule, rows), colour in zip(schedules.items(), colour_cycle()):
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
        loglog(ax)
        ax.set_title(prior, fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("E1: recovery with T = sigma2/(2 h2) along the bandwidth schedules (mean, 95% CI over seeds)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_estimator_table(rows_by_prior: dict[str, list[dict]]) -> Figure:
    """E4: excess risk against N, one panel per prior (rows by prior label), one line per estimator; returns the figure."""
    labels = list(rows_by_prior)
    cols = 3
    n_rows = (len(labels) + cols - 1) // cols
    fig = Figure(figsize=(12, 3.5 * n_rows))
    axes = fig.subplots(n_rows, cols, squeeze=False)
    estimators = sorted({r["estimator"] for rows in rows_by_prior.values() for r in rows})
    colour = dict(zip(estimators, colour_cycle()))
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
    return fig
