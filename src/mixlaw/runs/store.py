"""The RunStore: an embedded SQLite experiment registry (stdlib ``sqlite3``, WAL mode).

Layout (schema version :data:`SCHEMA_VERSION`, recorded in ``PRAGMA user_version``)::

    runs   (run_id TEXT PRIMARY KEY, meta TEXT  -- RunMeta JSON, created REAL, updated REAL)
    steps  (run_id, step, PRIMARY KEY (run_id, step))                  -- one row per evaluation
    evals  (run_id, step, "column", value REAL, PRIMARY KEY (run_id, step, "column"))   -- long format
    status (run_id TEXT PRIMARY KEY, status TEXT, message TEXT, updated REAL)
    run_ids (run_id TEXT PRIMARY KEY, spelling TEXT, source TEXT)   -- as ingested (mixlaw.runs.run_ids; on first use)

Every write (a run's metadata, an evaluation chunk, a whole ingested table) is one ``BEGIN IMMEDIATE``
transaction:
it is written completely or not at all, also when the process is killed. Several processes may write to one
store
at once (WAL, 60 s busy timeout). Empty cells of a sparse evaluation chunk are simply not stored and come
back as
NaN.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError
from mixlaw.runs.claims import StoreClaims
from mixlaw.runs.schema import (
    RunMeta,
)
from mixlaw.runs.store_ingest import _py, infer_run_metas, iter_chunks
from mixlaw.runs.store_reads import StoreReads, _column, _scalar, query_frame
from mixlaw.runs.store_writes import StoreWrites

__all__ = ["RunStore", "SCHEMA_VERSION", "STATUSES", "DEFAULT_STORE", "query_frame", "iter_chunks"]
# Helpers that lived in this module before it was split (kept importable from here).
_REEXPORTED = (_column, _py, _scalar)
_infer_run_metas = infer_run_metas

SCHEMA_VERSION = 1
DEFAULT_STORE = "mixlaw.db"
STATUSES = ("pending", "running", "finished", "failed")
_BUSY_TIMEOUT_S = 60.0
_MAX_MESSAGE = 2000  # characters of a status message kept

_DDL = """
CREATE TABLE runs (
    run_id  TEXT PRIMARY KEY,
    meta    TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE steps (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    step   INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE evals (
    run_id   TEXT NOT NULL,
    step     INTEGER NOT NULL,
    "column" TEXT NOT NULL,
    value    REAL NOT NULL,
    PRIMARY KEY (run_id, step, "column"),
    FOREIGN KEY (run_id, step) REFERENCES steps(run_id, step) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE status (
    run_id  TEXT PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
    status  TEXT NOT NULL,
    message TEXT,
    updated REAL NOT NULL
);
"""
_TABLES = {"runs", "steps", "evals", "status"}


class RunStore(StoreReads, StoreWrites, StoreClaims):
    """SQLite store of runs (metadata once per run) and their evaluations (per run and step).

    Parameters
    ----------
    path
        Database file (created if absent; default ``./mixlaw.db``). ``":memory:"`` gives a private in-memory
        store.

    Raises
    ------
    InputError
        The file is not a SQLite database, is not a mixlaw store, or was written by a newer mixlaw.

    Examples
    --------
    >>> store = RunStore("mixlaw.db")  # doctest: +SKIP
    >>> store.put_run(RunMeta("r1", n_params=10**6, mixture=Mixture({"web": 1.0})))  # doctest: +SKIP
    >>> store.append_evals("r1", [{"step": 100, "tokens": 1e6, "loss_web": 3.2}])  # doctest: +SKIP
    >>> store.to_frame("n_params > 0")  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE, *, read_only: bool = False) -> None:
        self.path = str(path)  # read_only: a reader's store must exist (it is never created by reading)
        if read_only and self.path != ":memory:" and not Path(self.path).is_file():
            raise InputError(f"expected an existing store, got no such file in {self.path}")
        if self.path != ":memory:":
            parent = Path(self.path).resolve().parent
            if not parent.is_dir():
                raise InputError(f"expected an existing directory for the store, got {parent} in {self.path}")
        self.read_only = bool(read_only) and self.path != ":memory:"
        if self.read_only:
            self._con = self._connect_read_only()
            try:
                self._check_schema()
            except sqlite3.DatabaseError as exc:
                self._con.close()
                raise InputError(f"expected a mixlaw SQLite store, got '{exc}' in {self.path}") from None
            except InputError:
                self._con.close()
                raise
            return
        if self.path != ":memory:" and not os.access(Path(self.path).resolve().parent, os.W_OK):
            raise InputError(f"expected a writable directory for the store (SQLite writes its journal beside it), "
                             f"got the read-only {Path(self.path).resolve().parent} in {self.path}")  # fmt: skip
        try:
            self._con = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(f"expected a writable SQLite store, got error '{exc}' in {self.path}") from None
        try:
            self._init_schema_retrying()
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise InputError(f"expected a mixlaw SQLite store, got '{exc}' in {self.path}") from None
        except InputError:
            self._con.close()
            raise

    # ------------------------------------------------------------------------------------------------ plumbin

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that only reads: reading never creates, migrates or switches the journal mode of a file.
        In a read-only directory (where SQLite cannot create the WAL index beside a WAL store) the file is
        opened ``immutable``, which is exact while nobody writes it — and nobody can there."""
        resolved = Path(self.path).resolve()
        uri = resolved.as_uri()
        # Where the directory and the file are writable, ``mode=rw`` (never creates the file): its last close
        # removes the WAL index files as a writer's does, so a read leaves no ``-wal``/``-shm`` behind; the
        # connection only reads (no journal-mode switch, no migration). Elsewhere ``mode=ro``.
        writable = os.access(resolved.parent, os.W_OK) and os.access(resolved, os.W_OK)
        try:
            con = sqlite3.connect(f"{uri}?mode={'rw' if writable else 'ro'}", uri=True, timeout=_BUSY_TIMEOUT_S,
                                  isolation_level=None)  # fmt: skip
            con.execute("PRAGMA user_version").fetchone()
            return con
        except sqlite3.Error as exc:
            if os.access(Path(self.path).resolve().parent, os.W_OK):
                raise InputError(f"expected a readable SQLite store, got error '{exc}' in {self.path}") from None
        try:
            con = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)
            con.execute("PRAGMA user_version").fetchone()
            return con
        except sqlite3.Error as exc:
            raise InputError(f"expected a readable SQLite store, got error '{exc}' in {self.path} (its directory "
                             "is read-only)") from None  # fmt: skip

    def _check_schema(self) -> None:
        """The checks of :meth:`_init_schema` that only read: this mixlaw's version, and its tables present."""
        version = self._con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(f"expected a store with schema version <= {SCHEMA_VERSION} (this mixlaw), got version "
                             f"{version} (written by a newer mixlaw; upgrade mixlaw) in {self.path}")  # fmt: skip
        if version == 0:
            raise InputError(f"expected a mixlaw store, got a SQLite file without mixlaw's schema in {self.path}")
        self._check_tables(version)

    def _check_tables(self, version: int) -> None:
        tables = {r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted({"runs", "steps", "evals", "status"} - tables)
        if missing:
            raise InputError(f"expected a mixlaw store, got a SQLite file with user_version {version} but without "
                             f"the tables {missing} in {self.path}")  # fmt: skip

    def _init_schema_retrying(self) -> None:
        """:meth:`_init_schema`, retried while another process holds the file. SQLite skips the busy handler where
        waiting could deadlock (a lock upgrade, a journal-mode switch), so two sweeps creating one store at once could
        see 'database is locked' at once; each try is atomic (its transaction rolls back), and the tries stop at the
        same busy timeout as every other statement."""
        import time

        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                return self._init_schema()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _init_schema(self) -> None:
        con = self._con
        con.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise InputError(f"expected a store that supports WAL mode, got journal_mode={mode} in {self.path}")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(
                f"expected a store with schema version <= {SCHEMA_VERSION} (this mixlaw), "
                f"got version {version} "
                f"(written by a newer mixlaw; upgrade mixlaw) in {self.path}"
            )
        if version == SCHEMA_VERSION:
            self._check_tables(version)  # `user_version = 1` and no tables was a traceback later
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                existing = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if existing:
                    raise InputError(
                        f"expected an empty file or a mixlaw store, got a SQLite database with tables "
                        f"{sorted(existing)} in {self.path}"
                    )
                for stmt in _DDL.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any exception."""
        con = self._con
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise InputError(f"expected a writable store, got '{exc}' in {self.path}") from None
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as exc:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the transaction is already gone (e.g. the COMMIT failed and SQLite rolled back)
            if isinstance(exc, sqlite3.Error):
                raise InputError(f"expected a writable store, got '{exc}' in {self.path}") from None
            raise

    def close(self) -> None:
        """Close the connection (the store object is unusable afterwards)."""
        self._con.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({self.path!r})"

    @property
    def schema_version(self) -> int:
        """``PRAGMA user_version`` of the file."""
        return int(self._con.execute("PRAGMA user_version").fetchone()[0])

    @property
    def journal_mode(self) -> str:
        """``PRAGMA journal_mode`` (``"wal"`` for a file store)."""
        return str(self._con.execute("PRAGMA journal_mode").fetchone()[0])

    # ------------------------------------------------------------------------------------------------ runs

    def put_run(self, meta: RunMeta, *, replace: bool = False) -> RunMeta:
        """Insert or update a run's metadata (idempotent).

        Putting the same metadata twice is a no-op; fields known on one side only are merged. A field given
        on both
        sides with different values (e.g. another ``n_params``) is an :class:`InputError` unless
        ``replace=True``,
        which overwrites the stored metadata with ``meta``.

        Returns
        -------
        RunMeta
            The metadata now stored.
        """
        if not isinstance(meta, RunMeta):
            raise InputError(f"expected a RunMeta, got {type(meta).__name__}")
        with self._tx() as con:
            return self._put_run(con, meta, replace=replace)

    def _put_run(self, con: sqlite3.Connection, meta: RunMeta, *, replace: bool) -> RunMeta:
        now = time.time()
        row = con.execute("SELECT meta FROM runs WHERE run_id = ?", (meta.run_id,)).fetchone()
        if row is None:
            con.execute(
                "INSERT INTO runs (run_id, meta, created, updated) VALUES (?, ?, ?, ?)",
                (meta.run_id, meta.to_json(), now, now),
            )
            return meta
        old = RunMeta.from_json(row[0])
        new = meta if replace else old.merge(meta)
        if new != old:
            con.execute("UPDATE runs SET meta = ?, updated = ? WHERE run_id = ?", (new.to_json(), now, meta.run_id))
        return new

    def get_run(self, run_id: str) -> RunMeta:
        """The stored metadata of a run (full schedule included); :class:`InputError` if unknown."""
        row = self._con.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise InputError(f"expected a run in the store, got unknown run_id {run_id!r} in {self.path}")
        return RunMeta.from_json(row[0])

    def has_run(self, run_id: str) -> bool:
        """True if the run exists."""
        return self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def run_ids(self) -> list[str]:
        """All run ids in the order they were first stored."""
        return [r[0] for r in self._con.execute("SELECT run_id FROM runs ORDER BY rowid")]

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its evaluations and status (one transaction); :class:`InputError` if unknown."""
        with self._tx() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise InputError(f"expected a run in the store, got unknown run_id {run_id!r} in {self.path}")
            con.execute("DELETE FROM evals WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM status WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def set_status(self, run_id: str, status: str, message: str | None = None) -> None:
        """Record a run's status (``pending``, ``running``, ``finished`` or ``failed``) with an optional
        message."""
        if status not in STATUSES:
            raise InputError(f"expected a status in {STATUSES}, got {status!r} for run {run_id!r}")
        if message is not None:  # a message comes from an exception: keep it printable and bounded
            message = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
            message = message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"
        with self._tx() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise InputError(f"expected a run in the store, got unknown run_id {run_id!r} in {self.path}")
            con.execute(
                "INSERT INTO status (run_id, status, message, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET status = excluded.status, message = excluded.message, "
                "updated = excluded.updated",
                (run_id, status, message, time.time()),
            )

    def run_status(self, run_id: str) -> str | None:
        """The run's status, or ``None`` if none was set (or the run is unknown)."""
        row = self._con.execute("SELECT status FROM status WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def steps(self, run_id: str) -> list[int]:
        """The run's evaluated steps, ascending (empty if none or unknown)."""
        return [
            int(r[0]) for r in self._con.execute("SELECT step FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
        ]

    def status_info(self, run_id: str) -> tuple[str, str | None, float] | None:
        """``(status, message, updated)`` of the run (Unix seconds), or ``None`` if no status was set."""
        row = self._con.execute("SELECT status, message, updated FROM status WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else (str(row[0]), row[1], float(row[2]))

    def last_step(self, run_id: str) -> int | None:
        """The largest evaluated step of the run, or ``None`` if it has no evaluations (or is unknown)."""
        row = self._con.execute("SELECT MAX(step) FROM steps WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, sorted (for comparing two states of a store)."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        for t in sorted(_TABLES):
            rows = self._con.execute(f"SELECT * FROM {t}").fetchall()  # noqa: S608 (fixed table names)
            out[t] = sorted(rows, key=repr)
        return out
