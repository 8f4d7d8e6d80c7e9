import sqlite3

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from attneb.numerics import training
from attneb.numerics.priors import GaussianMixture
from attneb.numerics.training import PARAMETRIZATIONS, TrainedTransformer, fit_transformer, init_params, loss_and_gradient
from attneb.numerics.transformer import TwoStageTransformer

TWO_CLUSTERS = GaussianMixture([[2.0, 0.0], [-2.0, 0.0]], var=0.05)


class Interrupted(Exception):
    """Stands for a crash or a Ctrl-C in the middle of training."""


EASY = dict(n_tokens=32, n_layers=2, batch=8, seed=3, lr=0.02)


@st.composite
def gradient_problems(draw):
    """Random parameters (the random initialisation plus N(0, 0.3^2) on every entry) and contexts."""
    kind = draw(st.sampled_from(PARAMETRIZATIONS))
    dim, n_layers = draw(st.integers(1, 3)), draw(st.integers(0, 4))
    batch, n = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    params = init_params(dim, n_layers, 1.0, parametrization=kind, rng=rng)
    params = {k: np.asarray(p + 0.3 * rng.standard_normal(p.shape)) for k, p in params.items()}
    return params, rng.standard_normal((batch, n, dim)), rng.standard_normal((batch, n, dim))


def finite_difference_gradient(params, noisy, clean, step=1e-6):
    grad = {}
    for key, value in params.items():
        grad[key] = np.empty(value.shape)
        for idx in np.ndindex(value.shape):
            shifted = {k: v.copy() for k, v in params.items()}
            shifted[key][idx] = value[idx] + step
            up = loss_and_gradient(shifted, noisy, clean)[0]
            shifted[key][idx] = value[idx] - step
            down = loss_and_gradient(shifted, noisy, clean)[0]
            grad[key][idx] = (up - down) / (2 * step)
    return grad


# Central differences with step 1e-6 carry a rounding error of about eps |loss| / step ~ 1e-10 |loss|,
# which dominates where the gradient is small: so the bound is 1e-6 x (sup norm of the gradient)
# + 1e-8 x max(loss, 1). Measured over 2000 examples of this strategy (2026-11-26):
# largest error / bound 9.3e-3, largest relative error 1.9e-8 (another 2000: 3.9e-7).
@settings(max_examples=25, deadline=None)
@given(gradient_problems())
def test_gradient_matches_central_differences(problem):
    params, noisy, clean = problem
    loss, grad = loss_and_gradient(params, noisy, clean)
    fd = finite_difference_gradient(params, noisy, clean)
    assert set(grad) == set(params)
    assert all(grad[k].shape == params[k].shape for k in params)
    scale = max(np.abs(g).max(initial=0.0) for g in grad.values())
    worst = max(np.abs(grad[k] - fd[k]).max(initial=0.0) for k in grad)
    assert worst <= 1e-6 * scale + 1e-8 * max(loss, 1.0)


