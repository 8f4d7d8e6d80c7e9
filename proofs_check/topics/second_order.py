"""The mean field's second-order term against particles: G5, and its figure E8.

The ``mean_field`` derivation gives the token density's equation to second order in ``h2``,
``d rho/dt = -h2 rho'' - (h2^2/2)(rho (rho''/rho)')' + O(h2^3)``; the leading order, the backward heat
equation, moves the variance by ``-2 h2 t`` and leaves every higher cumulant where it was.
:mod:`attneb.theory.second_order` turns the second-order term into predicted changes of the variance and
fourth cumulant from a Gaussian-mixture start. Here 1-D tokens run the Stage-1 flow at a finite ``h2``
from three non-Gaussian starts (the noisy tokens of three priors), and the measured changes are held
against both PDEs.

The tokens are the start's quantiles (:func:`attneb.numerics.meanfield.mixture_quantile_tokens`), so a
run has no seed-to-seed spread and the design is deterministic: what separates measurement and
prediction is the PDE's neglected order, the layers' step and the flow's own finite ``N`` (sparse
tails), each stated in the criterion.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from attneb.numerics import flow, meanfield
from attneb.numerics.sweep import ResultStore
from attneb.proofs_check.engine.plotting import colour_cycle
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, claim, swap
from attneb.proofs_check.engine.replication import plot_study
from attneb.proofs_check.engine.studies import mode_name, store_missing, study
from attneb.proofs_check.topics.designs import SIGMA2
from attneb.theory import second_order

claim(
    "G5",
    "the mean field's second-order term, against particles",
    "At a finite bandwidth, the mean-field PDE to second order, d rho/dt = -h2 rho'' - (h2^2/2) "
    "(rho (rho''/rho)')' + O(h2^3) (the mean_field derivation's right side), predicts how the token density of "
    "a 1-D context moves: from Gaussian-mixture starts, the changes of the token variance and fourth cumulant over a depth T agree with "
    "that PDE within 30% of their departure from the backward heat equation alone (variance down by 2 h2 T, "
    "fourth cumulant fixed), which misses that departure.",
    ("N -> oo", "h2 T small against the components' variances", "d = 1"),
)

#: The starts: the noisy tokens (noise variance SIGMA2) of three priors, as Gaussian mixtures
#: (weights, means, variances): the prior's components with SIGMA2 added to each variance.
STARTS = {
    "clusters": ("two clusters at +-2, var 0.25", ([0.5, 0.5], [-2.0, 2.0], [0.25 + SIGMA2, 0.25 + SIGMA2])),
    "atoms": ("three atoms -1.5, 0, 1.5", ([1 / 3] * 3, [-1.5, 0.0, 1.5], [SIGMA2] * 3)),
    "scale": ("scale mixture: N(0, 0.25) and N(0, 2.25), equal weights", ([0.5, 0.5], [0.0, 0.0],
                                                                          [0.25 + SIGMA2, 2.25 + SIGMA2])),
}
#: Diffusive time s = h2 T of every run: the components' variances fall by 2 s = 0.2.
S_END = 0.1
#: Layer step of the Euler flow.
ETA = 0.02
#: Largest |q| accepted, q = (measured - PDE with its second-order term) / (measured - backward heat equation).
TOLERANCE = 0.3
#: Depths at which the trajectory is recorded, as fractions of T (the figure's points; the decision reads the last).
FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def design(quick: bool) -> dict:
    """Tokens per run and bandwidths: 2^17 tokens at h2 = 0.05 (quick); 2^20 at h2 = 0.05 and 0.025 (full)."""
    return {"n": 1 << 17, "h2": [0.05]} if quick else {"n": 1 << 20, "h2": [0.05, 0.025]}


def run_key(start: str, n: int, h2: float) -> str:
    return f"{start}/n={n}/h2={h2:g}/s={S_END:g}/eta={ETA:g}"


def run_trajectory(start: str, n: int, h2: float) -> dict:
    """One run: the start's quantile tokens through ``T = S_END / h2`` of Euler layers; cumulants at the recorded depths."""
    weights, means, variances = STARTS[start][1]
    tokens = meanfield.mixture_quantile_tokens(weights, means, variances, n)
    depth = S_END / h2
    result = flow.particle_flow(tokens, h2, depth, eta=ETA, record=[f * depth for f in FRACTIONS],
                                record_energy=False)
    kappas = [meanfield.token_cumulants(x) for x in result.trajectory]
    return {"start": start, "n": n, "h2": h2, "depths": result.depths.tolist(),
            "kappa2": [k[0] for k in kappas], "kappa4": [k[1] for k in kappas]}


