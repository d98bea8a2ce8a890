"""Run ids as they were written, compared exactly across files.

A reader normalises a run id (surrounding spaces stripped, a number read as its text: ``" a"`` → ``"a"``, ``1`` →
``"1"``); within one file two spellings that normalise to one id are refused by the validator. Across files the
normalised ids alone would merge ``"a"`` of one file with ``"a "`` of another, or ``1`` with ``"1"``. So every
validated table carries the *spelling* of each id that is not written as its plain text (``table.attrs``
:data:`SPELLINGS`: ``{run_id: spelling}``, the JSON of the value as written: ``"a "`` quoted, ``1`` bare), and the
store keeps the spelling and the source file of every run it ingests (table ``run_ids``, created on first use).
A file whose spelling of a stored run differs is refused with one line naming the run, both spellings and both
files; nothing is written.

CSV and TSV cells carry no type: an id read from one is *untyped* text (``table.attrs`` :data:`UNTYPED`; its
spelling is marked ``~``) and matches a typed id of the same text (the CSV ``1`` is the JSONL ``1`` or ``"1"``);
surrounding spaces still count.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from mixlaw.errors import InputError

__all__ = ["SPELLINGS", "UNTYPED", "check", "compare", "of_table", "plain", "record", "spelling", "spellings"]

UNTYPED = "run_id_untyped"
"""The ``DataFrame.attrs`` flag of a table read from a format whose cells carry no type (CSV, TSV)."""
SPELLINGS = "run_id_spellings"
"""The ``DataFrame.attrs`` key of a validated table's ``{run_id: spelling}`` (ids not written as their plain text)."""

_DDL = """CREATE TABLE IF NOT EXISTS run_ids (
    run_id   TEXT PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
    spelling TEXT NOT NULL,
    source   TEXT NOT NULL
)"""


def spelling(value: Any) -> str:
    """The exact spelling of a run id as written: JSON of the value (``'"a "'``, ``'1'``, ``'1.5'``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def plain(run_id: str) -> str:
    """The spelling of an id written as its plain text (no record needed)."""
    return json.dumps(run_id, ensure_ascii=False)


def spellings(raw: np.ndarray, ids: np.ndarray) -> dict[str, str]:
    """``{run_id: spelling}`` of the ids whose written value is not their plain text (the validator has already
    refused two spellings of one id within the table, so the first one stands for all)."""
    out: dict[str, str] = {}
    for v, rid in zip(raw, ids, strict=True):
        if rid is None or rid in out:
            continue
        if not (isinstance(v, str) and v == rid):
            out[str(rid)] = spelling(v)
    return out


def of_table(table: Any) -> dict[str, str]:
    """The spellings of a validated table's runs as :func:`check` compares them: the recorded ones, and for an
    untyped table (:data:`UNTYPED`) every run's, marked ``~``."""
    spelled = dict(table.attrs.get(SPELLINGS, {}))
    if not table.attrs.get(UNTYPED):
        return spelled
    return {str(r): "~" + spelled.get(str(r), plain(str(r))) for r in dict.fromkeys(table["run_id"])}


def _text(sp: str) -> str:
    v = json.loads(sp.lstrip("~"))
    return v if isinstance(v, str) else str(v)


def _same(a: str, b: str) -> bool:
    """Two spellings of one run: equal, or (one of them untyped) the same text."""
    return a == b or ((a.startswith("~") or b.startswith("~")) and _text(a) == _text(b))


def _describe(sp: str) -> str:
    if sp.startswith("~"):
        return f"{sp[1:]} (untyped text)"
    return f"{sp} (text)" if sp.startswith('"') else f"{sp} (a number)"


def _refuse(rid: str, first: str, first_source: str, second: str, second_source: str) -> InputError:
    why = "by type" if _text(first) == _text(second) else "by surrounding spaces"
    return InputError(
        f"expected run ids that differ as written to stay distinct, got run {rid!r} written {_describe(first)} in "
        f"{first_source} and {_describe(second)} in {second_source}: they differ only {why} (write them "
        "identically, or rename one)"
    )


def compare(
    first: Mapping[str, str], first_source: str, second: Mapping[str, str], second_source: str, ids: Iterable[str]
) -> None:
    """Refuse a run of ``ids`` that two files (``{run_id: spelling}`` of each, :data:`SPELLINGS`) write
    differently: one line naming the run, both spellings and both files."""
    for rid in ids:
        a, b = first.get(rid, plain(rid)), second.get(rid, plain(rid))
        if not _same(a, b):
            raise _refuse(rid, a, first_source, b, second_source)


def check(
    con: sqlite3.Connection, store: str, run_ids: Iterable[str], spelled: Mapping[str, str], source: str
) -> list[tuple[str, str, str]]:
    """In a store's write transaction, before its runs are written: refuse a run already stored under another
    spelling (one line naming the run, both spellings and both files). Returns the rows :func:`record` writes.

    A run stored before spellings were recorded (or by a sweep) counts as written as its plain text."""
    con.execute(_DDL)
    rows: list[tuple[str, str, str]] = []
    for rid in run_ids:
        mine = spelled.get(rid, plain(rid))
        rec = con.execute("SELECT spelling, source FROM run_ids WHERE run_id = ?", (rid,)).fetchone()
        if rec is None:
            stored = con.execute("SELECT 1 FROM runs WHERE run_id = ?", (rid,)).fetchone() is not None
            rec = (plain(rid), f"the store {store}") if stored else None
        if rec is not None and not _same(rec[0], mine):
            raise _refuse(rid, rec[0], rec[1], mine, source)
        rows.append((rid, mine, source))
    return rows


def record(con: sqlite3.Connection, rows: list[tuple[str, str, str]]) -> None:
    """Record the spelling and source of each run not yet recorded (after the runs are written: the key refers
    to them)."""
    con.executemany("INSERT OR IGNORE INTO run_ids (run_id, spelling, source) VALUES (?, ?, ?)", rows)
