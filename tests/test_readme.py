"""The README's quick start and example stay true."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def quick_start_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, re.S)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_command():
    install_verify, install_test = quick_start_commands()
    assert "attneb verify" in install_verify and "pip install" in install_verify
    assert "pytest" in install_test and "pip install" in install_test
    assert install_test in (ROOT / ".ci" / "run").read_text()


def test_python_example_runs_and_lands_near_bayes(capsys):
    code = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    gap = float(re.search(r"gap to Bayes\s*:\s*(\S+)", out).group(1))
    mse_bayes = float(re.search(r"MSE  Bayes\s*:\s*(\S+)", out).group(1))
    # the bound is the mean + 3 sd of gap / Bayes MSE over seeds 0-19 of this example (0.029 + 3 x 0.0071; seed 0: 0.032)
    assert 0 < gap < 0.05 * mse_bayes
