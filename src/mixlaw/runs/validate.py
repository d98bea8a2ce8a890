"""The one RunTable validator: :func:`validate_table` (columns and message row numbers: :mod:`mixlaw.runs.schema`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.run_ids import SPELLINGS, spellings
from mixlaw.runs.values import (
    _INTEGER_COLUMNS,
    _NONNEG_COLUMNS,
    _NUMBER_MATCH,
    _NUMBER_RE,
    MAX_TABLE_INT,
    MIXTURE_ROW_ATOL,
    PHASES,
    _check_name,
    _fail,
    _fmt,
    _is_domain_tokens,
    _is_missing,
    _is_unique_tokens,
    _short,
    _to_float,
    is_loss_column,
    is_weight_column,
    validate_schedule,
)

__all__ = ["validate_table"]


def _all_str(obj: np.ndarray) -> bool:
    return all(type(v) is str for v in obj)


_SHORT = 256
"""Columns up to this many cells are parsed cell by cell: a 2-row CSV with 20,000 columns spent 30+ s in the
fixed cost of a dozen pandas calls per column (``benchmarks/wide_csv.py``)."""


def _parse_numbers(obj: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(float values, missing mask, position of the first non-numeric cell or None) of an object array.

    Empty cells (None, '', whitespace, pandas NA) are missing; numbers and number-like text (incl. 'nan',
    'inf')
    are values; anything else (other text, booleans, containers) is non-numeric.
    """
    n = len(obj)
    if 0 < n <= _SHORT and _all_str(obj):  # a short text column: pandas' per-call overhead would dominate
        stripped = [v.strip() for v in obj]
        missing = np.fromiter((t == "" for t in stripped), dtype=bool, count=n)
        vals = np.full(n, np.nan)
        for i, t in enumerate(stripped):
            if t:
                if not _NUMBER_MATCH(t):
                    return vals, missing, i
                vals[i] = float(t)
        return vals, missing, None
    if n and _all_str(obj):  # the CSV path: vectorised, per-cell work only for the few unusual cells
        stripped = pd.Series(obj, dtype=object).str.strip()
        missing = (stripped == "").to_numpy(dtype=bool, copy=True)
        # The regex decides what is a number (pd.to_numeric / float() accept more, e.g. other scripts' digits).
        number = stripped.str.match(_NUMBER_RE).to_numpy(dtype=bool, na_value=False)
        not_number = np.flatnonzero(~missing & ~number)
        vals = pd.to_numeric(stripped.where(~missing & number, None), errors="coerce").to_numpy(
            dtype="float64", na_value=np.nan, copy=True
        )
        if len(not_number):
            return vals, missing, int(not_number[0])
        for j in np.flatnonzero(np.isnan(vals) & ~missing):
            v = str(stripped.iloc[int(j)])
            if _NUMBER_MATCH(v):
                vals[j] = float(v)
            else:
                return vals, missing, int(j)
        return vals, missing, None
    vals = np.empty(n, dtype="float64")
    missing = np.zeros(n, dtype=bool)
    for i, v in enumerate(obj):
        if isinstance(v, bool | np.bool_):
            return vals, missing, i
        if isinstance(v, int | float | np.integer | np.floating):
            vals[i] = _to_float(v)  # a 400-digit JSON integer is +-inf (refused as not finite), not an OverflowError
        elif isinstance(v, str):
            t = v.strip()
            if t == "":
                missing[i] = True
                vals[i] = math.nan
            elif _NUMBER_MATCH(t):
                vals[i] = float(t)
            else:
                return vals, missing, i
        elif _is_missing(v):
            missing[i] = True
            vals[i] = math.nan
        else:
            return vals, missing, i
    return vals, missing, None


