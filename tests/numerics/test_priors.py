"""Tests of :mod:`attneb.numerics.priors`.

``check_prior`` is the battery run on every prior, as scipy's ``test_continuous_basic`` does for
its distributions. Statistical checks use tolerances derived from their sample sizes (5 standard
errors); quadrature checks use the accuracy quad reports.
"""

import dataclasses
import math
import tracemalloc

import mpmath
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy import integrate, special, stats

from attneb.numerics.priors import (
    Discrete,
    Gaussian,
    GaussianMixture,
    Laplace,
    RiskEstimate,
    StudentT,
    UniformBox,
    UniformSphere,
)
from attneb.proofs_check.engine.finite_differences import five_point_gradient
from attneb.proofs_check.topics.tweedie import student_t_posterior_width
from tests.strategies import (
    boxes,
    discretes,
    log_uniform,
    prior_queries,
    prior_scale,
    priors,
    sigma2s,
    spheres,
)

SEED = 20260527
N_SAMPLES = 20_000
EPS = np.finfo(float).eps

CASES = {
    "gaussian-1d": Gaussian(0.3, 2.0),
    "gaussian-3d": Gaussian([1.0, -2.0, 0.5], 0.7),
    "mixture-1d": GaussianMixture([[-2.0], [1.5]], [0.3, 0.7], var=0.25),
    "mixture-2d": GaussianMixture([[-2.0, 0.0], [1.5, 1.0], [0.0, -1.0]], [0.2, 0.5, 0.3], var=0.4),
    "discrete-1d": Discrete([[-1.0], [0.5], [2.0]], [0.2, 0.5, 0.3]),
    "discrete-2d-empirical": Discrete(np.random.default_rng(7).normal(size=(50, 2))),
    "sphere-1d": UniformSphere(1, 1.5),
    "sphere-2d": UniformSphere(2),
    "sphere-3d": UniformSphere(3, 0.7),
    "sphere-5d": UniformSphere(5, 2.0),
    "box-1d": UniformBox(-1.0, 2.0),
    "box-3d": UniformBox([-1.0, 0.0, 2.0], [0.0, 3.0, 2.5]),
    "laplace-1d": Laplace(0.8, 1),
    "laplace-3d": Laplace(1.3, 3),
    "student-t-1d": StudentT(3.0, 1.0, 1),
    "student-t-2d": StudentT(5.0, 0.7, 2),
}
SIGMA2 = (0.3, 1.0, 5.0)


@st.composite
def student_ts(draw, dim: int = 1) -> StudentT:
    """Student-t priors with df in [2.5, 50] (finite variance, so ``prior_scale`` exists) and scale in [0.1, 10]."""
    return StudentT(draw(log_uniform(2.5, 50.0)), draw(log_uniform(1e-1, 1e1)), dim)


def any_prior(dim: int = 1) -> st.SearchStrategy:
    """A prior of any family in ``tests.strategies.priors`` or a Student-t (which that module does not draw)."""
    return st.one_of(priors(dim), student_ts(dim))


# --- the battery -------------------------------------------------------------------------------


def check_prior(prior, sigma2, rng):
    """Every check that applies to ``prior`` at noise variance ``sigma2``."""
    check_normalised(prior, sigma2, rng)
    check_sample_moments(prior, rng)
    check_score_matches_finite_differences(prior, sigma2, rng)
    check_tweedie(prior, sigma2, rng)
    if prior.dim == 1:
        check_posterior_mean_matches_quadrature(prior, sigma2, rng)
    check_mmse(prior, sigma2, rng)


@pytest.mark.parametrize("sigma2", SIGMA2)
@pytest.mark.parametrize("prior", CASES.values(), ids=CASES.keys())
def test_battery(prior, sigma2):
    check_prior(prior, sigma2, np.random.default_rng(SEED))


def _noisy_draws(prior, sigma2, rng, n):
    x = prior.sample(n, rng)
    return x, x + np.sqrt(sigma2) * rng.standard_normal(x.shape)


def _reference_1d(prior):
    """A 1-D prior written out from its parameters, independently of the module's formulas.

    Returns ``("atoms", values, weights)`` or ``("density", pdf, lo, hi, landmarks)`` with the
    support (up to a negligible tail) in ``[lo, hi]``.
    """
    if isinstance(prior, Discrete):
        return "atoms", prior.atoms[:, 0], prior.weights
    if isinstance(prior, UniformSphere):
        return "atoms", np.array([-prior.radius, prior.radius]), np.array([0.5, 0.5])
    if isinstance(prior, Gaussian):
        m, sd = prior.params()["mean"][0], np.sqrt(prior.params()["var"])
        return "density", stats.norm(m, sd).pdf, m - 40 * sd, m + 40 * sd, [m]
    if isinstance(prior, GaussianMixture):
        means, sd = prior.means[:, 0], np.sqrt(prior.component_var)

        def pdf(x):
            return prior.weights @ stats.norm.pdf(x, means, sd)

        return "density", pdf, means.min() - 40 * sd, means.max() + 40 * sd, list(means)
    if isinstance(prior, UniformBox):
        lo, hi = prior.low[0], prior.high[0]
        return "density", stats.uniform(lo, hi - lo).pdf, lo, hi, []
    if isinstance(prior, Laplace):
        b = prior.scale
        return "density", stats.laplace(scale=b).pdf, -80 * b, 80 * b, [0.0]
    if isinstance(prior, StudentT):  # power-law tails: the range is infinite (quad maps it)
        nu, s = prior.df, prior.scale
        log_c = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi) - math.log(s)
        assert math.exp(log_c) == pytest.approx(stats.t(nu, scale=s).pdf(0.0), rel=1e-12)

        def pdf(x):  # scalar, as quad calls it: scipy.stats' pdf costs ~50 us a call
            return math.exp(log_c - (nu + 1) / 2 * math.log1p(x * x / (nu * s * s)))

        return "density", pdf, -np.inf, np.inf, [0.0]
    raise TypeError(type(prior))


def _quad(f, lo, hi, points, epsabs=0.0):
    points = sorted({float(p) for p in points if lo < p < hi})
    return integrate.quad(f, lo, hi, points=points or None, epsabs=epsabs, epsrel=1e-11, limit=500)


