"""One side table of run metadata (``--meta META.csv``) for logs that lack it: sizes, mixtures, phases, parents,
tokens per step and schedules, keyed by run id or by a glob over the run's id, folder or file.

- :func:`read_meta` / :class:`MetaTable`: the table, its rows and what each row matches;
- :func:`join_meta`: the run-level values of the matching rows onto a RunTable (ingest, or any verb reading a
  file or a store), with the coverage checks (a row that matches nothing, a run no row matches when some do);
- :func:`base_runs`: rows that describe a run the logs do not hold (a base checkpoint: ``phase = pt`` with its
  final losses) as one-row runs at step 0;
- :func:`complete_tokens`: ``tokens = tokens_per_step × step`` (or ``batch_size × seq_len × step``) when the log
  has no token count.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.columns import blank_cells

__all__ = ["MetaTable", "MetaRow", "read_meta", "join_meta", "base_runs", "complete_tokens", "check_coverage"]

_META_KEYS = ("run_id", "file")
_GLOB = re.compile(r"[*?\[]")
#: Columns that give a run's token count per step (``tokens_per_step``, or ``batch_size`` × ``seq_len``).
TOKEN_RATE_COLUMNS = ("tokens_per_step", "batch_size", "seq_len")


@dataclass(frozen=True)
class MetaRow:
    """One row of a ``--meta`` table: its key, file line and the run-level values it gives."""

    key: str
    line: int
    values: Mapping[str, Any]

    @property
    def is_glob(self) -> bool:
        return bool(_GLOB.search(self.key))

    @property
    def describes_run(self) -> bool:
        """A row for a run the logs do not hold: an exact run id, ``phase = pt`` and at least one loss."""
        return (
            not self.is_glob
            and self.values.get("phase") == "pt"
            and any(c == "loss" or c.startswith("loss_") for c in self.values)
        )


@dataclass(frozen=True)
class MetaTable:
    """Rows of a ``--meta`` table: a key (``run_id`` = a run id or a glob over the run's id, folder or file;
    ``file`` = a glob over the file's name or path) and the run-level values it gives (empty cells give
    nothing)."""

    source: str
    key: str
    rows: tuple[MetaRow, ...]

    def matches(self, row: MetaRow, run_id: str, path: Path | None) -> bool:
        """Whether ``row`` names the run ``run_id`` logged in ``path`` (``None``: a store's run)."""
        k = row.key
        if self.key == "run_id" and (k == run_id or (row.is_glob and fnmatch.fnmatchcase(run_id, k))):
            return True
        if path is None or (self.key == "run_id" and not row.is_glob):
            return False
        return any(fnmatch.fnmatchcase(s, k) for s in _path_names(path))

    def for_run(self, run_id: str, path: Path | None = None) -> list[MetaRow]:
        """The rows that name a run (exact id, or a glob over its id, folders or file)."""
        return [r for r in self.rows if self.matches(r, run_id, path)]

    def for_file(self, path: Path) -> list[tuple[int, dict[str, Any]]]:
        """The rows whose pattern matches ``path`` (its name, a folder or the whole path)."""
        return [
            (r.line, dict(r.values)) for r in self.rows if any(fnmatch.fnmatchcase(s, r.key) for s in _path_names(path))
        ]

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(c for r in self.rows for c in r.values))


def _path_names(path: Path) -> list[str]:
    """What a glob is tried on: the file name, each folder name above it, and the path itself."""
    p = Path(path)
    return [p.name, *(q.name for q in p.parents if q.name), p.as_posix()]


def _number(v: str) -> Any:
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and re.fullmatch(r"[+-]?\d+", v.strip()) else f


