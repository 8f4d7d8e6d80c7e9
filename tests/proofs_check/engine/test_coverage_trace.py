"""The tracer of the coverage map: which public functions of numerics and theory a run calls, and how it names them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from attneb import numerics, theory
from attneb.numerics import estimators, kernels, priors, stats
from attneb.proofs_check.engine import trace


@pytest.mark.parametrize(("module", "qualname", "public"), [
    ("attneb.numerics.kernels", "kernel_mean", True),
    ("attneb.numerics.transformer", "AttentionHead.__call__", True),
    ("attneb.numerics.kernels", "_prepare", False),
    ("attneb.numerics.priors", "Gaussian._sample", False),
    ("attneb.numerics.priors", "Gaussian.__init__", False),
    ("attneb.numerics._accel", "kernel_sums", False),
    ("attneb.theory.depth_noise", "anisotropic_depth.<locals>.excess", False),
    ("attneb.numerics.meanfield", "<lambda>", False),
])
def test_public_means_no_private_part_but_call(module, qualname, public):
    assert trace.is_public(module, qualname) is public


def test_module_names_follow_the_package_folders():
    assert trace.module_name(kernels.__file__) == "attneb.numerics.kernels"
    assert trace.module_name(numerics.__file__) == "attneb.numerics"
    assert trace.module_name(theory.__file__) == "attneb.theory"
    assert trace.module_name(str(Path(numerics.__path__[0]) / "sweep" / "store.py")) == "attneb.numerics.sweep.store"
    assert trace.module_name(__file__) is None


class _Mine(priors.Gaussian):
    """A prior defined outside the traced packages."""


def test_recording_names_methods_after_the_class_they_were_called_on():
    x = np.linspace(-1.0, 1.0, 6)[:, None]
    before = sys.getprofile()
    with trace.recording() as recorder:
        priors.Gaussian(0.0, 1.0).posterior_mean(x, 0.5)
        estimators.StageTwoOnly(0.5).fit(x).denoise(x)
        _Mine(0.0, 1.0).noisy_score(x, 0.5)
        sorted([3, 1, 2], key=lambda v: -v)
    assert sys.getprofile() is before
    found = recorder.take()
    assert {"attneb.numerics.priors:Gaussian.posterior_mean", "attneb.numerics.estimators:StageTwoOnly.fit",
            "attneb.numerics.estimators:StageTwoOnly.denoise", "attneb.numerics.validation:check_array",
            "attneb.numerics.estimators:stage_two", "attneb.numerics.kernels:kernel_mean",
            "attneb.numerics.priors:Prior.noisy_score"} <= set(found)
    assert not [t for t in found if "Denoiser" in t or "._" in t or ":_" in t or "<" in t]
    assert found == sorted(found) and recorder.take() == []


def test_class_bodies_are_not_functions():
    source = Path(stats.__file__)
    module_code = compile(source.read_text(), str(source), "exec")
    body = next(c for c in module_code.co_consts if getattr(c, "co_name", "") == "Interval")
    recorder = trace.Recorder()
    recorder.functions.update({body, stats.mean_interval.__code__})
    assert recorder.take() == ["attneb.numerics.stats:mean_interval"]


def test_a_traced_run_needs_an_empty_folder(tmp_path):
    (tmp_path / "results.sqlite").write_text("")
    with pytest.raises(ValueError, match="holds files; a traced run needs an empty folder"):
        trace.traced_run(["C1"], out=tmp_path)
