"""The wheel installs one import package, ``attneb``, with every subpackage of the source folders."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import attneb

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed():
    config = _config()
    listed = set(config["packages"])
    found = set()
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join((package, *relative.parts)))
    assert found == listed, f"pyproject lists {sorted(listed - found)} not on disk; on disk, not listed: {sorted(found - listed)}"


def test_every_data_file_of_a_package_is_declared():
    """Files other than Python sources in the package folders ship only when package-data names them."""
    config = _config()
    declared = {(package, name) for package, names in config.get("package-data", {}).items() for name in names}
    found = set()
    for package, folder in config["package-dir"].items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts:
                relative = path.parent.relative_to(ROOT / folder)
                found.add((".".join((package, *relative.parts)), path.name))
    assert found == declared, f"undeclared: {sorted(found - declared)}; declared but absent: {sorted(declared - found)}"


def test_only_attneb_is_installed():
    assert {name.split(".")[0] for name in _config()["packages"]} == {attneb.__name__}


def test_version_and_command(tmp_path):
    assert attneb.__version__ and attneb.__version__ != "0+unknown"
    for command in ([sys.executable, "-m", "attneb", "--version"],):
        out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
        assert out.stdout.strip() == f"attneb {attneb.__version__}"