def _numeric_column(
    s: pd.Series, name: str, source: str, rows: np.ndarray, *, allow_nan: bool, allow_missing: bool
) -> pd.Series:
    """Convert a column to float64, refusing non-numeric cells; returns floats with NaN for missing cells."""
    if pd.api.types.is_bool_dtype(s.dtype):
        i = 0
        raise _fail("a number", _fmt(s.iloc[i]), source, int(rows[i]), name)
    if pd.api.types.is_numeric_dtype(s.dtype):
        out = pd.Series(s.to_numpy(dtype="float64", na_value=np.nan), index=s.index, name=name)
        # A typed frame cannot tell an empty cell from NaN: NaN counts as missing only where that is allowed.
        missing = np.isnan(out.to_numpy()) if allow_missing else np.zeros(len(s), dtype=bool)
    else:
        obj = s.to_numpy(dtype=object)
        vals, missing, bad_at = _parse_numbers(obj)
        if bad_at is not None:
            v = obj[bad_at]
            raise _fail("a number", _fmt(bool(v) if isinstance(v, np.bool_) else v), source, int(rows[bad_at]), name)
        out = pd.Series(vals, index=s.index, name=name)
    arr = out.to_numpy()
    bad = ~np.isfinite(arr)
    if bad.any():
        for j in np.flatnonzero(bad):
            i = int(j)
            if missing[i]:
                if not allow_missing and not allow_nan:
                    raise _fail("a value", "an empty cell", source, int(rows[i]), name)
            elif np.isinf(arr[i]) and allow_nan:
                # NaN marks a value that is not there; an infinite value cannot be stored or fitted.
                raise _fail("a finite number or NaN (--allow-nan admits NaN, not inf)", _fmt(float(arr[i])), source,
                            int(rows[i]), name)  # fmt: skip
            elif not allow_nan:
                raise _fail("a finite number", _fmt(float(arr[i])), source, int(rows[i]), name)
    return out


def _string_column(s: pd.Series, name: str, source: str, rows: np.ndarray, *, required: bool) -> pd.Series:
    obj = s.to_numpy(dtype=object)
    if len(obj) and _all_str(obj):
        stripped = pd.Series(obj, dtype=object).str.strip()
        empty = (stripped == "").to_numpy(dtype=bool)
        if required and empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise _fail("a non-empty value", "an empty cell", source, int(rows[i]), name)
        res = stripped.to_numpy(dtype=object, copy=True)
        res[empty] = None
        _check_cells_text(res, name, source, rows)
        if name == "run_id" and bool((obj != res)[~empty].any()):  # an id written with surrounding spaces
            _check_distinct_ids(obj, res, source, rows)
        return pd.Series(res, index=s.index, name=name, dtype=object)
    out: list[str | None] = []
    for i, v in enumerate(obj):
        if _is_missing(v) or (isinstance(v, str) and v.strip() == ""):
            if required:
                raise _fail("a non-empty value", "an empty cell", source, int(rows[i]), name)
            out.append(None)
        elif isinstance(v, bool | np.bool_):
            raise _fail("a string", _fmt(bool(v)), source, int(rows[i]), name)
        elif isinstance(v, float | np.floating) and not math.isfinite(float(v)):
            raise _fail("a string", _fmt(float(v)), source, int(rows[i]), name)
        elif isinstance(v, float | np.floating) and float(v) == round(float(v)):
            out.append(str(int(v)))  # "3.0" from a numeric CSV column means run 3
        elif isinstance(v, str | float | np.floating) or (
            isinstance(v, int | np.integer) and int(v).bit_length() < 256
        ):
            out.append(str(v).strip())
        else:
            raise _fail("a string", _fmt(v), source, int(rows[i]), name)
    _check_cells_text(np.asarray(out, dtype=object), name, source, rows)
    if name == "run_id":
        _check_distinct_ids(obj, np.asarray(out, dtype=object), source, rows)
    return pd.Series(out, index=s.index, name=name, dtype=object)


def _check_distinct_ids(raw: np.ndarray, ids: np.ndarray, source: str, rows: np.ndarray) -> None:
    """Refuse run ids that become one id only by normalisation: ``"a"`` and ``"a "`` (surrounding spaces), ``1`` and
    ``"1"`` (type). They are never merged silently: the error names both spellings and the row of the second."""
    seen: dict[str, tuple[str, Any, int]] = {}
    for i, (v, rid) in enumerate(zip(raw, ids, strict=True)):
        if rid is None:
            continue
        key = (type(v).__name__ if not isinstance(v, np.generic) else type(v.item()).__name__, v)
        first = seen.get(rid)
        if first is None:
            seen[rid] = (key[0], v, i)
            continue
        if first[0] == key[0] and (first[1] == v if key[0] != "float" else True):
            continue
        why = "by surrounding spaces" if first[0] == key[0] == "str" else "by type"
        raise _fail(
            f"run ids that differ as written to stay distinct ({first[1]!r} at row {int(rows[first[2]])} and {v!r} "
            f"differ only {why}; write them identically, or rename one)",
            f"both read as run {rid!r}",
            source,
            int(rows[i]),
            "run_id",
        )


