"""theory.gap_sphere: the shell kernel sums against quadrature over the sphere, Bayes against numerics.priors, the
noisy radial density's mass and second moment, the Stage-2 variance against Stage 2 run over samples of the sphere,
and the mean-field bias's convergence in the number of shells."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from attneb.numerics import kernels, priors
from attneb.theory import gap, gap_sphere


def _log_shell_average(r, R, h, power):
    """log E_{y ~ U(S_R)}[exp(-|x - y|^2/(2h)) (y . x/|x|)^power], |x| = r, by quadrature over u = cos(angle) of the
    integrand divided by its largest value exp(-(r - R)^2/(2h)), so that quad sees numbers of order 1."""
    value, _ = integrate.quad(lambda u: np.exp(-r * R * (1 - u) / h) * (R * u) ** power / 2, -1, 1, epsabs=0,
                              epsrel=1e-10)
    return -((r - R) ** 2) / (2 * h) + np.log(value)


@pytest.mark.parametrize("h", [0.05, 0.5])
def test_the_shell_kernel_mean_is_the_kernel_mean_of_the_shells(h):
    shells, weights = np.array([0.0, 0.4, 1.0, 1.7]), np.array([0.1, 0.2, 0.3, 0.4])
    for r in (0.3, 1.1, 2.5):
        log_s0 = np.array([_log_shell_average(r, R, h, 0) for R in shells]) + np.log(weights)
        log_s1 = np.array([_log_shell_average(r, R, h, 1) if R > 0 else -np.inf for R in shells]) + np.log(weights)
        expected = np.exp(log_s1 - log_s0.max()).sum() / np.exp(log_s0 - log_s0.max()).sum()
        assert gap_sphere.shell_kernel_mean([r], shells, h, weights)[0] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert gap_sphere.shell_kernel_mean([0.0], shells, h, weights)[0] == pytest.approx(0.0, abs=1e-15)


def test_bayes_is_the_uniform_spheres_posterior_mean():
    prior = priors.UniformSphere(dim=3, radius=1.5)
    q = np.array([[0.1, 0.0, 0.0], [0.5, 0.7, -0.2], [2.0, 1.0, 3.0]])
    radial = prior.posterior_mean(q, 0.5) @ np.eye(3)
    r = np.linalg.norm(q, axis=1)
    expected = np.einsum("ij,ij->i", radial, q / r[:, None])
    np.testing.assert_allclose(gap_sphere.bayes_radius(r, 1.5, 0.5), expected, rtol=1e-10)


def test_the_noisy_radial_density_has_mass_one_and_second_moment_r2_plus_3v():
    r = np.linspace(0, 12, 200_001)
    density = gap_sphere.noisy_radial_density(r, 1.2, 0.5)
    assert np.trapezoid(density, r) == pytest.approx(1.0, abs=1e-10)
    assert np.trapezoid(r**2 * density, r) == pytest.approx(1.2**2 + 3 * 0.5, abs=1e-9)


def test_the_stage_two_variance_is_that_of_stage_two_over_samples_of_the_sphere():
    """At T* the order-zero refined density is the sphere: V against Stage 2 run over 300 samples of N points."""
    sigma2, h2, n = 0.5, 0.1, 300
    v = gap_sphere.variance(1.0, sigma2, h2, sigma2 / (2 * h2), 0.05, n)
    rng = np.random.default_rng(1)
    prior = priors.UniformSphere(dim=3, radius=1.0)
    queries = prior.sample(400, rng) + np.sqrt(sigma2) * rng.standard_normal((400, 3))
    estimates = np.stack([kernels.kernel_mean(queries, prior.sample(n, rng), sigma2) for _ in range(300)])
    measured = estimates.var(axis=0, ddof=1).mean()  # per coordinate, averaged over noisy queries
    assert measured == pytest.approx(v["variance"], rel=0.15)
    assert v["amplified"] > v["variance"] > 0 and 0 < v["inverse_effective_tokens"] < 1


def test_the_mean_field_bias_converges_in_the_shells_and_shrinks_with_h2():
    sigma2 = 0.5
    coarse, fine = (gap_sphere.mean_field_bias(1.0, sigma2, 0.1, sigma2 / 0.2, 0.05, m=m) for m in (64, 256))
    assert abs(coarse["bias"] - fine["bias"]) < 0.01 * fine["bias"]
    assert abs(fine["bias"] - fine["bias_half"]) < 0.005 * fine["bias"]
    smaller = gap_sphere.mean_field_bias(1.0, sigma2, 0.05, sigma2 / 0.1, 0.05, m=256)
    assert smaller["bias"] < fine["bias"] and smaller["spread_end"] < fine["spread_end"] < fine["spread_start"]


def test_the_gain_counts_modes_by_dimension():
    a = np.array([0.5])
    steps = [0.05] * 40
    assert gap.gain(a, 0.5, 0.1, steps, dim=3)[0] > gap.gain(a, 0.5, 0.1, steps, dim=1)[0] > 1
    with pytest.raises(ValueError, match="dim"):
        gap.gain(a, 0.5, 0.1, steps, dim=0)


@pytest.mark.parametrize(("args", "match"), [((0.0, 0.5, 0.1, 1.0, 0.05, 10), "radius"),
                                             ((1.0, 0.5, 0.1, 3.0, 0.05, 10), "h2 T"),
                                             ((1.0, 0.5, 0.1, 1.0, 0.0, 10), "eta"),
                                             ((1.0, 0.5, 0.1, 1.0, 0.05, 0), "n")])
def test_bad_arguments_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        gap_sphere.variance(*args)


def test_the_blur_coefficient_of_a_point_prior_is_the_gaussians():
    """radius -> 0: the noisy sphere is N(0, sigma2 I), and C = sigma2^2/(tau2 + sigma2)^3 at tau2 = 0 is 1/sigma2."""
    for sigma2 in (0.5, 2.0):
        assert gap_sphere.blur_bias_coefficient(1e-3, sigma2) == pytest.approx(1 / sigma2, rel=1e-3)
    assert gap_sphere.blur_bias_coefficient(1.0, 0.5) > 0


def test_the_blur_coefficient_predicts_the_bias_of_a_slightly_blurred_sphere():
    """Stage 2 over the sphere blurred by eps (shells) against Bayes, at two small eps: the bias / eps^2 -> C."""
    sigma2 = 0.5
    coefficient = gap_sphere.blur_bias_coefficient(1.0, sigma2)
    r = np.arange(1e-3, 1.0 + 12 * np.sqrt(sigma2), np.sqrt(sigma2) / 200)
    p, bayes = gap_sphere.noisy_radial_density(r, 1.0, sigma2), gap_sphere.bayes_radius(r, 1.0, sigma2)
    ratios = []
    for eps in (0.01, 0.005):
        radii = np.arange(np.sqrt(eps) / 80, 1.0 + 12 * np.sqrt(eps), np.sqrt(eps) / 80)
        masses = gap_sphere.noisy_radial_density(radii, 1.0, eps)
        estimate = gap_sphere.shell_kernel_mean(r, radii, sigma2, masses / masses.sum())
        ratios.append(np.trapezoid(p * (estimate - bayes) ** 2, r) / 3 / eps**2 / coefficient)
    assert abs(ratios[1] - 1) < abs(ratios[0] - 1) < 0.1
