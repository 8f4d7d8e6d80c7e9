r"""S1 in d = 1, 2, 3: successors of 'E3 in d = 1, 2, 3' (:func:`attneb.proofs_check.topics.stability.dimension.threshold_in_dimension`).

Two checks, registered after a referee found that the first one passes near misses, never decides
on the Laplace form ``attneb.theory.stability.fluctuation_threshold`` (N_C_DIM), runs 3-D below the
threshold in quick mode and changed its design after runs of its own seeds:

* **Laplace form against the fluctuation integral** (deterministic). With :math:`u = \sqrt{h_2}|k|`,
  :math:`M = \sigma^2/h_2 = 2T^*` and the rate :math:`\lambda = g(u) = u^2 e^{-u^2/2}`,
  :math:`I_d(T^*) = S_d h_2^{-d/2}\int u^{d-1}e^{-u^2} e^{M g(u)}\,du`; Laplace's method about the
  shell :math:`u^* = \sqrt 2` gives N_C_DIM times :math:`1 + c_1(d)/M + O(M^{-2})` with
  (:math:`f = u^{d-1}e^{-u^2}`, derivatives at :math:`u^*`)

  .. math:: c_1 = -\frac{f''}{2 f g''} + \frac{f' g'''}{2 f g''^2} + \frac{g''''}{8 g''^2}
            - \frac{5 g'''^2}{24 g''^3},

  :math:`2e/3,\ 11e/48,\ -e/12` for ``d = 1, 2, 3`` (:func:`laplace_correction`, sympy).
* **Confirmatory threshold runs** on fresh seeds, every ``N >= 2 N_c(d)``, with a band on
  measured / linear theory set from the first check's runs (its pilot) and a test that
  ``N eps^2(T*)`` does not depend on ``N``. The first of them (seeds from 3000) is superseded: its
  slope test had size 1 (8 seeds on a factor 2 of N). Its successor (seeds from 4000) sized its
  ladder (a factor 8 of N), seeds and slope band on the first one's runs (seeds 3000-3023).
"""

from __future__ import annotations

import hashlib
import math
from functools import cache, lru_cache

import numpy as np
import sympy as sp
from scipy import integrate, special

from attneb.numerics import binned, flow, kernels, stats
from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Gaussian
from attneb.numerics.sweep import ResultStore, canonical_json
from attneb.numerics.validation import check_positive, check_positive_int
from attneb.proofs_check.engine.registry import Context, Evidence, alternative, check, swap
from attneb.proofs_check.engine.studies import mode_name, store_missing
from attneb.proofs_check.topics.stability.onset import ETA, SIGMA2, TAU2, one_over_e_rate
from attneb.theory import depth_noise, stability

#: Bandwidth of the dimension runs (sigma2 / h2 = 5: T* = 2.5, 50 layers of ETA).
DIM_H2 = 0.1
#: Layers between samples of the fluctuation.
DIM_EVERY = 5
#: Probes: standard normal points with norm <= DIM_PROBE_RADIUS (the bulk), scaled by the mean-field
#: standard deviation at each depth; DIM_PROBES of them, the same for every run of a dimension.
DIM_PROBES, DIM_PROBE_RADIUS = 2000, 1.5
#: A run has departed from mean field where the rms relative deviation of its kernel density estimate
#: from the mean field's (over the probes) reaches this: N_c(d) = the N at which that happens at T*.
DIM_LEVEL = 0.2


def dimension_probes(d: int) -> np.ndarray:
    """The probes of dimension ``d`` in standard units (a fixed draw, the same for every run)."""
    rng = np.random.default_rng([d, DIM_PROBES])
    points = np.empty((0, d))
    while len(points) < DIM_PROBES:
        z = rng.standard_normal((2 * DIM_PROBES, d))
        points = np.concatenate([points, z[np.linalg.norm(z, axis=1) <= DIM_PROBE_RADIUS]])
    return points[:DIM_PROBES]


def _dimension_layers() -> int:
    return int(round(float(depth_noise.leading_horizon(SIGMA2, DIM_H2)) / ETA))


def _log_gaussian(points: np.ndarray, variance: float) -> np.ndarray:
    d = points.shape[1]
    return -0.5 * (points**2).sum(axis=1) / variance - 0.5 * d * np.log(2 * np.pi * variance)


def run_dimension(d: int, n: int, seed: int) -> dict:
    """One run: Gaussian prior N(0, TAU2 I_d), T* of Euler layers at DIM_H2; the squared relative fluctuation
    of the kernel density estimate against the exact mean field's, averaged over the probes, every DIM_EVERY layers."""
    _, tokens = draw_batch(Gaussian(np.zeros(d), TAU2), SIGMA2, n, seed)
    layers = _dimension_layers()
    variances = depth_noise.gaussian_variance_map(TAU2 + SIGMA2, DIM_H2, ETA, layers)
    unit = dimension_probes(d)
    depths, fluctuation = [], []
    for layer in range(0, layers + 1, DIM_EVERY):
        if layer:
            tokens = flow.particle_flow(tokens, DIM_H2, DIM_EVERY * ETA, eta=ETA, backend="auto")
        s = variances[layer]
        probes = np.sqrt(s) * unit
        ratio = np.exp(kernels.log_kde(probes, tokens, DIM_H2) - _log_gaussian(probes, s + DIM_H2))
        depths.append(layer * ETA)
        fluctuation.append(float(np.mean((ratio - 1) ** 2)))
    return {"d": d, "n": n, "seed": seed, "depths": depths, "fluctuation": fluctuation}


#: Wavenumbers of the fluctuation integral: u = sqrt(h2) |k| on [0, DIM_U_MAX] (exp(-u^2) < 1e-30 beyond),
#: DIM_U_POINTS of them (Simpson's rule; 801 points change I_d by < 1e-7 relative).
DIM_U_MAX, DIM_U_POINTS = 8.5, 201


@lru_cache(maxsize=16)
def _rates(h2: float, rate) -> np.ndarray:
    """``rate(k, h2)`` on the wavenumbers of the fluctuation integral (cached per rate function: swaps recompute)."""
    k = np.linspace(0.0, DIM_U_MAX, DIM_U_POINTS) / np.sqrt(h2)
    return np.array([float(rate(float(kk), h2)) for kk in k])


def fluctuation_integral(d: int, t: float, h2: float) -> float:
    r"""Linear theory's :math:`I_d(t) = \int e^{-h_2|k|^2} G(k, t)^2\, d^dk/(2\pi)^d`, :math:`G = (1 + \eta\lambda(k))^{t/\eta}`.

    A token density with Poisson fluctuations (structure factor 1) whose Fourier modes grow by ``G``
    (Euler layers of step ETA at the rate ``stability.growth_rate``, read at call time): the kernel
    density estimate at a point of density ``rho`` has relative variance
    :math:`\rho I_d(t) / (N (\rho * \varphi_{h_2})^2)`. Radial quadrature over the shell area
    :math:`2\pi^{d/2}/\Gamma(d/2)`.
    """
    k = np.linspace(0.0, DIM_U_MAX, DIM_U_POINTS) / np.sqrt(h2)
    rate = _rates(h2, stability.growth_rate)
    log_growth = (2 * t / ETA) * np.log1p(ETA * rate)
    shell = 2 * np.pi ** (d / 2) / special.gamma(d / 2) / (2 * np.pi) ** d
    return float(shell * integrate.simpson(k ** (d - 1) * np.exp(log_growth - h2 * k**2), x=k))


def predicted_fluctuation(d: int, n: int, depth: float) -> float:
    """Linear theory's mean over the probes of the squared relative fluctuation at ``depth`` (a multiple of ETA)."""
    layer = int(round(depth / ETA))
    s = depth_noise.gaussian_variance_map(TAU2 + SIGMA2, DIM_H2, ETA, layer)[-1]
    probes = np.sqrt(s) * dimension_probes(d)
    # rho * phi_h2^2 = rho_(s + h2/2) (4 pi h2)^(-d/2) for the Gaussian background: exact at depth 0, with the -1
    weight = np.exp(_log_gaussian(probes, s + DIM_H2 / 2) - 2 * _log_gaussian(probes, s + DIM_H2))
    return float((np.mean(weight) * fluctuation_integral(d, depth, DIM_H2) - 1) / n)


#: Seeds of the dimension runs start here (pilots, not used by the check: seeds 0-3 at N = 2048/8192, 4096/16384,
#: 8192/32768 in d = 1, 2, 3 sized DIM_FACTOR; seeds 100-105 at N = 1024-4096, 2048/4096, 2048/4096 measured the
#: scatter of single runs, 25-90% in 1-D, ~20% in 2-D, 7-25% in 3-D, which sized the ladders of N).
DIM_SEED_START = 2000
#: The measured N_c(d) must lie within this factor of the linear theory's. The first pilot measured 0.85 (d = 1), 0.71
#: (d = 2) and 0.77 (d = 3) of it (means over its runs; lower at the smaller N, nearer the nonlinear regime): the
#: theory linearises about a static uniform density, the Gaussian background contracts. The alternatives registered
#: below sit a factor 2.2 or more from the pilot in at least one dimension.
DIM_FACTOR = 2.0

DIMENSION_CRITERION = (
    "Dimension runs: Gaussian prior N(0, I_d), sigma2 = 0.5, h2 = 0.1, Euler layers eta = 0.05 to T* = 2.5, "
    "d = 1, 2, 3 (N in steps of sqrt 2: d = 1: 8 from 2048, d = 2: 5 from 8192, d = 3: 16384; quick: d = 1: 8 from "
    "1024, d = 2: 3 from 4096, d = 3: 8192), 8 seeds from 2000. Departure from mean field: eps(t)^2 = mean over 2000 fixed probes (standard "
    "normal points of norm <= 1.5, scaled by the mean-field standard deviation sqrt(s_t) of "
    "depth_noise.gaussian_variance_map) of (KDE_h2(p) / rho_(s_t + h2)(p) - 1)^2, the exact mean field's smoothed "
    "density in the denominator; a run has departed when eps >= 0.2, so N_c(d) = N eps^2(T*) / 0.2^2 in the "
    "regime where N eps^2 does not depend on N. Measured: per seed, the mean over the design's N of N eps^2(T*); "
    "95% t-interval over seeds, per d. Linear theory: N eps^2(T*) = mean over the probes of rho_(s_t + h2/2) / "
    "rho_(s_t + h2)^2 x I_d(T*) - 1, I_d(t) = int exp(-h2 |k|^2) (1 + eta lambda(k))^(2 t/eta) d^dk/(2 pi)^d with "
    "lambda = stability.growth_rate at call time (its mean over the design's N). Passes when, for each d, the "
    "interval lies within [prediction / 2, 2 x prediction] (N_c within a factor 2 of the linear theory), and the "
    "intervals increase with d (d = 2 above d = 1, d = 3 above d = 2)."
)