def _check_cells_text(cells: np.ndarray, name: str, source: str, rows: np.ndarray) -> None:
    """Every text cell is encodable as UTF-8 (SQLite and every printer need that; JSON "\\ud800" is not)."""
    texts = [v for v in cells if isinstance(v, str)]
    try:
        "\x1f".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        for i, v in enumerate(cells):
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise _fail("UTF-8 text", f"{_fmt(v)} (a lone surrogate)", source, int(rows[i]), name) from None


def _looks_numeric(s: pd.Series) -> tuple[bool, int | None]:
    """(any numeric cell?, position of the first non-empty non-numeric cell or None)."""
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        return True, None
    obj = s.to_numpy(dtype=object)
    _, missing, bad_at = _parse_numbers(obj)
    if bad_at is None:
        return bool((~missing).any()), None
    if _all_str(obj):
        any_num = bool(pd.Series(obj, dtype=object).str.match(_NUMBER_RE).any())
    else:
        any_num = any(_is_number_cell(v) for v in obj)
    return any_num, bad_at


def _is_number_cell(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | float | np.integer | np.floating):
        return True
    return isinstance(v, str) and bool(_NUMBER_MATCH(v.strip()))


def validate_table(
    df: pd.DataFrame,
    source: str = "<table>",
    *,
    allow_nan: bool = False,
    allow_missing: bool = False,
    rows: Sequence[int] | np.ndarray | None = None,
    require_loss: bool = True,
) -> pd.DataFrame:
    """Validate a RunTable and return a clean copy with canonical dtypes.

    Every table that enters mixlaw (readers, :meth:`RunStore.ingest_table`, :meth:`RunStore.append_evals`)
    goes
    through this function. Checks, each raising one :class:`~mixlaw.errors.InputError`
    ``expected ..., got ... in FILE:ROW:COLUMN``:

    - columns: names are unique non-empty strings; ``run_id`` is present; at least one ``loss`` /
      ``loss_<set>``
      column (unless ``require_loss=False``); ``step`` is present, or absent with each run having exactly one
      row
      (then ``step = 0``);
    - numeric columns (canonical numeric columns, ``w_*``, ``loss*`` and every extra column holding numbers):
      every cell a number; finite (NaN / inf refused unless ``allow_nan``); empty cells refused unless
      ``allow_missing`` (sparse logs) or ``allow_nan``;
    - ``step``, ``tokens``, ``lr``, ``n_params``, ``n_params_total``, ``compute_flops``, ``unique_tokens_*``,
      ``tokens_*`` and losses non-negative; ``step`` and ``seed`` integers;
    - mixture weights ``w_*``: non-negative and summing to 1 within 1e-6 per row. A row whose weights are all
      empty
      has no recorded mixture (e.g. a base checkpoint trained elsewhere); some empty and some not is an error;
    - ``phase`` is ``pt`` or ``cpt`` (case-insensitive); ``schedule`` cells are JSON objects;
    - no duplicate ``(run_id, step)``.

    Extra columns pass through: numeric ones as float64, all-text ones as strings (per-run metadata in the
    store).

    Parameters
    ----------
    df
        The table (canonical column names; map foreign names first, see :func:`mixlaw.runs.io.read_table`).
    source
        File name (or label) used in messages.
    allow_nan
        Accept NaN / inf values and empty cells in numeric columns.
    allow_missing
        Accept empty cells (but not explicit NaN / inf) in numeric columns.
    rows
        The row number a user sees for each row of ``df`` (see the module docstring); default ``1 ..
        len(df)``.
    require_loss
        Require a loss column (``False`` for evaluation chunks that only carry e.g. ``lr``).

    Returns
    -------
    pandas.DataFrame
        A new frame with a fresh RangeIndex: ``run_id`` (str), ``step`` (int64), numeric columns float64,
        ``phase`` / ``parent_run`` / extra text columns as object (None where empty).
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"expected a table (pandas DataFrame), got {type(df).__name__} in {source}")
    n = len(df)
    row_nums = np.arange(1, n + 1) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(row_nums) != n:
        raise InputError(f"expected {n} row numbers, got {len(row_nums)} in {source}")
    names: list[str] = []
    seen: set[str] = set()  # a list lookup made 20,000 columns quadratic
    for c in df.columns:
        if not isinstance(c, str):
            c = str(c)
        c = c.strip()
        if not c:
            raise _fail("a column name", "an empty header cell", source, None, None)
        try:
            c.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail("a UTF-8 column name", f"{_fmt(c)} (a lone surrogate)", source, None, None) from None
        if c in seen:
            raise _fail("unique column names", f"{c!r} twice", source, None, c)
        seen.add(c)
        names.append(c)
    df = df.copy()
    df.columns = names
    if "run_id" not in names:
        raise _fail(
            "a column 'run_id' (map one with --map run_id=COLUMN, or use --run-id / --run-id-from-row)",
            f"columns {_short(names)}",
            source,
            None,
            "run_id",
        )
    losses = [c for c in names if is_loss_column(c)]
    if require_loss and not losses:
        raise _fail(
            "a loss column 'loss' or 'loss_<evalset>' (map one with --map loss_<evalset>=COLUMN)",
            f"columns {_short(names)}",
            source,
            None,
            "loss",
        )
    if n == 0:
        raise InputError(f"expected at least one data row, got none in {source}")
    out: dict[str, pd.Series] = {}
    out["run_id"] = _string_column(df["run_id"], "run_id", source, row_nums, required=True)
    spelled = spellings(df["run_id"].to_numpy(dtype=object), out["run_id"].to_numpy())  # across files: run_ids
    weight_cols: list[str] = []
    for c in names:
        if c == "run_id":
            continue
        s = df[c]
        if c in ("phase", "parent_run"):
            col = _string_column(s, c, source, row_nums, required=False)
            if c == "phase":
                for i, v in enumerate(col.to_numpy()):
                    if v is not None and v.lower() not in PHASES:
                        raise _fail("phase 'pt' or 'cpt'", _fmt(v), source, int(row_nums[i]), c)
                col = col.map(lambda v: v.lower() if isinstance(v, str) else None).astype(object)
            out[c] = col
            continue
        if c == "schedule":
            vals: list[str | None] = []
            for i, v in enumerate(s.astype(object).to_numpy()):
                if _is_missing(v) or (isinstance(v, str) and not v.strip()):
                    vals.append(None)
                    continue
                try:
                    if isinstance(v, str) and not v.strip().startswith(("{", "[")):
                        from mixlaw.schedules import Schedule  # a spec: cosine:peak=1e-4,steps=2000,warmup=100

                        parsed = Schedule.parse(v.strip()).to_dict()
                    else:
                        parsed = json.loads(v) if isinstance(v, str) else v
                    sched = validate_schedule(parsed)
                except (ValueError, RecursionError, InputError) as exc:
                    msg = str(exc) if isinstance(exc, InputError) else "unparsable or too deeply nested JSON"
                    raise _fail("a schedule spec or JSON object", f"{_fmt(v)} ({msg})", source, int(row_nums[i]),
                                c) from None  # fmt: skip
                vals.append(json.dumps(sched, sort_keys=True))
            out[c] = pd.Series(vals, index=df.index, dtype=object)
            continue
        canonical_numeric = (
            c in ("step", "tokens", "lr", "n_params", "n_params_total", "seed", "compute_flops")
            or is_loss_column(c)
            or is_weight_column(c)
            or _is_unique_tokens(c)
            or _is_domain_tokens(c)
        )
        if not canonical_numeric:
            any_num, first_bad = _looks_numeric(s)
            if not any_num:
                out[c] = _string_column(s, c, source, row_nums, required=False)
                continue
            if first_bad is not None:
                raise _fail(
                    "a number (column holds numbers elsewhere; drop it with --drop if it is a label)",
                    _fmt(s.iloc[first_bad]),
                    source,
                    int(row_nums[first_bad]),
                    c,
                )
        if is_weight_column(c):
            _check_name(c[2:], "domain")
            weight_cols.append(c)
        col = _numeric_column(
            s, c, source, row_nums, allow_nan=allow_nan, allow_missing=allow_missing or is_weight_column(c)
        )
        arr = col.to_numpy()
        nonneg = c in _NONNEG_COLUMNS or is_loss_column(c) or is_weight_column(c) or _is_unique_tokens(c)
        nonneg = nonneg or _is_domain_tokens(c)
        if nonneg:
            with np.errstate(invalid="ignore"):
                neg = np.flatnonzero(arr < 0)
            if len(neg):
                i = int(neg[0])
                raise _fail("a non-negative value", _fmt(float(arr[i])), source, int(row_nums[i]), c)
        if c in _INTEGER_COLUMNS:
            with np.errstate(invalid="ignore"):
                frac = np.flatnonzero(np.isfinite(arr) & (arr != np.round(arr)))
                big = np.flatnonzero(np.abs(arr) > MAX_TABLE_INT)
            if len(frac):
                i = int(frac[0])
                raise _fail("an integer", _fmt(float(arr[i])), source, int(row_nums[i]), c)
            if len(big):
                i = int(big[0])
                raise _fail(
                    f"an integer {c} with |{c}| < 2^53 (larger ones do not survive float64 exactly)",
                    _fmt(float(arr[i])),
                    source,
                    int(row_nums[i]),
                    c,
                )
        out[c] = col
    # step: required unless one row per run
    if "step" not in out:
        counts = out["run_id"].value_counts()
        if (counts > 1).any():
            rid = counts.index[counts > 1][0]
            first = int(row_nums[np.flatnonzero(out["run_id"].to_numpy() == rid)[1]])
            raise _fail(
                "a column 'step' (or one row per run)",
                f"run {rid!r} with {int(counts[rid])} rows and no step column",
                source,
                first,
                "step",
            )
        out["step"] = pd.Series(np.zeros(n, dtype=np.int64), index=df.index)
    else:
        st = out["step"].to_numpy()
        if np.isnan(st).any():
            i = int(np.flatnonzero(np.isnan(st))[0])
            raise _fail("a step", "an empty cell", source, int(row_nums[i]), "step")
        out["step"] = pd.Series(st.astype(np.int64), index=df.index)
    # mixtures per row
    if weight_cols:
        W = np.column_stack([out[c].to_numpy() for c in weight_cols])
        isn = np.isnan(W)
        all_missing = isn.all(axis=1)
        partial = np.flatnonzero(isn.any(axis=1) & ~all_missing)
        if len(partial):
            i = int(partial[0])
            j = int(np.flatnonzero(isn[i])[0])
            raise _fail(
                "all or none of a row's mixture weights",
                "an empty cell",
                source,
                int(row_nums[i]),
                weight_cols[j],
            )
        sums = np.where(all_missing, 1.0, np.nansum(W, axis=1))
        off = np.flatnonzero(np.abs(sums - 1.0) > MIXTURE_ROW_ATOL)
        if len(off):
            i = int(off[0])
            raise _fail(
                f"mixture weights summing to 1 (within {MIXTURE_ROW_ATOL:g})",
                f"sum {float(sums[i])!r} over {', '.join(weight_cols)}",
                source,
                int(row_nums[i]),
                weight_cols[-1],
            )
    # duplicates
    key = pd.DataFrame({"run_id": out["run_id"].to_numpy(), "step": out["step"].to_numpy()})
    dup = key.duplicated(keep=False).to_numpy()
    if dup.any():
        second = key.duplicated(keep="first").to_numpy()
        i = int(np.flatnonzero(second)[0])
        rid, st = key.iloc[i]["run_id"], int(key.iloc[i]["step"])
        firsts = np.flatnonzero(dup & (key["run_id"].to_numpy() == rid) & (key["step"].to_numpy() == st))
        raise _fail("one row per (run_id, step)", f"a second row for ({rid!r}, {st}) (first at row "
                    f"{int(row_nums[firsts[0]])})", source, int(row_nums[i]), "step")  # fmt: skip
    order = ["run_id", "step"] + [c for c in names if c not in ("run_id", "step")]
    res = pd.DataFrame({c: out[c].to_numpy() for c in order})
    for c in res.columns:
        if c not in ("run_id",) and out[c].dtype == object:
            res[c] = res[c].astype(object)
    res["run_id"] = res["run_id"].astype(object)
    res.attrs.update({"rows": [int(r) for r in row_nums], **({SPELLINGS: spelled} if spelled else {})})
    return res
