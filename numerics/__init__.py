"""Numerics of the two-stage attention denoiser (arXiv:2605.29351).

Modules: :mod:`~numerics.kernels` (Gaussian-kernel sums), :mod:`~numerics.transformer`
(the same computation written as attention layers), :mod:`~numerics.flow` (Stage 1
particle flow), :mod:`~numerics.estimators` (Stage 2 and baselines),
:mod:`~numerics.priors` (reference priors with exact posterior means) and
:mod:`~numerics.validation` (shared input checks).
"""
