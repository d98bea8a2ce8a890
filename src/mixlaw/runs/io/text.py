"""Text formats: CSV/TSV, JSONL, JSON and Parquet files -> raw frames (every cell kept; validated later).

Each frame carries the hidden column :data:`_ROW`: the row number a user sees for each record (CSV/TSV and JSONL:
the line in the file; JSON arrays and Parquet: the 1-based data row).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

_ROW = "__mixlaw_row__"  # hidden column carrying each row's user-visible row number through reshaping


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"expected a readable file, got '{exc.strerror or exc}' in {path.name}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"expected UTF-8 text, got undecodable byte 0x{data[exc.start]:02x} at byte {exc.start} "
            f"in {path.name}:{line}"
        ) from None


def _read_csv(path: Path, *, delimiter: str = ",") -> pd.DataFrame:
    """All cells as strings; the hidden row column holds each record's first line number."""
    text = _read_text(path)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError(f"expected text, got a NUL byte in {path.name}:{line}")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    records: list[list[str]] = []
    lines: list[int] = []
    prev_end = 0
    try:
        for rec in reader:
            start = prev_end + 1
            prev_end = reader.line_num
            if not rec or all(not c.strip() for c in rec):
                continue
            if header is None:
                header = [c.strip() for c in rec]
                continue
            if len(rec) != len(header):
                raise InputError(
                    f"expected {len(header)} fields as in the header, got {len(rec)} in {path.name}:{start}"
                )
            records.append(rec)
            lines.append(start)
    except csv.Error as exc:
        raise InputError(f"expected valid CSV, got '{exc}' in {path.name}:{reader.line_num}") from None
    if header is None:
        raise InputError(f"expected a header line and data rows, got an empty file in {path.name}")
    _check_header(header, path.name)
    if records:  # one object block, not one Series per column (a 20,000-column file)
        cells = np.empty((len(records), len(header)), dtype=object)
        cells[:] = records
        df = pd.DataFrame(cells, columns=header)
    else:
        df = pd.DataFrame({h: pd.Series([], dtype=object) for h in header})
    df[_ROW] = np.asarray(lines, dtype=np.int64)
    return df


def _check_header(header: Sequence[str], name: str) -> None:
    seen: set[str] = set()
    for i, h in enumerate(header):
        if not h:
            raise InputError(f"expected a name for every column, got an empty header cell (column {i + 1}) in {name}:1")
        if h in seen:
            raise InputError(f"expected unique column names, got {h!r} twice in {name}:1:{h}")
        if h == _ROW:
            raise InputError(f"expected ordinary column names, got reserved {h!r} in {name}:1")
        seen.add(h)


def _records_frame(records: list[dict[str, Any]], rows: list[int], name: str) -> pd.DataFrame:
    keys: list[str] = []
    seen: set[str] = set()
    for r in records:
        for k in r:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    if not keys:
        raise InputError(f"expected records with fields, got none in {name}")
    for k in keys:
        if not k.strip() or k == _ROW:
            raise InputError(f"expected ordinary field names, got {k!r} in {name}")
    df = pd.DataFrame({k: pd.Series([r.get(k) for r in records], dtype=object) for k in keys})
    df[_ROW] = np.asarray(rows, dtype=np.int64)
    return df


def _check_record(obj: Any, name: str, row: int) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object per record, got {type(obj).__name__} in {name}:{row}")
    for k, v in obj.items():
        try:
            k.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"expected UTF-8 field names, got {k!r} (a lone surrogate) in {name}:{row}") from None
        if isinstance(v, list | dict) and k != "schedule":
            raise InputError(f"expected a scalar value, got a JSON {type(v).__name__} in {name}:{row}:{k}")
    return obj


def _read_jsonl(path: Path) -> pd.DataFrame:
    text = _read_text(path)
    records: list[dict[str, Any]] = []
    rows: list[int] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "too deeply nested"
            raise InputError(
                f"expected one JSON object per line, got invalid JSON ({msg}) in {path.name}:{i}"
            ) from None
        records.append(_check_record(obj, path.name, i))
        rows.append(i)
    if not records:
        raise InputError(f"expected JSON lines, got an empty file in {path.name}")
    return _records_frame(records, rows, path.name)


def _read_json(path: Path) -> pd.DataFrame:
    text = _read_text(path)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else 1
        raise InputError(f"expected a JSON array of records, got invalid JSON in {path.name}:{line}") from None
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        # column-oriented {"col": [..], ...}
        lens = {len(v) for v in obj.values()}
        if len(lens) != 1:
            raise InputError(f"expected equally long columns, got lengths {sorted(lens)} in {path.name}")
        n = lens.pop()
        obj = [{k: v[i] for k, v in obj.items()} for i in range(n)]
    if not isinstance(obj, list) or not obj:
        raise InputError(f"expected a non-empty JSON array of records, got {type(obj).__name__} in {path.name}")
    records = [_check_record(o, path.name, i + 1) for i, o in enumerate(obj)]
    return _records_frame(records, list(range(1, len(records) + 1)), path.name)


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            f"expected pyarrow to read Parquet (pip install mixlaw[parquet]), got it not installed in {path.name}"
        ) from None
    try:
        tbl = pq.read_table(path)
        df = tbl.to_pandas()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        raise InputError(
            f"expected a Parquet file, got '{str(exc).splitlines()[0] if str(exc) else exc}' in {path.name}"
        ) from None
    df.columns = [str(c) for c in df.columns]
    _check_header(list(df.columns), path.name)
    df = df.reset_index(drop=True)
    df[_ROW] = np.arange(1, len(df) + 1, dtype=np.int64)
    return df