def read_meta(path: str | Path) -> MetaTable:
    """A CSV of run-level columns with a key column ``run_id`` (run ids, or globs over a run's id, folder or
    file) or ``file`` (a glob over file names or paths, e.g. ``190M-*``); numbers are parsed, empty cells give
    nothing. A ``schedule`` cell may hold a spec (``cosine:peak=1e-4,steps=2000``) or a JSON object."""
    from mixlaw.runs.io.text import _ROW, _read_csv
    from mixlaw.runs.meta_schema import check_row

    p = Path(path)
    if not p.is_file():
        raise InputError(f"expected an existing --meta table, got no such file in {p}")
    raw = _read_csv(p)
    cols = [c for c in raw.columns if c != _ROW]
    keys = [k for k in _META_KEYS if k in cols]
    if len(keys) != 1:
        raise InputError(
            f"expected one key column 'run_id' or 'file' (a file-name glob) in the --meta table, "
            f"got {'both' if keys else 'columns ' + str(cols[:10])} in {p.name}:1"
        )
    key = keys[0]
    rows: list[MetaRow] = []
    for rec in raw.to_dict("records"):
        k = str(rec[key]).strip()
        line = int(rec[_ROW])
        if not k:
            raise InputError(f"expected a {key} value, got an empty cell in {p.name}:{line}:{key}")
        vals = {c: _number(str(rec[c]).strip()) for c in cols if c != key and str(rec[c]).strip()}
        vals = check_row(vals, p.name, line)  # the schema of meta cells (mixlaw.runs.meta_schema)
        if "schedule" in vals:
            vals["schedule"] = _schedule_cell(vals["schedule"], f"{p.name}:{line}:schedule")
        rows.append(MetaRow(k, line, vals))
    return MetaTable(p.name, key, tuple(rows))


def _schedule_cell(value: Any, where: str) -> str:
    """A ``schedule`` cell as the JSON object the store keeps: a spec string is parsed, JSON passes through."""
    import json

    text = str(value).strip()
    if text.startswith("{"):
        return text
    from mixlaw.schedules import Schedule

    try:
        sched = Schedule.parse(text)
    except Exception as exc:  # the parser raises InputError / ValueError with its reason
        raise InputError(f"expected a schedule spec or JSON object, got {text!r} ({exc}) in {where}") from None
    return json.dumps(sched.to_dict())


def _merged(rows: Sequence[MetaRow], what: str, source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    line_of: dict[str, int] = {}
    for r in rows:
        for c, v in r.values.items():
            if c in out and out[c] != v:
                raise InputError(
                    f"expected one {c!r} for {what}, got {out[c]!r} (line {line_of[c]}) and {v!r} in "
                    f"{source}:{r.line}:{c}"
                )
            out[c], line_of[c] = v, r.line
    return out


def _empty(s: pd.Series) -> pd.Series:
    return pd.Series(blank_cells(s), index=s.index)


def join_meta(
    table: pd.DataFrame, meta: MetaTable, paths: Mapping[str, Path | None], name: str
) -> tuple[pd.DataFrame, set[int]]:
    """The run-level values of the rows that match each run, as columns of ``table``; returns the table and the
    lines of the rows used. ``paths`` gives each run's log file (``None`` for a store's run).

    A column the table already has is filled where it is empty for the run; a value there that differs from the
    table's is an error naming the run, the column and both values."""
    from mixlaw.runs.schema import validate_table

    used: set[int] = set()
    per_run: dict[str, dict[str, Any]] = {}
    for rid in pd.unique(table["run_id"]):
        rows = [r for r in meta.for_run(str(rid), paths.get(str(rid))) if not r.describes_run or r.key == rid]
        used.update(r.line for r in rows)
        vals = _merged(rows, f"run {rid!r}", meta.source)
        vals = {c: v for c, v in vals.items() if not (c == "loss" or c.startswith("loss_"))}
        if vals:
            per_run[str(rid)] = vals
    cols = list(dict.fromkeys(c for v in per_run.values() for c in v))
    if not cols:
        return table, used
    attrs = dict(table.attrs)
    table = table.copy()
    table.attrs.clear()  # pandas deep-copies attrs (the row numbers) on every column access
    run = table["run_id"].astype(str)
    added = table[["run_id", "step"]].copy() if "step" in table.columns else table[["run_id"]].copy()
    for c in cols:
        added[c] = run.map(lambda r, c=c: per_run.get(r, {}).get(c)).astype(object)
    checked = validate_table(added, f"{name} (--meta {meta.source})", allow_missing=True, require_loss=False)
    for c in cols:
        new = pd.Series(checked[c].to_numpy(), index=table.index, dtype=checked[c].dtype)
        if c not in table.columns:
            table[c] = new
            continue
        have = ~_empty(table[c]) & ~_empty(new)
        old = table[c]
        differ = have & (old.astype(str) != new.astype(str))
        if differ.any() and pd.api.types.is_numeric_dtype(new):
            a = pd.to_numeric(old, errors="coerce").to_numpy(dtype=np.float64)
            b = pd.to_numeric(new, errors="coerce").to_numpy(dtype=np.float64)
            differ &= ~np.isclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True)
        if differ.any():
            i = int(np.flatnonzero(differ.to_numpy())[0])
            raise InputError(
                f"expected the --meta value of {c!r} for run {run.iloc[i]!r} to agree with the log, got "
                f"{new.iloc[i]!r} in {meta.source} and {old.iloc[i]!r} in {name} (drop one of them)"
            )
        fill = _empty(old) & ~_empty(new)
        if fill.any():
            merged = old.astype(object).where(~fill, new.astype(object))
            table[c] = merged if not pd.api.types.is_numeric_dtype(new) else pd.to_numeric(merged)
    table.attrs.update(attrs)
    return table, used


