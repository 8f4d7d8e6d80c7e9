"""The SQLite store of a sweep's results: tidy rows of runs, and records of other experiments.

:class:`ResultStore` keeps one row per finished run in the ``runs`` table (columns
:data:`COLUMNS`, keyed by :attr:`attneb.numerics.sweep.RunSpec.key`) and, for experiments that are not
risk sweeps, one JSON record per key in the ``records`` table. Its guarantees: every write is
one transaction (a crash at any moment leaves whole rows only), the first write of a key wins
(``INSERT OR IGNORE``; rows are never updated), and a committed row survives the writing
process being killed, so a sweep resumes from what the store holds. A store of another schema
version is refused, not migrated.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from .canonical import canonical_json

#: Version of the store's row schema (SQLite ``user_version``). 2 added the out-of-sample columns
#: ``oos_mse``, ``oos_gap`` and ``oos_excess``; a store of another version is refused, not migrated.
_SCHEMA_VERSION = 2


#: Row schema: (column, SQLite type). ``key`` is the primary key.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "TEXT PRIMARY KEY"),
    ("experiment", "TEXT NOT NULL"),
    ("estimator", "TEXT NOT NULL"),
    ("prior", "TEXT NOT NULL"),
    ("dim", "INTEGER NOT NULL"),
    ("sigma2", "REAL NOT NULL"),
    ("n", "INTEGER NOT NULL"),
    ("seed", "INTEGER NOT NULL"),
    ("h2", "REAL"),
    ("T", "REAL"),
    ("eta", "REAL"),
    ("method", "TEXT"),
    ("n_layers", "INTEGER"),
    ("mse", "REAL NOT NULL"),
    ("mmse", "REAL NOT NULL"),
    ("mmse_error", "REAL NOT NULL"),
    ("mmse_method", "TEXT NOT NULL"),
    ("gap", "REAL NOT NULL"),
    ("excess", "REAL NOT NULL"),
    ("oos_mse", "REAL NOT NULL"),
    ("oos_gap", "REAL NOT NULL"),
    ("oos_excess", "REAL NOT NULL"),
    ("runtime_s", "REAL NOT NULL"),
    ("finished_at", "TEXT NOT NULL"),
    ("attneb_version", "TEXT NOT NULL"),
    ("numpy_version", "TEXT NOT NULL"),
    ("scipy_version", "TEXT NOT NULL"),
    ("python_version", "TEXT NOT NULL"),
    ("options", "TEXT NOT NULL"),
    ("spec", "TEXT NOT NULL"),
)
_NAMES = tuple(name for name, _ in COLUMNS)
_TYPES = {name: kind.split()[0] for name, kind in COLUMNS}
_NULLABLE = {name for name, kind in COLUMNS if "NOT NULL" not in kind and "PRIMARY KEY" not in kind}
#: Columns that differ between two executions of the same run (timing, clock, environment).
VOLATILE_COLUMNS = ("runtime_s", "finished_at", "attneb_version", "numpy_version", "scipy_version", "python_version")
_ORDER = "experiment, estimator, prior, sigma2, n, h2, T, method, eta, seed, key"


class ResultStore:
    """Tidy rows of finished runs in one SQLite file (WAL journal), keyed by :attr:`RunSpec.key`.

    Every :meth:`add` is one transaction: after a crash at any moment the file holds whole rows
    only. Rows are only added, never updated (``INSERT OR IGNORE``: a key already present keeps
    its first row). ``synchronous=NORMAL``: a committed row survives the process being killed;
    only a power loss or OS crash may drop the last commits (never corrupting the file).

    Parameters
    ----------
    path : str or Path
        The database file; created with its table if missing.
    timeout : float
        Seconds to wait for another process's write lock.
    """

    def __init__(self, path, *, timeout: float = 30.0):
        self.path = Path(path)
        self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _SCHEMA_VERSION):
            self._conn.close()
            raise ValueError(f"{self.path} has store schema version {version}; this attneb writes {_SCHEMA_VERSION}: "
                             "start a fresh store (a new report folder, or another --store path)")
        with self._transaction():
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{n} {k}' for n, k in COLUMNS)})")
            self._conn.execute("CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, experiment TEXT NOT NULL, "
                               "payload TEXT NOT NULL, finished_at TEXT NOT NULL)")
            self._conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _transaction(self):
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def add(self, rows: Iterable[Mapping]) -> int:
        """Insert rows (dicts with the keys of :data:`COLUMNS`) in one transaction; returns how many were new."""
        values = [tuple(row[name] for name in _NAMES) for row in rows]
        if not values:
            return 0
        sql = f"INSERT OR IGNORE INTO runs ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"
        with self._transaction():
            before = self._conn.total_changes
            self._conn.executemany(sql, values)
            return self._conn.total_changes - before

    def finished_keys(self, experiment: str | None = None) -> set[str]:
        """Keys of the stored runs (of one experiment, or all)."""
        if experiment is None:
            cur = self._conn.execute("SELECT key FROM runs")
        else:
            cur = self._conn.execute("SELECT key FROM runs WHERE experiment = ?", (experiment,))
        return {key for (key,) in cur}

    def rows(self, experiment: str | None = None) -> list[dict]:
        """Stored rows as dicts (columns of :data:`COLUMNS`), in a fixed order."""
        where, args = ("", ()) if experiment is None else (" WHERE experiment = ?", (experiment,))
        cur = self._conn.execute(f"SELECT {', '.join(_NAMES)} FROM runs{where} ORDER BY {_ORDER}", args)
        return [dict(zip(_NAMES, values)) for values in cur]

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def add_record(self, experiment: str, key: str, payload: Mapping) -> bool:
        """Keep one finished unit of an experiment that is not a risk sweep (a JSON-serialisable mapping).

        Same guarantees as :meth:`add`: one transaction, first write of a key wins. Returns
        whether the record was new.
        """
        text = canonical_json(payload)
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        with self._transaction():
            before = self._conn.total_changes
            self._conn.execute("INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?)", (key, experiment, text, stamp))
            return self._conn.total_changes > before

    def records(self, experiment: str) -> dict[str, dict]:
        """The records of ``experiment`` by key (see :meth:`add_record`)."""
        cur = self._conn.execute("SELECT key, payload FROM records WHERE experiment = ? ORDER BY key", (experiment,))
        return {key: json.loads(payload) for key, payload in cur}

    def record_keys(self, experiment: str) -> set[str]:
        """The keys of ``experiment``'s records, without reading their payloads."""
        cur = self._conn.execute("SELECT key FROM records WHERE experiment = ?", (experiment,))
        return {key for (key,) in cur}

    def to_csv(self, path, experiment: str | None = None) -> int:
        """Write the rows (of one experiment, or all) to a CSV file with a header; returns the row count.

        ``None`` is written as an empty field (the nullable columns are never an empty string);
        floats by ``repr``, so :meth:`read_csv` gives back the rows exactly.
        """
        rows = self.rows(experiment)
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(_NAMES)
            for row in rows:
                writer.writerow(["" if row[n] is None else row[n] for n in _NAMES])
        return len(rows)

    @staticmethod
    def read_csv(path) -> list[dict]:
        """Rows from a CSV written by :meth:`to_csv`, with the column types of :data:`COLUMNS`."""
        cast = {"INTEGER": int, "REAL": float, "TEXT": str}
        with open(path, newline="", encoding="utf-8") as fh:
            return [
                {k: (None if v == "" and k in _NULLABLE else cast[_TYPES[k]](v)) for k, v in row.items()}
                for row in csv.DictReader(fh)
            ]

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check``: ``"ok"`` for a sound file."""
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"
