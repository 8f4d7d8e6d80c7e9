"""The E3 figure, drawn from stored numbers (never recomputed here): finite-N fluctuations against S1.

Six panels: the onset runs' fluctuation power near ``k*`` against depth with the linear theory's
growth, their departure depth ``t_c`` against ``log N`` (the N_c law) with the fitted and predicted
slopes, the distribution of their clump wavenumbers against the predicted band and a flat
structure factor; and, from the runs of the first version, the token variance against the exact
mean-field layer map, where each ``N`` clumps, and Stage 2's gap to Bayes.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.plotting import GAP_LABEL, N_LABEL, colour_cycle, grouped_intervals, loglog
from attneb.proofs_check.engine.studies import study
from attneb.proofs_check.topics.stability import onset as e3


@study("E3", "finite-N fluctuations against linear stability: N_c law, clump scale, mean-field variance (S1)",
       claims=("S1",), files=("E3_stability",))
def draw_stability(store: ResultStore, quick: bool) -> tuple[Figure]:
    ns, seeds = e3.sizes(quick)
    runs = [r for r in e3.stored_runs(store, quick) if r["n"] in ns and r["seed"] < seeds]
    design, parsed = e3.onset_design(quick), e3.parsed_onset(store, quick)
    # the seeds of the gating (confirmatory) check where the store has them, else those of the superseded one
    confirm = range(e3.ONSET_CONFIRM_SEED_START, e3.ONSET_CONFIRM_SEED_START + e3.confirmatory_seeds(quick))
    onset = e3.filtered_onset(parsed, design, confirm) or e3.filtered_onset(parsed, design, None)
    if not runs and not onset:
        raise LookupError(f"{store.path} holds no E3 records ({'quick' if quick else 'full'} mode); "
                          "run 'attneb verify' to compute them")
    decision = e3.decide_onset(onset, e3.onset_design(quick)["n"]) if onset else None
    return (plot_stability(runs, e3.prediction(), onset, decision),)


def plot_stability(runs: list[dict], prediction: dict, onset: list[dict], decision: dict | None) -> Figure:
    """E3: onset of fluctuations (N_c law), clump scale, and the first version's variance and risk panels.

    Parameters
    ----------
    runs : list of dict
        Records of the first version (``h2 = 0.05``; may be empty).
    prediction : dict
        Its mean-field prediction (:func:`attneb.proofs_check.topics.stability.onset.prediction`).
    onset : list of dict
        Parsed onset runs of the seeds to show (:func:`attneb.proofs_check.topics.stability.onset.parsed_onset`).
    decision : dict or None
        :func:`attneb.proofs_check.topics.stability.onset.decide_onset` on ``onset``.

    Returns
    -------
    matplotlib.figure.Figure
        Six panels, 2 x 3.
    """
    fig = Figure(figsize=(16, 9))
    axes = fig.subplots(2, 3)
    colours = colour_cycle()
    h2s = sorted({r["h2"] for r in onset})
    colour = dict(zip(h2s, colours))

    ax = axes[0, 0]
    if onset:
        for h2 in h2s:
            k_star = e3.clump_band(h2)[0]
            for r in [r for r in onset if r["h2"] == h2 and r["n"] == max(x["n"] for x in onset)]:
                cols = e3.band_columns(r, k_star)
                power = np.exp(r["log_structure"][:, cols]).mean(axis=1)
                ax.semilogy(r["depths"], power / power[0], color=colour[h2], lw=0.8, alpha=0.6)
            ax.plot([], [], color=colour[h2], label=f"h2 = {h2:g}, N = {max(x['n'] for x in onset)}")
        t = np.linspace(0, 6, 50)
        ax.semilogy(t, np.exp(2 * e3.law_rate(h2s[0]) * t), "k:", lw=1.5, label="exp(2 lambda* t), lambda* = 2/e")
        ax.axhline(e3.ONSET_LEVEL * max(x["n"] for x in onset), color="grey", ls="--", lw=1, label="N/300 (t_c)")
    ax.set_xlabel("depth t")
    ax.set_ylabel("fluctuation power near k*, S(t)/S(0) (mean over |k/k* - 1| <= 0.2)")
    ax.set_title("growth of finite-N fluctuations (largest N)", fontsize=9)
    ax.legend(fontsize=7)

    ax = axes[0, 1]
    if decision is not None and not decision["missing"]:
        for h2 in h2s:
            mine = [r for r in onset if r["h2"] == h2]
            n = np.array([r["n"] for r in mine], dtype=float)
            tc = np.array([decision["depths"][(r["h2"], r["n"], r["seed"])] for r in mine])
            ax.plot(n, tc, "o", ms=3, alpha=0.5, color=colour[h2])
            fit = decision["per_h2"][h2]
            ns = np.array(sorted(set(n)))
            ax.plot(ns, fit.intercept + fit.slope.estimate * np.log(ns), "-", color=colour[h2],
                    label=f"h2 = {h2:g}: slope {fit.slope.estimate:.3f}")
            centre = np.mean(np.log(n)), np.mean(tc)
            ax.plot(ns, centre[1] + decision["predicted"] * (np.log(ns) - centre[0]), ":", color=colour[h2], lw=1)
        c = decision["coefficient"]
        ax.set_title(f"N_c law: pooled slope {c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}] vs linear theory "
                     f"{decision['predicted']:.3f} (dotted)\n(passes within [{decision['law_band'][0]:.3f}, "
                     f"{decision['law_band'][1]:.3f}]; rate 1/e would give {decision['excluded']:.3f})", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(N_LABEL)
    ax.set_ylabel("departure depth t_c (power grown by N/300)")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)

    ax = axes[0, 2]
    if decision is not None:
        scaled = [r["peak_k"] / e3.clump_band(r["h2"])[0] for r in onset if r["peak_k"] is not None]
        grid = np.asarray(onset[0]["k"]) / e3.clump_band(onset[0]["h2"])[0]
        edges = np.append(grid - (grid[1] - grid[0]) / 2, grid[-1] + (grid[1] - grid[0]) / 2)
        ax.hist(scaled, bins=edges[::3], color="C0", alpha=0.8, label=f"clump wavenumbers ({len(scaled)} runs)")
        ax.axhline(len(scaled) * 3 / len(grid), color="k", ls=":", lw=1.2, label="flat structure factor")
        for bound in decision["band"]:
            ax.axvline(bound, color="grey", ls="--", lw=1)
        ax.axvline(1.0, color="k", lw=1)
        for bound in e3.ONSET_SCALE_BAND:
            ax.axvline(bound, color="k", ls=":", lw=1)
        scale = decision["scale"]
        mean = "" if scale is None else (f"; mean {scale.estimate:.3f} [{scale.low:.3f}, {scale.high:.3f}] "
                                         f"(passes within the dotted [{e3.ONSET_SCALE_BAND[0]:g}, "
                                         f"{e3.ONSET_SCALE_BAND[1]:g}])")
        ax.set_title(f"clump scale: {decision['inside']} of {decision['runs']} in the band lambda >= 3/4 lambda* "
                     f"(dashed);\nflat S: {100 * decision['flat_fraction']:.0f}%, binomial p = {decision['p_value']:.2g}"
                     f"{mean}", fontsize=8)
        ax.legend(fontsize=7)
    ax.set_xlabel("clump wavenumber / k*")
    ax.set_ylabel("runs")

    ns = sorted({r["n"] for r in runs})
    colour_n = dict(zip(ns, colours * 3))
    ax = axes[1, 0]
    ax.plot(prediction["depths"], prediction["variances"], "k-", lw=2, label="mean field (exact layer map)")
    for r in runs:
        ax.plot(r["depths"], r["variances"], color=colour_n[r["n"]], lw=1, alpha=0.8,
                label=f"N = {r['n']}" if r["seed"] == 0 else None)
    ax.axhline(prediction["tau2"], color="grey", ls=":", lw=1)
    ax.axvline(prediction["T_star"], color="grey", ls=":", lw=1)
    ax.axvline(prediction["T_G"], color="grey", ls="--", lw=1)
    ax.set_xlabel("depth t")
    ax.set_ylabel("token variance (squared data units)")
    ax.set_title("variance (h2 = 0.05): dotted tau2 and T*, dashed T_G", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[1, 1]
    for n in ns:
        depth = [r["clump_depth"] for r in runs if r["n"] == n and r["clump_depth"] is not None]
        ax.plot([n] * len(depth), depth, "o", color=colour_n[n])
    ax.axhline(prediction["T_star"], color="grey", ls=":", lw=1, label="T*")
    ax.axvline(prediction["N_c"], color="grey", ls="--", lw=1, label="N_c = exp(2 sigma2/(e h2))")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(N_LABEL)
    ax.set_ylabel("depth at which S reaches N/20 (clumps)")
    ax.set_title("first version (h2 = 0.05): where the tokens clump", fontsize=9)
    ax.legend(fontsize=7)

    ax = axes[1, 2]
    if runs:
        for key, style, label in (("gap_T_star", "-o", "at T*"), ("gap_T_G", "--s", "at T_G")):
            n, mean, half = grouped_intervals([{"n": r["n"], "gap": r[key]} for r in runs], "n", "gap")
            ax.errorbar(n, mean, yerr=half, fmt=style, capsize=3, ms=4, color="k", label=f"two-stage {label}")
        loglog(ax)
    ax.set_ylabel(GAP_LABEL, fontsize=8)
    ax.set_title("Stage 2's gap to Bayes (h2 = 0.05)", fontsize=9)
    ax.legend(fontsize=8)
    fig.suptitle("E3: finite-N Stage 1 against linear stability (Gaussian prior tau2 = 1, sigma2 = 0.5)", fontsize=11)
    fig.tight_layout()
    return fig
