"""Sweeps on an existing ``dask.distributed`` cluster (optional extra ``dist``).

:func:`attneb.numerics.sweep.run_sweep` executes its tasks through any
:class:`concurrent.futures.Executor`; :func:`dask_executor` provides one backed by a
``dask.distributed`` scheduler. The tasks (:func:`attneb.numerics.sweep.run_batch`, one batch of runs
each) execute on the cluster's workers; their rows come back to the client, which alone writes
them to the SQLite store, one transaction per task as it arrives. So a sweep on a cluster has the
same rows (up to :data:`attneb.numerics.sweep.VOLATILE_COLUMNS`), the same resumption and the same
store as a local one; the workers need ``attneb`` importable, not the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Executor

__all__ = ["dask_executor"]


def _client_class():
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(
            "sweeps on a dask cluster need the optional extra 'dist': pip install 'attneb[dist]'"
        ) from exc
    return Client


@contextlib.contextmanager
def dask_executor(scheduler, *, timeout: float = 30.0) -> Iterator[Executor]:
    """Connect to a ``dask.distributed`` scheduler and yield an executor for its workers.

    Parameters
    ----------
    scheduler : str or distributed.deploy.Cluster
        The scheduler's address (``"tcp://HOST:PORT"``) or a cluster object (a ``LocalCluster``).
    timeout : float
        Seconds to wait for the connection.

    Yields
    ------
    concurrent.futures.Executor
        ``Client.get_executor(pure=False)``: every submitted task runs (no result sharing by key).

    Raises
    ------
    ImportError
        When ``distributed`` is not installed (extra ``dist``).
    ValueError
        When ``scheduler`` is a string that is not a ``tcp://``, ``tls://``, ``inproc://`` or
        ``ucx://`` address.
    OSError
        When no scheduler answers within ``timeout`` (dask's own error, with the address).
    """
    if isinstance(scheduler, str) and not scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        raise ValueError(f"scheduler == {scheduler!r}, expected an address such as 'tcp://127.0.0.1:8786'")
    client = _client_class()(scheduler, timeout=timeout, set_as_default=False)
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()