def runs(ctx: Context) -> list[dict]:
    """The design's records, computed (in ``ctx.workers`` processes) where the store lacks them."""
    d = design(ctx.quick)
    wanted = [(start, d["n"], h2) for h2 in d["h2"] for start in STARTS]
    cache_key = ("G5", ctx.quick, str(ctx.store_path))
    if cache_key not in ctx.cache:
        experiment = mode_name("E8", "runs", ctx.quick)
        with ResultStore(ctx.store_path) as store:
            store_missing(store, experiment, wanted, run_trajectory, run_key, ctx.workers)
            records = store.records(experiment)
        ctx.cache[cache_key] = [records[run_key(*args)] for args in wanted]
    return ctx.cache[cache_key]


def predictions(record: dict) -> dict[str, np.ndarray]:
    """Changes of kappa2 and kappa4 from depth 0 at the record's depths, by each PDE (``order`` 1 and 2)."""
    weights, means, variances = STARTS[record["start"]][1]
    out = {}
    for order in (1, 2):
        kappa2, kappa4 = second_order.cumulants(weights, means, variances, record["h2"], record["depths"],
                                                order=order)
        out[f"kappa2-{order}"], out[f"kappa4-{order}"] = kappa2 - kappa2[0], kappa4 - kappa4[0]
    return out


def decide(records: list[dict]) -> list[dict]:
    """Per run and cumulant: measured change over depth T, both PDEs' changes, and q."""
    rows = []
    for record in records:
        predicted = predictions(record)
        for name in ("kappa2", "kappa4"):
            measured = record[name][-1] - record[name][0]
            second, leading = predicted[f"{name}-2"][-1], predicted[f"{name}-1"][-1]
            departure = measured - leading
            q = (measured - second) / departure if departure != 0 else np.inf
            rows.append({"start": record["start"], "h2": record["h2"], "n": record["n"], "cumulant": name,
                         "measured": measured, "second_order": second, "leading_order": leading, "q": float(q),
                         "passed": bool(abs(q) <= TOLERANCE)})
    return rows


def _scaled_second_order(factor: float):
    """``cumulants`` whose second-order part is ``factor`` times the derived one (0: the backward heat equation)."""
    def make(real):
        def cumulants(weights, means, variances, h2, depths, *, order=2):
            leading = real(weights, means, variances, h2, depths, order=1)
            if order == 1:
                return leading
            full = real(weights, means, variances, h2, depths, order=2)
            return tuple(a + factor * (b - a) for a, b in zip(leading, full))
        return cumulants
    return make


_TARGET = "attneb.theory.second_order:cumulants"


@check("G5", "E8: token variance and fourth cumulant from three non-Gaussian starts = the PDE to second order",
       criterion=f"1-D tokens at the quantiles of the noisy tokens (sigma2 = {SIGMA2}) of two clusters, three atoms "
       f"and a scale mixture (2^17 tokens at h2 = 0.05, quick; 2^20 at h2 = 0.05 and 0.025, full), Euler layers of "
       f"step {ETA} to depth T = {S_END} / h2; q = (measured - PDE with its second-order term) / (measured - "
       f"backward heat equation), for the change of kappa2 and of kappa4 over depth T. Passes when |q| <= "
       f"{TOLERANCE} for every start, bandwidth and cumulant (a zero departure fails, q = inf): the second-order "
       f"term accounts for the measured departure from the backward heat equation within {TOLERANCE:.0%} (the "
       f"backward heat equation's own q is 1 by construction; passing needs a measured departure of at least "
       f"1/1.3 of the predicted one). Left out by the prediction: the PDE's next order (relative size h2 / v, v the "
       f"smallest component variance at depth T: up to 0.17, the atoms at h2 = 0.05), the Euler step (about "
       f"eta / 2 = 1% of the second-order term for a Gaussian) and the flow's finite N (tokens in sparse tails); "
       f"the tolerance is 1.8 times the largest",
       replication="none",
       note="the design (starts, s = h2 T = 0.1, eta, N) was chosen after exploratory runs of the same kind, "
       "before this criterion was written and committed; those runs showed the fourth cumulant's departure "
       "shrinking from N = 2^17 to 2^20 at h2 = 0.025 (a finite-N effect of the tails), hence 2^20 in full mode. "
       "What it lets through (a referee's scratch runs, quick design): the second-order term times 0.8-0.9 (it "
       "accepts factors 0.79-1.09), the moment recursion with half its coefficient (only the kappa4 rows see the "
       "recursion and the fourth-derivative term), and any term odd in x (the three starts are symmetric). The "
       "scale mixture's kappa4 q is -0.15 at 2^17 tokens and -0.09 at 2^18 (h2 = 0.05): most of the quick value is "
       "finite N; halving the step moves q by up to 0.018 (the clusters' kappa4), more than a Gaussian's eta/2",
       alternatives=[
           alternative("backward heat equation", "the leading-order PDE: kappa2 - 2 h2 t, kappa4 fixed",
                       swap(_TARGET, _scaled_second_order(0.0))),
           alternative("second-order term x 1/2", "the h2^2 term with coefficient 1/4 instead of 1/2",
                       swap(_TARGET, _scaled_second_order(0.5))),
           alternative("second-order term x 2", "the h2^2 term with coefficient 1 instead of 1/2",
                       swap(_TARGET, _scaled_second_order(2.0))),
           alternative("second-order term with the opposite sign", "+(h2^2/2) (rho (rho''/rho)')'",
                       swap(_TARGET, _scaled_second_order(-1.0))),
       ],
       covers=("attneb.numerics.meanfield:token_cumulants",))
