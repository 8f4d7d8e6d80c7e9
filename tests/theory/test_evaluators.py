"""Evaluators of the derived closed forms: numbers in -> float out, symbols in -> expressions out."""

from __future__ import annotations

import math

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from attneb.theory.depth_noise import (
    gaussian_horizon,
    gaussian_layers,
    gaussian_layers_fractional,
    gaussian_variance_map,
    leading_horizon,
    leading_layers,
)
from attneb.theory.stability import fastest_mode, growth_rate, token_scaling

positive = st.floats(min_value=0.05, max_value=5.0, allow_nan=False, allow_infinity=False)
bandwidth = st.floats(min_value=0.05, max_value=2.0, allow_nan=False, allow_infinity=False)
wavenumber = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False, allow_infinity=False)
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)


def variance_map(s, h2, eta):
    """One residual layer on a Gaussian N(m, s): typed here independently of theory.gaussian."""
    return (1 - eta * h2 / (s + h2)) ** 2 * s


def test_numbers_in_float_out():
    assert leading_horizon(1, 0.5) == 1.0
    assert isinstance(leading_horizon(1, 0.5), float)
    assert leading_layers(1, 0.25, 0.05) == pytest.approx(40.0)
    assert gaussian_horizon(1, 1, 0.5) == pytest.approx(1 + math.log(2) / 2)
    assert isinstance(gaussian_layers(1, 1, 0.5, 0.05), int)
    assert isinstance(gaussian_layers_fractional(1, 1, 0.5, 0.05), float)
    k_star, rate_star = fastest_mode(0.5)
    assert (k_star, rate_star) == (pytest.approx(2.0), pytest.approx(2 / math.e))
    assert isinstance(growth_rate(1, 0.5), float)
    assert token_scaling(10, 1) == pytest.approx(math.exp(20 / math.e))


def test_sympy_numbers_count_as_numbers():
    assert leading_horizon(sp.Integer(1), sp.Rational(1, 2)) == 1.0


def test_symbols_in_expression_out():
    sigma2, tau2, h2, k = sp.symbols("sigma2 tau2 h2 k", positive=True)
    assert leading_horizon(sigma2, h2) == sigma2 / (2 * h2)
    assert sp.simplify(gaussian_horizon(sigma2, tau2, h2) - sigma2 / (2 * h2) - sp.log(1 + sigma2 / tau2) / 2) == 0
    assert growth_rate(k, h2) == h2 * k**2 * sp.exp(-h2 * k**2 / 2)
    assert fastest_mode(h2) == (sp.sqrt(2 / h2), 2 / sp.E)
    assert sp.simplify(token_scaling(sigma2, h2) - sp.exp(2 * sigma2 / (sp.E * h2))) == 0
    assert leading_horizon(sigma2, 0.5) == sigma2
    assert isinstance(leading_layers(sigma2, h2, 0.1), sp.Expr)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf])
def test_bad_numbers_raise_value_error_naming_the_argument(bad):
    with pytest.raises(ValueError, match=r"^h2 == "):
        leading_horizon(1.0, bad)
    with pytest.raises(ValueError, match=r"^tau2 == "):
        gaussian_horizon(1.0, bad, 0.5)
    with pytest.raises(ValueError, match=r"^eta == "):
        gaussian_layers(1.0, 1.0, 0.5, bad)
    with pytest.raises(ValueError, match=r"^h2 == "):
        fastest_mode(bad)
    with pytest.raises(ValueError, match=r"^sigma2 == "):
        token_scaling(bad, 0.5)


def test_other_bad_inputs():
    with pytest.raises(TypeError, match="sigma2 must be a real number"):
        leading_horizon("1", 0.5)
    with pytest.raises(TypeError, match="h2 must be a real number"):
        growth_rate(1.0, True)
    with pytest.raises(ValueError, match=r"eta == 1.5, must lie in \(0, 1\]"):
        gaussian_layers(1.0, 1.0, 0.5, 1.5)
    with pytest.raises(ValueError, match="k == nan"):
        growth_rate(math.nan, 0.5)
    with pytest.raises(ValueError, match="layers needed"):
        gaussian_layers(1.0, 1.0, 1e-4, 1e-4)


