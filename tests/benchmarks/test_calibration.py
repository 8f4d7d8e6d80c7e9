"""The calibration benchmark (benchmarks/calibration.py) and the replacement it proposes for E1/E5/H1's floor
interval (proofs_check.engine.replication.floor_fit_t, floor_resamples)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sstats

from attneb.numerics import stats
from attneb.proofs_check.engine import replication
from tests.benchmarks import load_script

N = np.array([256, 1024, 4096, 16384, 131072.0])


def _table(seed: int, seeds: int = 6, c: float = 1e-3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return c + 0.2 * N**-0.45 * np.exp(0.4 * rng.standard_normal((seeds, N.size)))


@pytest.mark.parametrize("seed", range(3))
def test_floor_resamples_without_reweighting_are_floor_fits_resamples(seed):
    table = _table(seed)
    fit = replication.floor_fit(N, table)
    c, a = replication.floor_resamples(N, table, reweight=False)
    assert c[0] == pytest.approx(fit["c"], rel=1e-9) and a[0] == fit["a"]
    np.testing.assert_allclose(np.quantile(c[1:], [0.025, 0.975]), fit["ci"], rtol=1e-9)


def test_floor_fit_t_is_the_student_t_interval_of_its_bootstrap_standard_error():
    table = _table(4, seeds=5)
    fit = replication.floor_fit_t(N, table)
    c, _ = replication.floor_resamples(N, table)
    se = c[1:].std(ddof=1) * math.sqrt(5 / 4)
    half = sstats.t.ppf(0.975, 4) * se
    assert fit["se"] == pytest.approx(se, rel=1e-12)
    np.testing.assert_allclose(fit["ci"], [c[0] - half, c[0] + half], rtol=1e-12)
    assert fit["c"] == pytest.approx(replication.floor_fit(N, table)["c"], rel=1e-9)


def test_floor_fit_t_on_seed_offsets_is_the_t_interval_of_the_mean():
    """gap_s(N) = c + u_s + b N^-a: every resample fits exactly, its c is c + the resample's mean u, so the interval
    is mean_interval of c + u up to the bootstrap's sampling error (2000 resamples: sd of an sd about 1.6%, so 5%)."""
    u = np.random.default_rng(5).normal(0, 1e-3, 6)
    table = 2e-3 + u[:, None] + 0.3 * N[None, :] ** -0.5
    fit = replication.floor_fit_t(N, table)
    iv = stats.mean_interval(2e-3 + u)
    assert fit["c"] == pytest.approx(iv.estimate, rel=1e-9) and fit["a"] == 0.5
    assert (fit["ci"][1] - fit["ci"][0]) == pytest.approx(iv.high - iv.low, rel=0.05)


def test_a_floor_added_to_every_gap_shifts_the_interval_by_itself():
    table = _table(6)
    base, shifted = replication.floor_fit_t(N, table), replication.floor_fit_t(N, table + 0.01)
    np.testing.assert_allclose(np.array(shifted["ci"]) - base["ci"], 0.01, rtol=1e-6)


def test_floor_fit_t_needs_two_seeds():
    with pytest.raises(ValueError, match="at least 2"):
        replication.floor_fit_t(N, _table(7, seeds=1))


def test_the_script_runs_writes_its_rows_and_resumes(tmp_path, capsys):
    calibration = load_script("calibration")
    out = tmp_path / "rows.jsonl"
    only = "t-normal-S4,slopes-E5-quick-lognormal,floor_fit_t-E5-quick,group-slopes-T2-full,binomtest-S1-quick"
    assert calibration.main(["--trials", "40", "--seed", "3", "--only", only, "--json", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["t-normal-S4", "slopes-E5-quick-lognormal", "group-slopes-T2-full",
                                       "floor_fit_t-E5-quick-lognormal", "binomtest-S1-quick"]
    for r in rows:
        assert 0 <= r["coverage"] <= 1 and r["base_trials"] == 40 and r["seed"] == 3
    printed = capsys.readouterr().out
    assert "t-interval is exact" in printed and "flagged LOW" in printed
    # a second run with the same trials and seed reuses every stored row and appends nothing
    assert calibration.main(["--trials", "40", "--seed", "3", "--only", only, "--json", str(out)]) == 0
    assert len(out.read_text().splitlines()) == len(rows)
    assert "5 stored rows reused" in capsys.readouterr().out


def test_the_script_is_deterministic(tmp_path):
    calibration = load_script("calibration")
    runs = []
    for name in ("a.jsonl", "b.jsonl"):
        calibration.main(["--trials", "60", "--only", "t-normal-S5", "--json", str(tmp_path / name)])
        runs.append(json.loads((tmp_path / name).read_text())["covered"])
    assert runs[0] == runs[1]


def test_only_must_select_a_row(tmp_path):
    with pytest.raises(SystemExit):
        load_script("calibration").main(["--only", "no-such-method", "--json", str(tmp_path / "x.jsonl")])
