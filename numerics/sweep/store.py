"""The SQLite store of a sweep's results: tidy rows of runs, and records of other experiments.

:class:`ResultStore` keeps one row per finished run in the ``runs`` table (columns
:data:`COLUMNS`, keyed by :attr:`attneb.numerics.sweep.RunSpec.key` and the code that computed
it) and, for experiments that are not risk sweeps, one JSON record per key and code in the
``records`` table. Its guarantees: every write is one transaction (a crash at any moment leaves
whole rows only), the first write of a key by one code wins (``INSERT OR IGNORE``; rows are
never updated), and a committed row survives the writing process being killed, so a sweep
resumes from what the store holds. Every row and record names the code that computed it
(:func:`attneb.numerics.sweep.provenance.source_fingerprint`); a store reads back only those of
the code that is running unless it is told to reuse others (``reuse_other_code``), so a result
of other code is computed again, never silently reused. A store of schema version 2 (which did
not record the code) is migrated, its rows marked as of unrecorded code; other versions are
refused.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from . import provenance
from .canonical import canonical_json

#: Version of the store's row schema (SQLite ``user_version``). 2 added the out-of-sample columns
#: ``oos_mse``, ``oos_gap`` and ``oos_excess``; 3 the ``code`` of every run and record, part of
#: their primary keys. A version-2 store is migrated (its code :data:`provenance.UNRECORDED`);
#: another version is refused.
_SCHEMA_VERSION = 3


#: Row schema: (column, SQLite type). ``(key, code)`` is the primary key: ``code`` is the
#: :attr:`ResultStore.code` that wrote the row, the running code's
#: :func:`~attneb.numerics.sweep.provenance.source_fingerprint` unless told otherwise.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "TEXT NOT NULL"),
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
    ("code", "TEXT NOT NULL"),
    ("options", "TEXT NOT NULL"),
    ("spec", "TEXT NOT NULL"),
)
_NAMES = tuple(name for name, _ in COLUMNS)
_TYPES = {name: kind.split()[0] for name, kind in COLUMNS}
_NULLABLE = {name for name, kind in COLUMNS if "NOT NULL" not in kind}
#: Columns that differ between two executions of the same run (timing, clock, environment, code).
VOLATILE_COLUMNS = ("runtime_s", "finished_at", "attneb_version", "numpy_version", "scipy_version", "python_version",
                    "code")
_ORDER = "experiment, estimator, prior, sigma2, n, h2, T, method, eta, seed, key"


class ResultStore:
    """Tidy rows of finished runs in one SQLite file (WAL journal), keyed by :attr:`RunSpec.key` and code.

    Every :meth:`add` is one transaction: after a crash at any moment the file holds whole rows
    only. Rows are only added, never updated (``INSERT OR IGNORE``: a key already computed by
    the same code keeps its first row). ``synchronous=NORMAL``: a committed row survives the
    process being killed; only a power loss or OS crash may drop the last commits (never
    corrupting the file).

    Every row and record carries the code that computed it (``code``,
    :func:`~attneb.numerics.sweep.provenance.source_fingerprint`). The reading methods
    (:meth:`finished_keys`, :meth:`rows`, :meth:`records`, :meth:`record_keys`) see only those
    of :attr:`code`, so a sweep or check computes again what other code computed; with
    ``reuse_other_code`` they see, for each key, the row of :attr:`code` if there is one, else
    the most recent row of any other code (:meth:`provenance` says which code each came from).
    Rows of other code are kept in the file either way.

    Parameters
    ----------
    path : str or Path
        The database file; created with its tables if missing.
    timeout : float
        Seconds to wait for another process's write lock.
    code : str, optional
        The code whose results are read and whose records are written (default: the running
        code's :func:`~attneb.numerics.sweep.provenance.source_fingerprint`).
    reuse_other_code : bool, optional
        Read results of other code where :attr:`code` has none (default: the environment
        variable :data:`~attneb.numerics.sweep.provenance.REUSE_VARIABLE`, ``"1"`` for yes).
    """

    def __init__(self, path, *, timeout: float = 30.0, code: str | None = None, reuse_other_code: bool | None = None):
        self.path = Path(path)
        self.code = provenance.source_fingerprint() if code is None else code
        self.reuse_other_code = provenance.reuse_other_code() if reuse_other_code is None else bool(reuse_other_code)
        self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, 2, _SCHEMA_VERSION):
            self._conn.close()
            raise ValueError(f"{self.path} has store schema version {version}; this attneb writes {_SCHEMA_VERSION}: "
                             "start a fresh store (a new report folder, or another --store path)")
        with self._transaction():
            if version == 2:
                self._migrate_from_2()
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{n} {k}' for n, k in COLUMNS)}, "
                               "PRIMARY KEY (key, code))")
            self._conn.execute("CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS records (key TEXT NOT NULL, experiment TEXT NOT NULL, "
                               "payload TEXT NOT NULL, finished_at TEXT NOT NULL, code TEXT NOT NULL, "
                               "PRIMARY KEY (key, code))")
            self._conn.execute("CREATE INDEX IF NOT EXISTS records_experiment ON records (experiment)")
            self._conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def _migrate_from_2(self) -> None:
        """Version 2 to 3: both tables gain ``code`` (:data:`provenance.UNRECORDED` for the rows they hold)."""
        old = [n for n in _NAMES if n != "code"]
        for table in ("runs", "records"):
            self._conn.execute(f"ALTER TABLE {table} RENAME TO {table}_v2")
        self._conn.execute("DROP INDEX IF EXISTS runs_experiment")
        self._conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {k}' for n, k in COLUMNS)}, PRIMARY KEY (key, code))")
        self._conn.execute(f"INSERT INTO runs ({', '.join(old)}, code) SELECT {', '.join(old)}, ? FROM runs_v2",
                           (provenance.UNRECORDED,))
        self._conn.execute("CREATE TABLE records (key TEXT NOT NULL, experiment TEXT NOT NULL, payload TEXT NOT NULL, "
                           "finished_at TEXT NOT NULL, code TEXT NOT NULL, PRIMARY KEY (key, code))")
        self._conn.execute("INSERT INTO records SELECT key, experiment, payload, finished_at, ? FROM records_v2",
                           (provenance.UNRECORDED,))
        self._conn.execute("DROP TABLE runs_v2")
        self._conn.execute("DROP TABLE records_v2")

    @contextlib.contextmanager
    def _transaction(self):
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _visible(self, table: str, experiment: str | None) -> tuple[str, tuple]:
        """A subquery of ``table``'s rows that the reading methods see (of :attr:`code`, or one per key with reuse)."""
        where, args = ("", ()) if experiment is None else ("WHERE experiment = ?", (experiment,))
        if not self.reuse_other_code:
            where = f"{where} AND code = ?" if where else "WHERE code = ?"
            return f"(SELECT * FROM {table} {where})", (*args, self.code)
        ranked = (f"SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY code = ? DESC, finished_at DESC, code) "
                  f"AS attneb_rank FROM {table} {where}")
        return f"(SELECT * FROM ({ranked}) WHERE attneb_rank = 1)", (self.code, *args)

    def add(self, rows: Iterable[Mapping]) -> int:
        """Insert rows (dicts with the keys of :data:`COLUMNS`; ``code`` may be left out) in one transaction.

        Every row is written as computed by :attr:`code`, whatever its own ``code`` says. Returns
        how many were new.
        """
        values = [tuple(self.code if name == "code" else row[name] for name in _NAMES) for row in rows]
        if not values:
            return 0
        sql = f"INSERT OR IGNORE INTO runs ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"
        with self._transaction():
            before = self._conn.total_changes
            self._conn.executemany(sql, values)
            return self._conn.total_changes - before

    def finished_keys(self, experiment: str | None = None) -> set[str]:
        """Keys of the stored runs (of one experiment, or all) that this store reads."""
        table, args = self._visible("runs", experiment)
        return {key for (key,) in self._conn.execute(f"SELECT key FROM {table}", args)}

    def rows(self, experiment: str | None = None) -> list[dict]:
        """Stored rows as dicts (columns of :data:`COLUMNS`), in a fixed order: those this store reads."""
        table, args = self._visible("runs", experiment)
        cur = self._conn.execute(f"SELECT {', '.join(_NAMES)} FROM {table} ORDER BY {_ORDER}", args)
        return [dict(zip(_NAMES, values)) for values in cur]

    def __len__(self) -> int:
        """The number of rows this store reads."""
        table, args = self._visible("runs", None)
        return self._conn.execute(f"SELECT COUNT(*) FROM {table}", args).fetchone()[0]

    def add_record(self, experiment: str, key: str, payload: Mapping) -> bool:
        """Keep one finished unit of an experiment that is not a risk sweep (a JSON-serialisable mapping).

        Same guarantees as :meth:`add`: one transaction, first write of a key by one code wins;
        the record is written as of :attr:`code`. Returns whether the record was new.
        """
        text = canonical_json(payload)
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        with self._transaction():
            before = self._conn.total_changes
            self._conn.execute("INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, ?)",
                               (key, experiment, text, stamp, self.code))
            return self._conn.total_changes > before

    def records(self, experiment: str) -> dict[str, dict]:
        """The records of ``experiment`` by key (see :meth:`add_record`) that this store reads."""
        table, args = self._visible("records", experiment)
        cur = self._conn.execute(f"SELECT key, payload FROM {table} ORDER BY key", args)
        return {key: json.loads(payload) for key, payload in cur}

    def record_keys(self, experiment: str) -> set[str]:
        """The keys of ``experiment``'s records that this store reads, without reading their payloads."""
        table, args = self._visible("records", experiment)
        return {key for (key,) in self._conn.execute(f"SELECT key FROM {table}", args)}

    def provenance(self) -> dict[str, dict[str, int]]:
        """Which code computed what this store reads: ``{experiment: {code: count of runs and records}}``."""
        return self._counts(lambda table: self._visible(table, None))

    def other_code(self) -> dict[str, dict[str, int]]:
        """What the file holds from code other than :attr:`code`, read or not: ``{experiment: {code: count}}``."""
        return self._counts(lambda table: (f"(SELECT * FROM {table} WHERE code != ?)", (self.code,)))

    def _counts(self, rows_of) -> dict[str, dict[str, int]]:
        """``{experiment: {code: count}}`` over the runs and records that ``rows_of(table) -> (subquery, args)`` selects."""
        found: dict[str, dict[str, int]] = {}
        for table in ("runs", "records"):
            subquery, args = rows_of(table)
            cur = self._conn.execute(f"SELECT experiment, code, COUNT(*) FROM {subquery} GROUP BY experiment, code", args)
            for experiment, code, count in cur:
                found.setdefault(experiment, {})
                found[experiment][code] = found[experiment].get(code, 0) + count
        return dict(sorted(found.items()))

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
        return f"ResultStore({str(self.path)!r}, code={self.code!r}, reuse_other_code={self.reuse_other_code})"
