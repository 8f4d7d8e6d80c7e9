"""Shrunken configurations of E1, E2, E4 and E5 for the tests."""

from attneb.proofs_check.topics import attention as attention_checks
from attneb.proofs_check.topics import depth_noise as depth_noise_checks
from attneb.proofs_check.topics import designs
from attneb.proofs_check.topics.stage2 import estimator_table, recovery


def _shrink(monkeypatch, module, name, parts=None, **changes):
    real = getattr(module, name)

    def small(quick):
        return {part: {**config, **changes} for part, config in real(quick).items() if parts is None or part in parts}

    monkeypatch.setattr(module, name, small)


def shrink_convergence(monkeypatch):
    real_recovery = recovery.recovery_configs
    monkeypatch.setattr(recovery, "recovery_configs", lambda quick: {
        # the power schedule keeps its N: the largest, 131072, is below N_c, as the scope check needs
        "clusters-power": real_recovery(quick)["clusters-power"],
        "gaussian-log": {**real_recovery(quick)["gaussian-log"], "n": [256, 1024, 4096], "seeds": {"start": 0, "count": 3}},
    })
    # two N (the extrapolation in N needs them), three seeds; tau2 = 1 at both h2 (the leading-order check needs both)
    _shrink(monkeypatch, depth_noise_checks, "depth_configs", parts=("tau2=1-h2=0.25", "tau2=1-h2=0.125"),
            n=[2048, 8192], seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, estimator_table, "table_configs", parts=("clusters", "box"), n=[128, 512],
            seeds={"start": 0, "count": 3})
    # one Student-t prior each: df 5 in E1 (on fresh queries df 3 recovers too slowly for so small a design); df 3 in
    # E4, only the two estimators its decision compares, at N = 1024 (at 512 its fresh-query benefit is within noise)
    _shrink(monkeypatch, recovery, "student_recovery_configs", parts=("student-t5-log",), n=[256, 1024, 4096],
            seeds={"start": 0, "count": 3})
    _shrink(monkeypatch, estimator_table, "student_table_configs", parts=("student-t3",), n=[1024],
            seeds={"start": 0, "count": 4}, estimators=["two-stage", "stage-two-only"],
            options=designs.fast_options(["two-stage", "stage-two-only"]))
    # six seeds: the E5 slope interval is a t-interval over per-seed slopes (S - 1 degrees of freedom), and the
    # Gaussian's per-seed slopes over three small N scatter by about 0.6 (with three seeds its interval reaches above 0)
    _shrink(monkeypatch, attention_checks, "clean_configs", n=[128, 512, 2048], seeds={"start": 0, "count": 6})
