"""benchmarks/gap_table.py: the predicted gap beside E1's stored gaps, N by N."""

from __future__ import annotations

import pytest

from attneb.numerics.sweep import ResultStore
from attneb.numerics.sweep.store import COLUMNS
from attneb.theory import gap
from tests.benchmarks import load_script


def _row(n: int, seed: int, value: float) -> dict:
    row = dict.fromkeys((name for name, _ in COLUMNS), None)
    row.update(key=f"k{n}-{seed}", experiment="E1-gaussian-log-quick", estimator="two-stage", prior="Gaussian", dim=1,
               sigma2=0.5, n=n, seed=seed, h2=0.1, T=2.5, eta=0.05, gap=value, oos_gap=value / 2, mse=0.0, mmse=0.0,
               mmse_error=0.0, mmse_method="exact", excess=0.0, oos_mse=0.0, oos_excess=0.0,
               runtime_s=0.0, finished_at="", attneb_version="", numpy_version="", scipy_version="", python_version="",
               options="{}", spec="{}")
    return row


@pytest.mark.slow  # about 9 s beside the other tests (theory.gap's quadratures)
def test_the_table_puts_the_prediction_beside_the_stored_gaps(tmp_path, capsys):
    script = load_script("gap_table")
    with ResultStore(tmp_path / "results.sqlite") as store:
        store.add([_row(256, seed, value) for seed, value in enumerate((0.010, 0.012, 0.014))])
    [row] = script.table(tmp_path / "results.sqlite", True, ["log"], with_mean_field=False)
    expected = gap.predicted_gap([1.0], [0.0], [1.0], 0.5, 0.1, 2.5, 0.05, 256)
    assert row["bias"] == pytest.approx(gap.gaussian_bias(1.0, 0.5, 0.1, 2.5, 0.05))
    assert row["predicted"] == pytest.approx(row["bias"] + expected["variance"] + expected["fluctuation"])
    assert row["gap"][0] == pytest.approx(0.012) and row["gap"][1] < 0.012 < row["gap"][2]
    assert row["oos_gap"][0] == pytest.approx(0.006)
    script.print_table([row])
    assert "| gaussian | log | 256 | 0.1000 |" in capsys.readouterr().out


def test_an_empty_store_is_an_error(tmp_path):
    script = load_script("gap_table")
    ResultStore(tmp_path / "empty.sqlite").close()
    with pytest.raises(SystemExit):
        script.main(["--store", str(tmp_path / "empty.sqlite"), "--quick"])