@SETTINGS
@given(positive, positive, bandwidth)
def test_gaussian_horizon_is_leading_horizon_plus_exact_correction(sigma2, tau2, h2):
    correction = gaussian_horizon(sigma2, tau2, h2) - leading_horizon(sigma2, h2)
    assert correction == pytest.approx(0.5 * math.log1p(sigma2 / tau2), rel=1e-12, abs=1e-12)
    assert correction > 0


@SETTINGS
@given(positive, positive, bandwidth, st.sampled_from([0.05, 0.1, 0.5, 1.0]))
def test_gaussian_layers_is_the_first_layer_at_or_below_tau2(sigma2, tau2, h2, eta):
    layers = gaussian_layers(sigma2, tau2, h2, eta)
    s = tau2 + sigma2
    for _ in range(layers - 1):
        s = variance_map(s, h2, eta)
    assert s > tau2 >= variance_map(s, h2, eta)
    assert layers - 1 < gaussian_layers_fractional(sigma2, tau2, h2, eta) <= layers


@pytest.mark.parametrize(("sigma2", "tau2", "h2"), [(1, 1, 0.5), (1, 1, 0.25), (0.5, 0.25, 0.05)])
def test_layers_times_eta_tend_to_the_horizon_at_first_order(sigma2, tau2, h2):
    horizon = gaussian_horizon(sigma2, tau2, h2)
    errors = [eta * gaussian_layers_fractional(sigma2, tau2, h2, eta) - horizon for eta in (0.02, 0.01, 0.005)]
    assert errors[2] < errors[1] < errors[0]
    for coarse, fine in zip(errors, errors[1:]):
        assert 1.7 < coarse / fine < 2.3


@SETTINGS
@given(wavenumber, bandwidth)
def test_growth_rate_positive_and_bounded_by_the_fastest_mode(k, h2):
    rate = growth_rate(k, h2)
    k_star, rate_star = fastest_mode(h2)
    assert 0 <= rate <= rate_star * (1 + 1e-12)
    assert growth_rate(k_star, h2) == pytest.approx(rate_star)
    assert rate_star == pytest.approx(2 / math.e)


@SETTINGS
@given(positive, bandwidth)
def test_token_scaling_is_exp_of_twice_the_amplification(sigma2, h2):
    _, rate_star = fastest_mode(h2)
    expected = math.exp(2 * rate_star * leading_horizon(sigma2, h2))
    assert token_scaling(sigma2, h2) == pytest.approx(expected, rel=1e-12)


@SETTINGS
@given(positive, positive, bandwidth, st.floats(min_value=0.01, max_value=1.0))
def test_variance_map_iterates_the_layer_map_and_agrees_with_the_layer_count(sigma2, tau2, h2, eta):
    layers = gaussian_layers(sigma2, tau2, h2, eta)
    path = gaussian_variance_map(tau2 + sigma2, h2, eta, layers + 3)
    assert len(path) == layers + 4 and path[0] == tau2 + sigma2
    for before, after in zip(path, path[1:]):
        assert after == pytest.approx(variance_map(before, h2, eta), rel=1e-12)
    assert sum(v > tau2 for v in path) == layers


@pytest.mark.parametrize("args,match", [((0.0, 0.5, 0.1, 3), "s0"), ((1.0, 0.5, 1.5, 3), "eta"),
                                        ((1.0, 0.5, 0.1, -1), "layers"), ((1.0, 0.5, 0.1, 2.0), "layers")])
def test_variance_map_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        gaussian_variance_map(*args)


