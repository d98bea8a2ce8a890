"""Readers: CSV, TSV, JSONL/JSON, Parquet, TensorBoard event files, W&B exports and the W&B API -> RunTable.

Every reader returns a table that went through :func:`mixlaw.runs.schema.validate_table`; every failure is an
:class:`~mixlaw.errors.InputError` naming the file (and line / row and column where possible), never another
exception type. See ``docs/runs.md`` for the formats and the column mapping.

Row numbers: CSV/TSV, W&B CSV and JSONL report the **line in the file** (CSV header = line 1); JSON arrays,
Parquet, TensorBoard and W&B API sources report the 1-based data row of the table read.

Layout: :mod:`.text` (CSV/TSV/JSONL/JSON/Parquet), :mod:`.names` (column mapping and metric-name rules),
:mod:`.tensorboard` (event files), :mod:`.wandb_export` (W&B exports and API).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mixlaw.errors import InputError, attach_lines
from mixlaw.runs.io.names import _canonical_columns, _sanitize, _to_runtable, canonical_metric_name
from mixlaw.runs.io.tensorboard import _event_files, _masked_crc, _scalars_from_event_file, _tensorboard_frame
from mixlaw.runs.io.text import _ROW, _read_csv, _read_json, _read_jsonl, _read_parquet, _read_text
from mixlaw.runs.io.trainers import default_run_id, lightning_frame, looks_like_lightning, read_trainer_state
from mixlaw.runs.io.wandb_export import _looks_like_wandb, _wandb_api_frame, _wandb_csv_to_long, read_wandb
from mixlaw.runs.run_ids import UNTYPED
from mixlaw.runs.schema import validate_table

__all__ = [
    "read_table",
    "read_wandb",
    "read_tensorboard",
    "parse_column_map",
    "canonical_metric_name",
    "FORMATS",
]
# Private names other modules and tests import from here (the module was one file before it became a package).
_REEXPORTED = (_ROW, _canonical_columns, _masked_crc, _read_csv, _read_text, _sanitize, _scalars_from_event_file)

FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "tensorboard", "wandb-csv", "wandb", "hf-trainer", "lightning")


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
        if kind in ("csv", "tsv", "wandb-csv", "lightning"):
            raw = _read_csv(Path(str(path)), delimiter="\t" if kind == "tsv" else ",")
            if kind == "wandb-csv" or (fmt is None and _looks_like_wandb(raw)):
                kind = "wandb-csv"
                raw = _wandb_csv_to_long(raw, Path(str(path)), column_map or {}, list(drop or ()))
            elif kind == "lightning" or (fmt is None and looks_like_lightning(raw, Path(str(path)))):
                kind = "lightning"
                raw = lightning_frame(raw, Path(str(path)), column_map or {}, list(drop or ()))
        elif kind == "jsonl":
            raw = _read_jsonl(Path(str(path)))
        elif kind in ("json", "hf-trainer"):
            hf = read_trainer_state(Path(str(path)), column_map or {}, list(drop or ()))
            if hf is None and kind == "hf-trainer":
                raise InputError(
                    f"expected a Hugging Face trainer_state.json with a log_history, got other JSON in {name}"
                )
            kind = "json" if hf is None else "hf-trainer"
            raw = _read_json(Path(str(path))) if hf is None else hf
        elif kind == "parquet":
            raw = _read_parquet(Path(str(path)))
        elif kind == "tensorboard":
            raw = _tensorboard_frame(
                Path(str(path)), allow_nan=allow_nan, column_map=column_map or {}, drop=list(drop or ())
            )
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
        allow_missing = kind in ("tensorboard", "wandb-csv", "wandb", "hf-trainer", "lightning")
    raw_attrs = dict(raw.attrs)
    raw.attrs.clear()  # pandas deep-copies attrs on every column access: keep them off the frame while it is worked on
    logs = ("wandb-csv", "hf-trainer", "lightning")
    if kind in logs and "run_id" not in raw.columns and run_id is None and not run_id_from_row:
        run_id = default_run_id(p) if p is not None else name  # a one-run log is named by its file (or folder)
    table = _to_runtable(
        raw,
        name,
        column_map=column_map or {},
        run_id=run_id,
        run_id_from_row=run_id_from_row,
        evalset_column=evalset_column,
        set_values=set_values or {},
        drop=[d for d in drop or () if d not in raw_attrs.get("raw_names", ())],  # raw names went at mapping
        stem=(p.stem if p is not None else name),
        already_mapped=kind in ("wandb-csv", "tensorboard", "wandb", "hf-trainer", "lightning"),
    )
    rows = table.pop(_ROW).to_numpy()
    sources = dict(raw_attrs.get("column_sources", {}))
    for canon, foreign in (column_map or {}).items():
        sources.setdefault(canon, foreign)
    out = validate_table(table, name, allow_nan=allow_nan, allow_missing=bool(allow_missing), rows=rows)
    out.attrs["column_sources"] = {c: f for c, f in sources.items() if c in out.columns and c != f}
    if kind in ("csv", "tsv", "wandb-csv", "lightning"):  # cells of no type: ids compared by text (runs.run_ids)
        out.attrs[UNTYPED] = True
    stored = set(sources.values())
    out.attrs["skipped_names"] = [f for f in raw_attrs.get("raw_names", ()) if f not in stored and f not in out.columns]
    return attach_lines(out, rows) if len(out) == len(rows) else out  # later messages name these lines


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
            "hf": "hf-trainer",
            "trainer-state": "hf-trainer",
            "pytorch-lightning": "lightning",
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
