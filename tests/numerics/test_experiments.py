"""numerics.experiments: the seeded draws against the laws they sample."""

import numpy as np

from attneb.numerics import experiments, priors

MEAN, TAU2, SIGMA2, N = np.array([0.5, -1.0]), 2.0, 0.3, 400_000


def test_draws_follow_the_prior_and_the_noise_law():
    """Clean draws ~ N(MEAN, TAU2 I) and noise ~ N(0, SIGMA2 I), independent: every moment within 5 standard errors.

    With N = 400000 the variances' relative standard error is sqrt(2 / N) = 0.22%: a draw 1% too wide (variance 2%)
    is 9 standard errors off.
    """
    prior = priors.Gaussian(MEAN, TAU2)
    batch, queries = experiments.draw_batch(prior, SIGMA2, N, 5), experiments.draw_queries(prior, SIGMA2, N, 5)
    for clean, noisy in (batch, queries):
        noise = noisy - clean
        assert clean.shape == noise.shape == (N, 2)
        assert np.all(np.abs(clean.mean(axis=0) - MEAN) <= 5 * np.sqrt(TAU2 / N))
        assert np.all(np.abs(noise.mean(axis=0)) <= 5 * np.sqrt(SIGMA2 / N))
        assert np.all(np.abs(clean.var(axis=0, ddof=1) / TAU2 - 1) <= 5 * np.sqrt(2 / N))
        assert np.all(np.abs(noise.var(axis=0, ddof=1) / SIGMA2 - 1) <= 5 * np.sqrt(2 / N))
        correlation = np.mean((clean - MEAN) * noise, axis=0) / np.sqrt(TAU2 * SIGMA2)
        assert np.all(np.abs(correlation) <= 5 / np.sqrt(N))
    # the queries of a seed are not its batch, and each is reproduced by its seed
    assert np.all(np.abs(np.mean((batch[1] - batch[0]) * (queries[1] - queries[0]), axis=0) / SIGMA2) <= 5 / np.sqrt(N))
    for draw in (experiments.draw_batch, experiments.draw_queries):
        np.testing.assert_array_equal(draw(prior, SIGMA2, 100, 7)[1], draw(prior, SIGMA2, 100, 7)[1])
