"""numerics.base: the one-BLAS-thread context."""

import numpy as np  # noqa: F401 - loads the BLAS whose threads are counted
from threadpoolctl import threadpool_info, threadpool_limits

from attneb.numerics import base


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_single_blas_thread_limits_blas_to_one_thread_and_restores_it():
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        with base.single_blas_thread():
            assert _blas_threads() == {1}
        assert _blas_threads() == {2}