def dimension_design(quick: bool) -> dict:
    """Token counts per dimension and seeds of the dimension runs."""
    if quick:
        return {"n": {1: _ladder(1024, 8), 2: _ladder(4096, 3), 3: [8192]}, "seeds": 8}
    return {"n": {1: _ladder(2048, 8), 2: _ladder(8192, 5), 3: [16384]}, "seeds": 8}


def _ladder(start: int, count: int) -> list[int]:
    """``count`` token counts from ``start`` in steps of sqrt 2 (each N a fresh draw: pooled, they shrink the scatter)."""
    return [int(round(start * 2 ** (i / 2))) for i in range(count)]


def _dimension_key(d: int, n: int, seed: int) -> str:
    config = {"study": "E3-dimension", "d": d, "n": n, "seed": seed, "backend": "auto", "sigma2": SIGMA2, "tau2": TAU2,
              "h2": DIM_H2, "eta": ETA, "every": DIM_EVERY, "probes": DIM_PROBES, "radius": DIM_PROBE_RADIUS}
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def _dimension_runs(ctx: Context) -> tuple[list[dict], dict]:
    """The dimension runs this replicate decides on: computed where the store lacks them."""
    design = dimension_design(ctx.quick)
    experiment = mode_name("E3", "dimension", ctx.quick)
    pool = ctx.pool_seeds(design["seeds"], start=DIM_SEED_START)
    cases = [(d, n) for d, ns in design["n"].items() for n in ns]
    with ResultStore(ctx.store_path) as store:
        store_missing(store, experiment, [(d, n, seed) for seed in pool for d, n in cases], run_dimension,
                      _dimension_key, ctx.workers)
        records = store.records(experiment)
    seeds = set(ctx.subsample_seeds(design["seeds"], start=DIM_SEED_START))
    wanted = {_dimension_key(d, n, seed) for d, n in cases for seed in seeds}
    return [records[key] for key in sorted(wanted)], design


def fluctuation_coefficients(runs: list[dict]) -> dict[int, list[float]]:
    """Per dimension, per seed: the mean over its runs' N of N eps^2(T*), as measured."""
    by_seed = {}
    for r in runs:
        by_seed.setdefault((r["d"], r["seed"]), []).append(r["n"] * r["fluctuation"][-1])
    out = {}
    for (d, _), values in sorted(by_seed.items()):
        out.setdefault(d, []).append(float(np.mean(values)))
    return out


def decide_dimension(runs: list[dict], design: dict) -> dict:
    """The N_c(d) table and the decision, against the theory as it is at call time."""
    horizon = _dimension_layers() * ETA
    measured = fluctuation_coefficients(runs)
    rows, within, intervals = {}, {}, {}
    for d, ns in design["n"].items():
        predicted = float(np.mean([n * predicted_fluctuation(d, n, horizon) for n in ns]))
        interval = stats.mean_interval(measured[d]) if len(measured.get(d, [])) >= 2 else None
        intervals[d] = interval
        within[d] = interval is not None and predicted / DIM_FACTOR <= interval.low and interval.high <= DIM_FACTOR * predicted
        s = depth_noise.gaussian_variance_map(TAU2 + SIGMA2, DIM_H2, ETA, _dimension_layers())[-1]
        probes = np.sqrt(s) * dimension_probes(d)
        density = 1 / np.mean(np.exp(_log_gaussian(probes, s + DIM_H2 / 2) - 2 * _log_gaussian(probes, s + DIM_H2)))
        rows[d] = {
            "predicted": predicted / DIM_LEVEL**2,
            "measured": None if interval is None else [float(v / DIM_LEVEL**2)
                                                       for v in (interval.estimate, interval.low, interval.high)],
            "laplace": float(stability.fluctuation_threshold(d, SIGMA2, DIM_H2, density, DIM_LEVEL)),
            "per_mode": float(stability.token_scaling(SIGMA2, DIM_H2)),
            "coefficient_predicted": predicted, "coefficients_measured": measured.get(d, []),
        }
    ds = sorted(design["n"])
    increasing = all(intervals[a] is not None and intervals[b] is not None and intervals[b].low > intervals[a].high
                     for a, b in zip(ds, ds[1:]))
    checks = {**{f"d = {d}: N_c within a factor {DIM_FACTOR:g} of the linear theory": ok for d, ok in within.items()},
              "N_c increases with d": increasing}
    return {"rows": rows, "checks": checks, "passed": all(checks.values())}


def _dimension_table(rows: dict) -> str:
    lines = ["| d | per-mode law e^(2 sigma2/(e h2)) | linear theory N_c(d) | Laplace asymptotic | measured N_c(d) [95%] "
             "| measured / theory |", "|---|---|---|---|---|---|"]
    for d, row in rows.items():
        m = row["measured"]
        ratio = "n/a" if m is None else f"{m[0] / row['predicted']:.2f}"
        lines.append(f"| {d} | {row['per_mode']:.3g} | {row['predicted']:.3g} | {row['laplace']:.3g} | {_triple(m)} "
                     f"| {ratio} |")
    return "\n".join(lines)


def _triple(values) -> str:
    return "n/a" if values is None else f"{values[0]:.3g} [{values[1]:.3g}, {values[2]:.3g}]"


def _fastest_everywhere(real):
    """Every mode grows at the fastest rate: the h2^(-d/2) modes of the kernel's band all at lambda*."""
    return lambda k, h2: 2 / np.e


def _same_in_every_dimension(real):
    """N_c independent of d: every dimension predicted as d = 1."""
    return lambda d, n, depth: real(1, n, depth)


def _growth_times(factor):
    return lambda real: lambda k, h2: factor * real(k, h2)


#: The wrong theories of the dimension checks (this one and the threshold checks below).
DIMENSION_ALTERNATIVES = [
    alternative("N_c independent of d", "every dimension predicted as d = 1 (the per-mode law has no d)",
                swap(f"{__name__}:predicted_fluctuation", _same_in_every_dimension)),
    alternative("every mode at the fastest rate", "lambda(k) = lambda* = 2/e for every k: the h2^(-d/2) modes "
                "of the kernel's band all grow at the top rate",
                swap("attneb.theory.stability:growth_rate", _fastest_everywhere)),
    alternative("no growth", "lambda = 0: the fluctuations at T* are the sampling noise of depth 0",
                swap("attneb.theory.stability:growth_rate", lambda real: lambda k, h2: 0.0)),
    alternative("rate peaking at 1/e", "lambda(k) = h2 k^2 exp(-h2 k^2)",
                swap("attneb.theory.stability:growth_rate", one_over_e_rate)),
    alternative("rate x 0.5", "lambda(k) x 0.5", swap("attneb.theory.stability:growth_rate", _growth_times(0.5))),
    alternative("rate x 1.5", "lambda(k) x 1.5", swap("attneb.theory.stability:growth_rate", _growth_times(1.5))),
    alternative("rate x 0.85", "lambda(k) x 0.85 (a near miss)",
                swap("attneb.theory.stability:growth_rate", _growth_times(0.85))),
]


@check("S1", "E3 in d = 1, 2, 3: N_c(d) where kernel-scale density fluctuations reach 20% at T*, against the "
             "linear theory's sum over modes",
       criterion=DIMENSION_CRITERION,
       replication="subsample",
       gating=False,
       alternatives=[
           *DIMENSION_ALTERNATIVES,
       ],
       note="superseded by 'E3 in d = 1, 2, 3 (confirmatory, seeds from 4000)' (issue 24): blind to its own registered "
            "near miss 'rate x 0.85' (power about 0, point (2) below), so it does not gate S1. "
            "Criterion fixed after pilots (seeds 0-3 and 100-105, not used by the check): measured / linear theory 0.85 "
            "(d = 1), 0.71 (d = 2), 0.77 (d = 3), means over its runs; the linear theory linearises about a static uniform "
            "density, the Gaussian background here contracts (as in the onset check's +2%). The per-mode law "
            "(structure factor near k*) is the same in every d; the kernel-scale fluctuation sums the modes of the "
            "shell |k| ~ k*, whose count grows like h2^(-(d-1)/2) (theory.stability: log N_c(d) = 2 sigma2/(e h2) + "
            "((d-1)/2) log(1/h2) + O(1), the same leading order in every d); one h2 here, so the check tests the "
            "prefactor at h2 = 0.1, not the exponent of h2. Measured on its seeds (2000-2007): measured / linear theory "
            "0.83, 0.78, 0.70 (quick; 3-D at N = 8192, nearer the nonlinear regime) and 0.92, 0.85, 0.81 (full) for "
            "d = 1, 2, 3; every registered alternative fails in both modes. Size not yet measured by a power run. Added "
            "on a referee's report: (1) provenance: the design of 6e4a61b (ladders of N) came after 41 runs of the "
            "check's own seeds (2000-2005) had finished under cf4b970's design; those runs pass cf4b970's criterion "
            "too (d = 3: 8534 [6229, 10840] against a lower limit of 6160), so the change did not turn a failure "
            "into a pass, but it was not made before any run of the check's seeds, as its commit message says; "
            "(2) near misses pass: the whole prediction x 0.6 or x 0.7, the rate x 0.8 to x 0.9 (x 0.9 fits better "
            "than the theory: 1.10, 1.06, 0.96), and a log(1/h2) coefficient of 0.3-0.4 in place of (d - 1)/2: the "
            "effective band is about [0.55, 1.25] x the theory, and the registered near miss 'rate x 0.85' passes "
            "(power about 0); (3) theory.stability.fluctuation_threshold (the Laplace form N_C_DIM) is reported, not "
            "decided on; (4) quick mode's 3-D runs sit at N = 8192, about 0.66 N_c(3), below the threshold, and "
            "nothing checks that N eps^2 does not depend on N. A deterministic check of N_C_DIM against the "
            "fluctuation integral in d = 1, 2, 3, a design with every N >= 2 N_c(d) and fresh seeds are left for a "
            "later session; they are the two threshold checks of proofs_check/topics/stability/dimension.py (its seeds 2000-2007 their pilot)")
