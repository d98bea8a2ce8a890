"""``mixlaw ingest PATH ...``: many log files into a RunStore, one transaction per file, with run metadata from a
side table (``--meta``) and the shared row selectors.

- :func:`expand_sources`: files, directories (every log file inside, recursively; a folder of TensorBoard event
  files is one source) and globs, in a stable order;
- :func:`read_meta` / :class:`MetaTable`: run-level columns keyed by ``run_id`` or by a file-name pattern;
- :func:`ingest_files`: read, join the metadata, select rows, store; a summary row per file.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError, source_lines
from mixlaw.runs.meta import MetaTable, base_runs, check_coverage, complete_tokens, join_meta, read_meta
from mixlaw.runs.run_ids import of_table
from mixlaw.runs.select import TableOptions, select_rows
from mixlaw.runs.validate import validate_table

__all__ = ["expand_sources", "read_meta", "MetaTable", "ingest_files", "run_id_from_pattern", "LOG_SUFFIXES"]

LOG_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")


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
            visible = [f for f in p.rglob("*") if not any(part.startswith(".") for part in f.relative_to(p).parts)]
            logs = [f for f in visible if f.is_file() and f.suffix.lower() in LOG_SUFFIXES]
            shown = set(visible)
            events = {f.parent for f in _event_files(p) if f in shown}
            if events and not logs:
                found = [p]  # a TensorBoard log folder: one source, a run per sub-folder
            else:  # a folder of logs of several kinds: each log file, and each folder holding event files
                found = sorted([*logs, *events])
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
# The side table lives in mixlaw.runs.meta (read_meta, MetaTable re-exported here).


# ---------------------------------------------------------------------------------------------- ingest


def _label(f: Path, files: Sequence[Path]) -> str:
    """How the summary names a file: its name when it is the only one, else its path below the files' common
    folder (``hf/a/checkpoint-2000/trainer_state.json``, not ``trainer_state.json`` three times)."""
    if len(files) == 1:
        return f.name
    import os

    try:
        root = Path(os.path.commonpath([str(g.parent if g.is_file() else g) for g in files]))
        return f.relative_to(root).as_posix()
    except ValueError:
        return str(f)


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
    or by ``run_id_pattern``; ``meta`` joins run-level columns (:func:`~mixlaw.runs.meta.read_meta`: keyed by run
    id or a glob over the run's id, folder or file), and its rows for runs the logs lack (a base checkpoint,
    ``phase = pt`` with its losses) are stored as one-row runs; ``tokens`` follows from ``tokens_per_step`` (or
    ``batch_size`` × ``seq_len``) × ``step`` when the log has none; ``options`` maps columns, adds ``--derive``
    columns and selects the rows stored (``--where``/``--final``/``--every``/``--steps``). Every file is read and
    joined first: a ``--meta`` row that matches no run, or a run no row matches when some do, is an error before
    anything is written. A file that fails is reported (``status`` = the one-line error) and the others still go in
    (``keep_going``); nothing of it is written.

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
    meta_table = read_meta(meta) if meta is not None else (opts.meta_table() if opts.meta is not None else None)
    results: list[dict[str, Any]] = []
    tables: list[pd.DataFrame | None] = []
    spelled: list[dict[str, str]] = []  # per file: {run_id: spelling} (mixlaw.runs.run_ids)
    used: set[int] = set()
    all_runs: list[str] = []
    matched: list[str] = []
    for f in files:  # read and join every file first: the --meta coverage is checked before anything is written
        label = _label(f, files)
        res: dict[str, Any] = {"file": label, "runs": 0, "rows": 0, "new_runs": 0, "mapped": 0, "skipped": 0}
        table: pd.DataFrame | None = None
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
            runs = [str(r) for r in pd.unique(table["run_id"])]
            spelled.append(of_table(table))  # as the file wrote them (attrs do not survive the joins)
            if meta_table is not None:
                table, hit = join_meta(table, meta_table, {r: f for r in runs}, label)
                used |= hit
                matched += [r for r in runs if meta_table.for_run(r, f)]
            all_runs += runs
            table = complete_tokens(table)
            if opts.selects or opts.derive:
                table = select_rows(table, opts, source=label)
            if opts.derive:  # derived values are checked like read ones (a negative loss is refused, not stored)
                table = _check_derived(table, opts, label, allow_nan=allow_nan, allow_missing=allow_missing)
        except InputError as exc:
            if not keep_going:
                raise
            res["status"] = f"error: {exc}"
            table = None
        spelled += [{}] * (len(results) + 1 - len(spelled))
        results.append(res)
        tables.append(table)
    base: pd.DataFrame | None = None
    if meta_table is not None:
        base, hit = base_runs(meta_table, set(all_runs))
        if all(t is not None for t in tables):  # a file that failed may hold the runs the other rows name
            check_coverage(meta_table, used | hit, all_runs, matched)
    with RunStore(store) as st:
        for res, table, spelling in zip(results, tables, spelled, strict=True):
            if table is None:
                if on_file is not None:
                    on_file(res)
                continue
            try:
                sources = dict(table.attrs.get("column_sources", {}))
                skipped = list(table.attrs.get("skipped_names", ()))
                table.attrs.clear()  # the store reads every column: no attrs to deep-copy on each access
                schedules = None
                if lr_table is not None:
                    from mixlaw.runs.lr_table import read_lr_table

                    schedules = read_lr_table(lr_table, table, spellings=spelling, source=res["file"])
                summary = st.ingest_table(
                    table, res["file"], replace=replace, validated=True, schedules=schedules, allow_nan=allow_nan,
                    spellings=spelling,
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
            if on_file is not None:
                on_file(res)
        if base is not None and meta_table is not None:
            res = {"file": f"{meta_table.source} (base runs)", "runs": 0, "rows": 0, "new_runs": 0, "mapped": 0,
                   "skipped": 0}  # fmt: skip
            summary = st.ingest_table(base, res["file"], replace=replace, validated=True, allow_nan=allow_nan)
            res.update(summary)
            res["columns"] = [c for c in base.columns if c not in ("run_id", "step")]
            res["loss_columns"] = [c for c in base.columns if str(c).startswith("loss")]
            res["status"] = "ok"
            results.append(res)
            if on_file is not None:
                on_file(res)
    failed = [r for r in results if r.get("status") != "ok"]
    return {
        "store": str(store),
        "files": results,
        "runs": sum(r["runs"] for r in results),
        "rows": sum(r["rows"] for r in results),
        "new_runs": sum(r["new_runs"] for r in results),
        "failed": len(failed),
    }


def _check_derived(
    table: pd.DataFrame, opts: TableOptions, label: str, *, allow_nan: bool, allow_missing: bool
) -> pd.DataFrame:
    """The table after ``--derive``, validated like a table read from the file: a derived loss ≤ 0, negative tokens
    or a non-finite value is one error naming the file, the row, the column and the run, and nothing is stored. A
    derived cell may be missing only where the log itself is sparse (a derived value of a missing cell)."""
    read_cols = [c for c in table.columns if c not in opts.derive]
    sparse = bool(allow_missing) or bool(table[read_cols].isna().to_numpy().any())
    lines = source_lines(table)
    rows = np.asarray(lines) if lines is not None else np.arange(1, len(table) + 1)
    attrs = dict(table.attrs)
    table.attrs.clear()
    try:
        out = validate_table(table, label, allow_nan=allow_nan, allow_missing=sparse, rows=rows)
    except InputError as exc:
        at = np.flatnonzero(rows == exc.row) if exc.row is not None else np.zeros(0, dtype=np.int64)
        run = f" of run {table['run_id'].iloc[int(at[0])]!r}" if at.size and "run_id" in table.columns else ""
        col = exc.column if exc.column is not None else ", ".join(opts.derive)
        msg = str(exc).split(" in ", 1)[0] if exc.file or exc.row is not None or exc.column else str(exc)
        raise InputError(f"{msg} after --derive {col}{run}", file=label, row=exc.row, column=exc.column) from None
    finally:
        table.attrs.update(attrs)
    out.attrs.update(attrs)
    return out
