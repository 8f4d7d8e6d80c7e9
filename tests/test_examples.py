"""examples/walkthrough.py runs top to bottom: as a plain script, and, where jupytext, nbclient and ipykernel are
installed, as the notebook jupytext makes of it."""

from __future__ import annotations

import runpy
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "examples" / "walkthrough.py"
PNG = b"\x89PNG\r\n\x1a\n"


def test_the_walkthrough_runs_as_a_script(tmp_path, monkeypatch, capsys):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its temporary folder, under tmp_path
    try:
        namespace = runpy.run_path(str(WALKTHROUGH), run_name="__main__")
    finally:
        plt.close("all")
    assert namespace["OUT"].parent == tmp_path
    # 1. derive: the derivation was checked (C3's run checks the same cached derivation again, so its report is newer)
    assert namespace["derivation"].name == namespace["report"].name == "depth_ode" and namespace["report"].passed
    # 2. one claim's checks, run in the temporary folder
    result = namespace["result"]
    assert result.claim.id == "C3" and result.status == "pass"
    assert (namespace["OUT"] / "verify").is_dir()
    # 3. a denoiser: the MSE of each on the batch and the excess over the oracle
    mse = namespace["mse"]
    assert set(mse) == {"TwoStageDenoiser", "StageTwoOnly", "OracleBayes"} and all(np.isfinite(list(mse.values())))
    assert namespace["excess"] == mse["TwoStageDenoiser"] - mse["OracleBayes"]
    # 4. the figure
    assert namespace["figure_path"].read_bytes().startswith(PNG)
    out = capsys.readouterr().out
    assert "depth_ode: passed" in out and "C3   PASS" in out and "excess of TwoStageDenoiser over OracleBayes" in out


def test_the_walkthrough_runs_as_a_notebook(tmp_path, monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's temporary folder
    notebook = jupytext.read(WALKTHROUGH)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]

    def shown(source_end: str) -> dict:
        """The rich display of the cell whose source ends with ``source_end``: mime type -> data."""
        cell = next(c for c in code if c.source.rstrip().endswith(source_end))
        return next(o["data"] for o in cell.outputs if o["output_type"] == "execute_result")

    assert shown("\nderivation")["text/latex"].startswith(r"$\displaystyle \begin{aligned}")
    assert shown("\nreport")["text/markdown"].startswith("Checks of `depth_ode`: passed")
    assert shown("\nclaim")["text/markdown"].startswith("**C3: ")
    assert shown("\nresult")["text/markdown"].startswith("**C3: ") and "— pass" in shown("\nresult")["text/markdown"]
    figure = next(c for c in code if "savefig" in c.source)
    assert any("image/png" in o.get("data", {}) for o in figure.outputs)  # the inline backend showed it
