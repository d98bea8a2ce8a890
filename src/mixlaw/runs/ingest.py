"""``mixlaw ingest PATH ...``: many log files into a RunStore, one transaction per file, with run metadata from a
side table (``--meta``) and the shared row selectors.

- :func:`expand_sources`: files, directories (every log file inside, recursively; a folder of TensorBoard event
  files is one source) and globs, in a stable order;
- :func:`read_meta` / :class:`MetaTable`: run-level columns keyed by ``run_id`` or by a file-name pattern;
- :func:`ingest_files`: read, join the metadata, select rows, store; a summary row per file.
"""

from __future__ import annotations

import fnmatch
import glob
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.select import TableOptions, select_rows

__all__ = ["expand_sources", "read_meta", "MetaTable", "ingest_files", "run_id_from_pattern", "LOG_SUFFIXES"]

LOG_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")
_META_KEYS = ("run_id", "file")


def expand_sources(paths: Sequence[str | Path]) -> list[Path]:
    """Files, directories and globs -> the log files they name, each once, sorted within each argument.

    A directory gives every file with a log suffix below it (hidden files and folders skipped), or itself when it
    holds TensorBoard event files; a glob (``*``, ``?``, ``[``; ``**`` recursive) gives its matches. An argument
    that names nothing is an error."""
    from mixlaw.runs.io.tensorboard import _event_files

    out: list[Path] = []
    for arg in paths:
        s = str(arg)
        if s.startswith("wandb://"):
            out.append(Path(s))
            continue
        p = Path(s)
        if p.is_dir():
            if any(_event_files(p)):
                found = [p]
            else:
                found = sorted(
                    f
                    for f in p.rglob("*")
                    if f.is_file()
                    and f.suffix.lower() in LOG_SUFFIXES
                    and not any(part.startswith(".") for part in f.relative_to(p).parts)
                )
            if not found:
                raise InputError(f"expected log files ({', '.join(LOG_SUFFIXES)}) in the directory, got none in {s}")
        elif p.exists():
            found = [p]
        elif any(ch in s for ch in "*?["):
            found = sorted(Path(m) for m in glob.glob(s, recursive=True) if Path(m).is_file() or Path(m).is_dir())
            if not found:
                raise InputError(f"expected files matching the pattern, got none for {s}")
        else:
            raise InputError(f"expected an existing file, directory or glob, got no such path in {s}")
        out += [f for f in found if f not in out]
    return out


def run_id_from_pattern(pattern: str, path: Path) -> tuple[str, dict[str, str]]:
    """The run id a ``--run-id-pattern`` REGEX gives a file name: its group ``run_id``, else its first group, else
    the whole match; other named groups come back as run-level columns (``(?P<size>...)``)."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise InputError(f"expected a regular expression for --run-id-pattern, got {pattern!r} ({exc})") from None
    m = rx.search(path.name)
    if m is None:
        raise InputError(f"expected --run-id-pattern {pattern!r} to match the file name, got no match in {path.name}")
    groups = {k: v for k, v in m.groupdict().items() if v is not None}
    rid = groups.pop("run_id", None) or (m.group(1) if rx.groups and m.group(1) else m.group(0))
    if not rid:
        raise InputError(f"expected --run-id-pattern {pattern!r} to capture a run id, got an empty one in {path.name}")
    return rid, groups


# ---------------------------------------------------------------------------------------------- --meta


@dataclass(frozen=True)
class MetaTable:
    """Rows of a ``--meta`` table: a key (``run_id`` = exact run id, ``file`` = a glob on the file name) and the
    run-level values it gives (empty cells give nothing)."""

    source: str
    key: str
    rows: tuple[tuple[str, int, dict[str, Any]], ...]  # (key value, line, {column: value})

    def for_file(self, path: Path) -> list[tuple[int, dict[str, Any]]]:
        """The rows whose ``file`` pattern matches ``path``'s name (or its path)."""
        return [(ln, v) for k, ln, v in self.rows if fnmatch.fnmatch(path.name, k) or fnmatch.fnmatch(str(path), k)]

    def for_run(self, run_id: str) -> list[tuple[int, dict[str, Any]]]:
        return [(ln, v) for k, ln, v in self.rows if k == run_id]

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(c for _, _, v in self.rows for c in v))


def _number(v: str) -> Any:
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and re.fullmatch(r"[+-]?\d+", v.strip()) else f


def read_meta(path: str | Path) -> MetaTable:
    """A CSV of run-level columns with a key column ``run_id`` (exact run ids) or ``file`` (a glob on file
    names, e.g. ``190M-*``); numbers are parsed, empty cells give nothing."""
    from mixlaw.runs.io.text import _ROW, _read_csv

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
    rows: list[tuple[str, int, dict[str, Any]]] = []
    for rec in raw.to_dict("records"):
        k = str(rec[key]).strip()
        line = int(rec[_ROW])
        if not k:
            raise InputError(f"expected a {key} value, got an empty cell in {p.name}:{line}:{key}")
        vals = {c: _number(str(rec[c]).strip()) for c in cols if c != key and str(rec[c]).strip()}
        rows.append((k, line, vals))
    return MetaTable(p.name, key, tuple(rows))