def threshold_in_dimension(ctx: Context) -> Evidence:
    runs, design = _dimension_runs(ctx)
    d = decide_dimension(runs, design)
    failed = [name for name, ok in d["checks"].items() if not ok]
    table = ", ".join(f"d = {dim}: measured {_triple(row['measured'])} vs linear theory {row['predicted']:.3g} "
                      f"(Laplace {row['laplace']:.3g})" for dim, row in d["rows"].items())
    summary = (f"N_c(d) at eps(T*) = {DIM_LEVEL:g} (h2 = {DIM_H2:g}, sigma2/h2 = {SIGMA2 / DIM_H2:g}; per-mode law "
               f"{next(iter(d['rows'].values()))['per_mode']:.3g} in every d): {table}; passes within a factor "
               f"{DIM_FACTOR:g} of the linear theory per d and increasing in d" + (f". FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(passed=d["passed"], kind="interval", summary=summary,
                    data={"rows": {str(k): v for k, v in d["rows"].items()}, "checks": d["checks"],
                          "level": DIM_LEVEL, "factor": DIM_FACTOR},
                    markdown=_dimension_table(d["rows"]))


#: sigma2 / h2 of the sequence h2 -> 0 (sigma2 = SIGMA2 fixed).
LAPLACE_M = (40, 80, 160, 320)
#: |M (R - 1) - c1| must stay within LAPLACE_REMAINDER / M: the O(1/M^2) term, |c2| <= 2.03 (module note).
LAPLACE_REMAINDER = 5.0
#: Gauss-Legendre nodes on u* +- LAPLACE_WIDTHS peak widths sqrt(e / (4 M)) (beyond: < e^-70 of the peak; 64 nodes
#: agree with mpmath's adaptive quadrature to 2e-14 at M = 40 and 320, as do 200).
LAPLACE_NODES, LAPLACE_WIDTHS = 64, 12.0

LAPLACE_CRITERION = (
    "Deterministic. For d = 1, 2, 3 and M = sigma2/h2 in {40, 80, 160, 320} (sigma2 = 0.5): R_d(M) = I_d(T*) / "
    "N_c(d), N_c(d) = theory.stability.fluctuation_threshold(d, sigma2, h2, rho0 = 1, level = 1) (the Laplace form "
    "N_C_DIM) and I_d(T*) = int exp(-h2 |k|^2 + 2 T* lambda(k)) d^dk/(2 pi)^d, T* = sigma2/(2 h2), the fluctuation "
    "integral in continuous depth with lambda = stability.growth_rate at call time (Gauss-Legendre, 64 nodes in "
    "sqrt(h2)|k| on the shell +- 12 peak widths). Laplace's method with its first correction (sympy, from the "
    "theory's rate) gives R_d = 1 + c1(d)/M + O(1/M^2), c1 = 2e/3, 11e/48, -e/12; its order-2 expansion gives "
    "c2 = 79e^2/288, e^2/4608, -11e^2/288 (|c2| <= 2.03). Passes when |M (R_d(M) - 1) - c1(d)| <= 5/M for every d "
    "and M (the error of N_C_DIM is c1 h2/sigma2 to O(h2^2), as derived)."
)


def _shell_variable():
    return sp.Symbol("u", positive=True)


@cache
def laplace_correction(d: int) -> float:
    r"""First correction :math:`c_1(d)` of Laplace's method for the fluctuation integral (module docstring).

    :math:`I_d(T^*) = N_{c}(d)\,[1 + c_1(d)\,h_2/\sigma^2 + O(h_2^2)]` at :math:`\rho_0 = \epsilon_c = 1`;
    derived from the theory's rate :math:`\lambda(k)` at :math:`k = u/\sqrt{h_2}` (sympy derivatives at
    :math:`u^* = \sqrt{h_2} k^*`).

    Parameters
    ----------
    d : int
        Dimension, >= 1.
    """
    d = check_positive_int(d, "d")
    theory = stability.derivation()
    u = _shell_variable()
    g = sp.simplify(theory.result_of(stability.LAMBDA).subs(stability.k, u / sp.sqrt(stability.h2)))
    u_star = sp.simplify(sp.sqrt(stability.h2) * theory.result_of(stability.K_STAR))
    f = u ** (d - 1) * sp.exp(-u**2)
    f0, f1, f2 = (sp.diff(f, u, j).subs(u, u_star) for j in range(3))
    g2, g3, g4 = (sp.diff(g, u, j).subs(u, u_star) for j in range(2, 5))
    c1 = -f2 / (2 * f0 * g2) + f1 * g3 / (2 * f0 * g2**2) + g4 / (8 * g2**2) - 5 * g3**2 / (24 * g2**3)
    return float(sp.simplify(c1))


@lru_cache(maxsize=16)
def _shell_nodes(t: float, h2: float, rate) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``u``, weights and exponents ``2 t rate(u / sqrt(h2), h2) - u^2`` of the shell's quadrature (cached per rate)."""
    width = np.sqrt(np.e / (8 * t))
    low, high = max(0.0, np.sqrt(2) - LAPLACE_WIDTHS * width), np.sqrt(2) + LAPLACE_WIDTHS * width
    nodes, weights = np.polynomial.legendre.leggauss(LAPLACE_NODES)
    u = low + (high - low) * (nodes + 1) / 2
    exponent = np.array([2 * t * float(rate(float(x) / np.sqrt(h2), h2)) for x in u]) - u**2
    return u, weights * (high - low) / 2, exponent


def log_fluctuation_integral(d: int, t: float, h2: float) -> float:
    r""":math:`\log I_d(t)`, :math:`I_d(t) = \int e^{-h_2|k|^2 + 2t\lambda(k)}\,d^dk/(2\pi)^d`, continuous depth, :math:`\lambda` = ``stability.growth_rate``.

    Gauss-Legendre with LAPLACE_NODES nodes in :math:`u = \sqrt{h_2}|k|` on the shell
    :math:`u^* = \sqrt 2` +- LAPLACE_WIDTHS widths :math:`(2t \cdot 4/e)^{-1/2}` (the rate is
    :math:`u^2 e^{-u^2/2}` in ``u``, :math:`|g''(u^*)| = 4/e`; clipped at 0), the growth factored
    out at its largest node: finite wherever the exponents are (a rate without damping makes
    :math:`I_d` itself overflow). Against mpmath's adaptive quadrature: 1e-14 relative.

    Parameters
    ----------
    d : int
        Dimension, >= 1.
    t : float
        Depth, > 0 (the shell's width scales as t^(-1/2)).
    h2 : float
        Bandwidth, > 0.
    """
    d, t, h2 = check_positive_int(d, "d"), check_positive(t, "t"), check_positive(h2, "h2")
    u, weights, exponent = _shell_nodes(t, h2, stability.growth_rate)
    top = exponent.max()
    shell = 2 * np.pi ** (d / 2) / special.gamma(d / 2) / (2 * np.pi) ** d
    return float(np.log(shell) - d / 2 * np.log(h2) + top + np.log(np.sum(weights * u ** (d - 1) * np.exp(exponent - top))))


def continuous_fluctuation_integral(d: int, t: float, h2: float) -> float:
    r""":math:`I_d(t) = \exp` :func:`log_fluctuation_integral` (same parameters); OverflowError beyond the float range."""
    return math.exp(log_fluctuation_integral(d, t, h2))


#: log of the largest float: a ratio beyond it is recorded as inf (the remainder test then fails).
LOG_FLOAT_MAX = math.log(np.finfo(float).max)


def laplace_ratios() -> dict[int, list[dict]]:
    """Per d, per M: R = I_d(T*) / N_C_DIM and the remainder M (R - 1) - c1(d) (theory at call time)."""
    out = {}
    for d in (1, 2, 3):
        c1 = laplace_correction(d)
        rows = []
        for m in LAPLACE_M:
            h2 = SIGMA2 / m
            horizon = SIGMA2 / (2 * h2)
            log_ratio = log_fluctuation_integral(d, horizon, h2) - math.log(
                float(stability.fluctuation_threshold(d, SIGMA2, h2, 1.0, 1.0)))
            ratio = math.exp(log_ratio) if log_ratio < LOG_FLOAT_MAX else math.inf
            rows.append({"M": m, "h2": h2, "ratio": ratio, "remainder": m * (ratio - 1) - c1,
                         "allowed": LAPLACE_REMAINDER / m})
        out[d] = rows
    return out


def _threshold_times(factor_of):
    """N_C_DIM multiplied by ``factor_of(sigma2, h2)``."""
    return lambda real: lambda d, s2, h2, rho0, level: real(d, s2, h2, rho0, level) * factor_of(s2, h2)


@check("S1", "N_C_DIM (Laplace form of N_c(d)) against the fluctuation integral as h2 -> 0 in d = 1, 2, 3",
       criterion=LAPLACE_CRITERION,
       covers=["attneb.theory.stability:fluctuation_threshold"],
       alternatives=[
           alternative("exponent h2^(-d/2)", "N_c(d) with h2^(-d/2) in place of h2^(-(d-1)/2): every mode inside "
                       "the shell counted", swap("attneb.theory.stability:fluctuation_threshold",
                                                 _threshold_times(lambda s2, h2: h2**-0.5))),
           alternative("prefactor x sqrt 2", "the shell's Gaussian width sqrt(2 pi/(t |lambda''|)) in place of "
                       "sqrt(pi/(t |lambda''|))", swap("attneb.theory.stability:fluctuation_threshold",
                                                       _threshold_times(lambda s2, h2: np.sqrt(2)))),
           alternative("rate 1/e in the exponent", "N_c(d) with exp(sigma2/(e h2)) in place of exp(2 sigma2/(e h2))",
                       swap("attneb.theory.stability:fluctuation_threshold",
                            _threshold_times(lambda s2, h2: np.exp(-s2 / (np.e * h2))))),
           alternative("integral's rate x 0.85", "lambda(k) x 0.85 in the fluctuation integral (N_C_DIM unchanged)",
                       swap("attneb.theory.stability:growth_rate", _growth_times(0.85))),
       ],
       note="c1 and the order-2 coefficients c2 were derived (sympy series of the Laplace integral in 1/sqrt(M), "
            "tests/proofs_check/topics/stability/test_dimension.py) before any ratio was computed; the bound 5/M on the "
            "remainder allows |c2| <= 2.03 plus higher orders. N_C_DIM's leading order and its h2^(-(d-1)/2) are "
            "decided here, on the continuous-depth integral; the Euler layers of the runs (eta = 0.05) are in the "
            "particle check's linear theory, not in N_C_DIM")
def laplace_threshold(ctx: Context) -> Evidence:
    rows = laplace_ratios()
    checks = {f"d = {d}, M = {r['M']}: |M (R - 1) - c1| <= {LAPLACE_REMAINDER:g}/M": abs(r["remainder"]) <= r["allowed"]
              for d, rs in rows.items() for r in rs}
    failed = [name for name, ok in checks.items() if not ok]
    text = "; ".join(f"d = {d} (c1 = {laplace_correction(d):.4f}): " + ", ".join(
        f"M={r['M']}: R-1 = {r['ratio'] - 1:.3e}, M(R-1)-c1 = {r['remainder']:+.2e}" for r in rs) for d, rs in rows.items())
    summary = (f"I_d(T*) / N_C_DIM at sigma2 = {SIGMA2:g}, h2 = sigma2/M: {text}; passes within {LAPLACE_REMAINDER:g}/M"
               + (f". FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(passed=not failed, kind="numeric", summary=summary,
                    data={"rows": {str(d): rs for d, rs in rows.items()},
                          "c1": {str(d): laplace_correction(d) for d in rows}, "checks": checks})


#: (sigma2, rho0, level) at which the arguments check evaluates N_C_DIM (M = ARGUMENTS_M): away from the Laplace
#: check's (0.5, 1, 1), so that each argument's power in N_C_DIM is seen.
ARGUMENTS_GRID = ((0.25, 0.5, 0.1), (1.0, 2.0, 0.2), (2.0, 10.0, 0.05))
ARGUMENTS_M = 80

ARGUMENTS_CRITERION = (
    "Deterministic (added on a referee's report that the Laplace check evaluates N_C_DIM only at sigma2 = 0.5, rho0 "
    "= level = 1). For d = 1, 2, 3 and (sigma2, rho0, level) in {(0.25, 0.5, 0.1), (1, 2, 0.2), (2, 10, 0.05)}, h2 = "
    "sigma2/80: R = I_d(T*) / (rho0 level^2 N_c(d)), N_c(d) = theory.stability.fluctuation_threshold(d, sigma2, h2, "
    "rho0, level), I_d as in the Laplace check (the derivation's step: N_c is where the relative fluctuation "
    "I_d(T*)/(N rho0) reaches level^2). Passes when |M (R - 1) - c1(d)| <= 5/M at M = 80 in every case, the Laplace "
    "check's bound."
)


def argument_ratios() -> dict[int, list[dict]]:
    """Per d, per (sigma2, rho0, level) of ARGUMENTS_GRID: R = I_d(T*) / (rho0 level^2 N_C_DIM) and its remainder."""
    out = {}
    for d in (1, 2, 3):
        c1 = laplace_correction(d)
        rows = []
        for sigma2, rho0, level in ARGUMENTS_GRID:
            h2 = sigma2 / ARGUMENTS_M
            log_ratio = log_fluctuation_integral(d, sigma2 / (2 * h2), h2) - math.log(
                rho0 * level**2 * float(stability.fluctuation_threshold(d, sigma2, h2, rho0, level)))
            ratio = math.exp(log_ratio) if log_ratio < LOG_FLOAT_MAX else math.inf
            rows.append({"sigma2": sigma2, "rho0": rho0, "level": level, "ratio": ratio,
                         "remainder": ARGUMENTS_M * (ratio - 1) - c1})
        out[d] = rows
    return out


def _threshold_with(make):
    """N_C_DIM with its arguments or its value changed by ``make(real, d, sigma2, h2, rho0, level)``."""
    return lambda real: lambda d, s2, h2, rho0, level: make(real, d, s2, h2, rho0, level)


@check("S1", "N_C_DIM's arguments: the Laplace form against the fluctuation integral at other sigma2, rho0 and level",
       criterion=ARGUMENTS_CRITERION,
       covers=["attneb.theory.stability:fluctuation_threshold"],
       alternatives=[
           alternative("level^-1", "N_c proportional to 1/level instead of 1/level^2",
                       swap("attneb.theory.stability:fluctuation_threshold",
                            _threshold_with(lambda real, d, s2, h2, rho0, lv: real(d, s2, h2, rho0, lv) * lv))),
           alternative("rho0^-2", "N_c proportional to 1/rho0^2 instead of 1/rho0",
                       swap("attneb.theory.stability:fluctuation_threshold",
                            _threshold_with(lambda real, d, s2, h2, rho0, lv: real(d, s2, h2, rho0, lv) / rho0))),
           alternative("density ignored", "N_c free of rho0",
                       swap("attneb.theory.stability:fluctuation_threshold",
                            _threshold_with(lambda real, d, s2, h2, rho0, lv: real(d, s2, h2, 1.0, lv)))),
           alternative("sigma2 for 0.5", "N_c evaluated at the Laplace check's sigma2 = 0.5 whatever sigma2 (h2 kept)",
                       swap("attneb.theory.stability:fluctuation_threshold",
                            _threshold_with(lambda real, d, s2, h2, rho0, lv: real(d, 0.5, h2, rho0, lv)))),
       ],
       note="criterion fixed and committed before the check was first run. What it adds to the Laplace check: each "
            "argument's power in N_C_DIM (the referee found that N_c ~ 1/level or ~ 1/rho0^2 passes the Laplace "
            "check, which sets rho0 = level = 1). What neither check can see: an error in the growth rate that the "
            "derivation, the integrand and c1 share (all three come from the theory's lambda: a rate x 0.7 re-derived "
            "consistently passes both); the rate is checked on its own by the lattice mode-growth check of the mean "
            "field (proofs_check/topics/stability/linear.py) and the form of the integrand by the threshold runs")
def laplace_arguments(ctx: Context) -> Evidence:
    rows = argument_ratios()
    allowed = LAPLACE_REMAINDER / ARGUMENTS_M
    checks = {f"d = {d}, sigma2 = {r['sigma2']:g}, rho0 = {r['rho0']:g}, level = {r['level']:g}": abs(r["remainder"])
              <= allowed for d, rs in rows.items() for r in rs}
    failed = [name for name, ok in checks.items() if not ok]
    text = "; ".join(f"d = {d}: " + ", ".join(f"({r['sigma2']:g}, {r['rho0']:g}, {r['level']:g}): M(R-1)-c1 = "
                                             f"{r['remainder']:+.2e}" for r in rs) for d, rs in rows.items())
    summary = (f"I_d(T*) / (rho0 level^2 N_C_DIM) at M = {ARGUMENTS_M}, (sigma2, rho0, level): {text}; passes within "
               f"{LAPLACE_REMAINDER:g}/M = {allowed:g}" + (f". FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(passed=not failed, kind="numeric", summary=summary,
                    data={"rows": {str(d): rs for d, rs in rows.items()}, "checks": checks})


# --------------------------------------------------------------------------------------------
# Threshold runs: every N >= 2 N_c(d), fresh seeds
# --------------------------------------------------------------------------------------------

#: Binned path's tolerance (velocities within 1e-6 of the data's scale: far below the fluctuations measured).
THRESHOLD_TOL = 1e-6
#: (a): the interval of measured / linear theory must lie in this band, per d. Pilot (seeds 2000-2007, full
#: design of the first check, every N >= 2 N_c there except 3-D): 0.92 [0.63, 1.20] (d = 1, 64 runs), 0.85
#: [0.75, 0.96] (d = 2, 40 runs); 3-D at N = 16384 (1.33 N_c): 0.81 [0.70, 0.92], and seeds 0-3 at N = 32768
#: (2.7 N_c): 0.83, 0.80, 0.76, 0.77. The linear theory grows modes about a static uniform density; the Gaussian
#: background contracts, and the measured ratio falls with d. d = 1's runs scatter by about 60% (few modes
#: in the probe window), so its band is wide; d = 2 and 3 carry the near misses: rate x 0.85 predicts 0.64,
#: 0.62 x the theory there (ratios 1.3), prediction x 0.7 gives 1.2, 1.1; rate x 0.9: 1.15, 1.10 (not registered).
#: Both threshold checks use it.
RATIO_BAND = {1: (0.5, 1.5), 2: (0.6, 1.1), 3: (0.6, 1.1)}

#: Seeds of the first confirmatory check (seeds 2000-2007, the first check's, were its pilot).
THRESHOLD_SEED_START = 3000
#: (b) of the first confirmatory check: in d = 2 the interval of the slope of log(N eps^2(T*)) on log N must lie
#: within +-SLOPE_BAND. Pilot (5 N from 8192 to 32768, 8 seeds): -0.017 [-0.089, 0.054]; with 3 N (quick) the
#: interval is about +-0.16.
SLOPE_BAND = 0.25

THRESHOLD_CRITERION = (
    "Threshold runs (successor of 'E3 in d = 1, 2, 3' on fresh seeds from 3000; that check's runs, seeds 2000-2007, "
    "were this criterion's pilot): Gaussian prior N(0, I_d), sigma2 = 0.5, h2 = 0.1, Euler layers eta = 0.05 to T* "
    "= 2.5 in one particle_flow (backend auto, binned tolerance 1e-6); eps(T*)^2 on that check's 2000 probes against "
    "the exact mean field. Every N >= 2 N_c(d) of the linear theory (N_c = 624, 3362, 12319): d = 1: 8 N from 1448 "
    "in steps of sqrt 2; d = 2: 5 N from 8192 (quick: 3); d = 3: N = 25600 (full mode only: quick decides d = 1 "
    "and 2); 8 seeds. Per seed and d: ratio = mean over the design's N of N eps^2(T*) / the linear theory's N "
    "eps^2(T*) (that check's: probe mean of rho_(s+h2/2)/rho_(s+h2)^2 x I_d(T*) - 1, Euler growth factor, "
    "stability.growth_rate at call time); slope = least-squares slope of log(N eps^2(T*)) on log N. Passes when "
    "(a) per d the 95% t-interval over seeds of the ratio lies within [0.6, 1.1] for d = 2, 3 and within [0.5, 1.5] "
    "for d = 1 (its runs scatter by about 60%); (b) N-independence: for d = 2 the 95% t-interval over seeds of the "
    "slope lies within [-0.25, 0.25] (N eps^2 changes by less than 19% per doubling of N; the slopes of d = 1 and 3 "
    "are reported, not decided on: too scattered, one N); (c) N_c(d) = ratio x linear theory / 0.2^2: the intervals "
    "increase with d."
)


def threshold_design(quick: bool) -> dict:
    """The first confirmatory check's token counts per d (every N >= 2 N_c(d)), seeds per d and slope bands per d."""
    ns = {1: _ladder(1448, 8), 2: _ladder(8192, 3 if quick else 5)}
    if not quick:
        ns[3] = [25600]
    return {"n": ns, "seeds": {d: 8 for d in ns}, "slope": {2: SLOPE_BAND}}


#: Seeds of the successor (the first confirmatory check's power pool, seeds 3000-3023, was its pilot).
SUCCESSOR_SEED_START = 4000
#: (b) of the successor: in d = 2 the interval of the slope must lie within +-SUCCESSOR_SLOPE_BAND (both modes).
#: Pilot (seeds 3000-3023, 2-D at N = 8192, 11585, 16384): log(N eps^2 / theory) scatters by s = 0.33 per run
#: (0.25, 0.30, 0.42 at the three N), independently across the N of one seed (within-seed residuals 0.34), so a
#: seed's slope scatters by s / sqrt(Sxx), Sxx = sum of (log N - mean)^2: 0.24 on the first check's quick ladder
#: (0.67 predicted, 0.76 measured), 2.16 on quick's N = 8192 and 65536 (0.22), 2.40 on full's 8192-65536 (0.21).
#: With 20 seeds the t-interval's half-width is about 0.105 and its mean's error 0.05, so the truth fails when the
#: mean slope is off by about 0.2 (4 errors). On runs resampled from the pilot (1000 replicates of the design) the
#: slope alone fails the truth in 1 (quick) and 0 (full) replicates, in 5 and 3 with normal 2-D runs of scatter 0.4;
#: slope 0.5 (N eps^2 ~ N^(1/2)) is rejected in every replicate.
SUCCESSOR_SLOPE_BAND = 0.3

SUCCESSOR_CRITERION = (
    "Threshold runs on fresh seeds from 4000 (successor of the first confirmatory S1 check, seeds from 3000, whose "
    "slope test had size 1: 8 seeds on a factor 2 of N); pilot: that check's 24-seed power pool (seeds 3000-3023, "
    "its quick design) and the runs of 'E3 in d = 1, 2, 3' (seeds 2000-2007) for d = 3, used as stated at "
    "SUCCESSOR_SLOPE_BAND. Runs as in the first confirmatory check: Gaussian prior N(0, I_d), sigma2 = 0.5, h2 = 0.1, "
    "Euler layers eta = 0.05 to T* = 2.5 in one particle_flow (backend auto, binned tolerance 1e-6); eps(T*)^2 on "
    "2000 fixed probes against the exact mean field; the linear theory's N eps^2(T*) with stability.growth_rate at "
    "call time. Every N >= 2 N_c(d) (N_c = 624, 3362, 12319). d = 1: N = 2048, 4096, 8192, 16384, 20 seeds; d = 2: "
    "N = 8192, 16384, 32768, 65536 (quick: 8192 and 65536), 20 seeds; d = 3 (full mode only): N = 25600, 8 seeds. "
    "Per seed and d: ratio = mean over the design's N of N eps^2(T*) / the mean of the linear theory's; slope = "
    "least-squares slope of log(N eps^2(T*)) on log N (a seed with some N eps^2 <= 0 is left out of the slopes). "
    "Passes when (a) per d the 95% t-interval over seeds of the "
    "ratio lies within [0.6, 1.1] (d = 2, 3) and [0.5, 1.5] (d = 1); (b) in d = 2, in both modes, the 95% "
    "t-interval over seeds of the slope lies within [-0.3, 0.3] (N eps^2 changes by less than 23% per doubling of N); "
    "the slopes of d = 1 and 3 are reported, not decided on; (c) N_c(d) = ratio x linear theory / 0.2^2: the "
    "intervals increase with d, disjointly (each lower end above the previous d's upper end; quick: d = 1, 2)."
)


def _successor_ladder(quick: bool, seeds: dict[int, int]) -> dict:
    """Token counts per d of the successor and of its control-variate successor (every N >= 2 N_c(d); d = 3 in full
    mode only), with ``seeds`` per d and the d = 2 slope band."""
    ns = {1: [2048, 4096, 8192, 16384], 2: [8192, 65536] if quick else [8192, 16384, 32768, 65536]}
    if not quick:
        ns[3] = [25600]
    return {"n": ns, "seeds": {d: seeds[d] for d in ns}, "slope": {2: SUCCESSOR_SLOPE_BAND}}


def successor_design(quick: bool) -> dict:
    """The successor's token counts per d (every N >= 2 N_c(d)), seeds per d and slope bands per d."""
    return _successor_ladder(quick, {1: 20, 2: 20, 3: 8})


def run_threshold(d: int, n: int, seed: int) -> dict:
    """One run: eps^2 (mean squared relative deviation of the KDE from the exact mean field's on the probes) at 0 and T*."""
    _, tokens = draw_batch(Gaussian(np.zeros(d), TAU2), SIGMA2, n, seed)
    layers = _dimension_layers()
    variances = depth_noise.gaussian_variance_map(TAU2 + SIGMA2, DIM_H2, ETA, layers)
    moved = flow.particle_flow(tokens, DIM_H2, layers * ETA, eta=ETA, backend="auto", tol=THRESHOLD_TOL)
    unit = dimension_probes(d)
    fluctuation = []
    for layer, x in ((0, tokens), (layers, moved)):
        probes = np.sqrt(variances[layer]) * unit
        ratio = np.exp(probe_log_kde(probes, x) - _log_gaussian(probes, variances[layer] + DIM_H2))
        fluctuation.append(float(np.mean((ratio - 1) ** 2)))
    return {"d": d, "n": n, "seed": seed, "depths": [0.0, layers * ETA], "fluctuation": fluctuation}


#: Absolute error allowed in the log-KDE at the probes where the binned path computes it: the ratio to the mean
#: field is then off by a relative 1e-8 at most, eps^2 (1e-4 to 1e-2 here, eps >= 0.01) by at most 2e-6 relative.
PROBE_KDE_TOL = 1e-8


def probe_log_kde(probes: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Log-KDE of ``tokens`` at bandwidth DIM_H2 at the probes: on the grid (within PROBE_KDE_TOL, absolute) for
    d <= 2 and at least ``binned.AUTO_MIN_PAIRS`` probe-token pairs (2000 probes over 65536 2-D tokens: 0.16 s
    against 0.65 s exact, 2 cores), else exact."""
    if tokens.shape[1] <= 2 and len(probes) * len(tokens) >= binned.AUTO_MIN_PAIRS:
        return binned.log_kde(probes, tokens, DIM_H2, tol=PROBE_KDE_TOL)
    return kernels.log_kde(probes, tokens, DIM_H2)


def _threshold_key(d: int, n: int, seed: int) -> str:
    config = {"study": "E3-threshold", "d": d, "n": n, "seed": seed, "backend": "auto", "tol": THRESHOLD_TOL,
              "probe_kde_tol": PROBE_KDE_TOL,
              "sigma2": SIGMA2, "tau2": TAU2, "h2": DIM_H2, "eta": ETA, "probes": DIM_PROBES,
              "radius": DIM_PROBE_RADIUS}
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def _threshold_runs(ctx: Context, design: dict, start: int) -> list[dict]:
    """The runs of ``design`` (seeds from ``start``) this replicate decides on: computed where the store lacks them."""
    experiment = mode_name("E3", "threshold", ctx.quick)
    with ResultStore(ctx.store_path) as store:
        # the largest d first: its runs are the longest
        wanted = [(d, n, seed) for d in sorted(design["n"], reverse=True)
                  for seed in ctx.pool_seeds(design["seeds"][d], start=start) for n in design["n"][d]]
        store_missing(store, experiment, wanted, run_threshold, _threshold_key, ctx.workers)
        records = store.records(experiment)
    wanted = {_threshold_key(d, n, seed) for d, ns in design["n"].items()
              for seed in ctx.subsample_seeds(design["seeds"][d], start=start) for n in ns}
    return [records[key] for key in sorted(wanted)]


def measured_coefficients(runs: list[dict]) -> list[float]:
    """N eps^2(T*) of each run, as measured (a data alternative replaces this function)."""
    return [r["n"] * r["fluctuation"][-1] for r in runs]


@cache
def depth_zero_coefficient(d: int) -> float:
    r"""The exact mean of ``N eps^2(0)``, the fluctuation of the noisy tokens before any layer, for any ``N``.

    The tokens are i.i.d. :math:`N(0, s_0 I_d)`, :math:`s_0 = \tau^2 + \sigma^2`, so at a probe ``p`` the KDE is a
    mean of ``N`` i.i.d. kernels with mean :math:`\rho_{s_0 + h_2}(p)` and second moment
    :math:`E\,\varphi_{h_2}(p - x)^2 = (4\pi h_2)^{-d/2}\rho_{s_0 + h_2/2}(p)`, and

    .. math:: E\big[N\,\varepsilon^2(0)\big] = \operatorname{mean}_p\Big[\frac{(4\pi h_2)^{-d/2}
              \rho_{s_0 + h_2/2}(p)}{\rho_{s_0 + h_2}(p)^2}\Big] - 1

    over the probes at depth 0. It holds whatever the growth rate, so no wrong theory of the fluctuations' growth
    moves it.
    """
    s = TAU2 + SIGMA2
    probes = np.sqrt(s) * dimension_probes(d)
    weight = np.exp(_log_gaussian(probes, s + DIM_H2 / 2) - 2 * _log_gaussian(probes, s + DIM_H2))
    return float(np.mean(weight) * (4 * np.pi * DIM_H2) ** (-d / 2) - 1)


def depth_zero_values(runs: list[dict]) -> list[float]:
    """N eps^2(0) of each run, as measured (a data alternative replaces this function)."""
    return [r["n"] * r["fluctuation"][0] for r in runs]


def controlled_coefficients(runs: list[dict], coefficient: dict[int, float]) -> list[float]:
    r"""``N eps^2(T*) - b_d (N eps^2(0) - E[N eps^2(0)])`` of each run: the same mean as the measured value, with
    the part of its scatter that the tokens' initial fluctuation explains removed (a control variate whose mean
    :func:`depth_zero_coefficient` gives exactly; ``b_d`` fixed in advance, :data:`CONTROL_COEFFICIENT`)."""
    return [v - coefficient[r["d"]] * (x - depth_zero_coefficient(r["d"]))
            for r, v, x in zip(runs, measured_coefficients(runs), depth_zero_values(runs))]


def decide_threshold(runs: list[dict], design: dict, ratio_interval=stats.mean_interval, control=None) -> dict:
    """Ratios, slopes, N_c(d) intervals and the decision (bands RATIO_BAND, ``design["slope"]``), theory at call time.

    ``ratio_interval`` is the interval of the per-seed ratios over seeds: :func:`attneb.numerics.stats.mean_interval`
    (their mean) or :func:`attneb.numerics.stats.geometric_mean_interval` (their geometric mean). With ``control``
    (``{d: b_d}``), each run's ``N eps^2(T*)`` is first adjusted by its own depth-0 fluctuation, a control variate of
    known mean (:func:`controlled_coefficients`).
    """
    horizon = _dimension_layers() * ETA
    values = measured_coefficients(runs) if control is None else controlled_coefficients(runs, control)
    rows, checks, intervals = {}, {}, {}
    for d, ns in design["n"].items():
        predicted = float(np.mean([n * predicted_fluctuation(d, n, horizon) for n in ns]))
        per_seed = {}
        for r, v in zip(runs, values):
            if r["d"] == d:
                per_seed.setdefault(r["seed"], []).append((r["n"], v))
        ratios = [float(np.mean([v for _, v in pts])) / predicted for pts in per_seed.values()]
        slopes = [float(np.polyfit(np.log([n for n, _ in pts]), np.log([v for _, v in pts]), 1)[0])
                  for pts in per_seed.values() if len({n for n, _ in pts}) >= 2 and all(v > 0 for _, v in pts)]
        ratio = ratio_interval(ratios) if len(ratios) >= 2 else None
        slope = stats.mean_interval(slopes) if len(slopes) >= 2 else None
        low, high = RATIO_BAND[d]
        checks[f"d = {d}: measured / linear theory within [{low:g}, {high:g}]"] = (
            ratio is not None and low <= ratio.low and ratio.high <= high)
        if d in design["slope"]:
            band = design["slope"][d]
            checks[f"d = {d}: slope of log(N eps^2) on log N within +-{band:g}"] = (
                slope is not None and -band <= slope.low and slope.high <= band)
        n_c = predicted / DIM_LEVEL**2
        intervals[d] = None if ratio is None else (ratio.low * n_c, ratio.high * n_c)
        rows[d] = {"predicted": n_c, "min_n_over_n_c": min(ns) / n_c,
                   "ratio": None if ratio is None else [ratio.estimate, ratio.low, ratio.high],
                   "slope": None if slope is None else [slope.estimate, slope.low, slope.high],
                   "ratios": ratios, "slopes": slopes}
    ds = sorted(design["n"])
    checks["N_c increases with d"] = all(intervals[a] is not None and intervals[b] is not None
                                         and intervals[b][0] > intervals[a][1] for a, b in zip(ds, ds[1:]))
    return {"rows": rows, "checks": checks, "passed": all(checks.values())}


def _prediction_times(factor):
    return lambda real: lambda d, n, depth: factor * real(d, n, depth)


def _grows_like_sqrt_n(real):
    """N eps^2 proportional to N^(1/2) (eps^2 ~ N^(-1/2): a bias, not sampling noise), equal at the design's middle N."""
    def wrong(runs):
        values = real(runs)
        middle = {d: float(np.median([r["n"] for r in runs if r["d"] == d])) for d in {r["d"] for r in runs}}
        return [v * np.sqrt(r["n"] / middle[r["d"]]) for r, v in zip(runs, values)]
    return wrong


def _stage_one_to_half_depth(real):
    return lambda x0, h2, T, **kwargs: real(x0, h2, T / 2, **kwargs)


def _table(rows: dict) -> str:
    lines = ["| d | linear theory N_c(d) | min N / N_c | measured / theory [95%] | slope of log(N eps^2) on log N [95%] |",
             "|---|---|---|---|---|"]
    for d, row in rows.items():
        lines.append(f"| {d} | {row['predicted']:.4g} | {row['min_n_over_n_c']:.2f} | {_triple(row['ratio'])} "
                     f"| {_triple(row['slope'])} |")
    return "\n".join(lines)


def _threshold_evidence(ctx: Context, design: dict, start: int, ratio_interval=stats.mean_interval,
                        control=None) -> Evidence:
    d = decide_threshold(_threshold_runs(ctx, design, start), design, ratio_interval, control)
    failed = [name for name, ok in d["checks"].items() if not ok]
    text = "; ".join(f"d = {dim}: measured / linear theory {_triple(row['ratio'])} (N_c = {row['predicted']:.4g}, "
                     f"N >= {row['min_n_over_n_c']:.2f} N_c), slope {_triple(row['slope'])}"
                     for dim, row in d["rows"].items())
    slopes = ", ".join(f"+-{band:g} (d = {dim})" for dim, band in design["slope"].items())
    mean = "geometric mean" if ratio_interval is stats.geometric_mean_interval else "mean"
    adjusted = "" if control is None else (
        ", each run's N eps^2(T*) less " + ", ".join(f"{b:g} (d = {dim})" for dim, b in control.items())
        + " x (its N eps^2(0) - the exact mean " + ", ".join(f"{depth_zero_coefficient(dim):.4g}" for dim in control)
        + ")")
    summary = (f"eps^2(T*) x N against the linear theory (h2 = {DIM_H2:g}, seeds from {start}; ratio: {mean} over "
               f"seeds{adjusted}): {text}; "
               f"passes within {RATIO_BAND[2]} (d = 2, 3), {RATIO_BAND[1]} (d = 1), slope within {slopes or 'n/a'}, "
               f"N_c increasing in d" + (f". FAILED: {', '.join(failed)}" if failed else ""))
    return Evidence(passed=d["passed"], kind="interval", summary=summary,
                    data={"rows": {str(k): v for k, v in d["rows"].items()}, "checks": d["checks"],
                          "ratio_band": {str(k): list(v) for k, v in RATIO_BAND.items()},
                          "slope_band": {str(k): v for k, v in design["slope"].items()}},
                    markdown=_table(d["rows"]))


#: The wrong theories both threshold checks must reject.
THRESHOLD_ALTERNATIVES = [
    *DIMENSION_ALTERNATIVES,
    alternative("prediction x 0.7", "the linear theory's N eps^2(T*) x 0.7 (a near miss)",
                swap(f"{__name__}:predicted_fluctuation", _prediction_times(0.7))),
    alternative("prediction x 1.5", "the linear theory's N eps^2(T*) x 1.5",
                swap(f"{__name__}:predicted_fluctuation", _prediction_times(1.5))),
    alternative("N eps^2 grows like N^(1/2)", "each run's N eps^2(T*) x sqrt(N / median N of its d): "
                "eps^2 ~ N^(-1/2), a finite-N bias rather than sampling noise",
                swap(f"{__name__}:measured_coefficients", _grows_like_sqrt_n), kind="data"),
    alternative("Stage 1 to T*/2", "the runs' particle_flow stops at half the horizon (T* = sigma2/(4 h2))",
                swap("attneb.numerics.flow:particle_flow", _stage_one_to_half_depth), kind="implementation"),
]


@check("S1", "E3 in d = 1, 2, 3 (confirmatory, seeds from 3000): N >= 2 N_c(d), measured / linear theory within "
             "[0.6, 1.1] (d = 2, 3), N eps^2 independent of N",
       criterion=THRESHOLD_CRITERION,
       replication="subsample",
       gating=False,
       alternatives=THRESHOLD_ALTERNATIVES,
       note="superseded by 'E3 in d = 1, 2, 3 (confirmatory, seeds from 4000)': its slope test (b) was underpowered "
            "by design (size 1 measured in quick mode, below), so it fails whatever the truth; the theory is not "
            "contradicted (on the 24-seed pool the slopes are consistent with 0 and the ratios lie in their bands). "
            "Criterion fixed and committed before any run of seeds 3000 on, from the first check's runs on seeds "
            "2000-2007 (its pilot here, used as stated at RATIO_BAND and SLOPE_BAND). The band is not centred on 1: "
            "the linear theory grows modes about a static uniform density while the Gaussian background contracts, "
            "and the measured ratio falls with d (0.92, 0.85, about 0.8 on the pilot); the check states the theory to "
            "within -40%/+10% at d = 2, 3, i.e. the growth rate to within about +-10% (rate x 0.9 and x 1.1 sit at the "
            "band's edges), and rejects rate x 0.85. "
            "3-D runs at N >= 2 N_c(3) take about 40 s each on the exact path (the binned grid does not fit 3-D at "
            "h2 = 0.1: 6e7 cells for 8.4e6 allowed), so quick mode decides d = 1 and 2 only. Measured (quick, "
            "seeds 3000-3007): FAILS on (b): d = 2 slope 0.072 [-0.689, 0.833], ratios 0.759 [0.592, 0.925] (d = 1) and "
            "0.824 [0.672, 0.976] (d = 2) inside their bands. The pilot under-stated the scatter of single 2-D runs "
            "(heavy-tailed: 0.37 to 2.35 x the theory at N >= 8192): per-seed slopes on 3 N over a factor 2 scatter by "
            "0.76 (pilot's 5 N over a factor 4: 0.085), so (b) cannot pass with 8 seeds. Power run (quick, 40 subsets of "
            "a 24-seed pool): size 1 (every subset fails (b)); on that pool the slopes are -0.01 [-0.15, 0.13] (d = 1) and "
            "-0.01 [-0.34, 0.31] (d = 2) and the ratios 0.78 [0.71, 0.86], 0.78 [0.71, 0.84]; (a) and (c) alone pass "
            "95% of the subsets and reject rate x 0.85 in 100%, prediction x 0.7 in 97.5%, N eps^2 ~ N^(1/2) in 10% "
            "(post hoc, not this criterion). Full mode not run")
def threshold_confirmatory(ctx: Context) -> Evidence:
    return _threshold_evidence(ctx, threshold_design(ctx.quick), THRESHOLD_SEED_START)


@check("S1", "E3 in d = 1, 2, 3 (confirmatory, seeds from 4000): N >= 2 N_c(d), measured / linear theory within "
             "[0.6, 1.1] (d = 2, 3), N eps^2 independent of N over a factor 8 (d = 2)",
       criterion=SUCCESSOR_CRITERION,
       replication="subsample",
       alternatives=THRESHOLD_ALTERNATIVES,
       gating=False,
       note="superseded by 'E3 in d = 1, 2, 3 (confirmatory, seeds from 4000, geometric mean ratio)' (issue 24): its "
            "t-interval of the mean of 8 per-seed ratios (d = 3, full mode) covers 0.91 at a nominal 0.95 on "
            "lognormal ratios shaped like the pilot's (benchmarks/calibration.py, row t-s1-ratio-S8; 0.94 at the 20 "
            "seeds of d = 1 and 2). Its "
            "criterion was fixed and committed before any run of seeds 4000 on, from its pilot (seeds 3000-3023, the first "
            "confirmatory check's power pool; seeds 2000-2007 for d = 3) and the theory (slope 0 in the linear regime). "
            "The pilot's 2-D runs are independent across N within a seed and scatter by 0.33 in log per run, so the "
            "slope needs a wide ladder (a factor 8) and many seeds: the calculation is at SUCCESSOR_SLOPE_BAND. The "
            "whole decision on runs resampled from the pilot (1000 replicates; d = 3 from seeds 2000-2007 at N = 16384): "
            "size 0.014 (quick) and 0.006 (full), 0.025 and 0.011 with the 2-D runs normal at a scatter of 0.4 "
            "(mostly (a) in d = 2 in quick mode, (a) in d = 3 in full mode); power (100 replicates) 1 against every "
            "theory and data alternative but prediction x 0.7 in quick mode (0.96; 0.99 at scatter 0.4). Ratio bands "
            "as in the first confirmatory check: the pilot's ratios, 0.78 [0.71, 0.86] (d = 1) and 0.78 [0.71, 0.84] "
            "(d = 2), lie inside them; rate x 0.85 and prediction x 0.7 multiply "
            "measured / theory by 1.57 and 1.43 in d = 2 (to about 1.22 and 1.11: above 1.1). Quick mode decides the "
            "slope on the ladder's two ends and has no d = 3 (3-D runs at N = 25600 take about 37 s each on the exact "
            "path); full mode adds the middle N and d = 3 (8 seeds: the pilot's 3-D runs scatter by 0.16 in log). "
            "Cost on the loaded 2-core machine, one thread: a seed's d = 1 runs about 1 s, its 2-D runs 3.6 s (quick) "
            "and 6.4 s (full). Measured (seeds 4000-4019): quick PASSES, ratios 0.772 [0.690, 0.854] (d = 1) and 0.828 "
            "[0.733, 0.922] (d = 2), d = 2 slope 0.091 [-0.005, 0.188] (53 s wall, 100 s CPU, 2 workers); full PASSES, "
            "ratios 0.772 [0.690, 0.854], 0.823 [0.747, 0.898] and 0.809 [0.713, 0.904] (d = 3, N = 2.08 N_c), d = 2 "
            "slope 0.070 [-0.027, 0.167] (5.5 min wall, 387 s CPU). Power run (quick, 40 subsets of a 60-seed pool, "
            "seeds 4000-4059; 287 s): size 0 of 40, every one of the 11 alternatives rejected in 40 of 40; on the "
            "whole pool the ratios are 0.758 [0.708, 0.809] (d = 1) and 0.818 [0.764, 0.872] (d = 2), the d = 2 "
            "slope 0.032 [-0.023, 0.086]")
def threshold_successor(ctx: Context) -> Evidence:
    return _threshold_evidence(ctx, successor_design(ctx.quick), SUCCESSOR_SEED_START)


#: The successor's criterion with the ratio decided on the log scale.
GEOMETRIC_CRITERION = SUCCESSOR_CRITERION.replace(
    "per d the 95% t-interval over seeds of the ratio",
    "per d the 95% t-interval over seeds of log(ratio), mapped back by exp (an interval for the ratios' geometric "
    "mean),")
assert GEOMETRIC_CRITERION != SUCCESSOR_CRITERION


@check("S1", "E3 in d = 1, 2, 3 (confirmatory, seeds from 4000, geometric mean ratio): N >= 2 N_c(d), measured / "
             "linear theory within [0.6, 1.1] (d = 2, 3), N eps^2 independent of N over a factor 8 (d = 2)",
       criterion=GEOMETRIC_CRITERION,
       replication="subsample",
       alternatives=THRESHOLD_ALTERNATIVES,
       gating=False,
       note="superseded by 'E3 in d = 1, 2, 3 (control variate, seeds from 5000)' (issue 24, item 2: fewer 2-D and "
            "3-D runs, sized for the same precision on the pilot's scatter). It "
            "replaces the seeds-from-4000 check (issue 24): the same runs, bands and slope test; the ratio's interval "
            "is on the log scale (stats.geometric_mean_interval), which covers 0.95 on lognormal ratios at 8 and 20 "
            "seeds (benchmarks/calibration.py, rows geometric-s1-ratio-*), where the mean's t-interval covers 0.91 at "
            "8. Written after the check it replaces had passed on these runs in both modes (its note), so not blind "
            "to them: the bands are unchanged, and only the interval's construction is new. Cost (issue 24): the probes' "
            "log-KDE is computed on the grid (probe_log_kde, within 1e-8 absolute) where d <= 2 and the pairs are "
            "many, which changes eps^2 by less than 2e-6 relative (measured 1e-9 to 1e-12) and halves the cost of a "
            "2-D run at N = 65536; the runs' keys name it, so runs of the exact KDE are not mixed in")
def threshold_successor_geometric(ctx: Context) -> Evidence:
    return _threshold_evidence(ctx, successor_design(ctx.quick), SUCCESSOR_SEED_START, stats.geometric_mean_interval)


#: Seeds of the control-variate check (the successor's seeds 4000-4019 were its pilot).
CONTROL_SEED_START = 5000
#: b_d of :func:`controlled_coefficients`: per d, the least-squares slope of N eps^2(T*) on N eps^2(0) within each N,
#: pooled over the N, on the pilot (seeds 4000-4019 of the full design, every N of d = 1 and 2; seeds 4000-4007 for
#: d = 3): 6.306, 7.879, 7.939, rounded. On the pilot the two are correlated by 0.68-0.88 within an N, and the
#: adjustment takes the per-seed ratio's standard deviation from 0.175 to 0.125 (d = 1), 0.201 to 0.103 (d = 2,
#: quick), 0.161 to 0.079 (d = 2, full), 0.114 to 0.072 (d = 3), and the d = 2 per-seed slope's from 0.21 to 0.11.
CONTROL_COEFFICIENT = {1: 6.3, 2: 7.9, 3: 7.9}

CONTROL_CRITERION = (
    "Threshold runs on fresh seeds from 5000 (successor of the geometric-mean check, seeds from 4000, whose runs were "
    "its pilot, used as stated at CONTROL_COEFFICIENT). Runs as in that check: Gaussian prior N(0, I_d), sigma2 = "
    "0.5, h2 = 0.1, Euler layers eta = 0.05 to T* = 2.5 in one particle_flow (backend auto, binned tolerance 1e-6); "
    "eps(t)^2 on 2000 fixed probes against the exact mean field at depth 0 and T*; the linear theory's N eps^2(T*) "
    "with stability.growth_rate at call time. Every N >= 2 N_c(d) (N_c = 624, 3362, 12319). d = 1: N = 2048, "
    "4096, 8192, 16384, 20 seeds; d = 2: N = 8192, 16384, 32768, 65536 (quick: 8192 and 65536), 8 seeds; d = 3 "
    "(full mode only): N = 25600, 5 seeds. Each run's value is Z = N eps^2(T*) - b_d (N eps^2(0) - m_d), b = 6.3, "
    "7.9, 7.9 for d = 1, 2, 3 (fixed from the pilot), m_d the exact mean of N eps^2(0) for i.i.d. N(0, 1.5 I_d) "
    "tokens (2.864, 11.966, 40.628): Z has the mean of N eps^2(T*). Per seed and d: ratio = mean over the design's "
    "N of Z / the mean of the linear theory's; slope = least-squares slope of log Z on log N (a seed with some Z <= 0 "
    "is left out of the slopes). Passes when (a) per d the 95% t-interval over seeds of the mean ratio lies within "
    "[0.6, 1.1] (d = 2, 3) and [0.5, 1.5] (d = 1); (b) in d = 2, in both modes, the 95% t-interval over seeds of the "
    "slope lies within [-0.3, 0.3]; the slopes of d = 1 and 3 are reported, not decided on; (c) N_c(d) = ratio x "
    "linear theory / 0.2^2: the intervals increase with d, disjointly (each lower end above the previous d's upper "
    "end; quick: d = 1, 2)."
)


def control_design(quick: bool) -> dict:
    """The control-variate check's token counts per d (the geometric-mean check's), seeds per d and slope bands."""
    return _successor_ladder(quick, {1: 20, 2: 8, 3: 5})


def _both_depths_times(factor):
    return lambda real: lambda runs: [factor * v for v in real(runs)]


#: A defect the control variate cancels for the most part: eps^2 too large by the same factor at both depths (tokens
#: that are not independent, an effective sample N/1.5). Found by a referee: on the check's own quick runs it passes
#: x 1.25, and 77% of 8-seed subsets pass x 1.5, where the unadjusted decision on the same seeds fails.
BOTH_DEPTHS_ALTERNATIVE = alternative(
    "eps^2 x 1.5 at both depths", "every run's measured eps^2 x 1.5 at depth 0 and at T*",
    swap(f"{__name__}:measured_coefficients", _both_depths_times(1.5)),
    swap(f"{__name__}:depth_zero_values", _both_depths_times(1.5)), kind="data")


@check("S1", "E3 in d = 1, 2, 3 (control variate, seeds from 5000): N >= 2 N_c(d), measured / linear theory within "
             "[0.6, 1.1] (d = 2, 3), N eps^2 independent of N over a factor 8 (d = 2)",
       criterion=CONTROL_CRITERION,
       replication="subsample",
       alternatives=[*THRESHOLD_ALTERNATIVES, BOTH_DEPTHS_ALTERNATIVE],
       note="issue 24, item 2: the geometric-mean check's bands, slope test and wrong theories, from fewer runs. Each "
            "run's departure at T* is adjusted by its departure at depth 0, whose mean is known exactly "
            "(depth_zero_coefficient), with a coefficient fixed from the pilot (CONTROL_COEFFICIENT): the adjusted "
            "values keep their mean and, on the pilot (in-sample), lose about three quarters of their variance in "
            "d = 2 and 60% in d = 3, so 8 seeds in d = 2 (was 20) and 5 in d = 3 (was 8) were sized to give "
            "intervals as narrow as before; on seeds from 5000 they came out wider (quick d = 2: 0.245 against "
            "0.189; d = 3: 0.264 against 0.195); "
            "d = 1's runs are cheap and keep their 20 seeds. The interval is the mean's t-interval (an adjusted "
            "value can be negative, so no geometric mean); on bivariate lognormal runs with the pilot's spreads and "
            "correlations it covers 0.948-0.957 at a nominal 0.95, ratio and slope, both modes "
            "(benchmarks/calibration.py, rows control-s1-*), and the whole decision fails 0.025 (quick) and 0.014 (full) of 1000 such replicates "
            "(the geometric-mean check on its own synthetic runs: 0.028, 0.018 of 400). Criterion and coefficients "
            "fixed and committed before any run of seeds 5000 on, but "
            "for the breakage tests' runs of seeds 5000-5002 (d = 1 at N = 2048 with the growth rate broken, which "
            "changes only the prediction; d = 2 at N = 4096 and 8192 with Stage 1 broken), in temporary stores, "
            "their values not read. Measured (seeds from 5000; attneb verify [--quick] at 6c64f75): quick PASSES, "
            "ratios 0.768 [0.708, 0.829] (d = 1) and 0.869 [0.746, 0.991] (d = 2), d = 2 slope -0.034 [-0.124, 0.057]; full PASSES, 0.768 [0.708, 0.829], "
            "0.853 [0.777, 0.930] and 0.858 [0.726, 0.990] (d = 3, 5 seeds), slope -0.012 [-0.107, 0.082]. Power run "
            "(attneb verify --quick --power --only S1 --reuse-other-code at 46e0de8, reusing the runs of 1e68093's "
            "code; 40 subsets of a 3x pool, 3 independent seed sets, the geometric-mean check's settings): size 0.00, "
            "power 1.00 against each of the 11 alternatives that check registered (its own: 40 of 40 each), and 0.20 "
            "against 'eps^2 x 1.5 at both depths', which a referee found the adjustment cancels for the most part; "
            "the check 'E3 control variate, depth 0' rejects x 1.5 (1.00)")
def threshold_control_variate(ctx: Context) -> Evidence:
    return _threshold_evidence(ctx, control_design(ctx.quick), CONTROL_SEED_START, stats.mean_interval,
                               CONTROL_COEFFICIENT)


#: The depth-0 check passes when the interval of the mean of N eps^2(0) / its exact mean lies within 1 +- this. On
#: pilot-like runs (bivariate lognormal, controlled_runs of test_dimension.py) +-0.25 fails 1.5% (quick) and 0.25%
#: (full) of 400 replicates, +-0.2 13% and 2.5%: the 1-D units are skewed.
DEPTH_ZERO_BAND = 0.25

DEPTH_ZERO_CRITERION = (
    "On the control-variate check's runs (seeds from 5000, its design): per d and seed, the mean over the design's N "
    "of N eps^2(0) / m_d, m_d its exact mean for i.i.d. N(0, 1.5 I_d) tokens (2.864, 11.966, 40.628 for d = 1, 2, 3); "
    "passes when the 95% t-interval of the mean of these values over every (d, seed) (quick: 28, full: 33) lies "
    "within [0.75, 1.25]. Criterion written after a referee reported the mean of N eps^2(0) / m_d on these seeds "
    "(0.985-1.009 per d), to catch what the control variate hides: eps^2 off by the same factor at both depths.")


def decide_depth_zero(runs: list[dict]) -> dict:
    """Per (d, seed) the mean over N of N eps^2(0) / depth_zero_coefficient(d), their interval and the decision."""
    units: dict[tuple[int, int], list[float]] = {}
    for r, x in zip(runs, depth_zero_values(runs)):
        units.setdefault((r["d"], r["seed"]), []).append(x / depth_zero_coefficient(r["d"]))
    means = {unit: float(np.mean(v)) for unit, v in sorted(units.items())}
    values = list(means.values())
    interval = stats.mean_interval(values) if len(values) >= 2 else None
    passed = interval is not None and 1 - DEPTH_ZERO_BAND <= interval.low and interval.high <= 1 + DEPTH_ZERO_BAND
    per_d = {d: float(np.mean([m for (dd, _), m in means.items() if dd == d])) for d in sorted({d for d, _ in means})}
    return {"values": values, "interval": interval, "per_d": per_d, "passed": passed}


@check("S1", "E3 control variate, depth 0: the measured N eps^2(0) averages its exact mean within 25% (seeds from 5000)",
       criterion=DEPTH_ZERO_CRITERION,
       replication="subsample",
       alternatives=[
           BOTH_DEPTHS_ALTERNATIVE,
           alternative("eps^2 / 1.5 at both depths", "every run's measured eps^2 / 1.5 at depth 0 and at T*",
                       swap(f"{__name__}:measured_coefficients", _both_depths_times(1 / 1.5)),
                       swap(f"{__name__}:depth_zero_values", _both_depths_times(1 / 1.5)), kind="data"),
           alternative("kernel's second moment (2 pi h2)^(-d/2)", "m_d with (2 pi h2)^(-d/2) for (4 pi h2)^(-d/2): "
                       "the squared kernel's normalisation missed",
                       swap(f"{__name__}:depth_zero_coefficient",
                            lambda real: lambda d: 2 ** (d / 2) * (real(d) + 1) - 1)),
       ],
       note="issue 24: the control-variate check assumes that N eps^2(0) has the mean m_d; this check tests it on the "
            "same runs, pooled over d, so a defect that scales eps^2 at both depths (which the adjustment cancels for "
            "the most part) fails here at x 1.5 or / 1.5 (the power run below); a common factor within about +-15% "
            "passes these runs' intervals (arithmetic on them, not a check). Added after a referee's report "
            "(BOTH_DEPTHS_ALTERNATIVE), with its criterion written then; the criterion's '0.985-1.009 per d' misquotes "
            "the referee, who reported 0.976-1.009 on stored runs that include the pilot's. Measured (attneb verify "
            "[--quick] at 6c64f75): quick 0.949 [0.834, 1.063] (28 units; per d 0.935, 0.982), full 0.983 [0.878, 1.088] (33 units; "
            "0.935, 1.012, 1.126); power run (as the control-variate check's, at 46e0de8): size 0.03, power 1.00 "
            "against each of its three wrong theories")
def depth_zero_control(ctx: Context) -> Evidence:
    d = decide_depth_zero(_threshold_runs(ctx, control_design(ctx.quick), CONTROL_SEED_START))
    iv = d["interval"]
    per_d = ", ".join(f"{v:.3f} (d = {dim})" for dim, v in d["per_d"].items())
    summary = (f"N eps^2(0) / its exact mean, mean over {len(d['values'])} (d, seed) units: "
               + ("n/a" if iv is None else f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]")
               + f" (per d: {per_d}); passes within [{1 - DEPTH_ZERO_BAND:g}, {1 + DEPTH_ZERO_BAND:g}]")
    return Evidence(passed=d["passed"], kind="interval", summary=summary,
                    data={"values": d["values"], "per_d": {str(k): v for k, v in d["per_d"].items()},
                          "interval": None if iv is None else [iv.estimate, iv.low, iv.high]})
