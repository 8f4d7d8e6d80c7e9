"""Stored results name the code that computed them, and other code's results are never reused unasked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from attneb.numerics import sweep
from attneb.numerics.sweep import provenance
from attneb.proofs_check import cli
from attneb.proofs_check.engine.report import stored_code

TINY = {
    "name": "tiny",
    "prior": {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25},
    "sigma2": 0.5,
    "n": [16],
    "seeds": [0, 1],
    "estimators": ["two-stage", "oracle"],
    "h2": {"rule": "power", "scale": 0.5, "exponent": 0.25},
    "T": "leading",
    "eta": 0.25,
}


@pytest.fixture
def code(monkeypatch):
    """Run as code ``name``: what every store opened and every row computed from now on records."""
    def run_as(name: str) -> None:
        monkeypatch.setattr(provenance, "source_fingerprint", lambda: name)
    monkeypatch.delenv(provenance.REUSE_VARIABLE, raising=False)
    return run_as


def test_the_fingerprint_is_the_version_and_a_hash_of_every_source_file():
    fingerprint = sweep.source_fingerprint()
    release, _, digest = fingerprint.partition("+src.")
    assert release == __import__("attneb").__version__ and len(digest) == 12
    int(digest, 16)


def test_the_fingerprint_changes_with_any_source_file(tmp_path, monkeypatch):
    root = tmp_path / "attneb"
    (root / "numerics").mkdir(parents=True)
    (root / "numerics" / "kernels.py").write_text("x = 1\n")
    spec = type("Spec", (), {"submodule_search_locations": [str(root)]})
    monkeypatch.setattr(provenance.importlib.util, "find_spec", lambda name: spec if name == "attneb.numerics" else None)
    read = provenance.source_fingerprint.__wrapped__
    before = read()
    (root / "numerics" / "kernels.py").write_text("x = 1  # a comment\n")
    assert read() != before
    (root / "numerics" / "kernels.py").write_text("x = 1\n")
    assert read() == before


def test_runs_of_other_code_are_computed_again_and_kept(tmp_path, code):
    path = tmp_path / "store.sqlite"
    code("old")
    first = sweep.run_sweep(sweep.Experiment.from_dict(TINY), path, progress=False)
    assert first.ran == 4
    code("new")
    second = sweep.run_sweep(sweep.Experiment.from_dict(TINY), path, progress=False)
    assert (second.skipped, second.ran) == (0, 4)
    with sweep.ResultStore(path) as store:
        assert {r["code"] for r in store.rows()} == {"new"}
        assert store.other_code() == {"tiny": {"old": 4}}
        assert store.provenance() == {"tiny": {"new": 4}}
    third = sweep.run_sweep(sweep.Experiment.from_dict(TINY), path, progress=False)
    assert (third.skipped, third.ran) == (4, 0)


def test_reuse_reads_other_code_only_where_this_code_has_none(tmp_path, code):
    path = tmp_path / "store.sqlite"
    code("old")
    sweep.run_sweep(sweep.Experiment.from_dict(TINY), path, progress=False)
    with sweep.ResultStore(path) as store:
        keys = sorted(store.finished_keys())
        store.add_record("E9", "a", {"value": 1})
        store.add_record("E9", "b", {"value": 2})
    code("new")
    with sweep.ResultStore(path) as store:
        assert store.rows() == [] and store.records("E9") == {} and store.finished_keys() == set()
    with sweep.ResultStore(path, reuse_other_code=True) as store:
        store.add([{**row, "code": "ignored", "mse": -1.0} for row in store.rows() if row["key"] == keys[0]])
        store.add_record("E9", "a", {"value": 10})
        rows = {r["key"]: r for r in store.rows()}
        assert sorted(rows) == keys
        assert rows[keys[0]]["code"] == "new" and rows[keys[0]]["mse"] == -1.0
        assert {rows[k]["code"] for k in keys[1:]} == {"old"}
        assert store.records("E9") == {"a": {"value": 10}, "b": {"value": 2}}
        assert store.provenance() == {"E9": {"new": 1, "old": 1}, "tiny": {"new": 1, "old": 3}}


def test_the_environment_variable_asks_for_reuse(tmp_path, code, monkeypatch):
    code("old")
    with sweep.ResultStore(tmp_path / "s.sqlite") as store:
        store.add_record("E9", "a", {"value": 1})
    code("new")
    monkeypatch.setenv(provenance.REUSE_VARIABLE, "1")
    with sweep.ResultStore(tmp_path / "s.sqlite") as store:
        assert store.records("E9") == {"a": {"value": 1}}
    monkeypatch.setenv(provenance.REUSE_VARIABLE, "yes")
    with pytest.raises(ValueError, match="ATTNEB_REUSE_OTHER_CODE == 'yes'; must be '0' or '1'"):
        sweep.ResultStore(tmp_path / "s.sqlite")


def _v2_store(path: Path) -> None:
    """A store as schema version 2 wrote it (no code), with one run and one record."""
    conn = sqlite3.connect(path)
    columns = [(n, "TEXT PRIMARY KEY" if n == "key" else k) for n, k in sweep.COLUMNS if n != "code"]
    conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {k}' for n, k in columns)})")
    conn.execute("CREATE INDEX runs_experiment ON runs (experiment)")
    conn.execute("CREATE TABLE records (key TEXT PRIMARY KEY, experiment TEXT NOT NULL, payload TEXT NOT NULL, "
                 "finished_at TEXT NOT NULL)")
    values = {n: (1 if k.startswith("INTEGER") else 0.5 if k.startswith("REAL") else n) for n, k in columns}
    conn.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(columns))})", [values[n] for n, _ in columns])
    conn.execute("INSERT INTO records VALUES ('r', 'E9', '{\"value\": 1}', '2026-11-01T00:00:00')")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()


def test_a_version_2_store_is_migrated_its_results_of_unrecorded_code(tmp_path, code):
    _v2_store(tmp_path / "old.sqlite")
    code("new")
    with sweep.ResultStore(tmp_path / "old.sqlite") as store:
        assert store.rows() == [] and store.records("E9") == {}
        assert store.other_code() == {"E9": {"unrecorded": 1}, "experiment": {"unrecorded": 1}}
    with sweep.ResultStore(tmp_path / "old.sqlite", reuse_other_code=True) as store:
        assert [r["code"] for r in store.rows()] == ["unrecorded"] and store.records("E9") == {"r": {"value": 1}}
        assert store.integrity_check() == "ok"


def test_verify_and_sweep_say_plainly_what_other_code_computed(tmp_path, code, capsys):
    path = tmp_path / "store.sqlite"
    code("old")
    sweep.run_sweep(sweep.Experiment.from_dict(TINY), path, progress=False)
    code("new")
    assert cli._other_code_notice("verify", [path]) == (
        f"attneb verify: {path} holds 4 results computed by other code (4 by old); "
        "this code (new) computes them again (--reuse-other-code would use them instead)")
    with sweep.ResultStore(path):
        pass
    assert stored_code(tmp_path) == {"code": "new", "reuse_other_code": False, "used": {},
                                     "held": {"store.sqlite": {"tiny": {"old": 4}}}}
    config = tmp_path / "tiny.toml"
    config.write_text(_toml(TINY))
    assert cli.main(["sweep", str(config), "--store", str(path), "--reuse-other-code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"attneb sweep: {path} holds 4 results computed by other code (4 by old); "
                          "--reuse-other-code: they are used where this code (new) has none")
    assert "4 already in" in out and "0 ran" in out
    assert stored_code(tmp_path)["used"] == {"store.sqlite": {"tiny": {"old": 4}}}


def _toml(config: dict) -> str:
    def value(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)
    return "".join(f"{k} = {value(v)}\n" for k, v in config.items())


def test_verify_refuses_a_store_it_cannot_read_before_running_anything(tmp_path, capsys):
    conn = sqlite3.connect(tmp_path / "results.sqlite")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert cli.main(["verify", "--quick", "--only", "C4", "--workers", "1", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"attneb verify: {tmp_path / 'results.sqlite'} has store schema version 1")


def test_the_fingerprint_is_the_sha256_of_the_sources_written_out():
    """sha256 over every .py file of the four packages (the namespace's own files only), named by package and path."""
    import hashlib
    import importlib.util

    digest = hashlib.sha256()
    for name in ("attneb", "attneb.theory", "attneb.numerics", "attneb.proofs_check"):
        for folder in importlib.util.find_spec(name).submodule_search_locations:
            root = Path(folder)
            files = [path for path in root.rglob("*.py") if name != "attneb" or path.parent == root]
            for path in sorted(files, key=lambda path: path.relative_to(root).as_posix()):
                digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    assert provenance.source_fingerprint() == f"{__import__('attneb').__version__}+src.{digest.hexdigest()[:12]}"


def test_the_fingerprint_is_read_when_the_toolkit_is_loaded():
    """So an edit of the source during a run changes neither this process's label nor its forks'."""
    import subprocess
    import sys

    probe = ("from attneb.numerics.sweep import provenance as p; info = p.source_fingerprint.cache_info(); "
             "assert (info.misses, info.hits) == (1, 0), info")
    subprocess.run([sys.executable, "-c", probe], check=True)