def second_order_against_particles(ctx: Context) -> Evidence:
    rows = decide(runs(ctx))
    figures = plot_study("E8", ctx)
    text = "; ".join(f"{r['start']} h2={r['h2']:g} {r['cumulant']}: measured {r['measured']:+.5f}, PDE2 "
                     f"{r['second_order']:+.5f}, heat {r['leading_order']:+.5f}, q {r['q']:+.3f}" for r in rows)
    worst = max(abs(r["q"]) for r in rows)
    return Evidence(
        passed=all(r["passed"] for r in rows),
        kind="numeric",
        summary=f"changes over depth T = {S_END}/h2 (N = {rows[0]['n']}): {text} (largest |q| {worst:.3f}; passes "
        f"when every |q| <= {TOLERANCE})",
        data={"rows": rows, "tolerance": TOLERANCE, "s": S_END, "eta": ETA},
        figures=figures,
    )


@study("E8", "the mean field's second-order term: token variance and fourth cumulant against depth (G5)",
       claims=("G5",), files=("E8_second_order",))
def draw_second_order(store: ResultStore, quick: bool) -> tuple[Figure]:
    records = list(store.records(mode_name("E8", "runs", quick)).values())
    if not records:
        raise LookupError(f"{store.path} holds no E8 runs of the {'quick' if quick else 'full'} mode; run "
                          "'attneb verify' to compute them")
    return (plot_second_order(records),)


def plot_second_order(records: list[dict]) -> Figure:
    """Departure of kappa2 and kappa4 from the backward heat equation against depth: measured and the second-order PDE.

    One column per start, one row per cumulant; a colour per bandwidth: points measured, line the PDE with its
    second-order term, the zero line the backward heat equation.
    """
    fig = Figure(figsize=(13, 7))
    axes = fig.subplots(2, len(STARTS), squeeze=False)
    colours = colour_cycle()
    colour = {h2: c for h2, c in zip(sorted({r["h2"] for r in records}, reverse=True), colours)}
    for col, start in enumerate(STARTS):
        for record in (r for r in records if r["start"] == start):
            predicted = predictions(record)
            depth = np.asarray(record["depths"]) * record["h2"]
            for row, name in enumerate(("kappa2", "kappa4")):
                ax = axes[row, col]
                measured = np.asarray(record[name]) - record[name][0] - predicted[f"{name}-1"]
                ax.plot(depth, measured, "o", color=colour[record["h2"]],
                        label=f"particles, h2 = {record['h2']:g}, N = {record['n']}")
                ax.plot(depth, predicted[f"{name}-2"] - predicted[f"{name}-1"], "-", color=colour[record["h2"]],
                        label=f"PDE to second order, h2 = {record['h2']:g}")
        for row, name in enumerate(("variance", "fourth cumulant")):
            ax = axes[row, col]
            ax.axhline(0.0, color="0.5", lw=0.8, label="backward heat equation")
            ax.set_xlabel("h2 t")
            if col == 0:
                ax.set_ylabel(f"{name}: change - heat equation's")
            ax.set_title(STARTS[start][0], fontsize=9)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("G5: the second-order term of the mean-field PDE against 1-D particles (quantile tokens)")
    fig.tight_layout()
    return fig