def check_normalised(prior, sigma2, rng):
    """``int p(xt) dxt = 1``: quadrature in 1-D, a product or radial reduction, or importance sampling."""
    sd = np.sqrt(sigma2)
    if prior.dim == 1:
        _check_normalised_1d(prior, sigma2)
    elif isinstance(prior, (Gaussian, UniformBox, Laplace, StudentT)):
        factors = {
            Gaussian: lambda i: Gaussian(prior.params()["mean"][i], prior.params()["var"]),
            UniformBox: lambda i: UniformBox(prior.low[i], prior.high[i]),
            Laplace: lambda i: Laplace(prior.scale, 1),
            StudentT: lambda i: StudentT(prior.df, prior.scale, 1),
        }[type(prior)]
        _, xt = _noisy_draws(prior, sigma2, rng, 50)
        total = sum(factors(i).noisy_logpdf(xt[:, [i]], sigma2) for i in range(prior.dim))
        assert_allclose(prior.noisy_logpdf(xt, sigma2), total, rtol=1e-13, atol=1e-13)
        for i in range(prior.dim):
            _check_normalised_1d(factors(i), sigma2)
    elif isinstance(prior, UniformSphere):
        d, r = prior.dim, prior.radius
        log_area = np.log(2) + 0.5 * d * np.log(np.pi) - special.gammaln(d / 2)
        e1 = np.eye(d)[:1]

        def radial(radius):
            return np.exp(log_area + (d - 1) * np.log(radius) + prior.noisy_logpdf(radius * e1, sigma2)[0])

        total, err = _quad(radial, max(0.0, r - 40 * sd), r + 40 * sd, [r])
        assert abs(total - 1) <= err + 1e-10
    else:
        centres, h = ((prior.means, prior.component_var + sigma2) if isinstance(prior, GaussianMixture)
                      else (prior.atoms, sigma2))
        # Proposal q: equal-weight mixture of N(c_k, 2 h I); p / q <= K max_k w_k 2^(d/2) is bounded.
        k, d = centres.shape
        t = centres[rng.integers(k, size=N_SAMPLES)] + np.sqrt(2 * h) * rng.standard_normal((N_SAMPLES, d))
        sq = np.sum((t[:, None, :] - centres[None, :, :]) ** 2, axis=2)
        log_q = special.logsumexp(-sq / (4 * h), axis=1) - np.log(k) - 0.5 * d * np.log(4 * np.pi * h)
        ratio = np.exp(prior.noisy_logpdf(t, sigma2) - log_q)
        assert abs(ratio.mean() - 1) <= 5 * ratio.std(ddof=1) / np.sqrt(N_SAMPLES)


def _check_normalised_1d(prior, sigma2):
    sd = np.sqrt(sigma2)
    if isinstance(prior, StudentT):  # heavy tails: quad over each half-line (it maps [0, inf) to (0, 1])
        halves = [integrate.quad(lambda t, s=s: np.exp(prior.noisy_logpdf([[s * t]], sigma2)[0]), 0, np.inf,
                                 epsabs=0.0, epsrel=1e-11, limit=500) for s in (-1.0, 1.0)]
        assert abs(sum(v for v, _ in halves) - 1) <= sum(e for _, e in halves) + 1e-10
        return
    ref = _reference_1d(prior)
    if ref[0] == "atoms":
        lo, hi, landmarks = ref[1].min(), ref[1].max(), list(ref[1])
    else:
        lo, hi, landmarks = ref[2], ref[3], [ref[2], ref[3], *ref[4]]
    total, err = _quad(
        lambda t: np.exp(prior.noisy_logpdf([[t]], sigma2)[0]), lo - 40 * sd, hi + 40 * sd, landmarks
    )
    assert abs(total - 1) <= err + 1e-10


def check_sample_moments(prior, rng):
    """Sample mean and second moment within 5 standard errors of ``moments()``."""
    mean, var = prior.moments()
    x = prior.sample(N_SAMPLES, rng)
    assert x.shape == (N_SAMPLES, prior.dim) and x.dtype == np.float64
    assert np.all(np.abs(x.mean(axis=0) - mean) <= 5 * np.sqrt(var / N_SAMPLES))
    second = x**2
    se = second.std(axis=0, ddof=1) / np.sqrt(N_SAMPLES)
    assert np.all(np.abs(second.mean(axis=0) - (var + mean**2)) <= 5 * se)


def posterior_width(prior, sigma2):
    """``W`` with ``|kappa_5| <= 11 W^5`` for each coordinate's posterior: ``|d^5 log p| <= 11 W^5 / sigma2^5``.

    ``d^k log p / dxt_i^k`` is the ``k``-th cumulant of ``x_i | xt`` over ``sigma2^k`` (``k >= 2``).
    A posterior within an interval of length ``D`` has ``|mu_k| <= D^k`` and ``kappa_5 = mu_5 -
    10 mu_3 mu_2``, so ``W = D``: the support's extent in a coordinate (atoms, sphere, box). For a
    mixture the posterior is the posterior over the means (shrunk towards ``xt``) plus an
    independent Gaussian (cumulants of order >= 3 vanish): ``W`` = extent of the means; for a
    Gaussian ``kappa_5 = 0``. The Laplace posterior is strongly log-concave with curvature
    ``>= 1 / sigma2``, hence sub-Gaussian with variance proxy ``sigma2``: its central moments give
    ``|kappa_5| <= 113 sd^5 <= 11 (2 sd)^5``. A Student-t posterior has no closed-form bound (it is
    bimodal for some ``t`` once ``(df + 1) sigma2 > 8 df s^2``): ``max_t |kappa_5|`` is measured
    from the t prior's scale-mixture form, independently of :mod:`attneb.numerics.priors`
    (:func:`attneb.proofs_check.topics.tweedie.student_t_posterior_width`, with a margin of 1.5 on ``W``).
    """
    if isinstance(prior, Discrete):
        return float(np.max(np.ptp(prior.atoms, axis=0)))
    if isinstance(prior, GaussianMixture):
        return float(np.max(np.ptp(prior.means, axis=0)))
    if isinstance(prior, UniformSphere):
        return 2 * prior.radius
    if isinstance(prior, UniformBox):
        return float(np.max(prior.high - prior.low))
    if isinstance(prior, Laplace):
        return 2 * np.sqrt(sigma2)
    if isinstance(prior, Gaussian):
        return 0.0
    if isinstance(prior, StudentT):
        return student_t_posterior_width(prior.df, prior.scale, sigma2)
    raise TypeError(type(prior))


#: Absolute rounding error of one ``noisy_logpdf`` value, in units of ``eps (10 + |log p|)``: a
#: few roundings per operation of a log-sum-exp, a special function or a series.
LOGPDF_ROUNDING = 8.0


def five_point_tolerance(prior, sigma2, step, logp):
    """Ten times truncation plus rounding of :func:`five_point_gradient` applied to ``noisy_logpdf``.

    Truncation ``h^4 |f^(5)| / 30`` with ``|f^(5)| <= 11 W^5 / sigma2^5`` (:func:`posterior_width`);
    rounding ``(1 + 8 + 8 + 1) / 12 = 1.5`` times the error of one ``log p`` over ``h``.
    """
    truncation = step**4 * 11 * posterior_width(prior, sigma2) ** 5 / sigma2**5 / 30
    rounding = 1.5 * LOGPDF_ROUNDING * EPS * (10 + np.abs(logp)) / step
    return 10 * (truncation + rounding)


def check_score_matches_finite_differences(prior, sigma2, rng):
    """``noisy_score`` = the 5-point gradient of ``noisy_logpdf`` with step ``h = 1e-3 sqrt(sigma2)``.

    The score is the closed-form derivative of the density, computed by its own formula, so this
    checks one against the other; the tolerance is :func:`five_point_tolerance`.
    """
    step = 1e-3 * np.sqrt(sigma2)
    _, xt = _noisy_draws(prior, sigma2, rng, 20)
    xt = np.concatenate([xt, np.zeros((1, prior.dim)), np.full((1, prior.dim), 10 * prior_scale(prior))])
    logp = prior.noisy_logpdf(xt, sigma2)
    fd = five_point_gradient(lambda x: prior.noisy_logpdf(x, sigma2), xt, step)
    tol = five_point_tolerance(prior, sigma2, step, logp)
    assert np.all(np.abs(prior.noisy_score(xt, sigma2) - fd) <= tol[:, None])


