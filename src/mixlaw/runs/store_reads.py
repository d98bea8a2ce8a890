"""The read side of the :class:`~mixlaw.runs.store.RunStore`: the RunTable (``to_frame``), the run list
(``runs``), exports, and the filter (``where``) applied to them."""

from __future__ import annotations

import io
import json
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.expr import filter_rows
from mixlaw.runs.schema import RunMeta, is_loss_column

__all__ = ["StoreReads", "query_frame"]

# RunTable columns that come from the run metadata (never stored as evaluations).
_META_COLUMNS = ("n_params", "n_params_total", "phase", "parent_run", "seed")


class StoreReads:
    """Reading methods of :class:`~mixlaw.runs.store.RunStore` (a mixin: it uses the store's connection)."""

    path: str
    _con: sqlite3.Connection

    def _load_metas(self) -> dict[str, RunMeta]:
        rows = self._con.execute("SELECT run_id, meta FROM runs ORDER BY rowid")
        return {r[0]: RunMeta.from_json(r[1]) for r in rows}

    def to_frame(self, where: str | None = None, *, include_schedule: bool = False) -> pd.DataFrame:
        """The RunTable: one row per (run, step) with the run's metadata broadcast onto it.

        Columns: ``run_id, step, tokens, lr, n_params, n_params_total, phase, parent_run, seed,
        w_<domain>...``,
        scalar ``meta`` entries (e.g. ``unique_tokens_<domain>``), ``loss``, ``loss_<set>...`` and any other
        stored
        columns. A run whose mixture lacks a domain another run has gets weight 0 there; a run without a
        recorded
        mixture gets NaN. Values never logged at a step are NaN.

        Parameters
        ----------
        where
            Filter over these columns in the :mod:`mixlaw.expr` grammar, e.g.
            ``"n_params > 1e8 and phase == 'cpt' and step >= 1000"`` (backticks around names with '-'), or
            ``"step == max(step, by=run_id)"`` for each run's final checkpoint. It is parsed into an expression
            tree, never evaluated as Python.
        include_schedule
            Add a ``schedule`` column holding each run's schedule as JSON (``None`` where unset).
        """
        metas = self._load_metas()
        cur = self._con.execute('SELECT run_id, step, "column", value FROM evals')
        ev = pd.DataFrame(cur.fetchall(), columns=["run_id", "step", "column", "value"])
        steps = pd.DataFrame(
            self._con.execute("SELECT run_id, step FROM steps ORDER BY run_id, step").fetchall(),
            columns=["run_id", "step"],
        )
        if len(ev):
            wide = ev.pivot(index=["run_id", "step"], columns="column", values="value")
            wide.columns.name = None
            wide = wide.reset_index()
            frame = steps.merge(wide, on=["run_id", "step"], how="left")
        else:
            frame = steps
        frame["run_id"] = frame["run_id"].astype(object)
        frame["step"] = frame["step"].astype("int64")
        value_cols = [c for c in frame.columns if c not in ("run_id", "step")]
        # run-level columns
        run_ids = frame["run_id"].to_numpy()
        domains: list[str] = []
        meta_keys: list[str] = []
        for m in metas.values():
            if m.mixture is not None:
                domains += [d for d in m.mixture.domains if d not in domains]
            meta_keys += [k for k, v in m.meta.items() if _scalar(v) and k not in meta_keys and k not in value_cols]
        per_run: dict[str, dict[str, Any]] = {}
        for rid, m in metas.items():
            d: dict[str, Any] = {
                "n_params": m.n_params,
                "n_params_total": m.n_params_total,
                "phase": m.phase,
                "parent_run": m.parent_run,
                "seed": m.seed,
            }
            for dom in domains:
                d[f"w_{dom}"] = math.nan if m.mixture is None else m.mixture.get(dom, 0.0)
            for k in meta_keys:
                v = m.meta.get(k)
                d[k] = v if _scalar(v) else None
            if include_schedule:
                d["schedule"] = None if m.schedule is None else json.dumps(m.schedule, sort_keys=True)
            per_run[rid] = d
        run_cols = list(_META_COLUMNS) + [f"w_{d}" for d in domains] + meta_keys
        if include_schedule:
            run_cols.append("schedule")
        for c in run_cols:
            vals = [per_run[r][c] for r in run_ids]
            frame[c] = _column(vals)
        lead = [c for c in ("run_id", "step", "tokens", "lr") if c in frame.columns]
        losses = sorted(c for c in value_cols if is_loss_column(c))
        rest = sorted(c for c in value_cols if c not in lead and c not in losses)
        order = lead + run_cols + losses + rest
        for c in ("tokens", "lr"):
            if c not in frame.columns:
                frame[c] = np.nan
        order = ["run_id", "step", "tokens", "lr"] + [c for c in order if c not in ("run_id", "step", "tokens", "lr")]
        rank = {rid: i for i, rid in enumerate(metas)}
        frame = frame[order]
        key = np.lexsort((frame["step"].to_numpy(), np.array([rank[r] for r in frame["run_id"]], dtype=np.int64)))
        frame = frame.iloc[key].reset_index(drop=True)
        if where is not None and str(where).strip():
            frame = query_frame(frame, where, source=self.path)
        return frame

    def runs(self, where: str | None = None) -> pd.DataFrame:
        """One row per run: metadata, ``status``, ``message``, ``n_evals``, ``last_step``, ``schedule_kind``.

        ``where`` filters over these columns (the :mod:`mixlaw.expr` grammar, as in :meth:`to_frame`).
        """
        metas = self._load_metas()
        stat = {r[0]: (r[1], r[2]) for r in self._con.execute("SELECT run_id, status, message FROM status")}
        counts = {
            r[0]: (int(r[1]), int(r[2]))
            for r in self._con.execute("SELECT run_id, COUNT(*), MAX(step) FROM steps GROUP BY run_id")
        }
        domains: list[str] = []
        meta_keys: list[str] = []
        for m in metas.values():
            if m.mixture is not None:
                domains += [d for d in m.mixture.domains if d not in domains]
            meta_keys += [k for k, v in m.meta.items() if _scalar(v) and k not in meta_keys]
        recs = []
        for rid, m in metas.items():
            n, last = counts.get(rid, (0, None))
            rec: dict[str, Any] = {
                "run_id": rid,
                "phase": m.phase,
                "n_params": m.n_params,
                "n_params_total": m.n_params_total,
                "parent_run": m.parent_run,
                "seed": m.seed,
            }
            for dom in domains:
                rec[f"w_{dom}"] = math.nan if m.mixture is None else m.mixture.get(dom, 0.0)
            rec["schedule_kind"] = None if m.schedule is None else m.schedule.get("kind")
            for k in meta_keys:
                rec[k] = m.meta.get(k) if _scalar(m.meta.get(k)) else None
            st = stat.get(rid)
            rec["status"] = None if st is None else st[0]
            rec["message"] = None if st is None else st[1]
            rec["n_evals"] = n
            rec["last_step"] = last
            recs.append(rec)
        cols = (
            ["run_id", "phase", "n_params", "n_params_total", "parent_run", "seed"]
            + [f"w_{d}" for d in domains]
            + ["schedule_kind"]
            + meta_keys
            + ["status", "message", "n_evals", "last_step"]
        )
        frame = pd.DataFrame({c: _column([r[c] for r in recs]) for c in cols})
        if where is not None and str(where).strip():
            frame = query_frame(frame, where, source=self.path)
        return frame

    def export(self, path: str | os.PathLike[str], where: str | None = None, *, include_schedule: bool = True) -> Path:
        """Write the RunTable (optionally filtered) to ``.csv``, ``.jsonl`` or ``.parquet``; returns the path.

        The export reads back with :func:`mixlaw.runs.io.read_table` and ingests into another store unchanged
        (schedules travel as a JSON ``schedule`` column unless ``include_schedule=False``).
        """
        p = Path(path)
        frame = self.to_frame(where, include_schedule=include_schedule)
        if include_schedule and "schedule" in frame.columns and frame["schedule"].isna().all():
            frame = frame.drop(columns="schedule")
        suffix = p.suffix.lower()
        if suffix == ".csv":
            data = frame.to_csv(index=False).encode("utf-8")
        elif suffix in (".jsonl", ".ndjson"):
            data = (frame.to_json(orient="records", lines=True) or "").encode("utf-8")
        elif suffix in (".parquet", ".pq"):
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise InputError(
                    f"expected pyarrow for Parquet (pip install mixlaw[parquet]), got it missing in {p}"
                ) from None
            buf = io.BytesIO()
            frame.to_parquet(buf, index=False)
            data = buf.getvalue()
        else:
            raise InputError(f"expected an export path ending in .csv, .jsonl or .parquet, got '{p.suffix}' in {p}")
        from mixlaw.safeio import atomic_write_bytes

        atomic_write_bytes(p, data)  # temp file + rename: a failed export leaves the previous file whole
        return p


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _column(vals: list[Any]) -> Any:
    """A column from Python values: int64 if all ints (within int64), float64 if numeric or all None
    (None -> NaN), else object. Never raises: a value no NumPy dtype holds keeps the column as objects."""
    non_null = [v for v in vals if v is not None]
    if not non_null:
        return np.full(len(vals), np.nan)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in non_null):
        if len(non_null) == len(vals) and all(-(2**63) <= v < 2**63 for v in non_null):
            return np.asarray(vals, dtype=np.int64)
        if all(abs(v) < 2**53 for v in non_null):
            return np.asarray([math.nan if v is None else float(v) for v in vals], dtype=np.float64)
    elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in non_null):
        if all(isinstance(v, float) or abs(v) < 2**53 for v in non_null):
            return np.asarray([math.nan if v is None else float(v) for v in vals], dtype=np.float64)
    return pd.Series(vals, dtype=object).to_numpy()


def query_frame(frame: pd.DataFrame, where: str, *, source: str = "<table>") -> pd.DataFrame:
    """The rows where the filter ``where`` holds (:mod:`mixlaw.expr` grammar); a bad filter is an
    :class:`InputError`. The filter is parsed into an expression tree of columns, literals and operators, so it
    cannot reach Python objects."""
    if not isinstance(where, str):
        raise InputError(f"expected a filter string, got {type(where).__name__}")
    try:
        res = filter_rows(frame, where)
    except InputError as exc:
        raise InputError(f"expected a filter over the columns of {source}, got {_short(where)} ({exc})") from None
    return res.reset_index(drop=True)


def _short(text: str, n: int = 120) -> str:
    r = repr(text if len(text) <= n else text[: n - 1] + "…")
    return r.encode("utf-8", "backslashreplace").decode("utf-8")
