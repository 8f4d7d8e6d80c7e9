"""Numerics of the two-stage attention denoiser (arXiv:2605.29351).

Modules: :mod:`~attneb.numerics.kernels` (Gaussian-kernel sums), :mod:`~attneb.numerics.transformer`
(the same computation written as attention layers), :mod:`~attneb.numerics.flow` (Stage 1
particle flow), :mod:`~attneb.numerics.estimators` (Stage 2 and baselines, on the interface of
:mod:`~attneb.numerics.base`; the NPMLE baseline in :mod:`~attneb.numerics.npmle`),
:mod:`~attneb.numerics.priors` (reference priors with exact posterior means),
:mod:`~attneb.numerics.experiments` (risk on seeded batches), :mod:`~attneb.numerics.sweep`
(declarative experiments in a resumable SQLite store), :mod:`~attneb.numerics.meanfield`
(particle measurements of mean-field predictions), :mod:`~attneb.numerics.stats`
(intervals and fitted rates) and :mod:`~attneb.numerics.validation` (shared input checks).
"""