def check_tweedie(prior, sigma2, rng):
    """``E[x | xt] = xt + sigma2 * grad log p(xt)`` to 1e-9 relative, each side from its own formula.

    The posterior mean and the score share no arithmetic (each family's Notes), so a wrong
    posterior mean fails here (``test_tweedie_fails_for_a_wrong_posterior_mean``). Both are closed
    forms evaluated to ~1e-15 relative; the sum cancels at most ``|xt|`` against ``E[x | xt]``,
    hence the scale ``|xt| + |E[x | xt]| + scale``, with a margin for the special functions.
    """
    _, xt = _noisy_draws(prior, sigma2, rng, 200)
    xt = np.concatenate([xt, np.zeros((1, prior.dim)), np.full((1, prior.dim), 10 * prior_scale(prior))])
    pm = prior.posterior_mean(xt, sigma2)
    tweedie = xt + sigma2 * prior.noisy_score(xt, sigma2)
    assert np.all(np.abs(pm - tweedie) <= 1e-9 * (np.abs(xt) + np.abs(pm) + prior_scale(prior)))


def _reference_posterior_mean(prior, t, sigma2):
    """``int x rho0(x) phi(t - x) dx / int rho0(x) phi(t - x) dx`` from :func:`_reference_1d`."""
    sd = np.sqrt(sigma2)
    ref = _reference_1d(prior)
    if ref[0] == "atoms":
        values, weights = ref[1], ref[2]
        w = weights * stats.norm.pdf(t, values, sd)
        return w @ values / w.sum()
    _, pdf, lo, hi, landmarks = ref
    lo, hi = max(lo, t - 40 * sd), min(hi, t + 40 * sd)
    landmarks = [p for p in landmarks if np.isfinite(p)]
    points = [t, *landmarks]
    den, _ = _quad(lambda x: pdf(x) * stats.norm.pdf(t, x, sd), lo, hi, points)
    # The numerator may vanish (odd integrand): ask for 1e-12 (|t| + hi - lo) of the ratio instead.
    num, _ = _quad(lambda x: x * pdf(x) * stats.norm.pdf(t, x, sd), lo, hi, points, 1e-12 * den * (abs(t) + hi - lo))
    return num / den


def check_posterior_mean_matches_quadrature(prior, sigma2, rng):
    scale = prior_scale(prior) + np.sqrt(sigma2)
    _, xt = _noisy_draws(prior, sigma2, rng, 8)
    xt = np.concatenate([xt, [[0.0], [3 * scale], [-3 * scale]]])
    reference = [_reference_posterior_mean(prior, t, sigma2) for t in xt[:, 0]]
    assert_allclose(prior.posterior_mean(xt, sigma2)[:, 0], reference, rtol=1e-8, atol=1e-9 * scale)


EXPECTED_METHOD = {Gaussian: "exact", UniformBox: "quadrature", Laplace: "quadrature", UniformSphere: "quadrature",
                   StudentT: "quadrature"}


def check_mmse(prior, sigma2, rng):
    """The reported risk agrees with an independent Monte Carlo within its error + 5 standard errors."""
    est = prior.mmse(sigma2, rng=SEED + 1)
    expected = EXPECTED_METHOD.get(type(prior), "quadrature" if prior.dim == 1 else "monte-carlo")
    assert est.method == expected
    if est.method == "quadrature":
        assert est.error <= 1e-8 * max(est.value, 1.0)
    x, xt = _noisy_draws(prior, sigma2, rng, N_SAMPLES)
    loss = np.sum((x - prior.posterior_mean(xt, sigma2)) ** 2, axis=1) / prior.dim
    assert abs(loss.mean() - est.value) <= est.error + 5 * loss.std(ddof=1) / np.sqrt(N_SAMPLES)


# --- closed forms and special points -----------------------------------------------------------


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 50, 2000])
def test_sphere_matches_mpmath_bessel(dim):
    """Posterior mean norm ``r A(kappa)`` and ``log p`` against mpmath, across the Bessel regimes."""
    nu = dim / 2 - 1
    edges = [max(1.0, nu) * (1 + e) for e in (0, 1e-9)] + [max(1.0, nu + 1) * (1 + e) for e in (0, 1e-9)]
    kappas = [0.0, 1e-8, 0.5, *edges, 3 * max(1.0, nu), 1e8 * (1 - 1e-9), 1e8, 1e12]
    prior = UniformSphere(dim, 1.0)
    xt = np.zeros((len(kappas), dim))
    xt[:, 0] = kappas  # r = sigma2 = 1, so kappa = ||xt||
    ratio = prior.posterior_mean(xt, 1.0)[:, 0]
    logp = prior.noisy_logpdf(xt, 1.0)
    for k, got_ratio, got_logp in zip(kappas, ratio, logp):
        with mpmath.workdps(40):
            kk = mpmath.mpf(k)
            want_ratio = 0 if k == 0 else mpmath.besseli(nu + 1, kk) / mpmath.besseli(nu, kk)
            log_0f1 = mpmath.log(mpmath.hyp0f1(nu + 1, kk**2 / 4, maxterms=10**6)) if k < 1e3 else (
                mpmath.loggamma(nu + 1) + nu * mpmath.log(2 / kk) + mpmath.log(mpmath.besseli(nu, kk))
            )
            want_logp = -0.5 * dim * mpmath.log(2 * mpmath.pi) - (kk**2 + 1) / 2 + log_0f1
        assert got_ratio == pytest.approx(float(want_ratio), rel=1e-12, abs=1e-300)
        assert got_logp == pytest.approx(float(want_logp), rel=1e-12, abs=1e-12)


def test_sphere_at_origin():
    prior = UniformSphere(3, 2.0)
    xt = np.zeros((1, 3))
    assert np.all(prior.posterior_mean(xt, 0.5) == 0) and np.all(prior.noisy_score(xt, 0.5) == 0)
    assert prior.noisy_logpdf(xt, 0.5)[0] == pytest.approx(-1.5 * np.log(np.pi) - 4.0, rel=1e-14)


def test_sphere_dim1_is_the_two_point_prior():
    sphere, atoms = UniformSphere(1, 1.5), Discrete([[-1.5], [1.5]])
    xt = np.linspace(-6, 6, 41)[:, None]
    for sigma2 in (1e-3, 0.3, 5.0):
        for method in ("noisy_logpdf", "noisy_score", "posterior_mean"):
            got, want = getattr(sphere, method)(xt, sigma2), getattr(atoms, method)(xt, sigma2)
            assert_allclose(got, want, rtol=1e-11, atol=1e-11)
        assert sphere.mmse(sigma2).value == pytest.approx(atoms.mmse(sigma2).value, rel=1e-8, abs=1e-15)


def test_one_component_mixture_is_the_gaussian():
    mixture, gaussian = GaussianMixture([[0.4, -1.0]], var=0.8), Gaussian([0.4, -1.0], 0.8)
    xt = np.random.default_rng(SEED).normal(size=(30, 2)) * 3
    for method in ("noisy_logpdf", "noisy_score", "posterior_mean"):
        assert_allclose(getattr(mixture, method)(xt, 0.7), getattr(gaussian, method)(xt, 0.7), rtol=1e-12, atol=1e-13)
    want = Gaussian(0.4, 0.8).mmse(0.7).value
    assert GaussianMixture([[0.4]], var=0.8).mmse(0.7).value == pytest.approx(want, rel=1e-9)


