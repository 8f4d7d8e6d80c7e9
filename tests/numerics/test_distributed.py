"""Sweeps on a dask.distributed cluster: the same rows as a local run, written by the client."""

import pytest

from attneb.numerics import sweep
from attneb.proofs_check import cli

distributed = pytest.importorskip("distributed")

CONFIG = """
name = "dask"
sigma2 = 0.5
n = [200, 400]
seeds = {start = 0, count = 3}
estimators = ["two-stage", "stage-two-only", "oracle"]
h2 = 0.1
T = "leading"
eta = 0.1
[prior]
family = "GaussianMixture"
means = [[-1.5], [1.5]]
var = 0.3
"""


def stable(rows):
    return [{k: v for k, v in row.items() if k not in sweep.VOLATILE_COLUMNS} for row in rows]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        yield local


def test_rows_on_a_local_cluster_equal_a_local_run(cluster, tmp_path):
    config = tmp_path / "dask.toml"
    config.write_text(CONFIG)
    local = sweep.sweep_file(config, tmp_path / "local.db", progress=False)
    remote = sweep.sweep_file(config, tmp_path / "dask.db", progress=False, scheduler=cluster.scheduler_address)
    assert (local.ran, remote.ran) == (18, 18)
    with sweep.ResultStore(tmp_path / "local.db") as a, sweep.ResultStore(tmp_path / "dask.db") as b:
        assert stable(a.rows()) == stable(b.rows())
    again = sweep.sweep_file(config, tmp_path / "dask.db", progress=False, scheduler=cluster.scheduler_address)
    assert (again.ran, again.skipped) == (0, 18)


def test_cli_scheduler_option(cluster, tmp_path, capsys):
    config = tmp_path / "dask.toml"
    config.write_text(CONFIG)
    store = tmp_path / "cli.db"
    assert cli.main(["sweep", str(config), "--store", str(store), "--scheduler", cluster.scheduler_address]) == 0
    assert "18 ran" in capsys.readouterr().out


def test_scheduler_errors_are_explained(tmp_path, capsys):
    config = tmp_path / "dask.toml"
    config.write_text(CONFIG)
    assert cli.main(["sweep", str(config), "--store", str(tmp_path / "x.db"), "--scheduler", "localhost:1"]) == 2
    assert "expected an address such as 'tcp://" in capsys.readouterr().err
    with pytest.raises(ValueError, match="excludes executor and workers"):
        sweep.sweep_file(config, tmp_path / "x.db", workers=2, scheduler="tcp://127.0.0.1:1")
