"""Hypothesis strategies shared by the tests: bounded, finite floats only.

Priors (:mod:`attneb.numerics.priors`): one strategy per family, ``priors`` drawing from all of them,
noise variances on a log scale and query points out to far tails. Point clouds, bandwidths
and rotations for the kernel, transformer and flow tests.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attneb.numerics.priors import Discrete, Gaussian, GaussianMixture, Laplace, UniformBox, UniformSphere


def finite_floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats in ``[lo, hi]``, never nan or inf."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def log_uniform(draw, lo: float, hi: float) -> float:
    """A float in ``[lo, hi]`` drawn uniformly in ``log10``."""
    return float(min(hi, max(lo, 10.0 ** draw(finite_floats(np.log10(lo), np.log10(hi))))))


def sigma2s(lo: float = 1e-6, hi: float = 1e6) -> st.SearchStrategy[float]:
    """Noise variances, log-uniform in ``[lo, hi]``."""
    return log_uniform(lo, hi)


@st.composite
def _weights(draw, n: int) -> np.ndarray:
    raw = np.array(draw(st.lists(finite_floats(0.05, 1.0), min_size=n, max_size=n)))
    return raw / raw.sum()


@st.composite
def gaussians(draw, dim: int = 1) -> Gaussian:
    mean = draw(st.lists(finite_floats(-5, 5), min_size=dim, max_size=dim))
    return Gaussian(mean, draw(log_uniform(1e-2, 1e2)))


@st.composite
def gaussian_mixtures(draw, dim: int = 1, max_components: int = 4) -> GaussianMixture:
    k = draw(st.integers(1, max_components))
    means = draw(hnp.arrays(np.float64, (k, dim), elements=finite_floats(-5, 5)))
    return GaussianMixture(means, draw(_weights(k)), var=draw(log_uniform(1e-2, 1e1)))


@st.composite
def discretes(draw, dim: int = 1, max_atoms: int = 6) -> Discrete:
    k = draw(st.integers(1, max_atoms))
    atoms = draw(hnp.arrays(np.float64, (k, dim), elements=finite_floats(-5, 5)))
    weights = draw(st.none() | _weights(k))
    return Discrete(atoms, weights)


@st.composite
def spheres(draw, dim: int | None = None) -> UniformSphere:
    dim = draw(st.sampled_from([1, 2, 3, 5, 10])) if dim is None else dim
    return UniformSphere(dim, draw(log_uniform(1e-1, 1e1)))


@st.composite
def boxes(draw, dim: int = 1) -> UniformBox:
    low = np.array(draw(st.lists(finite_floats(-5, 5), min_size=dim, max_size=dim)))
    width = np.array(draw(st.lists(log_uniform(1e-2, 1e1), min_size=dim, max_size=dim)))
    return UniformBox(low, low + width)


@st.composite
def laplaces(draw, dim: int = 1) -> Laplace:
    return Laplace(draw(log_uniform(1e-1, 1e1)), dim)


def priors(dim: int = 1) -> st.SearchStrategy:
    """A prior of any family on ``R^dim``."""
    return st.one_of(
        gaussians(dim), gaussian_mixtures(dim), discretes(dim), spheres(dim), boxes(dim), laplaces(dim)
    )


def prior_scale(prior) -> float:
    """``max_i |E x_i| + max_i sd(x_i)``: the length scale of the prior."""
    mean, var = prior.moments()
    return float(np.max(np.abs(mean)) + np.sqrt(np.max(var)))


@st.composite
def prior_queries(draw, prior, reach: float = 1e3, max_rows: int = 8) -> np.ndarray:
    """Points ``(M, prior.dim)`` with coordinates up to ``reach * max(prior_scale(prior), 1)``."""
    bound = reach * max(prior_scale(prior), 1.0)
    rows = draw(st.integers(1, max_rows))
    return draw(hnp.arrays(np.float64, (rows, prior.dim), elements=finite_floats(-bound, bound)))


# --- point clouds for the kernel, flow and estimator tests -------------------------------

COORD = finite_floats(-5.0, 5.0)


@st.composite
def point_clouds(draw, *, min_n=1, max_n=12, min_d=1, max_d=3, d=None):
    """An ``(n, d)`` float64 array of bounded, finite coordinates."""
    dim = draw(st.integers(min_d, max_d)) if d is None else d
    n = draw(st.integers(min_n, max_n))
    return draw(hnp.arrays(np.float64, (n, dim), elements=COORD))


@st.composite
def queries_and_keys(draw, *, max_n=12, max_d=3):
    """Queries ``(m, d)`` and keys ``(n, d)`` sharing ``d``."""
    dim = draw(st.integers(1, max_d))
    keys = draw(point_clouds(d=dim, max_n=max_n))
    queries = draw(point_clouds(d=dim, max_n=8))
    return queries, keys


bandwidths = log_uniform(0.05, 20.0)


@st.composite
def rotations(draw, d):
    """A random ``d x d`` orthogonal matrix (QR of a Gaussian matrix with sign fix)."""
    seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(seed).standard_normal((d, d))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))


# --- well-behaved priors and noise levels for the convergence properties -----------------
# (tests/numerics/test_convergence_properties.py). Bounded so that, at the batch sizes those
# tests afford (N = 128 ... 2048), the two-stage estimator is in its convergent regime: the
# mixture components are not much narrower than the spread of their means, weights stay away
# from 0 (a component with a handful of tokens is not learnable at N = 128), boxes and spheres
# are not degenerate, and the noise is within a factor ~10 of the prior's spread (far smaller
# noise makes every estimator the identity and the gap pure rounding; far larger makes every
# estimator the batch mean).


@st.composite
def well_behaved_mixtures(draw, dim: int = 1, max_components: int = 3) -> GaussianMixture:
    """Mixtures with means in ``[-2, 2]^dim``, weights >= ~0.05 and ``var`` in ``[0.05, 1]``."""
    k = draw(st.integers(1, max_components))
    means = draw(hnp.arrays(np.float64, (k, dim), elements=finite_floats(-2, 2)))
    return GaussianMixture(means, draw(_weights(k)), var=draw(log_uniform(5e-2, 1.0)))


@st.composite
def well_behaved_boxes(draw, dim: int = 1) -> UniformBox:
    """Boxes with corners in ``[-2, 2]`` and widths in ``[0.5, 4]``."""
    low = np.array(draw(st.lists(finite_floats(-2, 2), min_size=dim, max_size=dim)))
    width = np.array(draw(st.lists(log_uniform(0.5, 4.0), min_size=dim, max_size=dim)))
    return UniformBox(low, low + width)


@st.composite
def well_behaved_spheres(draw) -> UniformSphere:
    """Spheres in ``d`` = 1, 2 or 3 with radius in ``[0.5, 2]``."""
    return UniformSphere(draw(st.sampled_from([1, 2, 3])), draw(log_uniform(0.5, 2.0)))


def well_behaved_priors(dim: int = 1) -> st.SearchStrategy:
    """Mixture, box (both on ``R^dim``) or sphere (its own ``d``) from the bounded families above."""
    return st.one_of(well_behaved_mixtures(dim), well_behaved_boxes(dim), well_behaved_spheres())


@st.composite
def prior_and_noise(draw, priors=None, ratio=(0.1, 2.0)):
    """``(prior, sigma2)`` with ``sigma2 / max_i Var(x_i)`` log-uniform in ``ratio``."""
    prior = draw(well_behaved_priors() if priors is None else priors)
    _, var = prior.moments()
    return prior, float(draw(log_uniform(*ratio)) * np.max(var))