def test_box_far_outside():
    """Beyond an edge by ``D >> sd`` the posterior is an exponential of rate ``D / sigma2`` at the edge."""
    prior, sigma2 = UniformBox(0.0, 1.0), 1e-6
    for t in (1.0 + 1e3, -1e3):
        dist = t - 1.0 if t > 1 else -t
        edge = 1.0 if t > 1 else 0.0
        pm = prior.posterior_mean([[t]], sigma2)[0, 0]
        # E[x | t] is xt + sd E[u]: exact up to the rounding of |t| (and 2 sigma2^2 / dist^3).
        assert pm == pytest.approx(edge - np.sign(t) * sigma2 / dist, abs=4 * EPS * abs(t))
        want = special.log_ndtr(-dist / np.sqrt(sigma2))
        assert prior.noisy_logpdf([[t]], sigma2)[0] == pytest.approx(want, rel=1e-12)


def test_laplace_far_tails_soft_threshold():
    """For ``|t| >> sigma2 / b`` the posterior is ``N(t - sign(t) sigma2 / b, sigma2)``."""
    prior, sigma2 = Laplace(0.5, 1), 1e-2
    t = np.array([[-500.0], [500.0]])
    assert_allclose(prior.posterior_mean(t, sigma2), t - np.sign(t) * sigma2 / 0.5, rtol=1e-14)
    want = sigma2 / (2 * 0.5**2) - 500 / 0.5 - np.log(2 * 0.5)
    assert_allclose(prior.noisy_logpdf(t, sigma2), want, rtol=1e-14)


@pytest.mark.parametrize(
    "prior", [CASES[k] for k in ("gaussian-1d", "mixture-1d", "discrete-1d", "sphere-3d", "box-3d", "laplace-3d")]
)
def test_mmse_tends_to_prior_variance(prior):
    """``MMSE = mean_i Var x_i (1 + O(Var / sigma2))`` as ``sigma2 -> inf``."""
    var = prior.moments()[1]
    assert prior.mmse(1e6).value == pytest.approx(var.mean(), rel=1e-4)


@pytest.mark.parametrize("prior", [Laplace(1.0, 2), UniformBox([0.0, -1.0], [2.0, 3.0])])
def test_mmse_tends_to_sigma2(prior):
    """A continuous density gives ``MMSE = sigma2 (1 + O(sqrt(sigma2)))`` as ``sigma2 -> 0``."""
    assert prior.mmse(1e-8).value == pytest.approx(1e-8, rel=1e-3)


def test_sphere_mmse_small_noise_keeps_tangential_part():
    """On the sphere only the ``d - 1`` tangential noise directions survive: ``MMSE ~ sigma2 (d - 1) / d``."""
    assert UniformSphere(4, 1.0).mmse(1e-8).value == pytest.approx(0.75e-8, rel=1e-3)


# --- the Student-t prior -----------------------------------------------------------------------


@pytest.mark.parametrize(("scale", "sigma2"), [(1.0, 0.5), (0.7, 2.0)])
def test_student_t_tends_to_the_gaussian_as_df_grows(scale, sigma2):
    """``t_df(0, s) -> N(0, s^2)`` at rate ``1 / df``: posterior means, Bayes risks and log densities.

    On ``|t| <= 4 (s + sigma)`` the differences from ``Gaussian(0, s^2)`` are ``C / df`` (measured at
    df = 1e2, 1e4, 1e6: ``C ~ 18 (s + sigma)`` and ``~5 (s + sigma)`` for the posterior mean, ``~0.7``
    and ``~1.6`` relative for the risk). At df = 1e6 the posterior mean must be within
    ``50 (s + sigma) / df`` and the risk within ``5 / df`` relative; and the rate must be first order:
    ``df x difference`` at df = 1e4 and 1e6 agree within 2% (the quadrature at df = 1e6 must be
    right to ~1e-7 for that).
    """
    sd = np.sqrt(sigma2)
    t = np.linspace(-4, 4, 17)[:, None] * (scale + sd)
    gaussian = Gaussian(0.0, scale**2)
    scaled = {}
    for df in (1e4, 1e6):
        prior = StudentT(df, scale, 1)
        mean_gap = np.max(np.abs(prior.posterior_mean(t, sigma2) - gaussian.posterior_mean(t, sigma2)))
        risk_gap = abs(prior.mmse(sigma2).value / gaussian.mmse(sigma2).value - 1)
        logp_gap = np.max(np.abs(prior.noisy_logpdf(t, sigma2) - gaussian.noisy_logpdf(t, sigma2)))
        scaled[df] = np.array([mean_gap, risk_gap, logp_gap]) * df
    assert scaled[1e6][0] <= 50 * (scale + sd) and scaled[1e6][1] <= 5
    assert_allclose(scaled[1e6], scaled[1e4], rtol=0.02)


def _mpmath_posterior_mean(df, scale, sigma2, t, dps=20):
    """``E[x | t] = t + int (x - t) f(x) phi(t - x) dx / int f(x) phi(t - x) dx`` by mpmath at ``dps`` digits."""
    with mpmath.workdps(dps):
        nu, s2, t = mpmath.mpf(df), mpmath.mpf(sigma2), mpmath.mpf(t)
        a2, sd = nu * mpmath.mpf(scale) ** 2, mpmath.sqrt(s2)

        def q(x):
            return (1 + x * x / a2) ** (-(nu + 1) / 2) * mpmath.exp(-((x - t) ** 2) / (2 * s2))

        points = sorted({mpmath.mpf(0), t, -mpmath.sqrt(a2), mpmath.sqrt(a2),
                         *(t + k * sd for k in range(-12, 13)), *(k * sd for k in range(-12, 13))})
        points = [-mpmath.inf, *points, mpmath.inf]
        shift = mpmath.quad(lambda x: (x - t) * q(x), points) / mpmath.quad(q, points)
        return float(t + shift), float(shift)


@pytest.mark.parametrize(("df", "scale", "sigma2", "points"),
                         [(3.0, 1.0, 0.5, (0.7, -2.5, 9.0)), (5.0, 0.7, 5.0, (1.0, -6.0))],
                         ids=["log-concave", "bimodal-capable"])
def test_student_t_posterior_mean_matches_mpmath(df, scale, sigma2, points):
    """The posterior mean against 20-digit mpmath quadrature of its two integrals (breaks at 0, +-a, t +- k sd).

    Agreement to 1e-13 of the posterior's scale ``|E[x - t | t]| + sigma``. The second case,
    ``(df + 1) sigma2 > 0.9 * 8 df s^2``, takes the nodes built for posteriors that may be bimodal.
    """
    prior = StudentT(df, scale, 1)
    got = prior.posterior_mean(np.array(points)[:, None], sigma2)[:, 0]
    for t, value in zip(points, got):
        want, shift = _mpmath_posterior_mean(df, scale, sigma2, t)
        assert abs(value - want) <= 1e-13 * (abs(shift) + np.sqrt(sigma2)) + 2 * EPS * abs(t)


def test_student_t_mmse_matches_seeded_monte_carlo():
    """The quadrature risk against the mean loss of 100000 seeded draws: within its error + 5 standard errors."""
    prior, sigma2, n = StudentT(3.0, 1.0, 1), 1.0, 100_000
    est = prior.mmse(sigma2)
    assert est.method == "quadrature" and est.error <= 1e-10 * est.value
    x, xt = _noisy_draws(prior, sigma2, np.random.default_rng(SEED), n)
    loss = (x - prior.posterior_mean(xt, sigma2))[:, 0] ** 2
    assert abs(loss.mean() - est.value) <= est.error + 5 * loss.std(ddof=1) / np.sqrt(n)


