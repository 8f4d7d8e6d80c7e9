"""`attneb verify`: the report, the exit status, and that every check can fail."""

import json
import subprocess
import sys

import pytest

from numerics import estimators, flow, kernels
from proofs_check import cli, numeric_checks
from proofs_check.registry import CLAIMS

NUMERIC_CLAIMS = ["C1", "C2", "C3", "C7", "C9"]


def verify(tmp_path, *ids):
    return cli.main(["verify", "--quick", "--out", str(tmp_path), "--only", *ids])


def read_report(tmp_path):
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("claim_id", NUMERIC_CLAIMS)
def test_claim_passes_with_the_real_implementation(claim_id, tmp_path, capsys):
    assert verify(tmp_path, claim_id) == 0
    [entry] = read_report(tmp_path)["claims"]
    assert entry["id"] == claim_id and entry["status"] == "pass"
    assert entry["evidence"] and all(e["status"] == "pass" for e in entry["evidence"])
    assert capsys.readouterr().out.count(f"{claim_id} ") >= 1


def _wrong_bandwidth_kernel_mean(monkeypatch):
    real = kernels.kernel_mean
    monkeypatch.setattr(kernels, "kernel_mean", lambda q, k, h2, **kw: real(q, k, 2 * h2, **kw))


def _log_kde_missing_half(monkeypatch):
    real = kernels.log_kde
    monkeypatch.setattr(kernels, "log_kde", lambda q, k, h2, **kw: real(q, k, 2 * h2, **kw))


def _euler_with_frozen_keys(monkeypatch):
    def frozen(x0, h2, T, eta, depths, budget_bytes):
        layers = flow.n_layers(T, eta)
        tokens = x0
        for _ in range(layers):
            tokens = tokens + (T / layers) * (kernels.kernel_mean(tokens, x0, h2) - tokens)
        return tokens, []

    monkeypatch.setattr(flow, "_euler", frozen)


def _stage_two_wrong_bandwidth(monkeypatch):
    monkeypatch.setattr(
        estimators.TwoStageDenoiser, "_denoise", lambda self, q: kernels.kernel_mean(q, self.particles_, 2 * self.sigma2)
    )


def _no_stage_one(monkeypatch):
    monkeypatch.setattr(flow, "particle_flow", lambda x0, *args, **kwargs: x0)


BREAKAGES = {
    "C1": [_wrong_bandwidth_kernel_mean],
    "C2": [_wrong_bandwidth_kernel_mean, _log_kde_missing_half],
    "C3": [_euler_with_frozen_keys],
    "C7": [_stage_two_wrong_bandwidth],
    "C9": [_no_stage_one],
}


@pytest.mark.parametrize(
    "claim_id,breakage", [(c, b) for c, bs in BREAKAGES.items() for b in bs], ids=lambda v: getattr(v, "__name__", v)
)
def test_a_broken_implementation_fails_the_claim(claim_id, breakage, tmp_path, monkeypatch):
    breakage(monkeypatch)
    assert verify(tmp_path, claim_id) == 1
    [entry] = read_report(tmp_path)["claims"]
    assert entry["status"] == "fail"
    assert any(e["status"] == "fail" for e in entry["evidence"])


def test_every_numeric_claim_has_a_breakage_test():
    assert set(BREAKAGES) == {c for c in CLAIMS if CLAIMS[c].checks and c in NUMERIC_CLAIMS}


def test_a_crashing_check_is_an_error_not_a_pass(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("deliberate")

    monkeypatch.setattr(kernels, "kernel_mean", boom)
    assert verify(tmp_path, "C1") == 1
    [entry] = read_report(tmp_path)["claims"]
    assert entry["status"] == "error" and "deliberate" in entry["evidence"][0]["error"]


def test_report_files_and_schema(tmp_path):
    assert verify(tmp_path, "C1", "C4") == 0
    report = read_report(tmp_path)
    assert report["mode"] == "quick" and report["passed"] is True
    ids = [c["id"] for c in report["claims"]]
    assert ids == ["C1", "C4"]
    for c in report["claims"]:
        assert {"id", "status", "evidence", "statement"} <= set(c)
    assert report["claims"][1]["status"] == "unchecked"
    md = (tmp_path / "report.md").read_text()
    assert "| C1 | pass |" in md and "## C4" in md


def test_unknown_claim_id_is_a_usage_error(tmp_path, capsys):
    assert verify(tmp_path, "C99") == 2
    assert "unknown claim id" in capsys.readouterr().err


def test_identity_evidence_compares_residual_with_tolerance():
    ev = numeric_checks._identity({"a": 1e-12, "b": 3e-9}, 1e-10, "x")
    assert not ev.passed and ev.data["tolerance"] == 1e-10 and "3.00e-09" in ev.summary


def test_python_dash_m_is_attneb_verify(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "proofs_check", "--quick", "--only", "C1", "--out", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert read_report(tmp_path)["claims"][0]["id"] == "C1"
    helped = subprocess.run([sys.executable, "-m", "proofs_check", "--help"], capture_output=True, text=True, check=False)
    assert "--quick" in helped.stdout
