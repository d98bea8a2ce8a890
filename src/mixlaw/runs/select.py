"""The table options every verb that reads runs shares: read a file or a store with ``--map``/``--set``/``--drop``,
add ``--derive`` columns, keep the rows of ``--where``/``--steps``/``--every``/``--final``, and decide what an
empty cell in a needed column means (``--allow-missing``).

One bundle (:class:`TableOptions`) and one function (:func:`load_runs`; :func:`select_rows` for a frame in
hand); the CLI declarations are in :mod:`mixlaw.cli._table`. Filters and derived columns go through the safe
evaluator :mod:`mixlaw.expr`, never ``DataFrame.eval/query``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError, attach_lines, source_lines
from mixlaw.runs.io.rules import closest_hint

__all__ = ["TableOptions", "load_runs", "select_rows", "parse_steps", "parse_set", "apply_columns", "STORE_SUFFIXES"]

STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


@dataclass(frozen=True)
class TableOptions:
    """What to read and which rows to keep (the shared table options of every verb that reads runs).

    Parameters
    ----------
    column_map
        ``{canonical: foreign}`` renames (``--map``); an explicit name beats every automatic rule.
    set_values
        Constant columns to add (``--set``).
    drop
        Columns to leave out, by their logged or their canonical name (``--drop``).
    where
        Row filter in the safe expression language (``--where``).
    derive
        ``{column: expression}`` computed before the filter (``--derive``).
    final
        Keep each run's last evaluation (``--final``): its largest step with a value in the needed columns
        (any loss column when the verb names none).
    every
        Keep the steps that are multiples of ``every`` (``--every K``).
    steps
        ``(first, last)`` step range, inclusive, either end ``None`` (``--steps a:b``).
    allow_missing
        Leave out the rows with an empty needed column instead of refusing them (``--allow-missing``).
    """

    column_map: Mapping[str, str] = field(default_factory=dict)
    set_values: Mapping[str, Any] = field(default_factory=dict)
    drop: Sequence[str] = ()
    where: str | None = None
    derive: Mapping[str, str] = field(default_factory=dict)
    final: bool = False
    every: int | None = None
    steps: tuple[int | None, int | None] | None = None
    allow_missing: bool = False

    def __post_init__(self) -> None:
        if self.every is not None and (isinstance(self.every, bool) or int(self.every) < 1):
            raise InputError(f"expected --every K with K >= 1, got {self.every!r}", column="--every")

    @property
    def selects(self) -> bool:
        """Whether any row selector is set."""
        return bool(self.where or self.final or self.every or self.steps)


def parse_steps(text: str | None) -> tuple[int | None, int | None] | None:
    """``"1000:5000"`` -> ``(1000, 5000)``; ``"1000:"``, ``":5000"``; ``"2000"`` = that step only (inclusive)."""
    if text is None or not str(text).strip():
        return None
    s = str(text).strip()
    lo_s, sep, hi_s = s.partition(":")
    if not sep:
        hi_s = lo_s

    def num(part: str) -> int | None:
        part = part.strip().replace("_", "")
        if not part:
            return None
        try:
            v = float(part)
        except ValueError:
            raise InputError(
                f"expected --steps FIRST:LAST with integer steps, got {text!r}", column="--steps"
            ) from None
        if not math.isfinite(v) or v != round(v) or v < 0:
            raise InputError(f"expected --steps FIRST:LAST with integer steps >= 0, got {text!r}", column="--steps")
        return int(v)

    lo, hi = num(lo_s), num(hi_s)
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"expected --steps FIRST:LAST with FIRST <= LAST, got {text!r}", column="--steps")
    return lo, hi


def parse_set(items: Sequence[str] | None) -> dict[str, Any]:
    """``["n_params=1000", "phase=cpt"]`` (``--set``) -> ``{"n_params": 1000, "phase": "cpt"}``: numbers parsed."""
    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"expected --set column=value, got {item!r}")
        k, v = (p.strip() for p in item.split("=", 1))
        v = v.strip("'\"")
        if not k:
            raise InputError(f"expected --set column=value with a column name, got {item!r}")
        val: Any = v
        try:
            f = float(v)
            val = int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
        except ValueError:
            pass
        out[k] = val
    return out


# ---------------------------------------------------------------------------------------------- reading


def load_runs(
    source: str | Path | pd.DataFrame,
    options: TableOptions | None = None,
    *,
    needed: Sequence[str] = (),
    include_schedule: bool = True,
    allow_nan: bool = False,
) -> pd.DataFrame:
    """Read a table file or a RunStore and apply ``options`` (:class:`TableOptions`); a fresh RangeIndex.

    Files are read with their empty cells kept as missing values (a column no verb uses may be empty, e.g.
    ``unique_tokens_general`` of the shipped probe runs); a **needed** column (the target) with an empty cell is
    an error naming the run and step unless ``allow_missing`` leaves such rows out. A file without a run id whose
    rows are single runs (published fits' data) makes every row its own run.
    """
    opts = options or TableOptions()
    if isinstance(source, pd.DataFrame):
        df, name = apply_columns(source.copy(), opts, "table"), "table"
    else:
        path = Path(source)
        name = path.name
        if not path.exists() and not str(source).startswith("wandb://"):
            raise InputError(f"expected an existing file or store, got no such path {source}")
        if path.suffix.lower() in STORE_SUFFIXES:
            from mixlaw.runs.store import RunStore

            with RunStore(str(path), read_only=True) as store:
                df = store.to_frame(where=None, include_schedule=include_schedule)
            df = apply_columns(df, opts, name)
        else:
            df = _read_file(path, opts, allow_nan=allow_nan)
    return select_rows(df, opts, needed=needed, source=name)


def _read_file(path: Path, opts: TableOptions, *, allow_nan: bool) -> pd.DataFrame:
    from mixlaw.runs.io import read_table

    kw: dict[str, Any] = dict(
        column_map=dict(opts.column_map),
        set_values=dict(opts.set_values),
        drop=list(opts.drop),
        allow_nan=allow_nan,
        allow_missing=True,
    )
    try:
        return read_table(path, **kw)
    except InputError as exc:
        if not (getattr(exc, "column", None) == "run_id" and getattr(exc, "row", None) is None):
            raise
        return read_table(path, run_id_from_row=True, **kw)  # one row per run and no ids: every row a run


def apply_columns(df: pd.DataFrame, opts: TableOptions, name: str) -> pd.DataFrame:
    """``--map`` / ``--set`` / ``--drop`` on a frame already read (a store's RunTable)."""
    cols = [str(c) for c in df.columns]
    sources = df.attrs.get("column_sources")
    rename: dict[str, str] = {}
    for canon, foreign in opts.column_map.items():
        if foreign not in cols:
            hint = closest_hint(foreign, cols, sources)
            raise InputError(
                f"expected column {foreign!r} (from --map {canon}={foreign}), got no such column{hint} in {name}"
            )
        rename[foreign] = canon
    clash = [c for c in cols if c in set(rename.values()) and c not in rename]
    if clash:
        raise InputError(
            f"expected one column named {clash[0]!r}, got the table's own and the mapped "
            f"{opts.column_map[clash[0]]!r} (add --drop {clash[0]}) in {name}"
        )
    for c in opts.drop:
        if c not in cols:
            raise InputError(f"expected a column to drop, got unknown {c!r}{closest_hint(c, cols, sources)} in {name}")
    df = df.drop(columns=[c for c in opts.drop if c not in rename]).rename(columns=rename)
    for k, v in opts.set_values.items():
        if k in df.columns:
            raise InputError(f"expected --set to add a new column, got existing column {k!r} in {name}")
        df[k] = v
    return df


# ---------------------------------------------------------------------------------------------- rows


def select_rows(
    df: pd.DataFrame, opts: TableOptions, *, needed: Sequence[str] = (), source: str = "table"
) -> pd.DataFrame:
    """``--derive``, then ``--where``, ``--steps``, ``--every``, the needed-column check and ``--final``."""
    from mixlaw.expr import derive_column, filter_rows

    attrs = dict(df.attrs)
    lines = source_lines(df)  # each row's file line, carried through the selection for later messages
    if lines is not None:
        df = df.reset_index(drop=True)  # index = position in the file's rows
    for col, expr in opts.derive.items():
        try:
            df[col] = derive_column(df, expr)
        except Exception as exc:  # the evaluator raises InputError; pandas may raise others on odd data
            raise InputError(
                f"expected a valid expression for --derive {col}, got {expr!r} ({exc}) in {source}"
            ) from None
    if opts.where:
        try:
            df = filter_rows(df, opts.where)
        except Exception as exc:
            raise InputError(f"expected a valid --where filter, got {opts.where!r} ({exc}) in {source}") from None
    step = pd.to_numeric(df["step"], errors="coerce").to_numpy() if "step" in df.columns else None
    if (opts.steps or opts.every or opts.final) and step is None:
        raise InputError(f"expected a 'step' column for --steps / --every / --final, got none in {source}")
    keep = np.ones(len(df), dtype=bool)
    if opts.steps is not None and step is not None:
        lo, hi = opts.steps
        keep &= (step >= (-np.inf if lo is None else lo)) & (step <= (np.inf if hi is None else hi))
    if opts.every and step is not None:
        keep &= np.mod(step, int(opts.every)) == 0
    df = df[keep]
    need = [c for c in needed if c]
    for c in need:
        if c not in df.columns:
            sources = attrs.get("column_sources")
            raise InputError(
                f"expected column {c!r}, got no such column{closest_hint(c, map(str, df.columns), sources)} in {source}"
            )
    present = _present(df, need)
    if opts.final:
        df = _final_rows(df, present)
        present = np.ones(len(df), dtype=bool) if not need else _present(df, need)
    if need and not present.all():
        if not opts.allow_missing:
            i = int(np.flatnonzero(~present)[0])
            col = next(c for c in need if not _has_value(df[c]).iloc[i])
            rid, st = df["run_id"].iloc[i] if "run_id" in df else "?", df["step"].iloc[i] if "step" in df else "?"
            raise InputError(
                f"expected a value of {col!r} in every row used, got an empty cell at run {rid!r} step {st} "
                f"(leave such rows out with --allow-missing, or take each run's last evaluation with --final) "
                f"in {source}"
            )
        df = df[present]
    if len(df) == 0:
        raise InputError(f"expected rows to work with, got none after selecting rows in {source}")
    out = df.reset_index(drop=True)
    out.attrs.update({k: v for k, v in attrs.items() if k != "rows"})
    return out if lines is None else attach_lines(out, lines[df.index.to_numpy()])


def _has_value(s: pd.Series) -> pd.Series:
    v = pd.to_numeric(s, errors="coerce")
    return v.notna() & np.isfinite(v.fillna(0.0))


def _present(df: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
    if not cols:
        return np.ones(len(df), dtype=bool)
    ok = np.ones(len(df), dtype=bool)
    for c in cols:
        ok &= _has_value(df[c]).to_numpy()
    return ok


def _final_rows(df: pd.DataFrame, present: np.ndarray) -> pd.DataFrame:
    """Each run's last evaluation: the largest step among its rows with the needed values (with a loss when the
    verb needs no particular column)."""
    if "run_id" not in df.columns:
        raise InputError("expected a 'run_id' column for --final, got none")
    usable = present.copy()
    if usable.all():
        losses = [c for c in df.columns if str(c) == "loss" or str(c).startswith("loss_")]
        if losses:
            usable = np.zeros(len(df), dtype=bool)
            for c in losses:
                usable |= _has_value(df[c]).to_numpy()
    sub = df[usable]
    if len(sub) == 0:
        return sub
    step = pd.to_numeric(sub["step"], errors="coerce")
    last = step.groupby(sub["run_id"].to_numpy()).transform("max").to_numpy()
    return sub[step.to_numpy() == last]