def test_student_t_shrinkage_vanishes_in_the_tails():
    """Heavy tails: ``t - E[x | t] -> 0`` as ``|t| -> inf``, where a Laplace prior shrinks by ``sigma2 / b`` for ever.

    By Tweedie's formula ``t - E[x | t] = -sigma2 E[psi(x) | t]`` with the prior's score ``psi(x) =
    -(df + 1) x / (a^2 + x^2)``, so ``t (t - E[x | t]) -> sigma2 (df + 1)``, the relative
    correction being of order ``(a^2 + sigma2) / t^2`` (measured ~0.2 of it), plus the rounding of
    ``E[x | t]`` (``4 eps |t|`` over the shrinkage).
    """
    df, sigma2 = 3.0, 0.5
    a2 = df * 1.0**2
    t = np.array([1e1, 1e2, 1e3, 1e4, 1e5])
    shrink = t - StudentT(df, 1.0, 1).posterior_mean(t[:, None], sigma2)[:, 0]
    assert np.all(shrink > 0) and np.all(np.diff(shrink) < 0)
    assert np.all(np.abs(t * shrink / (sigma2 * (df + 1)) - 1) <= (a2 + sigma2) / t**2 + 4 * EPS * t / shrink)
    assert_allclose(StudentT(df, 1.0, 1).posterior_mean(-t[:, None], sigma2)[:, 0], -(t - shrink), rtol=1e-15)
    b = 0.8
    assert_allclose(t - Laplace(b, 1).posterior_mean(t[:, None], sigma2)[:, 0], sigma2 / b, rtol=1e-6)


@pytest.mark.parametrize("df", [0.5, 1.0, 2.0])
def test_student_t_without_a_finite_variance(df):
    """``df <= 2``: ``moments`` raises naming ``df``; the rest works, and the risk is below ``sigma2`` (that of ``xt``)."""
    prior, sigma2 = StudentT(df, 1.0, 1), 0.5
    with pytest.raises(ValueError, match=rf"df == {df}: .* needs df > 2"):
        prior.moments()
    assert np.all(np.isfinite(prior.sample(1000, SEED)))
    xt = np.array([[0.0], [0.8], [-3.0], [40.0], [-1e6]])
    pm, score, logp = prior.posterior_mean(xt, sigma2), prior.noisy_score(xt, sigma2), prior.noisy_logpdf(xt, sigma2)
    assert np.all(np.isfinite(pm)) and np.all(np.isfinite(score)) and np.all(np.isfinite(logp))
    assert np.all(np.abs(pm - (xt + sigma2 * score)) <= 1e-9 * (np.abs(xt) + np.abs(pm) + 1))
    est = prior.mmse(sigma2)
    assert est.method == "quadrature" and 0 < est.value < sigma2 and est.error <= 1e-8 * est.value