def test_gradient_matches_sympy():
    """d = 1, n = 2 tokens, L = 1, scalar parametrization: the loss written out and differentiated by sympy."""
    symbols = sp.symbols("theta_beta theta_v eta theta_beta_s theta_v_s", real=True)
    theta_b, theta_v, eta, theta_bs, theta_vs = symbols
    noisy, clean = [sp.Rational(3, 10), -sp.Rational(4, 5)], [sp.Rational(1, 2), -sp.Rational(11, 10)]

    def attend(queries, keys, beta, value):
        out = []
        for q in queries:
            weights = [sp.exp(beta * (q * k - k**2 / 2)) for k in keys]
            out.append(sum(w * value * k for w, k in zip(weights, keys)) / sum(weights))
        return out

    attn = attend(noisy, noisy, sp.exp(theta_b), sp.exp(theta_v))
    refined = [x + eta * (a - x) for x, a in zip(noisy, attn)]
    out = attend(noisy, refined, sp.exp(theta_bs), sp.exp(theta_vs))
    loss = sum((o - c) ** 2 for o, c in zip(out, clean)) / 2
    point = [0.4, -0.1, 0.7, -0.2, 0.05]
    expected = sp.lambdify(symbols, [sp.diff(loss, s) for s in symbols], "mpmath")(*point)

    params = {"log_beta": np.array([point[0]]), "log_value": np.array([point[1]]), "eta": np.array([point[2]]),
              "log_beta_s": np.array(point[3]), "log_value_s": np.array(point[4])}
    as_array = lambda xs: np.array([[[float(x)] for x in xs]])  # noqa: E731
    value, grad = loss_and_gradient(params, as_array(noisy), as_array(clean))
    assert value == pytest.approx(float(loss.subs(dict(zip(symbols, point)))), abs=1e-14)
    got = [grad[k].item() for k in ("log_beta", "log_value", "eta", "log_beta_s", "log_value_s")]
    np.testing.assert_allclose(got, [float(e) for e in expected], rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
@pytest.mark.parametrize("n_layers,h2", [(0, None), (1, None), (3, None), (2, 0.05)])
def test_construction_equals_two_stage_transformer(kind, n_layers, h2):
    sigma2 = 0.5
    h2_used = sigma2 / 4 if h2 is None else h2
    eta = min(sigma2 / (2 * h2_used) / max(n_layers, 1), 1.0)
    net = TrainedTransformer(init_params(2, n_layers, sigma2, parametrization=kind, init="construction", h2=h2))
    reference = TwoStageTransformer(h2=h2_used, sigma2=sigma2, n_layers=n_layers, eta=eta)
    contexts = np.random.default_rng(n_layers).normal(size=(3, 25, 2))
    batched = net.denoise(contexts)
    for context, out in zip(contexts, batched):
        np.testing.assert_allclose(net.denoise(context), reference(context), atol=1e-12, rtol=0)
        np.testing.assert_allclose(out, reference(context), atol=1e-12, rtol=0)
    np.testing.assert_allclose(net.stage1_h2_, np.full(n_layers, h2_used), rtol=1e-15)
    np.testing.assert_allclose(net.stage1_eta_, np.full(n_layers, eta), rtol=1e-15)
    assert net.stage2_h2_ == pytest.approx(sigma2, rel=1e-15)
    np.testing.assert_allclose(net.value_scales_, np.ones(n_layers + 1), rtol=1e-15)


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
def test_no_layers_is_one_attention_step_over_the_noisy_tokens(kind):
    rng = np.random.default_rng(7)
    params = init_params(2, 0, 0.5, parametrization=kind, rng=rng)
    noisy = rng.normal(size=(11, 2))
    if kind == "scalar":
        beta, value = np.exp(params["log_beta_s"]), np.exp(params["log_value_s"])
        sq_dist = ((noisy[:, None, :] - noisy[None, :, :]) ** 2).sum(axis=2)
        expected = softmax(-beta * sq_dist / 2, axis=1) @ (value * noisy)
    else:
        A, W = params["A_s"], params["W_s"]
        logits = noisy @ A @ noisy.T - 0.5 * np.einsum("jk,kl,jl->j", noisy, A, noisy)
        expected = softmax(logits, axis=1) @ noisy @ W.T
    np.testing.assert_allclose(TrainedTransformer(params).denoise(noisy), expected, atol=1e-12, rtol=0)


def test_the_bound_shift_of_a_psd_head_is_the_softmax_even_far_from_every_key():
    rng = np.random.default_rng(11)
    A, W = 3.0 * np.eye(2), 0.7 * np.eye(2)
    keys = rng.normal(size=(2, 9, 2))
    # The second context's queries sit 30 units from every key: under the bound 0.5 q.Aq all of
    # their weights underflow (exp(-1350)), so the head must fall back to the row maximum.
    for queries in (keys, keys + np.array([[[0.0, 0.0]], [[30.0, 0.0]]])):
        logits = queries @ A @ keys.swapaxes(1, 2) - 0.5 * np.einsum("bjk,kl,bjl->bj", keys, A, keys)[:, None, :]
        expected = softmax(logits, axis=2) @ keys @ W.T
        for psd in (False, True):
            out, (E, r, _, _) = training.attend(queries, keys, A, W, psd=psd)
            np.testing.assert_allclose(out, expected, atol=1e-12, rtol=0)
            np.testing.assert_allclose(E * r[:, :, None], softmax(logits, axis=2), atol=1e-14, rtol=0)


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
def test_reused_buffers_give_the_loss_and_gradient_of_fresh_arrays(kind):
    rng = np.random.default_rng(12)
    params = init_params(2, 3, 0.5, parametrization=kind, rng=rng)
    buffers = training._workspace(3, 4, 10)
    for _ in range(2):  # the second call reads buffers the first one filled
        noisy, clean = rng.normal(size=(2, 4, 10, 2))
        loss, grad = training._loss_and_gradient(params, kind, noisy, clean)
        loss_b, grad_b = training._loss_and_gradient(params, kind, noisy, clean, buffers)
        assert loss_b == loss
        for key in grad:
            np.testing.assert_array_equal(grad_b[key], grad[key])


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
def test_training_lowers_the_loss_and_is_reproducible(kind):
    first = fit_transformer(TWO_CLUSTERS, 0.5, parametrization=kind, steps=150, **EASY)
    again = fit_transformer(TWO_CLUSTERS, 0.5, parametrization=kind, steps=150, **EASY)
    assert first.losses_.shape == (150,)
    assert first.losses_[-20:].mean() < first.losses_[:20].mean()
    np.testing.assert_array_equal(first.losses_, again.losses_)
    for key in first.params_:
        np.testing.assert_array_equal(first.params_[key], again.params_[key])


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
def test_resume_after_interruption_equals_uninterrupted_run(kind, tmp_path, monkeypatch):
    store = tmp_path / "checkpoints.sqlite"
    kwargs = dict(parametrization=kind, batch=4, seed=11, lr=0.02, n_tokens=8, n_layers=2, checkpoint_every=20)
    clean_run = fit_transformer(TWO_CLUSTERS, 0.5, steps=60, **kwargs)
    clean_longer = fit_transformer(TWO_CLUSTERS, 0.5, steps=70, **kwargs)
    original = training._loss_and_gradient
    calls = []

    def crashing(*args):
        if len(calls) == 45:
            raise Interrupted
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(training, "_loss_and_gradient", crashing)
    with pytest.raises(Interrupted):
        fit_transformer(TWO_CLUSTERS, 0.5, steps=60, store=store, **kwargs)
    with sqlite3.connect(store) as conn:
        assert [s for (s,) in conn.execute("SELECT step FROM training_checkpoints ORDER BY step")] == [20, 40]
    calls.clear()
    resumed = fit_transformer(TWO_CLUSTERS, 0.5, steps=60, store=store, **kwargs)
    assert len(calls) == 20  # steps 41..60 only
    np.testing.assert_array_equal(resumed.losses_, clean_run.losses_)
    for key in clean_run.params_:
        np.testing.assert_array_equal(resumed.params_[key], clean_run.params_[key])
    calls.clear()
    longer = fit_transformer(TWO_CLUSTERS, 0.5, steps=70, store=store, **kwargs)
    assert len(calls) == 10
    np.testing.assert_array_equal(longer.losses_, clean_longer.losses_)
    for key in clean_longer.params_:
        np.testing.assert_array_equal(longer.params_[key], clean_longer.params_[key])


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"sigma2": 0.0}, ValueError, "sigma2"),
        ({"sigma2": -1.0}, ValueError, "sigma2"),
        ({"n_tokens": 0}, ValueError, "n_tokens"),
        ({"n_layers": -1}, ValueError, "n_layers"),
        ({"n_layers": 1.5}, TypeError, "n_layers"),
        ({"parametrization": "diagonal"}, ValueError, "parametrization"),
        ({"init": "zeros"}, ValueError, "init"),
        ({"steps": 0}, ValueError, "steps"),
        ({"batch": 0}, ValueError, "batch"),
        ({"seed": -1}, ValueError, "seed"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"checkpoint_every": 0}, ValueError, "checkpoint_every"),
        ({"schedule": "linear"}, ValueError, "schedule"),
        ({"init": "construction", "h2": -0.1}, ValueError, "h2"),
        ({"prior": "two clusters"}, TypeError, "prior"),
    ],
)
def test_fit_transformer_rejects_bad_arguments(kwargs, error, match):
    args = {"prior": TWO_CLUSTERS, "sigma2": 0.5, "n_tokens": 4, "n_layers": 1, "steps": 1, "batch": 1, "seed": 0}
    with pytest.raises(error, match=match):
        fit_transformer(**(args | kwargs))