def _join_meta(table: pd.DataFrame, meta: MetaTable, path: Path, name: str) -> pd.DataFrame:
    def merged(hits: list[tuple[int, dict[str, Any]]], what: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        line_of: dict[str, int] = {}
        for ln, vals in hits:
            for c, v in vals.items():
                if c in out and out[c] != v:
                    raise InputError(
                        f"expected one {c!r} for {what}, got {out[c]!r} (line {line_of[c]}) and {v!r} in "
                        f"{meta.source}:{ln}:{c}"
                    )
                out[c], line_of[c] = v, ln
        return out

    if meta.key == "file":
        per_run = {rid: merged(meta.for_file(path), f"file {path.name}") for rid in table["run_id"].unique()}
    else:
        per_run = {rid: merged(meta.for_run(str(rid)), f"run {rid!r}") for rid in table["run_id"].unique()}
    cols = list(dict.fromkeys(c for v in per_run.values() for c in v))
    if not cols:
        return table
    clash = [c for c in cols if c in table.columns]
    if clash:
        raise InputError(f"expected --meta to add new columns, got {clash[0]!r} also in {name} ({meta.source})")
    from mixlaw.runs.schema import validate_table

    attrs = dict(table.attrs)
    table = table.copy()
    table.attrs.clear()  # pandas deep-copies attrs (the row numbers) on every column access
    added = table[["run_id", "step"]].copy()
    for c in cols:
        added[c] = table["run_id"].map(lambda r, c=c: per_run.get(r, {}).get(c)).astype(object)
    checked = validate_table(added, f"{name} (--meta {meta.source})", allow_missing=True, require_loss=False)
    for c in cols:  # the validated columns, in the table's row order (the validator keeps it)
        table[c] = pd.Series(checked[c].to_numpy(), index=table.index, dtype=checked[c].dtype)
    table.attrs.update(attrs)
    return table


# ---------------------------------------------------------------------------------------------- ingest


def ingest_files(
    paths: Sequence[str | Path],
    store: str | Path,
    *,
    options: TableOptions | None = None,
    meta: str | Path | None = None,
    run_id: str | None = None,
    run_id_pattern: str | None = None,
    replace: bool = False,
    allow_nan: bool = False,
    allow_missing: bool = False,
    lr_table: str | Path | None = None,
    keep_going: bool = True,
    on_file: Callable[[dict[str, Any]], None] | None = None,
    **read_options: Any,
) -> dict[str, Any]:
    """Ingest every log file ``paths`` name into ``store``: one transaction per file, a summary per file.

    A file without a ``run_id`` column is one run named by the file (:func:`~mixlaw.runs.io.trainers.default_run_id`)
    or by ``run_id_pattern``; ``meta`` joins run-level columns (:func:`read_meta`); ``options`` maps columns and
    selects the rows stored (``--where``/``--final``/``--every``/``--steps``). A file that fails is reported
    (``status`` = the one-line error) and the others still go in (``keep_going``); nothing of it is written.

    Returns ``{"files": [per-file summary], "runs", "rows", "new_runs", "failed"}``.
    """
    from mixlaw.runs.io import read_table
    from mixlaw.runs.io.trainers import default_run_id
    from mixlaw.runs.store import RunStore

    opts = options or TableOptions()
    files = expand_sources(paths)
    if run_id is not None and len(files) > 1:
        raise InputError(f"expected one file with --run-id, got {len(files)} (use --run-id-pattern REGEX)")
    if lr_table is not None and len(files) > 1:
        raise InputError(f"expected one file with --lr-table, got {len(files)}")
    meta_table = read_meta(meta) if meta is not None else None
    results: list[dict[str, Any]] = []
    with RunStore(store) as st:
        for f in files:
            res: dict[str, Any] = {"file": str(f), "runs": 0, "rows": 0, "new_runs": 0, "mapped": 0, "skipped": 0}
            try:
                rid, extra = (run_id, {}) if run_id_pattern is None else run_id_from_pattern(run_id_pattern, f)
                kw = dict(
                    column_map=dict(opts.column_map),
                    set_values={**extra, **dict(opts.set_values)},
                    drop=list(opts.drop),
                    allow_nan=allow_nan,
                    allow_missing=True if allow_missing else None,
                    **read_options,
                )
                try:
                    table = read_table(f, run_id=rid, **kw)
                except InputError as exc:
                    named = getattr(exc, "column", None) == "run_id" and getattr(exc, "row", None) is None
                    if rid is not None or read_options.get("run_id_from_row") or not named:
                        raise
                    try:  # a log without run ids is one run, named by its file
                        table = read_table(f, run_id=default_run_id(f), **kw)
                    except InputError:
                        raise exc from None
                if meta_table is not None:
                    table = _join_meta(table, meta_table, f, f.name)
                if opts.selects:
                    table = select_rows(table, opts, source=f.name)
                sources = dict(table.attrs.get("column_sources", {}))
                skipped = list(table.attrs.get("skipped_names", ()))
                table.attrs.clear()  # the store reads every column: no attrs to deep-copy on each access
                schedules = None
                if lr_table is not None:
                    from mixlaw.runs.lr_table import read_lr_table

                    schedules = read_lr_table(lr_table, table)
                summary = st.ingest_table(
                    table, f.name, replace=replace, validated=True, schedules=schedules, allow_nan=allow_nan
                )
                res.update(summary)
                res["mapped"] = len(sources)
                res["skipped"] = len(skipped)
                res["skipped_names"] = skipped
                res["columns"] = [c for c in table.columns if c not in ("run_id", "step")]
                res["loss_columns"] = [c for c in table.columns if c == "loss" or str(c).startswith("loss_")]
                res["status"] = "ok"
            except InputError as exc:
                if not keep_going:
                    raise
                res["status"] = f"error: {exc}"
            results.append(res)
            if on_file is not None:
                on_file(res)
    failed = [r for r in results if r["status"] != "ok"]
    return {
        "store": str(store),
        "files": results,
        "runs": sum(r["runs"] for r in results),
        "rows": sum(r["rows"] for r in results),
        "new_runs": sum(r["new_runs"] for r in results),
        "failed": len(failed),
    }
