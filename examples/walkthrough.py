# %% [markdown]
# # Walkthrough: a derivation, a claim's checks, a denoiser and a figure
#
# This file is a notebook in jupytext's percent format: `# %%` starts a code cell, `# %% [markdown]` a
# text cell. Run it as a script (`python examples/walkthrough.py`), or open it as a notebook
# (`jupytext --to notebook examples/walkthrough.py`, or jupytext's "open as notebook"); docs/notebooks.md
# says what displays itself. In a notebook the last expression of a cell displays itself: a derivation
# as LaTeX, a check report, a claim and a claim's result as Markdown. As a script each cell prints a
# line instead, and the figure is drawn off screen (matplotlib's Agg backend) into a temporary folder.

# %%
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:  # a plain script: draw into a file, open no window
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from attneb import theory
from attneb.numerics import estimators, priors
from attneb.proofs_check import CLAIMS
from attneb.proofs_check.engine import content, runner
from attneb.proofs_check.engine.report import claim_line

OUT = Path(tempfile.mkdtemp(prefix="attneb-walkthrough-"))
print(f"output folder: {OUT}")

# %% [markdown]
# ## 1. Derive
#
# `theory` registers its derivations by name and builds each (sympy) when it is first asked for.

# %%
print("derivations:", ", ".join(theory.list_derivations()))
derivation = theory.get_derivation("depth_ode")
print(repr(derivation))
derivation

# %% [markdown]
# `depth_ode`: one residual layer is an Euler step of the depth ODE, its local error is `O(eta^2)`,
# and on the linear field `dx/dt = -c x` the global error at depth `T` is first order in `eta`.
# `check()` checks every step and claimed form, by sympy or, where sympy cannot decide, by mpmath at
# seeded random points (reported as numeric, not as a proof), and returns a report: one row per item.

# %%
report = derivation.check()
print(f"{report.name}: {'passed' if report.passed else 'FAILED'} {report.methods()}")
report

# %% [markdown]
# ## 2. One claim and its checks
#
# The toolkit's claims are registered when its content is loaded. Claim C3 (Euler layers converge to
# the depth ODE at first order) displays its statement, its assumptions and each check with its
# criterion, fixed before the run, and the wrong theories it must reject. The derivation above is
# one of its checks.

# %%
content.load_default()
claim = CLAIMS["C3"]
print(f"{claim.id}: {claim.statement}")
claim

# %% [markdown]
# `runner.run` runs the checks of the claims it is given, here in quick mode (smaller problems, still
# real checks), with its stores and figures in `out`; these are the checks that
# `attneb verify --only C3 --quick` runs, without the report files that `verify` writes.

# %%
start = time.perf_counter()
(result,) = runner.run(["C3"], quick=True, out=OUT / "verify")
print(claim_line(result), f"({time.perf_counter() - start:.1f} s)")
result

# %% [markdown]
# ## 3. A denoiser
#
# Two clusters on the line: means -2 and +2, component variance 0.25, equal weights, observed with
# noise variance `sigma2 = 0.5`. `TwoStageDenoiser` sees only the noisy batch: Stage 1 moves the
# tokens by the particle flow of bandwidth `h2 = 0.05` to the depth `T* = sigma2 / (2 h2) = 5`
# (Euler layers of step 0.05), Stage 2 attends from each noisy token over the moved ones with
# bandwidth `sigma2`. `StageTwoOnly` is Stage 2 over the noisy tokens (no Stage 1); `OracleBayes` is
# the posterior mean under the true prior. Below: the MSE per coordinate of each on the batch, and
# the two-stage estimator's excess MSE over the oracle.

# %%
prior = priors.GaussianMixture(np.array([[-2.0], [2.0]]), var=0.25)
sigma2, h2, n = 0.5, 0.05, 2000
rng = np.random.default_rng(0)
clean = prior.sample(n, rng)
noisy = clean + np.sqrt(sigma2) * rng.standard_normal(clean.shape)

denoisers = {
    "TwoStageDenoiser": estimators.TwoStageDenoiser(sigma2, h2),
    "StageTwoOnly": estimators.StageTwoOnly(sigma2),
    "OracleBayes": estimators.OracleBayes(prior, sigma2),
}
mse = {name: float(np.mean((d.fit_denoise(noisy) - clean) ** 2)) for name, d in denoisers.items()}
two_stage = denoisers["TwoStageDenoiser"]
excess = mse["TwoStageDenoiser"] - mse["OracleBayes"]
print(f"T = {two_stage.T_:g} ({two_stage.n_layers_} layers), N = {n}; MSE: "
      + ", ".join(f"{name} {value:.4f}" for name, value in mse.items())
      + f"; excess of TwoStageDenoiser over OracleBayes {excess:.4f}")
mse

# %% [markdown]
# ## 4. A figure
#
# Left: the noisy batch and the tokens after Stage 1 (`particles_`). Right: the three denoisers of
# section 3 as functions of the noisy query, on a grid from -4 to 4.

# %%
grid = np.linspace(-4.0, 4.0, 401)[:, None]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
bins = np.linspace(-5.0, 5.0, 81)
left.hist(noisy[:, 0], bins=bins, alpha=0.5, label="noisy tokens")
left.hist(two_stage.particles_[:, 0], bins=bins, alpha=0.5, label=f"after Stage 1 (T = {two_stage.T_:g})")
left.set(xlabel="x", ylabel="tokens", title=f"two clusters, sigma2 = {sigma2:g}, N = {n}")
left.legend()
for (name, d), style in zip(denoisers.items(), ("--", ":", "-")):
    right.plot(grid[:, 0], d.denoise(grid)[:, 0], style, label=name)
right.plot(grid[:, 0], grid[:, 0], color="0.75", lw=0.8, label="identity")
right.set(xlabel="noisy query", ylabel="estimate of the clean value", title="denoisers")
right.legend()
figure_path = OUT / "denoisers.png"
fig.savefig(figure_path, dpi=100)
print(f"figure: {figure_path}")
