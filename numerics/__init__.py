"""Numerics of the two-stage attention denoiser (arXiv:2605.29351).

Modules: :mod:`~numerics.kernels` (Gaussian-kernel sums), :mod:`~numerics.transformer`
(the same computation written as attention layers), :mod:`~numerics.flow` (Stage 1
particle flow), :mod:`~numerics.estimators` (Stage 2 and baselines, on the interface of
:mod:`~numerics.base`; the NPMLE baseline in :mod:`~numerics.npmle`),
:mod:`~numerics.priors` (reference priors with exact posterior means),
:mod:`~numerics.experiments` (risk on seeded batches), :mod:`~numerics.sweep`
(declarative experiments in a resumable SQLite store), :mod:`~numerics.meanfield`
(particle measurements of mean-field predictions), :mod:`~numerics.stats`
(intervals and fitted rates) and :mod:`~numerics.validation` (shared input checks).
"""
