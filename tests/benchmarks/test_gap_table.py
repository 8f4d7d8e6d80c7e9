"""benchmarks/gap_table.py: G6's predicted gap beside E1's stored gaps, N by N, with the local slope."""

from __future__ import annotations

import pytest

from attneb.numerics.sweep import ResultStore
from attneb.numerics.sweep.spec import H2Schedule
from attneb.numerics.sweep.store import COLUMNS
from attneb.proofs_check.topics import predicted_gap as g6
from attneb.proofs_check.topics.designs import SCHEDULES
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


@pytest.mark.slow  # about 10 s beside the other tests (the mean field at three bandwidths, the variance quadratures)
def test_the_table_puts_g6s_prediction_beside_the_stored_gaps(tmp_path, capsys):
    script = load_script("gap_table")
    h2 = H2Schedule.parse(SCHEDULES["log"][1]).at(256)[0]
    with ResultStore(tmp_path / "results.sqlite") as store:
        store.add([{**_row(256, seed, value), "h2": h2, "T": 0.5 / (2 * h2)}
                   for seed, value in enumerate((0.010, 0.012, 0.014))])
    [row] = script.table(tmp_path / "results.sqlite", True, ["log"])
    record = g6.mean_field_bias("gaussian", h2, 0.5 / (2 * h2), 0.05)
    expected = g6.predicted_terms("gaussian", h2, 0.5 / (2 * h2), 0.05, 256, record)
    assert row["bias"] == pytest.approx(gap.gaussian_bias(1.0, 0.5, h2, 0.5 / (2 * h2), 0.05))
    assert row["gap"] == pytest.approx(expected["gap"]) and row["low"] < row["gap"] < row["high"]
    assert row["measured"][0] == pytest.approx(0.012) and row["measured"][1] < 0.012 < row["measured"][2]
    assert row["fresh"][0] == pytest.approx(0.006) and row["decided"]
    assert row["slope"] == pytest.approx(script.local_slope("gaussian", "log", 256)) and row["slope"] < 0
    assert row["first_order_bias"] == pytest.approx(gap.bias([1.0], [0.0], [1.0], 0.5, h2, 0.5 / (2 * h2)))
    script.print_table([row])
    assert f"| gaussian | log | 256 | {h2:.4f} | yes |" in capsys.readouterr().out


@pytest.mark.slow  # about 15 s: the six theories' predictions at one point
def test_the_wrong_theories_are_counted_on_the_stored_points(tmp_path):
    script = load_script("gap_table")
    h2 = H2Schedule.parse(SCHEDULES["log"][1]).at(256)[0]
    with ResultStore(tmp_path / "results.sqlite") as store:
        store.add([{**_row(256, seed, value), "h2": h2, "T": 0.5 / (2 * h2), "oos_gap": value}
                   for seed, value in enumerate((0.0095, 0.0097, 0.0099))])
    counts = script.wrong_theory_counts(tmp_path / "results.sqlite", True)
    assert counts["derived"]["gaussian"] == (0, 1) and counts["bias term alone"]["gaussian"] == (1, 1)
    assert len(counts) == 6 and all(c["sphere"] == (0, 0) for c in counts.values())


def test_an_empty_store_is_an_error(tmp_path):
    script = load_script("gap_table")
    ResultStore(tmp_path / "empty.sqlite").close()
    with pytest.raises(SystemExit):
        script.main(["--store", str(tmp_path / "empty.sqlite"), "--quick"])