@SETTINGS
@given(positive, positive, positive)
def test_stage2_family_makes_attention_over_gaussian_tokens_the_bayes_rule(s, sigma2, tau2):
    # Attention of bandwidth h over keys ~ N(m, s), by quadrature on a grid: its slope in the query
    # must be the Bayes slope tau2 / (tau2 + sigma2) of the prior N(m, tau2).
    import numpy as np
    from scipy.special import logsumexp

    from attneb.theory.gaussian import stage2_bandwidth_family

    h, m = stage2_bandwidth_family(s, sigma2, tau2), 0.3
    keys = m + math.sqrt(s) * np.linspace(-12, 12, 20001)
    log_weights = -((keys - m) ** 2) / (2 * s)

    def attention(q):
        logits = log_weights - (q - keys) ** 2 / (2 * h)
        return float(np.sum(np.exp(logits - logsumexp(logits)) * keys))

    slope = (attention(m + 0.5) - attention(m - 0.5)) / 1.0
    assert slope == pytest.approx(tau2 / (tau2 + sigma2), rel=1e-9)


# ----------------------------------------------------------------------------- arrays, and one build per expression


def test_arrays_in_arrays_out_equal_to_the_scalar_calls():
    import numpy as np

    from attneb.theory.gaussian import stage2_bandwidth_family
    from attneb.theory.stability import fluctuation_threshold

    sigma2 = np.array([[0.5], [1.0], [2.0]])
    h2 = np.array([0.05, 0.2, 0.5, 1.0])
    cases = [
        (leading_horizon, (sigma2, h2)),
        (leading_layers, (sigma2, h2, 0.05)),
        (gaussian_horizon, (sigma2, 0.7, h2)),
        (growth_rate, (np.linspace(-3, 3, 7)[:, None], h2)),
        (token_scaling, (sigma2, h2)),
        (stage2_bandwidth_family, (sigma2, 1.0, h2)),
        (lambda *a: fluctuation_threshold(2, *a), (sigma2, h2, 0.3, 0.2)),
    ]
    for function, arguments in cases:
        values = function(*arguments)
        shape = np.broadcast_shapes(*(np.shape(a) for a in arguments))
        assert isinstance(values, np.ndarray) and values.shape == shape and values.dtype == np.float64
        for index in np.ndindex(shape):
            scalars = [float(np.broadcast_to(a, shape)[index]) for a in arguments]
            assert values[index] == pytest.approx(function(*scalars), rel=1e-13)
    k_star, rate_star = fastest_mode([0.5, 2.0])
    assert k_star.tolist() == pytest.approx([2.0, 1.0]) and rate_star.tolist() == pytest.approx([2 / math.e] * 2)
    assert leading_horizon([1.0], 0.5).tolist() == [1.0]  # lists count as arrays


def test_bad_array_entries_are_named_with_their_index():
    import numpy as np

    with pytest.raises(ValueError, match=r"^h2\[1\] == -0.5, every entry must be finite and > 0"):
        leading_horizon(1.0, np.array([0.5, -0.5]))
    with pytest.raises(ValueError, match=r"^k\[0, 1\] == nan, every entry must be finite$"):
        growth_rate(np.array([[1.0, np.nan]]), 0.5)
    with pytest.raises(TypeError, match="sigma2 must be real numbers"):
        leading_horizon(["a", "b"], 0.5)
    with pytest.raises(ValueError, match=r"shapes do not broadcast \(sigma2: \(2,\), h2: \(3,\)\)"):
        leading_horizon(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="not finite in float64"):
        token_scaling(np.array([1.0, 1000.0]), 0.01)  # exp(2 * 1000 / (e 0.01)) overflows


def test_the_numeric_function_of_an_expression_is_built_once(monkeypatch):
    import numpy as np
    import sympy as sp

    from attneb.theory import _evaluate

    built = []
    lambdify = sp.lambdify
    monkeypatch.setattr(_evaluate.sp, "lambdify", lambda *a, **k: built.append(a) or lambdify(*a, **k))
    _evaluate._scalar_function.cache_clear()
    _evaluate._array_function.cache_clear()
    for h2 in (0.1, 0.2, 0.3):
        token_scaling(1.0, h2)
    token_scaling(np.ones(3), 0.5)
    token_scaling(np.ones(2), np.ones(2))
    assert len(built) == 2  # one scalar function, one array function
