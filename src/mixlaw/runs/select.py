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
from mixlaw.runs.columns import blank_cells
from mixlaw.runs.io.rules import closest_hint

__all__ = [
    "TableOptions",
    "load_runs",
    "select_rows",
    "parse_steps",
    "parse_set",
    "apply_columns",
    "settable",
    "eval_columns",
    "STORE_SUFFIXES",
]

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
        Leave out the rows with an empty needed column instead of refusing them (``--allow-missing``). Rows that
        hold no evaluation at all (a train-loss or LR logging step) are always left out when a verb needs an eval
        column, and counted in ``attrs["notes"]``.
    meta
        A side table of run metadata (``--meta``, :func:`mixlaw.runs.meta.read_meta`) joined onto the runs.
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
    meta: str | Path | None = None

    def __post_init__(self) -> None:
        if self.every is not None and (isinstance(self.every, bool) or int(self.every) < 1):
            raise InputError(f"expected --every K with K >= 1, got {self.every!r}", column="--every")

    def meta_table(self) -> Any:
        """The ``--meta`` table read (a :class:`mixlaw.runs.meta.MetaTable`), or ``None``."""
        if self.meta is None:
            return None
        from mixlaw.runs.meta import read_meta

        return read_meta(self.meta)

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
    eval_names: bool = False,
) -> pd.DataFrame:
    """Read a table file or a RunStore and apply ``options`` (:class:`TableOptions`); a fresh RangeIndex.

    ``needed`` are the columns the verb reads (``eval_names``: eval-set names, the ``loss_`` prefix optional);
    rows that hold no evaluation at all (logging steps) are left out and counted in ``attrs["notes"]``.

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
    if opts.meta is not None:
        df = _with_meta(df, opts, None if isinstance(source, pd.DataFrame) else Path(source), name)
    from mixlaw.runs.meta import complete_tokens

    df = complete_tokens(df)
    if eval_names:
        resolved = [c if c in df.columns or f"loss_{c}" not in df.columns else f"loss_{c}" for c in needed]
        needed = [c for c in resolved if c in df.columns]  # an unknown name: the verb's own message names it
    return select_rows(df, opts, needed=needed, source=name, lr_schedules=include_schedule)


def _with_meta(df: pd.DataFrame, opts: TableOptions, path: Path | None, name: str) -> pd.DataFrame:
    """``--meta`` on a table read by a verb: run-level values joined, base runs appended, coverage checked."""
    from mixlaw.runs.meta import base_runs, check_coverage, join_meta

    meta = opts.meta_table()
    is_store = path is not None and path.suffix.lower() in STORE_SUFFIXES
    runs = [str(r) for r in pd.unique(df["run_id"])] if "run_id" in df.columns else []
    where = {r: (None if is_store else path) for r in runs}
    df, used = join_meta(df, meta, where, name)
    base, hit = base_runs(meta, set(runs))
    check_coverage(meta, used | hit, runs, [r for r in runs if meta.for_run(r, where[r])])
    if base is not None:
        attrs = dict(df.attrs)
        df = pd.concat([df, base], ignore_index=True)
        df.attrs.update({k: v for k, v in attrs.items() if k != "rows"})
    return df


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
        if k in df.columns and not settable(df, k):
            raise InputError(
                f"expected --set to add a new column or fill an empty one, got column {k!r} with values in {name}"
            )
        df[k] = v
    return df


def settable(df: pd.DataFrame, column: str) -> bool:
    """Whether ``--set column=...`` may fill an existing column: empty in every row (a store lists every run-level
    column), or ``phase`` holding only its default ``pt`` on runs without a ``parent_run``."""
    s = df[column]
    if bool(blank_cells(s).all()):
        return True
    if column == "phase":
        parents = df["parent_run"] if "parent_run" in df.columns else pd.Series(dtype=object)
        no_parent = bool(blank_cells(parents).all())
        return no_parent and bool(s.astype(str).eq("pt").all())
    return False


# ---------------------------------------------------------------------------------------------- rows


def select_rows(
    df: pd.DataFrame,
    opts: TableOptions,
    *,
    needed: Sequence[str] = (),
    source: str = "table",
    lr_schedules: bool = False,
) -> pd.DataFrame:
    """``--derive``, then ``--where``, ``--steps``, ``--every``, the needed-column check and ``--final``.

    ``lr_schedules``: runs without a schedule that log ``lr`` get one from it (:func:`logged_lr_schedules`, taken
    before logging rows are left out; ``attrs["schedule_note"]`` says so)."""
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
    notes: list[str] = list(attrs.get("notes", ()))
    if lr_schedules:
        df, note = logged_lr_schedules(df)
        if note:
            attrs["schedule_note"] = note
    present = _present(df, need)
    if need and not present.all():  # logging steps (train loss, LR) with no evaluation: not rows of this verb
        logging = ~present & ~_any_eval(df, need)
        if logging.any():
            n = int(logging.sum())
            notes.append(
                f"left out {n:,} of {len(df):,} rows with no value of {', '.join(need)}: logging steps without an "
                f"evaluation (train loss, LR)"
            )
            df, present = df[~logging], present[~logging]
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
        n = int((~present).sum())
        notes.append(f"left out {n:,} of {len(df):,} rows with an empty {' or '.join(need)} (--allow-missing)")
        df = df[present]
    if len(df) == 0:
        raise InputError(f"expected rows to work with, got none after selecting rows in {source}")
    out = df.reset_index(drop=True)
    out.attrs.update({k: v for k, v in attrs.items() if k != "rows"})
    if notes:
        out.attrs["notes"] = notes
    return out if lines is None else attach_lines(out, lines[df.index.to_numpy()])


def _has_value(s: pd.Series) -> pd.Series:
    v = pd.to_numeric(s, errors="coerce")
    return v.notna() & np.isfinite(v.fillna(0.0))


def eval_columns(columns: Sequence[Any]) -> list[str]:
    """The evaluation-loss columns of a table: ``loss`` and ``loss_<set>``, not the train loss."""
    return [str(c) for c in columns if (str(c) == "loss" or str(c).startswith("loss_")) and str(c) != "loss_train"]


def _any_eval(df: pd.DataFrame, need: Sequence[str]) -> np.ndarray:
    """Rows with a value in some evaluation column or some needed column: rows that are evaluations."""
    out = np.zeros(len(df), dtype=bool)
    for c in dict.fromkeys([*eval_columns(df.columns), *need]):
        out |= _has_value(df[c]).to_numpy()
    return out


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


# ---------------------------------------------------------------------------------------------- logged LR


def logged_lr_schedules(df: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """A ``schedule`` for every run that has none but logs its ``lr``: the per-step table ``{"kind": "table",
    "lr": [η_1, ..., η_T], "lr0": η_0}`` interpolated linearly between the logged steps (held at the ends), so
    the LR areas (S1, S2) and the multi-power history follow the LR the run actually used. Returns the table and
    a note naming how many runs got one (``None`` when none did)."""
    if "lr" not in df.columns or "run_id" not in df.columns or "step" not in df.columns:
        return df, None
    lr = pd.to_numeric(df["lr"], errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(lr).any():
        return df, None
    import json

    step = pd.to_numeric(df["step"], errors="coerce").to_numpy(dtype=np.float64)
    runs = df["run_id"].astype(str).to_numpy()
    has = np.zeros(len(df), dtype=bool)
    if "schedule" in df.columns:
        has = ~blank_cells(df["schedule"])
    made: dict[str, str] = {}
    gaps: list[int] = []
    for rid in pd.unique(runs):
        pos = runs == rid
        if has[pos].any():
            continue
        ok = pos & np.isfinite(lr) & np.isfinite(step)
        if not ok.any():
            continue
        order = np.argsort(step[ok], kind="stable")
        s_log, lr_log = step[ok][order], lr[ok][order]
        last = int(np.nanmax(step[pos]))
        if last < 1:
            continue
        table = np.interp(np.arange(1, last + 1, dtype=np.float64), s_log, lr_log)
        lr0 = float(np.interp(0.0, s_log, lr_log))
        made[str(rid)] = json.dumps({"kind": "table", "lr": [float(v) for v in table], "lr0": lr0})
        gaps.append(int(np.max(np.diff(s_log))) if s_log.size > 1 else last)
    if not made:
        return df, None
    attrs = dict(df.attrs)
    df = df.copy()
    df.attrs.clear()
    old = df["schedule"].astype(object) if "schedule" in df.columns else pd.Series(None, index=df.index, dtype=object)
    # object dtype: every row of a run holds a reference to the run's one JSON string. A string column (pandas 3's
    # default, Arrow-backed) would copy each run's whole per-step table into every one of its rows.
    df["schedule"] = pd.Series([made.get(r, v) for r, v in zip(runs, old.to_numpy(), strict=True)], index=df.index,
                               dtype=object)  # fmt: skip
    df.attrs.update(attrs)
    note = (
        f"LR schedule of {len(made)} run(s) without one taken from the logged lr (per step, interpolated between "
        f"logged steps at most {max(gaps)} apart)"
    )
    return df, note