def test_loss_and_gradient_and_denoise_reject_bad_inputs():
    params = init_params(2, 1, 0.5, parametrization="matrix", rng=0)
    contexts = np.zeros((1, 3, 2))
    with pytest.raises(ValueError, match=r"noisy\[None\]"):
        loss_and_gradient(params, contexts[0], contexts[0])
    with pytest.raises(ValueError, match="clean has shape"):
        loss_and_gradient(params, contexts, np.zeros((1, 4, 2)))
    with pytest.raises(ValueError, match="params has keys"):
        loss_and_gradient({"A": params["A"]}, contexts, contexts)
    with pytest.raises(ValueError, match=r"params\['W'\]"):
        loss_and_gradient(params | {"W": np.zeros((2, 2, 2))}, contexts, contexts)
    with pytest.raises(ValueError, match="d == 3"):
        TrainedTransformer(params).denoise(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="reshape"):
        TrainedTransformer(params).denoise(np.zeros(4))


def test_divergence_is_an_error_not_a_silent_nan(monkeypatch):
    real = training._loss_and_gradient
    calls = []

    def diverging(*args):
        calls.append(1)
        loss, grad = real(*args)
        return (float("nan"), grad) if len(calls) == 2 else (loss, grad)

    monkeypatch.setattr(training, "_loss_and_gradient", diverging)
    with pytest.raises(FloatingPointError, match="diverged at step 2"):
        fit_transformer(TWO_CLUSTERS, 0.5, n_tokens=4, n_layers=1, steps=3, batch=2, seed=0)


