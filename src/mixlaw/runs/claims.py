"""Run claims: which process is training a run, so that two sweeps on one store never train it twice.

A claim is a row ``claims(run_id, owner, acquired, heartbeat, expires)`` taken in one ``BEGIN IMMEDIATE``
transaction: it succeeds when no claim exists, when the existing one has expired (its owner stopped sending
heartbeats: killed, or its machine went away; on the same host a claim whose process is gone is taken at once),
or when the caller already holds it. The owner renews it with
:meth:`StoreClaims.heartbeat` (from a background thread, see :class:`mixlaw.probe.sweep.Lease`) and deletes it
with :meth:`StoreClaims.release`. A finished run cannot be claimed; a claim its killed owner left on a
finished run is dropped by :meth:`StoreClaims.reap` (every sweep calls it when it starts).

The table is created on first use (``CREATE TABLE IF NOT EXISTS``): a store written by a mixlaw without claims
opens unchanged, and such a mixlaw ignores the table.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from contextlib import AbstractContextManager
from typing import Any

from mixlaw.errors import InputError

__all__ = ["StoreClaims", "new_owner", "owner_is_dead", "CLAIMS_DDL", "DEFAULT_LEASE_S"]

#: Seconds a claim lives without a heartbeat (heartbeats come every third of it).
DEFAULT_LEASE_S = 120.0

CLAIMS_DDL = """
CREATE TABLE IF NOT EXISTS claims (
    run_id    TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    acquired  REAL NOT NULL,
    heartbeat REAL NOT NULL,
    expires   REAL NOT NULL
)
"""


def new_owner() -> str:
    """A claim owner id unique to this process and call: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` was a process of this host that no longer exists (killed): its claim need not wait
    for the lease to run out. Owners on other hosts are judged by their lease alone."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):
        return False
    return False


class StoreClaims:
    """Claim methods of :class:`~mixlaw.runs.store.RunStore` (a mixin: it uses the store's connection)."""

    path: str
    _con: sqlite3.Connection

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover - provided by RunStore
        raise NotImplementedError

    def _claims_table(self, con: sqlite3.Connection) -> None:
        con.execute(CLAIMS_DDL)

    def claim(self, run_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S) -> str | None:
        """Take the claim on ``run_id`` for ``owner``; ``None`` on success, else why not (who holds it).

        Refused when the run is finished, or when another owner holds an unexpired claim.
        """
        if not (lease_s > 0):
            raise InputError(f"expected a positive lease, got {lease_s!r} s")
        with self._tx() as con:
            self._claims_table(con)
            row = con.execute("SELECT status FROM status WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None and row[0] == "finished":
                return "finished"
            now = time.time()
            held = con.execute("SELECT owner, expires FROM claims WHERE run_id = ?", (run_id,)).fetchone()
            if held is not None and held[0] != owner and held[1] > now and not owner_is_dead(held[0]):
                return f"claimed by {held[0]} (lease ends in {held[1] - now:.0f} s)"
            con.execute(
                "INSERT INTO claims (run_id, owner, acquired, heartbeat, expires) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET owner = excluded.owner, acquired = excluded.acquired, "
                "heartbeat = excluded.heartbeat, expires = excluded.expires",
                (run_id, owner, now, now, now + lease_s),
            )
        return None

    def heartbeat(self, run_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S) -> bool:
        """Extend ``owner``'s claim; ``False`` if it no longer holds it (expired and taken by another)."""
        with self._tx() as con:
            self._claims_table(con)
            now = time.time()
            cur = con.execute(
                "UPDATE claims SET heartbeat = ?, expires = ? WHERE run_id = ? AND owner = ?",
                (now, now + lease_s, run_id, owner),
            )
            return cur.rowcount == 1

    def holds(self, run_id: str, owner: str) -> bool:
        """True while ``owner`` holds an unexpired claim on ``run_id``."""
        try:
            row = self._con.execute("SELECT owner, expires FROM claims WHERE run_id = ?", (run_id,)).fetchone()
        except sqlite3.OperationalError:  # no claims table yet: nobody holds anything
            return False
        return row is not None and row[0] == owner and row[1] > time.time()

    def release(self, run_id: str, owner: str) -> None:
        """Drop ``owner``'s claim (a no-op if it does not hold it)."""
        with self._tx() as con:
            self._claims_table(con)
            con.execute("DELETE FROM claims WHERE run_id = ? AND owner = ?", (run_id, owner))

    def reap(self) -> list[str]:
        """Delete the claims left on finished runs by owners that are gone (killed after the run was stored as
        finished but before they released it); the run ids whose claims were dropped. Live owners' claims stay:
        they release their own."""
        with self._tx() as con:
            self._claims_table(con)
            rows = con.execute(
                "SELECT c.run_id, c.owner, c.expires FROM claims c JOIN status s ON s.run_id = c.run_id "
                "WHERE s.status = 'finished'"
            ).fetchall()
            now = time.time()
            stale = [(rid, owner) for rid, owner, expires in rows if expires <= now or owner_is_dead(owner)]
            con.executemany("DELETE FROM claims WHERE run_id = ? AND owner = ?", stale)
        return [rid for rid, _ in stale]

    def claims(self) -> list[dict[str, Any]]:
        """Every claim: run_id, owner, acquired, heartbeat, expires (Unix seconds), expired (bool)."""
        try:
            rows = self._con.execute("SELECT run_id, owner, acquired, heartbeat, expires FROM claims").fetchall()
        except sqlite3.OperationalError:
            return []
        now = time.time()
        keys = ("run_id", "owner", "acquired", "heartbeat", "expires")
        return [{**dict(zip(keys, r, strict=True)), "expired": r[4] <= now or owner_is_dead(r[1])} for r in rows]
