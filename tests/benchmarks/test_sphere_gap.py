"""benchmarks/sphere_gap.py: the sphere's two-stage gap at one N beside the prediction, and Stage 2 alone at depth 0."""

from __future__ import annotations

import pytest

from attneb.numerics.sweep import ResultStore
from tests.benchmarks import load_script
from tests.benchmarks.test_gap_table import _row


@pytest.mark.slow  # about 5 s: the first call of the theory's gain builds S1's derivation
def test_a_small_run_prints_the_measured_and_predicted_gaps(capsys):
    load_script("sphere_gap").main(["--large-n", "128", "--h2", "0.5", "--seeds", "1"])
    out = capsys.readouterr().out
    assert "seed 0: gap fresh" in out and "N = 128, h2 = 0.5: measured fresh" in out and "fresh / predicted" in out


def test_depth_zero_reads_the_stage_two_alone_rows(tmp_path, capsys):
    rows = [{**_row(256, seed, 0.05), "experiment": "E1-sphere-log-quick", "estimator": "stage-two-only", "dim": 3,
             "key": f"s{seed}"} for seed in range(2)]
    with ResultStore(tmp_path / "results.sqlite") as store:
        store.add(rows)
    load_script("sphere_gap").main(["--depth-zero", str(tmp_path / "results.sqlite"), "--quick"])
    assert "log N = 256: measured fresh 0.025, in-sample 0.05; predicted 0.05" in capsys.readouterr().out


def test_it_asks_for_a_comparison():
    with pytest.raises(SystemExit):
        load_script("sphere_gap").main([])


def test_the_split_adds_up_to_the_gap(capsys):
    parts = load_script("sphere_gap").split(64, 0.5, 3)
    assert parts["gap"] == pytest.approx(parts["bias"] + parts["variance"], rel=1e-12)
    assert parts["variance"] > 0 and parts["predicted_bias"] > 0
    assert "squared bias" in capsys.readouterr().out