def base_runs(meta: MetaTable, known: set[str]) -> tuple[pd.DataFrame | None, set[int]]:
    """The rows that describe runs the logs do not hold (``phase = pt``, an exact run id, final losses): a RunTable
    with one row per such run at step 0 and ``tokens`` 0 (the reference ``T = 0`` of the runs that continue it,
    which count their tokens from their own start). Returns it (``None`` when no row does) and the lines used."""
    recs: list[dict[str, Any]] = []
    used: set[int] = set()
    for r in meta.rows:
        if r.describes_run and r.key not in known:
            vals = dict(r.values)
            vals.pop("tokens_per_step", None)
            recs.append({"run_id": r.key, "step": 0, "tokens": 0.0, **vals})
            used.add(r.line)
    if not recs:
        return None, used
    from mixlaw.runs.schema import validate_table

    frame = pd.DataFrame(recs)
    return validate_table(frame, f"{meta.source} (base runs)", allow_missing=True), used


def check_coverage(meta: MetaTable, used: set[int], runs: Sequence[str], matched: Sequence[str]) -> None:
    """A row that matches no run, or (when some runs are matched) a run that no row matches: one-line errors."""
    unused = [r for r in meta.rows if r.line not in used]
    if unused:
        r = unused[0]
        more = f" (and {len(unused) - 1} more rows)" if len(unused) > 1 else ""
        shown = ", ".join(repr(x) for x in list(runs)[:5]) + (", ..." if len(runs) > 5 else "")
        hint = "" if r.is_glob else "; a row for a run the logs lack needs phase=pt and its losses (loss_<set>)"
        raise InputError(
            f"expected every --meta row to match a run, got no run for {meta.key} {r.key!r}{more} "
            f"(runs: {shown}){hint} in {meta.source}:{r.line}:{meta.key}"
        )
    if matched:
        missing = [rid for rid in runs if rid not in set(matched)]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise InputError(
                f"expected a --meta row for every run, got none for run {missing[0]!r}{more} "
                f"(add a row, or a glob over its id, folder or file) in {meta.source}"
            )


def complete_tokens(table: pd.DataFrame) -> pd.DataFrame:
    """``tokens = tokens_per_step × step`` (or ``batch_size × seq_len × step``) where the log has no token count.

    Only empty ``tokens`` cells are filled; a logged count is kept."""
    if "step" not in table.columns:
        return table
    if "tokens_per_step" in table.columns:
        rate = pd.to_numeric(table["tokens_per_step"], errors="coerce")
    elif "batch_size" in table.columns and "seq_len" in table.columns:
        rate = pd.to_numeric(table["batch_size"], errors="coerce") * pd.to_numeric(table["seq_len"], errors="coerce")
    else:
        return table
    if not rate.notna().any():
        return table
    tokens = rate * pd.to_numeric(table["step"], errors="coerce")
    if "tokens" in table.columns:
        have = pd.to_numeric(table["tokens"], errors="coerce")
        tokens = have.where(have.notna(), tokens)
    attrs = dict(table.attrs)
    table = table.copy()
    table.attrs.clear()
    table["tokens"] = tokens.astype(np.float64)
    table.attrs.update(attrs)
    return table
