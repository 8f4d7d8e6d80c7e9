import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attneb.numerics import estimators, flow, kernels
from attneb.numerics.transformer import AttentionHead, ResidualAttentionLayer, TwoStageTransformer
from tests.strategies import bandwidths, point_clouds, queries_and_keys


@given(queries_and_keys(), bandwidths)
def test_gaussian_head_equals_kernel_mean(qk, h2):
    q, k = qk
    np.testing.assert_allclose(AttentionHead.gaussian(q.shape[1], h2)(q, k), kernels.kernel_mean(q, k, h2), atol=1e-12, rtol=0)


@pytest.mark.parametrize("n_layers,eta", [(0, 0.1), (1, 1.0), (7, 0.05), (20, 0.25)])
def test_two_stage_transformer_equals_kernel_form(n_layers, eta):
    rng = np.random.default_rng(n_layers)
    noisy = rng.normal(size=(40, 2))
    queries = rng.normal(size=(9, 2))
    net = TwoStageTransformer(h2=0.2, sigma2=0.5, n_layers=n_layers, eta=eta)
    T = n_layers * eta
    refined = flow.particle_flow(noisy, 0.2, T, eta=eta) if n_layers else noisy
    np.testing.assert_allclose(net.stage_one(noisy), refined, atol=1e-12, rtol=0)
    model = estimators.TwoStageDenoiser(0.5, 0.2, T=T, eta=eta).fit(noisy) if n_layers else estimators.StageTwoOnly(0.5).fit(noisy)
    np.testing.assert_allclose(net(noisy, queries), model.denoise(queries), atol=1e-12, rtol=0)
    np.testing.assert_allclose(net(noisy), model.denoise(noisy), atol=1e-12, rtol=0)


@given(point_clouds(min_n=2), bandwidths, st.randoms(use_true_random=False))
def test_layer_and_stage_one_are_permutation_equivariant(x, h2, random):
    perm = list(range(len(x)))
    random.shuffle(perm)
    layer = ResidualAttentionLayer(AttentionHead.gaussian(x.shape[1], h2), 0.5)
    np.testing.assert_allclose(layer(x[perm]), layer(x)[perm], atol=1e-10)
    net = TwoStageTransformer(h2=h2, sigma2=1.0, n_layers=3, eta=0.5)
    np.testing.assert_allclose(net.stage_one(x[perm]), net.stage_one(x)[perm], atol=1e-10)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"h2": 0.0}, "h2"),
        ({"sigma2": -1.0}, "sigma2"),
        ({"eta": 1.5}, "eta"),
        ({"eta": 0.0}, "eta"),
        ({"n_layers": 2.5}, "n_layers"),
        ({"n_layers": -1}, "n_layers"),
    ],
)
def test_bad_transformer_parameters(kwargs, match):
    params = {"h2": 0.1, "sigma2": 0.5, "n_layers": 2, "eta": 0.1} | kwargs
    with pytest.raises(ValueError, match=match):
        TwoStageTransformer(**params)


def test_head_rejects_wrong_dimension():
    with pytest.raises(ValueError, match="d == 3"):
        AttentionHead.gaussian(2, 1.0)(np.zeros((1, 3)), np.zeros((2, 3)))


def _attend(queries, keys, h2):
    """Gaussian-kernel attention written out: a softmax of -|q - k|^2 / (2 h2) over the keys."""
    logits = -((queries[:, None, :] - keys[None, :, :]) ** 2).sum(axis=2) / (2 * h2)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ keys


def test_layers_written_out_with_a_softmax():
    rng = np.random.default_rng(3)
    x, queries = rng.normal(size=(30, 2)), rng.normal(size=(6, 2))
    h2, sigma2, eta, layers = 0.2, 0.5, 0.25, 3
    head = AttentionHead.gaussian(2, h2)
    np.testing.assert_allclose(head(queries, x), _attend(queries, x, h2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ResidualAttentionLayer(head, eta)(x), x + eta * (_attend(x, x, h2) - x),
                               rtol=1e-10, atol=1e-12)
    tokens = x
    for _ in range(layers):
        tokens = tokens + eta * (_attend(tokens, tokens, h2) - tokens)
    net = TwoStageTransformer(h2=h2, sigma2=sigma2, n_layers=layers, eta=eta)
    np.testing.assert_allclose(net.stage_one(x), tokens, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(net(x, queries), _attend(queries, tokens, sigma2), rtol=1e-10, atol=1e-12)