def test_student_t_memory_is_bounded():
    """50000 queries: nodes in blocks (2^14 queries, 2^16 nodes), not the ~30 MB of 50000 x ~70 nodes x 8 bytes at once."""
    prior = StudentT(3.0, 1.0, 1)
    xt = 1.5 * np.random.default_rng(SEED).standard_t(3.0, size=(50_000, 1))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        prior.posterior_mean(xt, 0.5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 12 * 2**20


# --- the discrete prior in row blocks ----------------------------------------------------------


def test_discrete_blocks_match_direct_computation():
    rng = np.random.default_rng(SEED)
    atoms, weights = rng.normal(size=(300, 2)), rng.dirichlet(np.ones(300))
    xt = rng.normal(size=(97, 2)) * 2
    small = Discrete(atoms, weights, budget_bytes=9 * 300 * 10)  # 10 rows per block
    log_terms = np.log(weights) - np.sum((xt[:, None] - atoms[None]) ** 2, axis=2) / (2 * 0.3)
    want_logp = special.logsumexp(log_terms, axis=1) - np.log(2 * np.pi * 0.3)
    want_mean = special.softmax(log_terms, axis=1) @ atoms
    assert_allclose(small.noisy_logpdf(xt, 0.3), want_logp, rtol=1e-12)
    assert_allclose(small.posterior_mean(xt, 0.3), want_mean, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("method,extra", [("posterior_mean", 0), ("noisy_score", 20_000 * 8)],
                         ids=["posterior_mean", "noisy_score"])
def test_discrete_respects_memory_budget(method, extra):
    """20000 atoms x 3000 queries would need 480 MB at once; the blocks stay within 4 MiB.

    Both routes block their rows: the posterior mean, and the density's score, which beside the
    buffer holds ``(K, d)`` arrays only (its own centred atoms, their norms, the slopes: ``extra`` each).
    """
    rng = np.random.default_rng(SEED)
    budget = 4 * 2**20
    prior = Discrete(rng.normal(size=(20_000, 1)), budget_bytes=budget)
    xt = rng.normal(size=(3000, 1))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        getattr(prior, method)(xt, 0.1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= budget + 2**18 + 4 * extra  # plus the (3000, 1) inputs and outputs


# What __init__ precomputes for the attention step (the posterior mean), and a change to each.
DISCRETE_PRECOMPUTED = {
    "_centre": lambda value: value + 0.01,
    "_centred": lambda value: 1.01 * value,
    "_half_sq_norms": lambda value: 1.01 * value,
    "_log_weights": lambda value: value + 0.01 * (np.arange(value.size) == 0),
}


@pytest.mark.parametrize("attribute", list(DISCRETE_PRECOMPUTED))
@pytest.mark.parametrize("prior", [CASES["discrete-1d"], CASES["discrete-2d-empirical"], CASES["mixture-2d"]],
                         ids=["discrete-1d", "discrete-2d-empirical", "mixture-2d"])
def test_discrete_density_does_not_read_the_posterior_means_precomputations(monkeypatch, prior, attribute):
    """The referee's case: ``_half_sq_norms`` (or the centring, or the log weights) wrong in ``__init__``.

    Were the density and its score computed from the same arrays as the posterior mean, the two
    would be the exact Tweedie pair of a reweighted prior. They are recomputed from ``atoms`` and
    ``weights``: they do not move, the posterior mean does, and Tweedie's identity fails.
    """
    target = prior._centres if isinstance(prior, GaussianMixture) else prior
    rng = np.random.default_rng(SEED)
    xt = prior.sample(50, rng) + np.sqrt(0.5) * rng.standard_normal((50, prior.dim))
    logp, score, mean = prior.noisy_logpdf(xt, 0.5), prior.noisy_score(xt, 0.5), prior.posterior_mean(xt, 0.5)
    monkeypatch.setattr(target, attribute, DISCRETE_PRECOMPUTED[attribute](getattr(target, attribute)))
    np.testing.assert_array_equal(prior.noisy_logpdf(xt, 0.5), logp)
    np.testing.assert_array_equal(prior.noisy_score(xt, 0.5), score)
    assert np.max(np.abs(prior.posterior_mean(xt, 0.5) - mean)) > 1e-4
    with pytest.raises(AssertionError):
        check_tweedie(prior, 0.5, np.random.default_rng(SEED))


def test_discrete_density_is_stable_far_from_the_atoms():
    """Log space: far queries (``||xt - a_k||^2 / (2 h) ~ 1e6``) give finite log densities and exact scores."""
    prior = Discrete([[-1.0, 0.5], [0.8, 1.6], [2.0, -0.7]], [0.6, 0.25, 0.15])
    xt = np.array([[1e3, -2e3], [-5e2, 7e2], [3e3, 3e3]])
    h = 0.5
    terms = np.log(prior.weights) - np.sum((xt[:, None] - prior.atoms[None]) ** 2, axis=2) / (2 * h)
    assert_allclose(prior.noisy_logpdf(xt, h), special.logsumexp(terms, axis=1) - np.log(2 * np.pi * h), rtol=1e-14)
    want = special.softmax(terms, axis=1) @ prior.atoms
    assert_allclose(prior.noisy_score(xt, h), (want - xt) / h, rtol=1e-10)
    assert_allclose(prior.posterior_mean(xt, h), want, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_discrete_empirical_prior_mmse_1d_many_atoms():
    """Quadrature for 20000 atoms agrees with a Monte Carlo estimate."""
    rng = np.random.default_rng(SEED)
    prior = Discrete(rng.normal(size=(20_000, 1)))
    est = prior.mmse(0.1)
    x, xt = _noisy_draws(prior, 0.1, rng, N_SAMPLES)
    loss = (x - prior.posterior_mean(xt, 0.1))[:, 0] ** 2
    assert abs(loss.mean() - est.value) <= est.error + 5 * loss.std(ddof=1) / np.sqrt(N_SAMPLES)


# --- the score and the posterior mean are separate routes --------------------------------------


def _at_double_bandwidth(real):
    return lambda self, xt, sigma2: real(self, xt, 2 * sigma2)


def _one_percent_off(real):
    return lambda self, xt, sigma2: 1.01 * real(self, xt, sigma2)


@pytest.mark.parametrize("wrong", [_at_double_bandwidth, _one_percent_off], ids=["bandwidth-2sigma2", "times-1.01"])
@pytest.mark.parametrize("prior", CASES.values(), ids=CASES.keys())
def test_tweedie_fails_for_a_wrong_posterior_mean(monkeypatch, prior, wrong):
    """A posterior mean at bandwidth ``2 sigma2`` (or 1% off) fails the Tweedie check of the battery."""
    cls = type(prior)
    monkeypatch.setattr(cls, "_posterior_mean", wrong(cls._posterior_mean))
    with pytest.raises(AssertionError):
        check_tweedie(prior, 0.5, np.random.default_rng(SEED))


# The routine each posterior mean is computed by, and that routine run at bandwidth 2 sigma2.
POSTERIOR_MEAN_ROUTINES = {
    Discrete: (Discrete, "_kernel", _at_double_bandwidth),
    GaussianMixture: (Discrete, "_kernel", _at_double_bandwidth),  # the attention step over the means
    UniformSphere: (UniformSphere, "_shrinkage", lambda real: lambda self, kappa: real(self, kappa / 2)),
    UniformBox: (UniformBox, "_truncation", _at_double_bandwidth),
    Laplace: (Laplace, "_halves", _at_double_bandwidth),
    StudentT: (StudentT, "_posterior_mean", _at_double_bandwidth),  # the ratio of quadratures x q_t / q_t
}


@pytest.mark.parametrize(
    "prior", [p for p in CASES.values() if type(p) in POSTERIOR_MEAN_ROUTINES],
    ids=[k for k, p in CASES.items() if type(p) in POSTERIOR_MEAN_ROUTINES],
)
def test_a_bug_in_the_posterior_mean_routine_does_not_reach_the_score(monkeypatch, prior):
    """The referee's case: the posterior mean's own routine broken (bandwidth ``2 sigma2``).

    The score and the log density come from the density, so they do not move, and Tweedie's
    identity, which would hold if the score were ``(E[x | xt] - xt) / sigma2``, fails.
    """
    xt = prior.sample(50, SEED) + np.sqrt(0.5) * np.random.default_rng(SEED).standard_normal((50, prior.dim))
    score, logp = prior.noisy_score(xt, 0.5), prior.noisy_logpdf(xt, 0.5)
    owner, name, wrong = POSTERIOR_MEAN_ROUTINES[type(prior)]
    monkeypatch.setattr(owner, name, wrong(getattr(owner, name)))
    np.testing.assert_array_equal(prior.noisy_score(xt, 0.5), score)
    np.testing.assert_array_equal(prior.noisy_logpdf(xt, 0.5), logp)
    with pytest.raises(AssertionError):
        check_tweedie(prior, 0.5, np.random.default_rng(SEED))


@pytest.mark.parametrize("prior", CASES.values(), ids=CASES.keys())
def test_finite_differences_fail_for_a_wrong_log_density(monkeypatch, prior):
    """``log p`` 1% off (its gradient 1% off, wherever ``log p`` itself is) fails the score check."""
    cls = type(prior)
    monkeypatch.setattr(cls, "_noisy_logpdf", _one_percent_off(cls._noisy_logpdf))
    with pytest.raises(AssertionError):
        check_score_matches_finite_differences(prior, 0.5, np.random.default_rng(SEED))


# --- properties (Hypothesis) -------------------------------------------------------------------


@example(prior=Discrete([[1e-9], [2.0], [0.0]]), sigma2=0.03162277660168379, reach=3.0)
@example(prior=StudentT(3.0, 0.1, 1), sigma2=1e4, reach=30.0)
@given(prior=any_prior(dim=1), sigma2=sigma2s(1e-4, 1e4), reach=st.sampled_from([3.0, 30.0, 1e3]))
def test_posterior_mean_nondecreasing_1d(prior, sigma2, reach):
    """``d E[x | t] / dt = Var[x | t] / sigma2 >= 0``; allow rounding of a few ulps of ``|t|`` and of the prior's scale.

    A posterior mean computed about a centre (the atoms' mean) carries absolute rounding of the
    centre's size, however small the mean itself (atoms 0 and 1e-9 beside one at 2: means ~5e-10
    moving by 1e-16).
    """
    t = np.linspace(-1, 1, 401)[:, None] * reach * (prior_scale(prior) + np.sqrt(sigma2))
    pm = prior.posterior_mean(t, sigma2)[:, 0]
    assert np.all(np.diff(pm) >= -16 * EPS * (np.abs(t[1:, 0]) + np.abs(pm[1:]) + prior_scale(prior)))


@given(data=st.data())
def test_tweedie_property(data):
    """Posterior mean = ``xt + sigma2 * score``, any prior, noise and query out to far tails (as ``check_tweedie``)."""
    dim = data.draw(st.integers(1, 3))
    prior = data.draw(any_prior(dim))
    sigma2 = data.draw(sigma2s(1e-4, 1e4))
    xt = data.draw(prior_queries(prior, reach=data.draw(st.sampled_from([3.0, 30.0, 1e3]))))
    pm = prior.posterior_mean(xt, sigma2)
    tweedie = xt + sigma2 * prior.noisy_score(xt, sigma2)
    assert np.all(np.abs(pm - tweedie) <= 1e-9 * (np.abs(xt) + np.abs(pm) + prior_scale(prior)))


@given(data=st.data())
def test_score_is_five_point_gradient_property(data):
    """Score = 5-point gradient of ``log p`` within :func:`five_point_tolerance`, any prior and noise."""
    dim = data.draw(st.integers(1, 3))
    prior = data.draw(any_prior(dim))
    sigma2 = data.draw(sigma2s(1e-3, 1e3))
    xt = data.draw(prior_queries(prior, reach=3.0))
    step = 1e-3 * np.sqrt(sigma2)
    fd = five_point_gradient(lambda x: prior.noisy_logpdf(x, sigma2), xt, step)
    tol = five_point_tolerance(prior, sigma2, step, prior.noisy_logpdf(xt, sigma2))
    assert np.all(np.abs(prior.noisy_score(xt, sigma2) - fd) <= tol[:, None])


@given(data=st.data())
def test_far_tails_are_finite(data):
    dim = data.draw(st.integers(1, 3))
    prior = data.draw(any_prior(dim))
    sigma2 = data.draw(sigma2s())
    xt = data.draw(prior_queries(prior))
    logp = prior.noisy_logpdf(xt, sigma2)
    assert logp.shape == (xt.shape[0],) and np.all(np.isfinite(logp))
    for method in (prior.noisy_score, prior.posterior_mean):
        out = method(xt, sigma2)
        assert out.shape == xt.shape and np.all(np.isfinite(out))


@given(data=st.data())
def test_posterior_mean_in_convex_hull(data):
    dim = data.draw(st.integers(1, 3))
    prior = data.draw(boxes(dim) | discretes(dim) | spheres(dim))
    sigma2 = data.draw(sigma2s())
    pm = prior.posterior_mean(data.draw(prior_queries(prior)), sigma2)
    if isinstance(prior, UniformBox):
        assert np.all((prior.low <= pm) & (pm <= prior.high))
    elif isinstance(prior, Discrete):
        slack = 4 * EPS * np.max(np.abs(prior.atoms))
        assert np.all(pm >= prior.atoms.min(axis=0) - slack) and np.all(pm <= prior.atoms.max(axis=0) + slack)
    else:
        assert np.all(np.linalg.norm(pm, axis=1) <= prior.radius * (1 + 1e-12))


# --- bad inputs --------------------------------------------------------------------------------

BAD_PARAMETERS = [
    (lambda: Gaussian(np.nan, 1.0), ValueError, "mean contains nan"),
    (lambda: Gaussian([[0.0, 1.0]], 1.0), ValueError, "Expected 1D array for mean"),
    (lambda: Gaussian("a", 1.0), TypeError, "mean must be an array of real numbers"),
    (lambda: Gaussian(0.0, 0.0), ValueError, r"var == 0.0, must be > 0"),
    (lambda: Gaussian(0.0, np.inf), ValueError, r"var == inf, must be finite"),
    (lambda: GaussianMixture([0.0, 1.0], var=1.0), ValueError, r"Expected 2D array for means.*reshape"),
    (lambda: GaussianMixture([[0.0], [np.inf]], var=1.0), ValueError, "means contains nan or inf"),
    (lambda: GaussianMixture([[0.0], [1.0]], [0.5, 0.6], var=1.0), ValueError, "weights sum to 1.1"),
    (lambda: GaussianMixture([[0.0], [1.0]], [1.5, -0.5], var=1.0), ValueError, r"weights\[1\] == -0.5"),
    (lambda: GaussianMixture([[0.0], [1.0]], [1.0], var=1.0), ValueError, r"weights has shape \(1,\)"),
    (lambda: GaussianMixture([[0.0], [1.0]], var=-2.0), ValueError, r"var == -2.0, must be > 0"),
    (lambda: GaussianMixture([[0.0], [1.0]]), TypeError, "var"),
    (lambda: Discrete([[0.0], [np.nan]]), ValueError, "atoms contains nan"),
    (lambda: Discrete([0.0, 1.0]), ValueError, r"Expected 2D array for atoms.*reshape"),
    (lambda: Discrete([[0.0], [1.0]], [0.25, 0.7]), ValueError, "weights sum to 0.95"),
    (lambda: Discrete([[0.0], [1.0]], [[0.5, 0.5]]), ValueError, "Expected 1D array for weights"),
    (lambda: Discrete([[0.0]] * 100, budget_bytes=500), ValueError, r"budget_bytes == 500 is too small for 100 atoms"),
    (lambda: Discrete([[0.0]], budget_bytes=0), ValueError, r"budget_bytes == 0, must be >= 1"),
    (lambda: UniformSphere(0), ValueError, r"dim == 0, must be >= 1"),
    (lambda: UniformSphere(2.5), TypeError, "dim must be an integer"),
    (lambda: UniformSphere(2001), ValueError, r"dim == 2001, must be <= 2000"),
    (lambda: UniformSphere(3, -1.0), ValueError, r"radius == -1.0, must be > 0"),
    (lambda: UniformSphere(3, np.nan), ValueError, r"radius == nan, must be finite"),
    (lambda: UniformBox(1.0, 0.0), ValueError, r"low\[0\] == 1.0 >= high\[0\] == 0.0"),
    (lambda: UniformBox([0.0, 2.0], [1.0, 2.0]), ValueError, r"low\[1\] == 2.0 >= high\[1\] == 2.0"),
    (lambda: UniformBox([0.0, 0.0], [1.0]), ValueError, r"low has shape \(2,\) but high has shape \(1,\)"),
    (lambda: UniformBox(0.0, np.inf), ValueError, "high contains nan or inf"),
    (lambda: Laplace(0.0, 1), ValueError, r"scale == 0.0, must be > 0"),
    (lambda: Laplace(np.inf, 1), ValueError, r"scale == inf, must be finite"),
    (lambda: Laplace(1.0, 0), ValueError, r"dim == 0, must be >= 1"),
    (lambda: Laplace(1.0, 1.5), TypeError, "dim must be an integer"),
    (lambda: StudentT(0.0, 1.0, 1), ValueError, r"df == 0.0, must be > 0"),
    (lambda: StudentT(-3.0, 1.0, 1), ValueError, r"df == -3.0, must be > 0"),
    (lambda: StudentT(np.inf, 1.0, 1), ValueError, r"df == inf, must be finite"),
    (lambda: StudentT("3", 1.0, 1), TypeError, "df must be a real number"),
    (lambda: StudentT(3.0, 0.0, 1), ValueError, r"scale == 0.0, must be > 0"),
    (lambda: StudentT(3.0, np.nan, 1), ValueError, r"scale == nan, must be finite"),
    (lambda: StudentT(3.0, 1.0, 0), ValueError, r"dim == 0, must be >= 1"),
    (lambda: StudentT(3.0, 1.0, 2.0), TypeError, "dim must be an integer"),
    (lambda: StudentT(2.0, 1.0, 1).moments(), ValueError, r"df == 2.0: .* infinite variance .* needs df > 2"),
]


@pytest.mark.parametrize(("make", "error", "match"), BAD_PARAMETERS)
def test_bad_parameters_raise_naming_them(make, error, match):
    with pytest.raises(error, match=match):
        make()


BAD_CALLS = [
    (lambda p: p.noisy_logpdf(np.zeros(p.dim + 1), 1.0), ValueError, r"Expected 2D array for xt.*reshape"),
    (lambda p: p.noisy_score(np.zeros((2, p.dim + 1)), 1.0), ValueError, r"xt has d == \d+ coordinates per point but"),
    (lambda p: p.posterior_mean(np.full((1, p.dim), np.nan), 1.0), ValueError, "xt contains nan or inf"),
    (lambda p: p.posterior_mean(np.zeros((1, p.dim)), 0.0), ValueError, r"sigma2 == 0.0, must be > 0"),
    (lambda p: p.noisy_logpdf(np.zeros((1, p.dim)), np.nan), ValueError, r"sigma2 == nan, must be finite"),
    (lambda p: p.noisy_score(np.zeros((1, p.dim)), "1"), TypeError, "sigma2 must be a real number"),
    (lambda p: p.sample(-1, 1), ValueError, r"n == -1, must be >= 0"),
    (lambda p: p.sample(3, "seed"), TypeError, "rng must be"),
    (lambda p: p.mmse(-1.0), ValueError, r"sigma2 == -1.0, must be > 0"),
    (lambda p: p.mmse(1.0, n_mc=1), ValueError, r"n_mc == 1, must be >= 2"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD_CALLS)
@pytest.mark.parametrize(
    "prior",
    [CASES[k] for k in ("gaussian-3d", "mixture-2d", "discrete-1d", "sphere-2d", "box-1d", "laplace-3d", "student-t-2d")],
)
def test_bad_calls_raise_naming_the_argument(prior, call, error, match):
    with pytest.raises(error, match=match):
        call(prior)


# --- small API facts ---------------------------------------------------------------------------


def test_repr_shows_parameters():
    assert repr(Gaussian(0.5, 2.0)) == "Gaussian(mean=[0.5], var=2.0)"
    assert repr(GaussianMixture([[0.0], [1.0]], [0.25, 0.75], var=0.5)) == (
        "GaussianMixture(means=[[0.0], [1.0]], weights=[0.25, 0.75], var=0.5)"
    )
    want = "Discrete(atoms=<array of shape (20, 2)>, weights=<array of shape (20,)>)"
    assert repr(Discrete(np.zeros((20, 2)))) == want
    assert repr(UniformSphere(3, 2.0)) == "UniformSphere(dim=3, radius=2.0)"
    assert repr(UniformBox([0.0, 1.0], [1.0, 3.0])) == "UniformBox(low=[0.0, 1.0], high=[1.0, 3.0])"
    assert repr(Laplace(0.5, 4)) == "Laplace(scale=0.5, dim=4)"
    assert repr(StudentT(3, 0.5, 2)) == "StudentT(df=3.0, scale=0.5, dim=2)"


def test_risk_estimate_is_frozen_and_monte_carlo_is_seeded():
    prior = CASES["mixture-2d"]
    first, second = prior.mmse(1.0, rng=3, n_mc=2000), prior.mmse(1.0, rng=3, n_mc=2000)
    assert isinstance(first, RiskEstimate) and first == second
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.value = 0.0


# --- moments and samples against the closed forms of each law -----------------------------------------------


def _mixture_moments(means, weights, var):
    mean = weights @ means
    return mean, var + weights @ means**2 - mean**2


MOMENTS = {
    "gaussian": (Gaussian([1.0, -2.0, 0.5], 0.7), ([1.0, -2.0, 0.5], [0.7] * 3)),
    "mixture": (GaussianMixture([[-2.0], [1.5]], [0.3, 0.7], var=0.25),
                _mixture_moments(np.array([-2.0, 1.5]), np.array([0.3, 0.7]), 0.25)),
    "discrete": (Discrete([[-1.0], [0.5], [2.0]], [0.2, 0.5, 0.3]),
                 _mixture_moments(np.array([-1.0, 0.5, 2.0]), np.array([0.2, 0.5, 0.3]), 0.0)),
    "sphere": (UniformSphere(3, 0.7), ([0.0] * 3, [0.7**2 / 3] * 3)),  # E|x|^2 = r^2, shared by 3 coordinates
    "box": (UniformBox([-1.0, 0.0, 2.0], [0.0, 3.0, 2.5]), ([-0.5, 1.5, 2.25], [1 / 12, 9 / 12, 0.25 / 12])),
    "laplace": (Laplace(0.8, 2), ([0.0, 0.0], [2 * 0.8**2] * 2)),
    "student-t": (StudentT(5.0, 0.7, 2), ([0.0, 0.0], [0.7**2 * 5.0 / 3.0] * 2)),
}


@pytest.mark.parametrize("name", MOMENTS)
def test_moments_are_the_closed_forms(name):
    """``mean()`` and ``var()`` are the closed forms, and ``moments()`` is the two of them."""
    prior, (mean, var) = MOMENTS[name]
    got_mean, got_var = prior.mean(), prior.var()
    assert got_mean.shape == got_var.shape == (prior.dim,)
    assert_allclose(got_mean, np.broadcast_to(mean, (prior.dim,)), rtol=1e-12, atol=1e-15)
    assert_allclose(got_var, np.broadcast_to(var, (prior.dim,)), rtol=1e-12)
    both = prior.moments()
    np.testing.assert_array_equal(both[0], got_mean)
    np.testing.assert_array_equal(both[1], got_var)


N_LAW = 1_000_000


def _frequency(event, probability):
    """The frequency of ``event`` over the draws is ``probability`` within 5 binomial standard errors."""
    assert abs(np.mean(event) - probability) <= 5 * np.sqrt(probability * (1 - probability) / np.size(event))


def _half_within(x, centre, quartile):
    """Half of the draws lie within ``quartile`` of ``centre`` (the median of the distance, closed form).

    At N_LAW draws the binomial standard error is 0.05%; a law 1% too wide moves the frequency by 0.3-0.4% (7-9
    standard errors) for the laws below.
    """
    _frequency(np.abs(x - centre) <= quartile, 0.5)


LAWS = {
    "gaussian": (Gaussian(0.3, 2.0), lambda x: _half_within(x, 0.3, np.sqrt(2.0) * stats.norm.ppf(0.75))),
    # P(x <= 1.5) = 0.3 Phi(3.5 / 0.5) + 0.7 / 2: 1.5 is the second component's mean
    "mixture": (GaussianMixture([[-2.0], [1.5]], [0.3, 0.7], var=0.25),
                lambda x: _frequency(x <= 1.5, 0.3 * stats.norm.cdf(7.0) + 0.35)),
    "discrete": (Discrete([[-1.0], [0.5], [2.0]], [0.2, 0.5, 0.3]),
                 lambda x: (np.testing.assert_array_equal(np.isin(x, [-1.0, 0.5, 2.0]), True),
                            _frequency(x == 0.5, 0.5))),
    "sphere": (UniformSphere(3, 0.7),
               lambda x: (assert_allclose(np.linalg.norm(x, axis=1), 0.7, rtol=1e-12), _frequency(x[:, 2] > 0, 0.5))),
    "box": (UniformBox([-1.0, 0.0, 2.0], [0.0, 3.0, 2.5]),
            lambda x: (np.testing.assert_array_equal((x >= [-1.0, 0.0, 2.0]) & (x <= [0.0, 3.0, 2.5]), True),
                       assert_allclose(x.min(axis=0), [-1.0, 0.0, 2.0], atol=1e-4),
                       assert_allclose(x.max(axis=0), [0.0, 3.0, 2.5], atol=1e-4))),
    "laplace": (Laplace(0.8, 1), lambda x: _half_within(x, 0.0, 0.8 * np.log(2))),
    "student-t": (StudentT(3.0, 1.0, 1), lambda x: _half_within(x, 0.0, stats.t.ppf(0.75, 3.0))),
}


@pytest.mark.parametrize("name", LAWS)
def test_samples_follow_the_law_to_a_fraction_of_a_percent(name):
    prior, law = LAWS[name]
    x = prior.sample(N_LAW, np.random.default_rng(SEED))
    assert x.shape == (N_LAW, prior.dim) and x.dtype == np.float64
    law(x)
