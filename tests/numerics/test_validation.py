"""numerics.validation: each check returns a valid argument unchanged and names a bad one.

A check is the identity on valid input, so these tests compare what it returns with what it was given, exactly.
"""

import numpy as np
import pytest

from attneb.numerics import validation
from attneb.numerics.validation import NotFittedError


def test_check_array():
    x = np.arange(6.0).reshape(3, 2) / 7
    out = validation.check_array(x, "x")
    assert out.dtype == np.float64 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(validation.check_array([[1, 2]], "x"), [[1.0, 2.0]])
    np.testing.assert_array_equal(validation.check_array(x[:, 0], "x", ndim=1), x[:, 0])
    with pytest.raises(ValueError, match=r"Expected 2D array for x, got 1D array .* array.reshape\(-1, 1\)"):
        validation.check_array(x[:, 0], "x")
    with pytest.raises(ValueError, match="x contains nan or inf"):
        validation.check_array([[1.0, np.nan]], "x")
    with pytest.raises(ValueError, match="x is empty"):
        validation.check_array(np.zeros((0, 2)), "x")
    with pytest.raises(TypeError, match="x must be an array of real numbers"):
        validation.check_array([["a"]], "x")


def _returns_floats_unchanged(check, good, *args):
    for value in good:
        out = check(value, "h2", *args)
        assert type(out) is float and out == float(value)


def test_check_positive():
    _returns_floats_unchanged(validation.check_positive, [0.1, 3, 1e-300, np.float32(0.5)])
    for bad, message in [(0.0, r"h2 == 0.0, must be > 0"), (-1.0, "must be > 0"), (np.inf, "must be finite")]:
        with pytest.raises(ValueError, match=message):
            validation.check_positive(bad, "h2")


def test_check_nonnegative():
    _returns_floats_unchanged(validation.check_nonnegative, [0.0, 0.1, 7])
    with pytest.raises(ValueError, match=r"T == -1e-12, must be >= 0"):
        validation.check_nonnegative(-1e-12, "T")


def test_check_interval():
    _returns_floats_unchanged(validation.check_interval, [0.25, 1.0], 0.0, 1.0)
    assert validation.check_interval(0.0, "eta", 0.0, 1.0, closed="left") == 0.0
    with pytest.raises(ValueError, match=r"eta == 0.0, must lie in \(0.0, 1.0\]"):
        validation.check_interval(0.0, "eta", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"eta == 1.0, must lie in \(0.0, 1.0\)"):
        validation.check_interval(1.0, "eta", 0.0, 1.0, closed="neither")


def test_check_positive_int():
    for value in (1, 7, np.int64(12)):
        out = validation.check_positive_int(value, "n")
        assert type(out) is int and out == value
    with pytest.raises(ValueError, match="n == 0, must be >= 1"):
        validation.check_positive_int(0, "n")
    with pytest.raises(TypeError, match="n must be an integer"):
        validation.check_positive_int(2.0, "n")


def test_check_nonnegative_int():
    for value in (0, 5, np.int32(3)):
        out = validation.check_nonnegative_int(value, "layers")
        assert type(out) is int and out == value
    with pytest.raises(ValueError, match="layers == -1, must be >= 0"):
        validation.check_nonnegative_int(-1, "layers")
    with pytest.raises(TypeError, match="layers must be an integer"):
        validation.check_nonnegative_int(True, "layers")


def test_check_option():
    assert validation.check_option("binned", "backend", ("exact", "binned")) == "binned"
    message = r"backend == 'grid' is not a known option; expected one of \('exact', 'binned'\)"
    with pytest.raises(ValueError, match=message):
        validation.check_option("grid", "backend", ("exact", "binned"))


def test_check_same_dim():
    assert validation.check_same_dim(np.zeros((3, 2)), "a", np.zeros((5, 2)), "b") is None
    with pytest.raises(ValueError, match="a has d == 2 coordinates per point but b has d == 3"):
        validation.check_same_dim(np.zeros((3, 2)), "a", np.zeros((5, 3)), "b")


def test_check_rng():
    generator = np.random.default_rng(4)
    assert validation.check_rng(generator) is generator
    np.testing.assert_array_equal(validation.check_rng(9).random(4), np.random.default_rng(9).random(4))
    sequence = np.random.SeedSequence(11)
    np.testing.assert_array_equal(validation.check_rng(sequence).random(4), np.random.default_rng(sequence).random(4))
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        validation.check_rng(1.5)


def test_check_fitted():
    class Estimator:
        pass

    fitted = Estimator()
    fitted.n_features_in_ = 2
    assert validation.check_fitted(fitted, "n_features_in_") is None
    with pytest.raises(NotFittedError, match="This Estimator instance is not fitted yet"):
        validation.check_fitted(Estimator(), "n_features_in_")
