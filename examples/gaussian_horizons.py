"""Exact Gaussian horizon against a particle simulation, and the finite-N departure.

Usage: python examples/gaussian_horizons.py

For (sigma2, tau2, h2) in (1, 1, 0.5), (1, 1, 0.25), (0.5, 0.25, 0.05): N = 2000 Gaussian
tokens (standardised to variance tau2 + sigma2) run through Euler layers of step 0.01 until
their variance returns to tau2; the depth is printed beside theory.depth_noise's exact
gaussian_horizon and leading_horizon. Then the last case at N = 500..4000 beside the token
count N_c = exp(2 lambda* T*) of the stability analysis.
"""

import numpy as np

from attneb.numerics import meanfield
from attneb.proofs_check.topics.gaussian.horizon import standardized_gaussian_tokens
from attneb.theory import depth_noise, stability


def simulated_depths(sigma2, tau2, h2, n, eta, seeds=(0, 1, 2)):
    return [
        meanfield.variance_horizon(standardized_gaussian_tokens(n, tau2 + sigma2, seed), h2, tau2, eta=eta).depth
        for seed in seeds
    ]


def main() -> None:
    for sigma2, tau2, h2 in [(1.0, 1.0, 0.5), (1.0, 1.0, 0.25), (0.5, 0.25, 0.05)]:
        depths = simulated_depths(sigma2, tau2, h2, 2000, 0.01)
        print(f"(sigma2, tau2, h2) = ({sigma2}, {tau2}, {h2}), N=2000, eta=0.01: simulated {np.mean(depths):.4f} "
              f"(seeds {np.round(depths, 4)}), gaussian_horizon {depth_noise.gaussian_horizon(sigma2, tau2, h2):.4f}, "
              f"leading_horizon {depth_noise.leading_horizon(sigma2, h2):.4f}", flush=True)
    n_c = stability.token_scaling(0.5, 0.05)
    for n in (500, 1000, 2000, 4000):
        depths = simulated_depths(0.5, 0.25, 0.05, n, 0.05)
        print(f"(0.5, 0.25, 0.05), eta=0.05, N={n}: simulated {np.mean(depths):.3f} (seeds {np.round(depths, 3)}) "
              f"vs T_G {depth_noise.gaussian_horizon(0.5, 0.25, 0.05):.3f}; N_c = {n_c:.0f}", flush=True)


if __name__ == "__main__":
    main()
