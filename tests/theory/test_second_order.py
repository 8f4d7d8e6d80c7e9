"""theory.second_order: R1 and R2 as derived, the order-zero mixture, the moment recursion, and the predicted
cumulants against independent routes (the exact Gaussian variance flow, quadrature of R2 substituted by sympy)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy import integrate

from attneb.theory import mean_field, second_order

x, h2, rho = mean_field.x, mean_field.h2, mean_field.rho


def test_the_terms_are_the_backward_heat_operator_and_the_papers_second_order_term():
    r1, r2 = second_order.terms()
    f = rho(x)
    assert sp.simplify(r1 + sp.diff(f, x, 2)) == 0
    assert sp.simplify(r2 + sp.diff(f * sp.diff(sp.diff(f, x, 2) / f, x), x) / 2) == 0


def test_the_order_zero_mixture_solves_the_backward_heat_equation():
    s = sp.Symbol("s", nonnegative=True)
    w, m1, m2 = sp.symbols("w mu1 mu2", real=True)
    v1, v2 = sp.symbols("v1 v2", positive=True)
    density = second_order.leading_solution([w, 1 - w], [m1, m2], [v1, v2], s)
    r1 = second_order.terms()[0].subs(rho(x), density).doit()
    assert sp.simplify(sp.diff(density, s) - r1) == 0


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_moment_recursion_is_integration_by_parts(k):
    """x^k rho'' = d/dx (x^k rho' - k x^(k-1) rho) + k (k-1) x^(k-2) rho: the boundary term vanishes for a density
    that decays, so int x^k R1[rho] = -k (k-1) m_(k-2), the recursion of moment_corrections."""
    f = rho(x)
    boundary = x**k * sp.diff(f, x) - k * x ** (k - 1) * f
    assert sp.simplify(x**k * sp.diff(f, x, 2) - sp.diff(boundary, x) - k * (k - 1) * x ** (k - 2) * f) == 0


def test_a_gaussian_start_follows_the_exact_gaussian_variance_flow_to_first_order():
    # exact: dv/dt = -2 h2 v/(v + h2), i.e. dv/ds = -2 + 2 h2/v + O(h2^2): delta m2' = 2/(v0 - 2 s)
    v0, s = 0.75, np.array([0.0, 0.05, 0.1, 0.2])
    delta = second_order.moment_corrections([1.0], [0.0], [v0], s)
    np.testing.assert_allclose(delta[:, 1], np.log(v0 / (v0 - 2 * s)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(delta[:, [0, 2]], 0.0, atol=1e-10)
    kappa2, kappa4 = second_order.cumulants([1.0], [0.0], [v0], 0.05, s / 0.05)
    np.testing.assert_allclose(kappa2, v0 - 2 * s + 0.05 * np.log(v0 / (v0 - 2 * s)), rtol=1e-10)
    np.testing.assert_allclose(kappa4, 0.0, atol=1e-12)


def test_the_r2_moments_match_quadrature_of_r2_substituted_by_sympy():
    weights, means, variances, s = [0.3, 0.7], [-1.0, 1.5], [0.6, 0.9], 0.1
    density = second_order.leading_solution(weights, means, variances, s)
    integrand = sp.lambdify(x, second_order.terms()[1].subs(rho(x), density).doit(), "numpy")
    expected = [integrate.quad(lambda u, k=k: u**k * integrand(u), -12, 12, limit=400, epsabs=1e-13)[0]
                for k in range(second_order.MOMENTS + 1)]
    got = second_order._r2_moments(*(np.asarray(a, dtype=float) for a in (weights, means, variances)), s)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)
    assert abs(got[0]) < 1e-10  # R2 is a divergence: it moves no mass


def test_the_backward_heat_equation_moves_only_the_variance():
    kappa2, kappa4 = second_order.cumulants([0.5, 0.5], [-2.0, 2.0], [0.75, 0.75], 0.05, [0.0, 1.0, 2.0], order=1)
    np.testing.assert_allclose(kappa2, 4.75 - 2 * 0.05 * np.array([0.0, 1.0, 2.0]), rtol=1e-13)
    np.testing.assert_allclose(kappa4, -32.0, rtol=1e-13)


def test_the_second_order_part_is_first_order_in_h2():
    """At equal s = h2 t the departure from the heat equation is h2 times a function of s."""
    args = ([1 / 3] * 3, [-1.5, 0.0, 1.5], [0.5] * 3)
    parts = []
    for bandwidth in (0.05, 0.025):
        depths = np.array([0.0, 0.1]) / bandwidth
        second, first = (np.array(second_order.cumulants(*args, bandwidth, depths, order=o)) for o in (2, 1))
        parts.append((second - first)[:, 1] / bandwidth)
    np.testing.assert_allclose(parts[0], parts[1], rtol=1e-9)
    assert np.all(np.abs(parts[0]) > 0.1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"weights": [1.0, -1.0]}, "must be > 0"),
    ({"variances": [0.75]}, "one length"),
    ({"means": [np.nan, 0.0]}, "must be finite"),
    ({"h2": 0.0}, "h2 == 0.0"),
    ({"depths": [30.0]}, "below min(variances)/2"),
    ({"depths": [-1.0]}, "must be finite and >= 0"),
    ({"order": 3}, "order == 3"),
])
def test_bad_arguments_are_named(kwargs, message):
    arguments = {"weights": [0.5, 0.5], "means": [-2.0, 2.0], "variances": [0.75, 0.75], "h2": 0.05, "depths": [1.0]}
    arguments.update(kwargs)
    order = arguments.pop("order", 2)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        second_order.cumulants(**arguments, order=order)
