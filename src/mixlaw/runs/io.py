"""Readers: CSV, TSV, JSONL/JSON, Parquet, TensorBoard event files, W&B exports and the W&B API -> RunTable.

Every reader returns a table that went through :func:`mixlaw.runs.schema.validate_table`; every failure is an
:class:`~mixlaw.errors.InputError` naming the file (and line / row and column where possible), never another
exception type. See ``docs/runs.md`` for the formats and the column mapping.

Row numbers: CSV/TSV, W&B CSV and JSONL report the **line in the file** (CSV header = line 1); JSON arrays,
Parquet, TensorBoard and W&B API sources report the 1-based data row of the table read.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.schema import validate_table

__all__ = [
    "read_table",
    "read_wandb",
    "read_tensorboard",
    "parse_column_map",
    "canonical_metric_name",
    "FORMATS",
]

FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "tensorboard", "wandb-csv", "wandb")
_ROW = "__mixlaw_row__"  # hidden column carrying each row's user-visible row number through reshaping


# ---------------------------------------------------------------------------------------------- public API


def parse_column_map(items: Iterable[str] | None) -> dict[str, str]:
    """Parse ``["canonical=foreign", ...]`` (the CLI's ``--map``) into ``{canonical: foreign}``.

    Quotes around either side are stripped, so ``n_params="Model Size"`` works from a shell too.
    """
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"expected --map canonical=foreign, got {item!r}")
        canon, foreign = (p.strip().strip("'\"").strip() for p in item.split("=", 1))
        if not canon or not foreign:
            raise InputError(f"expected --map canonical=foreign with both names, got {item!r}")
        if canon in out:
            raise InputError(f"expected one --map per canonical column, got {canon!r} twice")
        out[canon] = foreign
    return out


def read_table(
    path: str | Path,
    *,
    column_map: Mapping[str, str] | None = None,
    fmt: str | None = None,
    run_id: str | None = None,
    run_id_from_row: bool = False,
    evalset_column: str | None = None,
    set_values: Mapping[str, Any] | None = None,
    drop: Sequence[str] | None = None,
    allow_nan: bool = False,
    allow_missing: bool | None = None,
) -> pd.DataFrame:
    """Read a run log into a validated RunTable.

    Parameters
    ----------
    path
        File (or, for TensorBoard, a directory of event files; for the W&B API, ``wandb://entity/project``).
    column_map
        ``{canonical: foreign}`` renames applied before anything else, e.g. ``{"n_params": "Model Size"}``.
    fmt
        One of :data:`FORMATS`; default from the suffix / content (``.csv``, ``.tsv``, ``.jsonl``/``.ndjson``,
        ``.json``, ``.parquet``/``.pq``, ``*tfevents*`` files or directories, a CSV with ``_step`` or
        ``"<run> - <metric>"`` columns = W&B export).
    run_id
        Constant run id for a file holding one run without a ``run_id`` column.
    run_id_from_row
        Make every row its own run (``run_id = "<file stem>-<data row>"``, 1-based), for tables with one row
        per
        run and no id (e.g. published fits' data). ``step`` then defaults to 0.
    evalset_column
        The table is long over eval sets: this column names the eval set of each row and ``loss`` holds its
        value;
        rows are pivoted to ``loss_<evalset>`` (other columns must agree within a (run_id, step)).
    set_values
        Constant columns to add, e.g. ``{"n_params": 18915328, "phase": "cpt"}`` (``--set``); an existing
        column of
        that name is an error.
    drop
        Columns to drop after mapping (labels you do not want stored).
    allow_nan
        Accept NaN / inf and empty cells.
    allow_missing
        Accept empty cells in numeric columns (default: ``True`` for TensorBoard and W&B, which log sparsely).

    Returns
    -------
    pandas.DataFrame
        The validated RunTable (see :func:`~mixlaw.runs.schema.validate_table`).
    """
    p = Path(str(path)) if not str(path).startswith("wandb://") else None
    name = str(path) if p is None else p.name
    kind = _detect_format(path, fmt)
    try:
        if kind in ("csv", "tsv", "wandb-csv"):
            raw = _read_csv(Path(str(path)), delimiter="\t" if kind == "tsv" else ",")
            if kind == "wandb-csv" or (fmt is None and _looks_like_wandb(raw)):
                kind = "wandb-csv"
                raw = _wandb_csv_to_long(raw, Path(str(path)), column_map or {})
        elif kind == "jsonl":
            raw = _read_jsonl(Path(str(path)))
        elif kind == "json":
            raw = _read_json(Path(str(path)))
        elif kind == "parquet":
            raw = _read_parquet(Path(str(path)))
        elif kind == "tensorboard":
            raw = _tensorboard_frame(Path(str(path)), allow_nan=allow_nan, column_map=column_map or {})
        elif kind == "wandb":
            raw = _wandb_api_frame(str(path)[len("wandb://") :], column_map=column_map or {})
        else:  # pragma: no cover - _detect_format guards
            raise InputError(f"expected a format in {FORMATS}, got {kind!r} in {name}")
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # last line of defence: a parser failing in an unforeseen way
        raise InputError(f"expected a readable {kind} file, got {type(exc).__name__}: {exc} in {name}") from None
    if allow_missing is None:
        allow_missing = kind in ("tensorboard", "wandb-csv", "wandb")
    if kind == "wandb-csv" and "run_id" not in raw.columns and run_id is None and not run_id_from_row:
        run_id = p.stem if p is not None else name  # a one-run history export names its run by the file
    table = _to_runtable(
        raw,
        name,
        column_map=column_map or {},
        run_id=run_id,
        run_id_from_row=run_id_from_row,
        evalset_column=evalset_column,
        set_values=set_values or {},
        drop=list(drop or ()),
        stem=(p.stem if p is not None else name),
        already_mapped=kind in ("wandb-csv", "tensorboard", "wandb"),
    )
    rows = table.pop(_ROW).to_numpy()
    return validate_table(table, name, allow_nan=allow_nan, allow_missing=bool(allow_missing), rows=rows)


# ---------------------------------------------------------------------------------------------- detection


def _detect_format(path: str | Path, fmt: str | None) -> str:
    s = str(path)
    if fmt is not None:
        f = fmt.lower().replace("_", "-")
        aliases = {
            "ndjson": "jsonl",
            "pq": "parquet",
            "tb": "tensorboard",
            "tfevents": "tensorboard",
            "w&b": "wandb",
        }
        f = aliases.get(f, f)
        if f not in FORMATS:
            raise InputError(f"expected a format in {FORMATS}, got {fmt!r} in {Path(s).name}")
        if f != "wandb" and not Path(s).exists():
            raise InputError(f"expected an existing file, got no such path in {s}")
        return f
    if s.startswith("wandb://"):
        return "wandb"
    p = Path(s)
    if not p.exists():
        raise InputError(f"expected an existing file, got no such path in {s}")
    if p.is_dir():
        if any(_event_files(p)):
            return "tensorboard"
        raise InputError(f"expected a file (or a directory of TensorBoard event files), got a directory in {s}")
    low = p.name.lower()
    if "tfevents" in low:
        return "tensorboard"
    suffix = p.suffix.lower()
    if suffix in (".csv", ".txt"):
        return "csv"
    if suffix == ".tsv":
        return "tsv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InputError(
        f"expected a .csv, .tsv, .jsonl, .json, .parquet or TensorBoard event file (or --format), "
        f"got suffix {p.suffix!r} in {p.name}"
    )


# ---------------------------------------------------------------------------------------------- text formats


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
    cols = list(zip(*records, strict=True)) if records else [() for _ in header]
    df = pd.DataFrame({h: pd.Series(list(c), dtype=object) for h, c in zip(header, cols, strict=True)})
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


# ---------------------------------------------------------------------------------------------- mapping


def _to_runtable(
    raw: pd.DataFrame,
    name: str,
    *,
    column_map: Mapping[str, str],
    run_id: str | None,
    run_id_from_row: bool,
    evalset_column: str | None,
    set_values: Mapping[str, Any],
    drop: list[str],
    stem: str,
    already_mapped: bool,
) -> pd.DataFrame:
    df = raw
    if not already_mapped:
        df = _apply_map(df, column_map, name)
    for c in drop:
        if c not in df.columns:
            raise InputError(f"expected a column to drop, got unknown {c!r} in {name}")
    df = df.drop(columns=drop)
    if evalset_column is not None:
        df = _pivot_evalsets(df, evalset_column, name)
    for k, v in set_values.items():
        if k in df.columns:
            raise InputError(f"expected --set to add a new column, got existing column {k!r} in {name}")
        df[k] = pd.Series([v] * len(df), index=df.index, dtype=object)
    if run_id is not None and run_id_from_row:
        raise InputError("expected either --run-id or --run-id-from-row, got both")
    if run_id is not None:
        if "run_id" in df.columns:
            raise InputError(f"expected no run_id column with --run-id, got one in {name}:1:run_id")
        df["run_id"] = run_id
    elif run_id_from_row:
        if "run_id" in df.columns:
            raise InputError(f"expected no run_id column with --run-id-from-row, got one in {name}:1:run_id")
        df["run_id"] = [f"{stem}-{i}" for i in range(1, len(df) + 1)]
    cols = ["run_id"] + [c for c in df.columns if c != "run_id"] if "run_id" in df.columns else list(df.columns)
    return df[cols]


def _apply_map(df: pd.DataFrame, column_map: Mapping[str, str], name: str) -> pd.DataFrame:
    if not column_map:
        return df
    rename: dict[str, str] = {}
    for canon, foreign in column_map.items():
        if foreign not in df.columns:
            visible = [c for c in df.columns if c != _ROW]
            raise InputError(
                f"expected column {foreign!r} (from --map {canon}={foreign}), got columns {visible[:20]} in {name}"
            )
        if foreign in rename:
            raise InputError(f"expected each foreign column mapped once, got {foreign!r} twice in {name}")
        rename[foreign] = canon
    targets = set(rename.values())
    clash = [c for c in df.columns if c in targets and c not in rename]
    if clash:
        raise InputError(
            f"expected one column named {clash[0]!r}, got the file's own and the mapped "
            f"{column_map[clash[0]]!r} (add --drop {clash[0]}) in {name}"
        )
    return df.rename(columns=rename)


def _pivot_evalsets(df: pd.DataFrame, col: str, name: str) -> pd.DataFrame:
    if col not in df.columns:
        raise InputError(f"expected the eval-set column {col!r}, got columns {list(df.columns)[:20]} in {name}")
    if "loss" not in df.columns:
        raise InputError(f"expected a 'loss' column holding the value of each eval set, got none in {name}")
    if "run_id" not in df.columns:
        raise InputError(f"expected a 'run_id' column to pivot eval sets, got none in {name}")
    sets = df[col].astype(object)
    for i, v in enumerate(sets.to_numpy()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
            raise InputError(f"expected an eval-set name, got an empty cell in {name}:{int(df[_ROW].iloc[i])}:{col}")
    names = ["loss_" + re.sub(r"[^A-Za-z0-9_.+\-]", "_", str(v).strip()) for v in sets.to_numpy()]
    keys = ["run_id"] + (["step"] if "step" in df.columns else [])
    other = [c for c in df.columns if c not in keys and c not in (col, "loss", _ROW)]
    clash = sorted(set(names) & set(df.columns))
    if clash:
        raise InputError(f"expected new loss columns from {col!r}, got existing {clash[0]!r} in {name}")
    out_rows: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], int] = {}
    key_vals = df[keys].astype(object).to_numpy()
    other_vals = df[other].astype(object).to_numpy()
    loss_vals = df["loss"].to_numpy()
    row_vals = df[_ROW].to_numpy()
    for i in range(len(df)):
        k = tuple(_norm_key(v) for v in key_vals[i])
        j = index.get(k)
        if j is None:
            index[k] = len(out_rows)
            rec = dict(zip(keys, key_vals[i], strict=True))
            rec.update(zip(other, other_vals[i], strict=True))
            rec[_ROW] = int(row_vals[i])
            out_rows.append(rec)
            j = index[k]
        rec = out_rows[j]
        for c, v in zip(other, other_vals[i], strict=True):
            if rec[c] is not v and not _same_cell(rec[c], v):
                raise InputError(
                    f"expected {c!r} constant within ({', '.join(map(str, k))}) across eval sets, got "
                    f"{rec[c]!r} and {v!r} in {name}:{int(row_vals[i])}:{c}"
                )
        nm = names[i]
        if nm in rec:
            raise InputError(
                f"expected one row per (run_id, step, {col}), got a second {nm[5:]!r} for "
                f"({', '.join(map(str, k))}) in {name}:{int(row_vals[i])}:{col}"
            )
        rec[nm] = loss_vals[i]
    loss_cols = sorted({n for n in names})
    cols = keys + other + loss_cols + [_ROW]
    return pd.DataFrame({c: pd.Series([r.get(c) for r in out_rows], dtype=object) for c in cols})


def _norm_key(v: Any) -> Any:
    if isinstance(v, str):
        return v.strip()
    return v


def _same_cell(a: Any, b: Any) -> bool:
    def empty(x: Any) -> bool:
        return x is None or (isinstance(x, float) and math.isnan(x)) or (isinstance(x, str) and not x.strip())

    if empty(a) and empty(b):
        return True
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip()
    return bool(a == b)


# ---------------------------------------------------------------------------------------------- metric names

_GENERIC_PARTS = {"eval", "evals", "evaluation", "val", "valid", "validation", "test", "metrics", "charts"}
_LR_NAMES = {"lr", "learning_rate", "learning-rate", "learningrate"}
_TOKEN_NAMES = {"tokens", "num_tokens", "n_tokens", "tokens_seen", "consumed_tokens", "total_tokens"}
_STEP_NAMES = {"_step", "step", "global_step", "trainer/global_step", "steps"}
_DROP_NAMES = {"_runtime", "_timestamp", "_wandb", "epoch", "trainer/epoch"}
_IDENTITY_NAMES = {"run_id"}  # columns a logged metric may not take over


def canonical_metric_name(name: str) -> str | None:
    """Canonical RunTable column for a logged metric name (W&B / TensorBoard); ``None`` = not stored.

    Rules (case-insensitive on the keywords, eval-set names keep their case):

    - ``_step``, ``step``, ``global_step``, ``trainer/global_step`` -> ``step``; ``_runtime``, ``_timestamp``,
      ``_wandb*``, ``epoch`` -> dropped;
    - a ``/``-path with a part ``loss``: the other parts, minus generic ones (``eval``, ``val``, ``valid``,
      ``validation``, ``test``, ``metrics``), name the eval set: ``eval/code/loss`` -> ``loss_code``,
      ``loss/web`` -> ``loss_web``, ``train/loss`` -> ``loss_train``, ``val/loss`` -> ``loss``;
      ``val_loss`` / ``eval_loss`` -> ``loss``; ``<set>_loss`` -> ``loss_<set>``;
    - last part ``lr``, ``learning_rate`` or ``lr-<optimizer>`` -> ``lr``; ``tokens``, ``num_tokens``,
      ``tokens_seen`` -> ``tokens``;
    - anything else: characters outside ``[A-Za-z0-9_.+-]`` become ``_`` (``train/grad_norm`` ->
      ``train_grad_norm``).

    A metric whose name would be a run's identity (``run_id``) is namespaced as ``metric_run_id``: a logged
    scalar must never rename runs.

    Map a name explicitly with ``--map canonical=foreign`` to override these rules.
    """
    n = name.strip()
    low = n.lower()
    if low in _STEP_NAMES:
        return "step"
    if _sanitize(n) in _IDENTITY_NAMES:
        return "metric_" + _sanitize(n)
    if low in _DROP_NAMES or low.startswith("_wandb") or low.startswith("system/"):
        return None
    parts = [p for p in n.split("/") if p]
    lparts = [p.lower() for p in parts]
    if "loss" in lparts:
        rest = [p for p, lp in zip(parts, lparts, strict=True) if lp != "loss" and lp not in _GENERIC_PARTS]
        return "loss" if not rest else "loss_" + _sanitize("_".join(rest))
    last = parts[-1] if parts else n
    llast = last.lower()
    if llast in _LR_NAMES or re.match(r"^lr[-_]", llast):
        return "lr"
    if llast in _TOKEN_NAMES:
        return "tokens"
    if len(parts) == 1:
        m = re.match(r"^(.*?)[_\-]loss$", n, flags=re.IGNORECASE)
        if m:
            prefix = m.group(1)
            return "loss" if prefix.lower() in _GENERIC_PARTS or not prefix else "loss_" + _sanitize(prefix)
    return _sanitize(n)


def _sanitize(s: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.+\-]", "_", s).strip("_")
    return out or "_"


def _canonical_columns(foreign: Sequence[str], column_map: Mapping[str, str], name: str) -> dict[str, str | None]:
    """``{foreign: canonical or None}`` using explicit ``--map`` entries first, then the rules."""
    inv = {v: k for k, v in column_map.items()}
    missing = [f for f in column_map.values() if f not in foreign]
    if missing:
        raise InputError(f"expected metric {missing[0]!r} (from --map), got metrics {list(foreign)[:20]} in {name}")
    out: dict[str, str | None] = {}
    owner: dict[str, str] = {}
    for f in foreign:
        canon = inv[f] if f in inv else canonical_metric_name(f)
        out[f] = canon
        if canon is None:
            continue
        if canon in owner:
            raise InputError(
                f"expected one metric per column, got {owner[canon]!r} and {f!r} both mapping to {canon!r} "
                f"(pick one with --map {canon}=NAME) in {name}"
            )
        owner[canon] = f
    return out


# ---------------------------------------------------------------------------------------------- W&B CSV

_WANDB_PANEL_RE = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")
_RUN_NAME_COLUMNS = ("run_id", "Name", "name", "run", "run_name", "Run", "display_name", "ID", "id")


def _looks_like_wandb(raw: pd.DataFrame) -> bool:
    cols = [c for c in raw.columns if c != _ROW]
    if "_step" in cols:
        return True
    return "Step" in cols and any(_WANDB_PANEL_RE.match(c) for c in cols if c != "Step")


def _wandb_csv_to_long(raw: pd.DataFrame, path: Path, column_map: Mapping[str, str]) -> pd.DataFrame:
    """W&B exports -> one row per (run, step) with canonical metric names.

    Two layouts are understood:

    - run history (``run.history()`` / ``scan_history`` saved as CSV, or the "Export" of a run's history):
      a ``_step`` column, metric columns like ``eval/code/loss``; the run is named by a ``Name`` / ``name`` /
      ``run`` / ``run_id`` column if present, else by the file stem;
    - a panel export ("Download CSV" of a line plot): ``Step`` and ``"<run name> - <metric>"`` columns (the
      ``__MIN`` / ``__MAX`` band columns are ignored).
    """
    name = path.name
    cols = [c for c in raw.columns if c != _ROW]
    if "Step" in cols and "_step" not in cols and any(_WANDB_PANEL_RE.match(c) for c in cols if c != "Step"):
        recs: dict[tuple[str, str], dict[str, Any]] = {}
        metrics: list[str] = []
        for c in cols:
            if c == "Step":
                continue
            m = _WANDB_PANEL_RE.match(c)
            if m is None:
                raise InputError(f"expected '<run> - <metric>' columns in a W&B panel export, got {c!r} in {name}:1")
            if m.group("agg"):
                continue
            if m.group("metric") not in metrics:
                metrics.append(m.group("metric"))
        mapping = _canonical_columns(metrics, column_map, name)
        steps = raw["Step"].to_numpy()
        rows = raw[_ROW].to_numpy()
        for c in cols:
            m = _WANDB_PANEL_RE.match(c)
            if c == "Step" or m is None or m.group("agg"):
                continue
            canon = mapping[m.group("metric")]
            if canon is None or canon == "step":
                continue
            for i, v in enumerate(raw[c].to_numpy()):
                if not isinstance(v, str) or not v.strip():
                    continue
                key = (m.group("run"), str(steps[i]).strip())
                rec = recs.setdefault(key, {"run_id": key[0], "step": key[1], _ROW: int(rows[i])})
                rec[canon] = v
        if not recs:
            raise InputError(f"expected values in the W&B panel export, got only empty cells in {name}")
        out_cols = ["run_id", "step"] + sorted({k for r in recs.values() for k in r} - {"run_id", "step", _ROW})
        out = pd.DataFrame({c: pd.Series([r.get(c) for r in recs.values()], dtype=object) for c in out_cols})
        out[_ROW] = [r[_ROW] for r in recs.values()]
        return out
    # history export
    run_col = next((c for c in _RUN_NAME_COLUMNS if c in cols and c not in column_map.values()), None)
    explicit_run = column_map.get("run_id")
    metric_cols = [c for c in cols if c != run_col and c != explicit_run]
    mapping = _canonical_columns(metric_cols, {k: v for k, v in column_map.items() if k != "run_id"}, name)
    data: dict[str, Any] = {}
    if explicit_run is not None:
        if explicit_run not in cols:
            raise InputError(f"expected column {explicit_run!r} (from --map run_id=...), got {cols[:20]} in {name}")
        data["run_id"] = raw[explicit_run]
    elif run_col is not None:
        data["run_id"] = raw[run_col]
    for f, canon in mapping.items():
        if canon is not None:
            data[canon] = raw[f]
    out = pd.DataFrame(data)
    out[_ROW] = raw[_ROW].to_numpy()
    return out


# ---------------------------------------------------------------------------------------------- W&B API


def read_wandb(
    path: str,
    *,
    column_map: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
    run_name: str = "name",
    allow_nan: bool = False,
) -> pd.DataFrame:
    """Read run histories through the W&B public API (optional extra ``wandb``; needs network and a login).

    Parameters
    ----------
    path
        ``entity/project`` (every run) or ``entity/project/run_id`` (one run).
    column_map, keys
        ``{canonical: metric}`` overrides, and the metric names to fetch (default: all).
    run_name
        ``"name"`` (display name, must be unique) or ``"id"`` for the RunTable's ``run_id``.
    """
    raw = _wandb_api_frame(path, column_map=column_map or {}, keys=keys, run_name=run_name)
    rows = raw.pop(_ROW).to_numpy()
    return validate_table(raw, f"wandb://{path}", allow_nan=allow_nan, allow_missing=True, rows=rows)


def _wandb_api_frame(
    path: str, *, column_map: Mapping[str, str], keys: Sequence[str] | None = None, run_name: str = "name"
) -> pd.DataFrame:
    try:
        import wandb
    except ImportError:
        raise InputError(
            f"expected the wandb package for the W&B API (pip install mixlaw[wandb]), got it not installed "
            f"in wandb://{path}"
        ) from None
    label = f"wandb://{path}"
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) not in (2, 3):
        raise InputError(f"expected wandb://entity/project[/run_id], got {label!r}")
    if run_name not in ("name", "id"):
        raise InputError(f"expected run_name 'name' or 'id', got {run_name!r}")
    try:
        api = wandb.Api()
        runs = [api.run("/".join(parts))] if len(parts) == 3 else list(api.runs("/".join(parts)))
    except Exception as exc:  # network / auth / not found: wandb raises many types
        raise InputError(f"expected a reachable W&B project, got '{exc}' in {label}") from None
    recs: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for run in runs:
        rid = str(getattr(run, run_name))
        if rid in seen:
            raise InputError(f"expected unique run names, got {rid!r} twice (use run_name='id') in {label}")
        seen[rid] = rid
        try:
            history = run.scan_history(keys=list(keys) if keys else None)
            for row in history:
                # a logged metric named run_id is kept as metric_run_id; it never renames the run
                rec = {("metric_run_id" if k == "run_id" else k): v for k, v in dict(row).items()}
                rec["run_id"] = rid
                recs.append(rec)
        except Exception as exc:
            raise InputError(f"expected the history of run {rid!r}, got '{exc}' in {label}") from None
    if not recs:
        raise InputError(f"expected logged history, got none in {label}")
    metric_names: list[str] = []
    for r in recs:
        metric_names += [k for k in r if k != "run_id" and k not in metric_names]
    mapping = _canonical_columns(metric_names, column_map, label)
    data: dict[str, list[Any]] = {"run_id": [r["run_id"] for r in recs]}
    for f, canon in mapping.items():
        if canon is not None:
            data[canon] = [r.get(f) for r in recs]
    df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in data.items()})
    df[_ROW] = np.arange(1, len(df) + 1)
    return _merge_same_step(df, label)


def _merge_same_step(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Merge rows logged separately at the same (run, step) (W&B logs train and eval metrics in calls)."""
    if "step" not in df.columns:
        return df
    groups: dict[tuple[Any, Any], dict[str, Any]] = {}
    cols = [c for c in df.columns if c not in ("run_id", "step")]
    for rec in df.to_dict("records"):
        key = (rec["run_id"], rec["step"])
        g = groups.get(key)
        if g is None:
            groups[key] = dict(rec)
            continue
        for c in cols:
            if c == _ROW:
                continue
            v = rec[c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if g.get(c) is not None and not (isinstance(g[c], float) and math.isnan(g[c])) and g[c] != v:
                raise InputError(
                    f"expected one value per (run, step), got {g[c]!r} and {v!r} in {name}:{rec[_ROW]}:{c}"
                )
            g[c] = v
    out = pd.DataFrame({c: pd.Series([g.get(c) for g in groups.values()], dtype=object) for c in df.columns})
    out[_ROW] = out[_ROW].astype(np.int64)
    return out


# ---------------------------------------------------------------------------------------------- TensorBoard


def _event_files(p: Path) -> Iterator[Path]:
    if p.is_file():
        yield p
        return
    for f in sorted(p.rglob("*")):
        if f.is_file() and "tfevents" in f.name:
            yield f


def read_tensorboard(
    path: str | Path, *, column_map: Mapping[str, str] | None = None, allow_nan: bool = False
) -> pd.DataFrame:
    """Scalars of TensorBoard event files as a RunTable (no ``tensorboard`` package needed).

    ``path`` is one event file or a directory: every directory holding event files is one run, named by its
    path
    relative to ``path`` (the directory's own name for event files directly inside it). Scalars written as
    ``simple_value`` (TF1, PyTorch ``SummaryWriter``) and as scalar tensors (TF2 ``tf.summary.scalar``) are
    read;
    images, histograms and other plugins are skipped. Tags are mapped with :func:`canonical_metric_name`; the
    last
    value written for a (run, step, tag) wins (a restarted run re-logs steps). Length checksums of every
    record
    are verified; a truncated last record (a writer still running or killed) is ignored.
    """
    return read_table(path, fmt="tensorboard", column_map=column_map, allow_nan=allow_nan)


def _tensorboard_frame(path: Path, *, allow_nan: bool, column_map: Mapping[str, str]) -> pd.DataFrame:
    files = list(_event_files(path))
    if not files:
        raise InputError(f"expected TensorBoard event files, got none in {path.name}")
    base = path if path.is_dir() else path.parent
    values: dict[tuple[str, int, str], float] = {}
    tags: list[str] = []
    for f in files:
        rel = f.parent.relative_to(base).as_posix()
        run = base.name if rel in (".", "") else rel
        if path.is_file():
            run = f.parent.name or f.stem
        for step, tag, value in _scalars_from_event_file(f):
            if math.isinf(value) or (not allow_nan and math.isnan(value)):
                what = "a finite number or NaN (--allow-nan admits NaN, not inf)" if allow_nan else "a finite number"
                raise InputError(f"expected {what}, got {value!r} at step {step} in {f.name}:{step}:{tag}")
            values[(run, step, tag)] = value
            if tag not in tags:
                tags.append(tag)
    if not values:
        raise InputError(f"expected scalar summaries, got none in {path.name}")
    mapping = _canonical_columns(tags, column_map, path.name)
    if "run_id" in mapping.values():
        raise InputError(f"expected runs named by their directory, got a scalar mapped to run_id in {path.name}")
    recs: dict[tuple[str, int], dict[str, Any]] = {}
    for (run, step, tag), v in values.items():
        canon = mapping[tag]
        if canon is None or canon == "step":
            continue
        recs.setdefault((run, step), {"run_id": run, "step": step})[canon] = v
    keys = sorted(recs)
    cols = ["run_id", "step"] + sorted({c for r in recs.values() for c in r} - {"run_id", "step"})
    df = pd.DataFrame({c: pd.Series([recs[k].get(c) for k in keys], dtype=object) for c in cols})
    for c in cols[2:]:
        df[c] = pd.to_numeric(df[c])
    df[_ROW] = np.arange(1, len(df) + 1)
    return df


def _crc32c_table() -> list[int]:
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _tfrecords(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset, payload) of each TFRecord; verifies length checksums (and payloads up to 1 MiB)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"expected a readable file, got '{exc.strerror or exc}' in {path.name}") from None
    pos, n = 0, len(data)
    if n == 0:
        raise InputError(f"expected a TensorBoard event file, got an empty file in {path.name}")
    while pos < n:
        if n - pos < 12:
            return  # truncated header of the last record: a writer was interrupted
        (length,) = struct.unpack_from("<Q", data, pos)
        (len_crc,) = struct.unpack_from("<I", data, pos + 8)
        if _masked_crc(data[pos : pos + 8]) != len_crc:
            raise InputError(
                f"expected a TensorBoard event file (TFRecord), got a bad checksum at byte {pos} in {path.name}"
            )
        start = pos + 12
        end = start + length
        if end + 4 > n:
            return  # truncated last record
        payload = data[start:end]
        (data_crc,) = struct.unpack_from("<I", data, end)
        if length <= (1 << 20) and _masked_crc(payload) != data_crc:
            raise InputError(f"expected an intact TensorBoard record, got a bad checksum at byte {pos} in {path.name}")
        yield pos, payload
        pos = end + 4


class _ProtoError(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message; value is int, bytes or a raw 4/8-byte chunk."""
    pos, n = 0, len(buf)
    v: Any
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise _ProtoError("truncated 64-bit field")
            v, pos = buf[pos : pos + 8], pos + 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise _ProtoError("truncated length-delimited field")
            v, pos = buf[pos : pos + ln], pos + ln
        elif wt == 5:
            if pos + 4 > n:
                raise _ProtoError("truncated 32-bit field")
            v, pos = buf[pos : pos + 4], pos + 4
        else:
            raise _ProtoError(f"unsupported wire type {wt}")
        yield num, wt, v


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= (1 << 63) else v


def _tensor_scalar(buf: bytes) -> float | None:
    dtype, dims, content = 0, 0, None
    vals: list[float] = []
    for num, wt, v in _fields(buf):
        if num == 1 and wt == 0:
            dtype = v
        elif num == 2 and wt == 2:
            dims = sum(1 for n2, _, _ in _fields(v) if n2 == 2)
            for n2, _, dim in _fields(v):
                if n2 == 2:
                    for n3, _, size in _fields(dim):
                        if n3 == 1 and size != 1:
                            return None
        elif num == 4 and wt == 2:
            content = v
        elif num == 5:  # float_val
            vals += list(struct.unpack(f"<{len(v) // 4}f", v)) if wt in (2, 5) else []
        elif num == 6:  # double_val
            vals += list(struct.unpack(f"<{len(v) // 8}d", v)) if wt in (1, 2) else []
        elif num in (7, 10) and wt == 0:
            vals.append(float(_signed64(v)))
        elif num in (7, 10) and wt == 2:
            p = 0
            while p < len(v):
                x, p = _varint(v, p)
                vals.append(float(_signed64(x)))
    del dims
    if content is not None:
        fmt = {1: "f", 2: "d", 3: "i", 9: "q"}.get(dtype)
        if fmt is None:
            return None
        size = struct.calcsize(fmt)
        if len(content) != size:
            return None
        return float(struct.unpack("<" + fmt, content)[0])
    if len(vals) == 1:
        return float(vals[0])
    return None


def _scalars_from_event_file(path: Path) -> Iterator[tuple[int, str, float]]:
    for offset, payload in _tfrecords(path):
        try:
            step = 0
            summary: bytes | None = None
            for num, wt, v in _fields(payload):
                if num == 2 and wt == 0:
                    step = _signed64(v)
                elif num == 5 and wt == 2:
                    summary = v
            if summary is None:
                continue
            for num, wt, value in _fields(summary):
                if num != 1 or wt != 2:
                    continue
                tag, simple, tensor, plugin, data_class = None, None, None, None, 0
                for n2, w2, v2 in _fields(value):
                    if n2 == 1 and w2 == 2:
                        tag = v2.decode("utf-8", errors="replace")
                    elif n2 == 2 and w2 == 5:
                        simple = struct.unpack("<f", v2)[0]
                    elif n2 == 8 and w2 == 2:
                        tensor = v2
                    elif n2 == 9 and w2 == 2:
                        for n3, w3, v3 in _fields(v2):
                            if n3 == 1 and w3 == 2:
                                for n4, w4, v4 in _fields(v3):
                                    if n4 == 1 and w4 == 2:
                                        plugin = v4.decode("utf-8", errors="replace")
                            elif n3 == 4 and w3 == 0:
                                data_class = v3
                if tag is None:
                    continue
                if simple is not None:
                    yield step, tag, float(simple)
                elif tensor is not None and (plugin == "scalars" or data_class == 1):
                    x = _tensor_scalar(tensor)
                    if x is not None:
                        yield step, tag, x
        except (_ProtoError, struct.error) as exc:
            raise InputError(
                f"expected a TensorBoard event record, got {exc} at byte {offset} in {path.name}"
            ) from None
