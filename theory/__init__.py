"""Symbolic derivations (sympy) of the theory behind the two-stage attention denoiser."""
