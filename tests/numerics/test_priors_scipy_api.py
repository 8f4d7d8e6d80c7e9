"""The scipy.stats-like interface of :mod:`attneb.numerics.priors` (issue 25, item 2).

``rvs``, ``sample``'s optional generator and ``n = 0``, ``mean()`` and ``var()`` (the mean and the
per-coordinate variances) and ``stats``, ``params()`` (the constructor's arguments, which the
sweep's canonical specs are made of) and ``noisy(sigma2)`` (the frozen law of ``xt``), on every
reference prior of ``test_priors.CASES`` (and, for ``params``, of C10's ``REFERENCE_PRIORS``). Statistical checks allow 5 standard errors estimated from the draws
themselves; quadrature checks allow quad's own error estimate.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import integrate, stats

from attneb.numerics.experiments import draw_batch
from attneb.numerics.priors import Discrete, Gaussian, GaussianMixture, Laplace, NoisyPrior, StudentT, UniformBox
from attneb.numerics.sweep import Experiment
from attneb.numerics.sweep.canonical import canonical_json, plain
from attneb.numerics.sweep.registry import prior_families
from attneb.proofs_check.engine.finite_differences import five_point_gradient
from attneb.proofs_check.topics.tweedie import REFERENCE_PRIORS
from tests.numerics.test_priors import CASES, five_point_tolerance
from tests.strategies import prior_scale

SEED = 20260601
N_MOMENTS = 100_000
IDS = list(CASES)


def _finite_fourth_moment(prior):
    """Whether the sample variance has a standard error: not for a Student-t prior with ``df <= 4``."""
    return not (isinstance(prior, StudentT) and prior.df <= 4)


def test_the_cases_cover_every_family():
    """Every family the sweeps know (concrete ``Prior`` subclasses in ``priors.__all__``) has a reference case."""
    assert {type(p) for p in CASES.values()} == set(prior_families().values())
    assert NoisyPrior not in prior_families().values()  # exported, but not a prior family


# --- rvs and sample ----------------------------------------------------------------------------


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_rvs_shapes_follow_scipy(prior):
    d = prior.dim
    for size, shape in [(None, (d,)), (5, (5, d)), ((2, 3), (2, 3, d)), ([4], (4, d)), (0, (0, d)), ((2, 0), (2, 0, d)),
                        (np.int64(3), (3, d))]:
        x = prior.rvs(size, random_state=SEED)
        assert x.shape == shape and x.dtype == np.float64, size
        assert np.all(np.isfinite(x))


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_rvs_is_sample_with_a_seeded_generator(prior):
    d = prior.dim
    want = prior.sample(6, np.random.default_rng(SEED))
    assert_array_equal(prior.rvs(6, random_state=SEED), want)
    assert_array_equal(prior.rvs(6, random_state=SEED), want)  # reproducible
    assert_array_equal(prior.rvs(6, random_state=np.random.default_rng(SEED)), want)
    assert_array_equal(prior.rvs(6, random_state=np.random.SeedSequence(SEED)), want)
    assert_array_equal(prior.rvs((2, 3), random_state=SEED), want.reshape(2, 3, d))
    assert_array_equal(prior.rvs(random_state=SEED), prior.sample(1, np.random.default_rng(SEED))[0])
    assert_array_equal(prior.sample(6, SEED), want)
    assert_array_equal(prior.sample(6, rng=SEED), want)
    # a Generator is used as it is, advanced by each call, as sample advances it
    rng, again = np.random.default_rng(SEED), np.random.default_rng(SEED)
    first, second = prior.rvs(2, random_state=rng), prior.rvs(4, random_state=rng)
    assert_array_equal(first, prior.sample(2, again))
    assert_array_equal(second, prior.sample(4, again))


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_sample_of_none_takes_fresh_entropy_and_zero_points_is_empty(prior):
    assert prior.sample(3).shape == (3, prior.dim)
    assert prior.rvs(3).shape == (3, prior.dim)
    for rng in (None, SEED, np.random.default_rng(SEED)):
        empty = prior.sample(0, rng)
        assert empty.shape == (0, prior.dim) and empty.dtype == np.float64
    rng = np.random.default_rng(SEED)
    prior.sample(0, rng)  # draws nothing
    assert_array_equal(prior.sample(4, rng), prior.sample(4, SEED))


# The families whose draws are one numpy call: the draws written out from the parameters, so that
# sample(n, rng) is seen to give the same numbers as before rng became optional (bit for bit).
WRITTEN_OUT = [
    (Gaussian([1.0, -2.0], 0.7),
     lambda p, rng, n: p.params()["mean"] + np.sqrt(p.params()["var"]) * rng.standard_normal((n, p.dim))),
    (UniformBox([-1.0, 0.0], [0.0, 3.0]), lambda p, rng, n: rng.uniform(p.low, p.high, size=(n, p.dim))),
    (Laplace(0.8, 2), lambda p, rng, n: rng.laplace(0.0, p.scale, size=(n, p.dim))),
    (StudentT(3.0, 0.7, 2), lambda p, rng, n: p.scale * rng.standard_t(p.df, size=(n, p.dim))),
]


@pytest.mark.parametrize(("prior", "draws"), WRITTEN_OUT, ids=[type(p).__name__ for p, _ in WRITTEN_OUT])
def test_positional_sample_gives_the_same_numbers_as_before(prior, draws):
    want = draws(prior, np.random.default_rng(SEED), 50)
    assert_array_equal(prior.sample(50, np.random.default_rng(SEED)), want)
    assert_array_equal(prior.rvs(50, random_state=SEED), want)


# --- mean, var and stats ---------------------------------------------------------------------------


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_mean_and_var_are_new_arrays_of_shape_dim(prior):
    mean, var = prior.mean(), prior.var()
    assert mean.shape == var.shape == (prior.dim,) and mean.dtype == var.dtype == np.float64
    want_mean, want_var = mean.copy(), var.copy()
    mean += 1.0  # the caller's own arrays: the prior does not change
    var += 1.0
    assert_array_equal(prior.mean(), want_mean)
    assert_array_equal(prior.var(), want_var)


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_stats_is_mean_and_var_and_follows_scipy_letters(prior):
    mean, var = prior.stats()
    assert mean.shape == var.shape == (prior.dim,)
    want_mean, want_var = prior.mean(), prior.var()
    assert_array_equal(mean, want_mean)
    assert_array_equal(var, want_var)
    assert_array_equal(prior.stats("m"), want_mean)
    assert_array_equal(prior.stats("v"), want_var)
    got = prior.stats("vm")  # scipy's order, whatever the letters' order
    assert_array_equal(got[0], want_mean)
    assert_array_equal(got[1], want_var)


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_stats_match_the_draws_within_5_standard_errors(prior):
    """The draws' mean and mean square about ``E[x]``, each within 5 of its standard errors (from the draws).

    ``Var[x_i]`` is checked as the mean of ``(x_i - E[x_i])^2``, an average of independent terms with
    standard error ``sd / sqrt(N)`` (no bias, and none of the sample variance's ``O(1 / N)`` terms,
    which dominate where ``(x_i - E[x_i])^2`` barely varies: the 1-D sphere's two points). It exists
    only with a finite fourth moment, so a Student-t prior with ``df <= 4`` is checked on its mean only.
    """
    _check_mean_and_variance(prior.rvs(N_MOMENTS, random_state=SEED), prior.mean(), prior.var(),
                             _finite_fourth_moment(prior))


def _check_mean_and_variance(x, mean, var, check_var):
    assert np.all(np.abs(x.mean(axis=0) - mean) <= 5 * x.std(axis=0, ddof=1) / np.sqrt(len(x)))
    if check_var:
        squares = (x - mean) ** 2
        assert np.all(np.abs(squares.mean(axis=0) - var) <= 5 * squares.std(axis=0, ddof=1) / np.sqrt(len(x)))


def test_mean_and_var_are_the_closed_forms_of_the_gaussian_the_mixture_and_the_box():
    gaussian = Gaussian([1.0, -2.0, 0.5], 0.7)
    assert_array_equal(gaussian.mean(), [1.0, -2.0, 0.5])
    assert_array_equal(gaussian.var(), [0.7] * 3)
    # the mixture's var() is the prior's (law of total variance), its component_var the argument var
    mixture = GaussianMixture([[-2.0, 1.0], [1.5, 1.0]], [0.3, 0.7], var=0.25)
    assert mixture.component_var == 0.25
    assert_allclose(mixture.mean(), [0.3 * -2.0 + 0.7 * 1.5, 1.0], rtol=1e-15)
    assert_allclose(mixture.var(), [0.25 + 0.3 * 0.7 * 3.5**2, 0.25], rtol=1e-14)
    box = UniformBox([-1.0, 0.0, 2.0], [0.0, 3.0, 2.5])
    assert_allclose(box.mean(), [-0.5, 1.5, 2.25], rtol=1e-15)
    assert_allclose(box.var(), [1 / 12, 9 / 12, 0.25 / 12], rtol=1e-15)


@pytest.mark.parametrize("df", [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 10.0])
def test_student_t_stats_follow_scipy_where_moments_do_not_exist(df):
    """Variance as ``scipy.stats.t`` (``inf`` for ``1 < df <= 2``, ``nan`` for ``df <= 1``); mean ``0``, or ``nan``
    for ``df <= 1``, as ``scipy.stats.cauchy`` gives it (``scipy.stats.t`` says ``inf`` there)."""
    scale = 0.7
    prior = StudentT(df, scale, 2)
    mean, var = prior.mean(), prior.var()
    assert_array_equal(prior.stats("m"), mean)
    assert_array_equal(prior.stats("v"), var)
    ref = stats.t(df, scale=scale)
    assert_allclose(var, np.full(2, ref.var()), rtol=1e-15, equal_nan=True)
    if df > 1:
        assert_array_equal(mean, np.full(2, ref.mean()))
    else:
        assert np.all(np.isnan(mean))
        if df == 1:
            assert np.isnan(stats.cauchy(scale=scale).mean())
    if df <= 2:
        with pytest.raises(ValueError, match=rf"df == {df}: .* needs df > 2"):
            StudentT(df, scale, 2).moments()


# --- noisy(sigma2) ---------------------------------------------------------------------------------


def _queries(prior, sigma2, n=8):
    _, xt = draw_batch(prior, sigma2, n, SEED)
    return np.concatenate([xt, np.zeros((1, prior.dim)), np.full((1, prior.dim), 5 * prior_scale(prior))])


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_noisy_is_the_prior_at_a_frozen_sigma2(prior):
    sigma2 = 0.6
    noisy = prior.noisy(sigma2)
    assert isinstance(noisy, NoisyPrior) and noisy.prior is prior and noisy.sigma2 == sigma2
    assert noisy.dim == prior.dim
    assert repr(noisy) == f"NoisyPrior({prior!r}, sigma2=0.6)"
    xt = _queries(prior, sigma2)
    assert_array_equal(noisy.logpdf(xt), prior.noisy_logpdf(xt, sigma2))
    assert_array_equal(noisy.score(xt), prior.noisy_score(xt, sigma2))
    assert_array_equal(noisy.mean(xt), prior.posterior_mean(xt, sigma2))


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_noisy_mean_is_tweedie(prior):
    """``mean(xt) = xt + sigma2 * score(xt)`` to 1e-9 relative (``test_priors.check_tweedie``'s tolerance)."""
    sigma2 = 0.6
    noisy = prior.noisy(sigma2)
    xt = _queries(prior, sigma2, 50)
    pm = noisy.mean(xt)
    assert np.all(np.abs(pm - (xt + sigma2 * noisy.score(xt))) <= 1e-9 * (np.abs(xt) + np.abs(pm) + prior_scale(prior)))


@pytest.mark.parametrize("name", ["mixture-2d", "laplace-1d", "box-3d", "sphere-3d", "discrete-1d", "gaussian-3d"])
def test_noisy_score_is_the_gradient_of_its_logpdf(name):
    """The 5-point gradient of ``logpdf``, step ``1e-3 sqrt(sigma2)``, within ``test_priors.five_point_tolerance``."""
    prior, sigma2 = CASES[name], 0.6
    noisy = prior.noisy(sigma2)
    step = 1e-3 * np.sqrt(sigma2)
    xt = _queries(prior, sigma2)
    fd = five_point_gradient(noisy.logpdf, xt, step)
    tol = five_point_tolerance(prior, sigma2, step, noisy.logpdf(xt))
    assert np.all(np.abs(noisy.score(xt) - fd) <= tol[:, None])


@pytest.mark.parametrize(("name", "sigma2"), [("mixture-1d", 0.5), ("laplace-1d", 1.0)])
def test_noisy_logpdf_integrates_to_one_in_1d(name, sigma2):
    """``int p(xt) dxt = 1`` by quad over three pieces (the two infinite tails apart), within quad's error estimates."""
    noisy = CASES[name].noisy(sigma2)

    def density(t):
        return float(np.exp(noisy.logpdf([[t]])[0]))

    lo, hi = -8.0, 8.0
    pieces = [integrate.quad(density, -np.inf, lo, epsrel=1e-11, limit=200),
              integrate.quad(density, lo, hi, points=[-2.0, 0.0, 1.5], epsrel=1e-11, limit=200),
              integrate.quad(density, hi, np.inf, epsrel=1e-11, limit=200)]
    total, error = sum(v for v, _ in pieces), sum(e for _, e in pieces)
    assert abs(total - 1) <= error + 1e-12


@pytest.mark.parametrize("prior", CASES.values(), ids=IDS)
def test_noisy_rvs_shapes_order_and_moments(prior):
    """Shapes as :meth:`Prior.rvs`; the draws are ``draw_batch``'s noisy half; mean and variance within 5 SE.

    ``xt``'s coordinates have mean ``E[x_i]`` and variance ``Var[x_i] + sigma2``, checked as in
    :func:`test_stats_match_the_draws_within_5_standard_errors` (the variance where the fourth
    moment is finite).
    """
    sigma2, d = 0.6, prior.dim
    noisy = prior.noisy(sigma2)
    for size, shape in [(None, (d,)), (5, (5, d)), ((2, 3), (2, 3, d)), (0, (0, d))]:
        assert noisy.rvs(size, random_state=SEED).shape == shape, size
    _, want = draw_batch(prior, sigma2, 6, SEED)
    assert_array_equal(noisy.rvs(6, random_state=SEED), want)
    assert_array_equal(noisy.rvs(6, random_state=np.random.default_rng(SEED)), want)
    assert_array_equal(noisy.rvs((3, 2), random_state=SEED), want.reshape(3, 2, d))
    assert noisy.rvs(3).shape == (3, d)

    xt = noisy.rvs(N_MOMENTS, random_state=SEED + 1)
    _check_mean_and_variance(xt, prior.mean(), prior.var() + sigma2, _finite_fourth_moment(prior))


# --- params() and the sweep's canonical spec --------------------------------------------------------

#: Every reference prior: the test cases of every family and C10's reference priors.
ALL_PRIORS = {**CASES, **{f"C10-{name}": prior for name, (_, prior) in REFERENCE_PRIORS.items()}}


def _assert_same_params(got, want):
    assert list(got) == list(want)
    for name, value in want.items():
        assert type(got[name]) is type(value), name
        assert_array_equal(got[name], value)


@pytest.mark.parametrize("prior", ALL_PRIORS.values(), ids=list(ALL_PRIORS))
def test_params_rebuild_the_prior(prior):
    """``type(p)(**p.params())`` has the same parameters, repr and draws; the keys are ``_param_names``."""
    params = prior.params()
    assert tuple(params) == type(prior)._param_names
    again = type(prior)(**params)
    _assert_same_params(again.params(), params)
    assert repr(again) == repr(prior)
    assert_array_equal(again.rvs(5, random_state=0), prior.rvs(5, random_state=0))


def test_params_are_the_validated_arguments_and_not_the_moments():
    gaussian = Gaussian(0.5, 2)
    _assert_same_params(gaussian.params(), {"mean": np.array([0.5]), "var": 2.0})
    assert repr(gaussian) == "Gaussian(mean=[0.5], var=2.0)"
    mixture = GaussianMixture([[-2.0], [2.0]], var=0.25)
    _assert_same_params(mixture.params(), {"means": np.array([[-2.0], [2.0]]), "weights": np.array([0.5, 0.5]),
                                           "var": 0.25})
    assert mixture.params()["var"] == mixture.component_var == 0.25 and mixture.var()[0] == 4.25
    discrete = Discrete([[0.0], [1.0]], budget_bytes=4096)  # a setting, not a parameter of the law
    assert list(discrete.params()) == ["atoms", "weights"]
    # scikit-learn takes any object with get_params for an estimator (clone, OracleBayes's deep params)
    assert not hasattr(gaussian, "get_params") and not hasattr(gaussian, "set_params")


def _canonical_spec(prior_config):
    """The canonical prior spec the sweep stores runs under: ``Experiment.prior`` of a one-run experiment."""
    config = {"name": "spec", "prior": prior_config, "sigma2": 0.5, "n": [8], "seeds": [0], "estimators": ["linear"]}
    return Experiment.from_dict(config).prior


@pytest.mark.parametrize("prior", ALL_PRIORS.values(), ids=list(ALL_PRIORS))
def test_the_canonical_spec_is_the_family_and_the_params(prior):
    family = type(prior).__name__
    want = {"family": family, **plain(prior.params())}
    spec = _canonical_spec({"family": family, **prior.params()})
    assert spec == want and list(spec) == list(want)
    assert canonical_json(spec) == canonical_json(want)


# The canonical specs (and their JSON, which keys the stored runs) as the sweep made them before the
# priors had params(), mean() and var(): arguments as the experiment files give them, defaults left out.
LITERAL_SPECS = [
    ({"family": "Gaussian", "mean": 0.7, "var": 2.3},
     {"family": "Gaussian", "mean": [0.7], "var": 2.3}, '{"family":"Gaussian","mean":[0.7],"var":2.3}'),
    ({"family": "Gaussian", "mean": [0.7, -1.1], "var": 0.6},
     {"family": "Gaussian", "mean": [0.7, -1.1], "var": 0.6}, '{"family":"Gaussian","mean":[0.7,-1.1],"var":0.6}'),
    ({"family": "Gaussian", "mean": 1, "var": 2},
     {"family": "Gaussian", "mean": [1.0], "var": 2.0}, '{"family":"Gaussian","mean":[1.0],"var":2.0}'),
    ({"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25},
     {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25, "weights": [0.5, 0.5]},
     '{"family":"GaussianMixture","means":[[-2.0],[2.0]],"var":0.25,"weights":[0.5,0.5]}'),
    ({"family": "Discrete", "atoms": [[0.0], [1.0]], "budget_bytes": 4096},
     {"family": "Discrete", "atoms": [[0.0], [1.0]], "budget_bytes": 4096, "weights": [0.5, 0.5]},
     '{"atoms":[[0.0],[1.0]],"budget_bytes":4096,"family":"Discrete","weights":[0.5,0.5]}'),
    ({"family": "UniformSphere", "dim": 4}, {"family": "UniformSphere", "dim": 4, "radius": 1.0},
     '{"dim":4,"family":"UniformSphere","radius":1.0}'),
    ({"family": "StudentT", "df": 1, "scale": 3, "dim": 2}, {"family": "StudentT", "df": 1.0, "scale": 3.0, "dim": 2},
     '{"df":1.0,"dim":2,"family":"StudentT","scale":3.0}'),
]


@pytest.mark.parametrize(("config", "spec", "key"), LITERAL_SPECS, ids=[c["family"] for c, _, _ in LITERAL_SPECS])
def test_the_canonical_spec_is_as_before(config, spec, key):
    got = _canonical_spec(config)
    assert got == spec and all(type(got[k]) is type(spec[k]) for k in spec)
    assert canonical_json(got) == key


# --- bad input -------------------------------------------------------------------------------------

BAD = [
    (lambda p: p.rvs(-1), ValueError, r"size == -1, must be >= 0"),
    (lambda p: p.rvs((2, -1)), ValueError, r"size == \(2, -1\), every entry must be >= 0"),
    (lambda p: p.rvs(2.5), TypeError, r"size must be None, an integer >= 0 or a tuple of them, got 2.5"),
    (lambda p: p.rvs(True), TypeError, r"size must be .* got True of type bool"),
    (lambda p: p.rvs("3"), TypeError, r"size must be .* got '3'"),
    (lambda p: p.rvs(2, random_state="abc"), TypeError, r"random_state must be a numpy.random.Generator.* got 'abc'"),
    (lambda p: p.rvs(2, random_state=-3), ValueError, r"random_state == -3 is not a valid seed"),
    (lambda p: p.rvs(2, random_state=np.random.RandomState(0)), TypeError, r"random_state is a legacy .*RandomState"),
    (lambda p: p.sample(-1), ValueError, r"n == -1, must be >= 0"),
    (lambda p: p.sample(2.0), TypeError, r"n must be an integer"),
    (lambda p: p.sample(3, "seed"), TypeError, r"rng must be a numpy.random.Generator.* got 'seed'"),
    (lambda p: p.stats("s"), ValueError, r"moments == 's'; expected a non-empty string of the letters 'm'"),
    (lambda p: p.stats(""), ValueError, r"moments == ''"),
    (lambda p: p.noisy(0.0), ValueError, r"sigma2 == 0.0, must be > 0"),
    (lambda p: p.noisy(-1), ValueError, r"sigma2 == -1.0, must be > 0"),
    (lambda p: p.noisy(np.nan), ValueError, r"sigma2 == nan, must be finite"),
    (lambda p: p.noisy("1"), TypeError, r"sigma2 must be a real number"),
    (lambda p: p.noisy(1.0).rvs(-1), ValueError, r"size == -1, must be >= 0"),
    (lambda p: p.noisy(1.0).rvs(2.5), TypeError, r"size must be .* got 2.5"),
    (lambda p: p.noisy(1.0).rvs(2, random_state="abc"), TypeError, r"random_state must be .* got 'abc'"),
    (lambda p: p.noisy(1.0).logpdf(np.zeros(p.dim)), ValueError, r"Expected 2D array for xt.*reshape"),
    (lambda p: NoisyPrior("Gaussian", 1.0), TypeError, r"prior must be a Prior"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD)
@pytest.mark.parametrize("prior", [CASES[k] for k in ("gaussian-3d", "discrete-1d", "student-t-2d")],
                         ids=["gaussian-3d", "discrete-1d", "student-t-2d"])
def test_bad_input_raises_naming_the_argument(prior, call, error, match):
    with pytest.raises(error, match=match):
        call(prior)