def test_cosine_schedule_decays_the_rate_and_resumes_only_its_own_length(tmp_path, monkeypatch):
    rates = []
    real = training._adam_step
    monkeypatch.setattr(training, "_adam_step", lambda p, g, m, v, step, lr: (rates.append(lr), real(p, g, m, v, step, lr)))
    fit_transformer(TWO_CLUSTERS, 0.5, steps=10, schedule="cosine", **EASY)
    np.testing.assert_allclose(rates, 0.02 * 0.5 * (1 + np.cos(np.pi * np.arange(10) / 10)), rtol=1e-15)
    store = tmp_path / "checkpoints.sqlite"
    short = fit_transformer(TWO_CLUSTERS, 0.5, steps=10, schedule="cosine", store=store, **EASY)
    rates.clear()
    again = fit_transformer(TWO_CLUSTERS, 0.5, steps=10, schedule="cosine", store=store, **EASY)
    assert rates == [] and np.array_equal(again.losses_, short.losses_)
    fit_transformer(TWO_CLUSTERS, 0.5, steps=20, schedule="cosine", store=store, **EASY)
    assert len(rates) == 20  # a longer cosine schedule has other rates: it does not resume the shorter run


@pytest.mark.parametrize("kind", PARAMETRIZATIONS)
def test_stage_one_is_the_construction_s_stage_one(kind):
    rng = np.random.default_rng(4)
    noisy = rng.normal(size=(3, 7, 2))
    network = TrainedTransformer(init_params(2, 3, 0.5, parametrization=kind, init="construction"))
    reference = TwoStageTransformer(h2=0.125, sigma2=0.5, n_layers=3, eta=min(2.0 / 3, 1.0))
    np.testing.assert_allclose(network.stage_one(noisy), np.stack([reference.stage_one(c) for c in noisy]),
                               rtol=0, atol=1e-14)
    np.testing.assert_array_equal(network.stage_one(noisy[0]), network.stage_one(noisy)[0])


def test_random_init_puts_stage_two_a_factor_2_to_4_from_sigma2():
    factors = [init_params(1, 2, 0.7, rng=seed)["log_beta_s"] + np.log(0.7) for seed in range(200)]
    factors = np.abs(factors)
    assert factors.min() >= np.log(2) and factors.max() <= np.log(4)
    signs = np.sign([init_params(1, 2, 0.7, rng=seed)["log_beta_s"] + np.log(0.7) for seed in range(200)])
    assert 60 < np.sum(signs > 0) < 140


def test_training_contexts_carry_noise_of_variance_sigma2(monkeypatch):
    seen = []
    real = training._loss_and_gradient
    monkeypatch.setattr(training, "_loss_and_gradient",
                        lambda params, kind, noisy, clean, buffers: (seen.append(noisy - clean),
                                                                     real(params, kind, noisy, clean, buffers))[1])
    fit_transformer(TWO_CLUSTERS, 0.3, n_tokens=40, n_layers=1, steps=3, batch=50, seed=1)
    noise = np.concatenate(seen).reshape(-1, 2)  # 12000 noise vectors: the variance's relative s.e. is 0.9%
    np.testing.assert_allclose(noise.var(axis=0), 0.3, rtol=0.04)
    np.testing.assert_allclose(noise.mean(axis=0), 0.0, atol=0.03)
