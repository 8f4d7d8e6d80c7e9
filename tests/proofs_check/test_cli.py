"""The command line's conventions: Ctrl-C, exit codes in --help, argument errors, one --workers default, -q."""

import os
import signal
import subprocess
import sys
import time

import pytest

from attneb.proofs_check import cli
from attneb.proofs_check.engine.registry import CLAIMS, Evidence, check, claim

SLOW_PLUGIN = '''
import pathlib, time
from attneb.proofs_check.engine.registry import Evidence, check, claim

claim("Z6", "interrupted", "a toy claim whose check waits until it is interrupted")

@check("Z6", "waits", criterion="never completes in the test")
def _waits(ctx):
    pathlib.Path({marker!r}).write_text("started")
    time.sleep(120)
    return Evidence(True, "identity", "waited", {{}})
'''


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell's background job would ignore it


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_ends_verify_with_one_line_and_status_130(tmp_path, workers):
    marker = tmp_path / "started"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(SLOW_PLUGIN.format(marker=str(marker)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "attneb", "verify", "--quick", "--workers", str(workers), "--out", str(tmp_path / "out"),
         "--load", str(plugin), "--only", "Z6"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == cli.EXIT_INTERRUPTED == 130
    assert err == "attneb verify: interrupted; run the same command with the same --out to resume\n"
    assert "Traceback" not in out


@pytest.mark.parametrize("command", ["verify", "derive", "show", "sweep", "plot"])
def test_every_help_lists_the_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([command, "--help"])
    assert stop.value.code == 0
    printed = capsys.readouterr().out
    assert "exit status:" in printed
    for code, meaning in cli.EXIT_CODES:
        assert f"  {code:<4} {meaning.split()[0]}" in printed
    assert {code for code, _ in cli.EXIT_CODES} == {0, 1, 2, 130, 141}


def test_plot_help_lists_every_experiment_that_can_be_drawn(capsys):
    from attneb.proofs_check.engine.content import load_default
    from attneb.proofs_check.engine.studies import STUDIES

    with pytest.raises(SystemExit):
        cli.main(["plot", "--help"])
    printed = capsys.readouterr().out
    load_default()
    assert len(STUDIES) >= 7
    for name, study in STUDIES.items():
        assert f"  {name:<4} {study.title}" in printed


@pytest.mark.parametrize(("argv", "message"), [
    (["verify", "--workers", "0"], "argument --workers: expected a positive integer, got 0"),
    (["verify", "--workers", "two"], "argument --workers: expected a positive integer, got two"),
    (["verify", "--replicates", "-3"], "argument --replicates: expected a positive integer, got -3"),
    (["sweep", "c.toml", "--store", "s.sqlite", "--workers", "1.5"],
     "argument --workers: expected a positive integer, got 1.5"),
    (["derive", "--time-limit", "0"], "argument --time-limit: expected a number of seconds > 0, got 0"),
    (["derive", "--time-limit", "inf"], "argument --time-limit: expected a number of seconds > 0, got inf"),
])
def test_argument_errors_name_the_option_and_what_it_expects(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_verify_and_sweep_default_to_the_same_workers():
    parser = cli.build_parser()
    verify = parser.parse_args(["verify"])
    sweep = parser.parse_args(["sweep", "c.toml", "--store", "s.sqlite"])
    assert verify.workers == sweep.workers == len(os.sched_getaffinity(0))


@pytest.fixture
def toy_claim():
    """A claim with one passing check, registered for the test and removed afterwards."""
    claim("Z5", "quiet", "a toy claim whose check passes")
    check("Z5", "passes", criterion="always passes")(lambda ctx: Evidence(True, "identity", "passed", {}))
    yield "Z5"
    del CLAIMS["Z5"]


def test_quiet_verify_prints_only_the_outcome(tmp_path, capsys, toy_claim):
    verify = ["verify", "--quick", "--workers", "1", "--out", str(tmp_path), "--only", toy_claim]
    assert cli.main([*verify, "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"report: {tmp_path / 'report.html'}, report.md and report.json ({lines[0].split('(')[1]}",
                     "all checks passed"]
    assert cli.main(verify) == 0
    loud = capsys.readouterr().out.splitlines()
    assert loud[0].startswith("attneb verify (quick)") and loud[1].startswith("Z5 ")
