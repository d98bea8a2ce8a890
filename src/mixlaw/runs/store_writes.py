"""The write side of the :class:`~mixlaw.runs.store.RunStore`: evaluations appended to a run and whole tables
ingested, each in one ``BEGIN IMMEDIATE`` transaction (written completely or not at all)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs import run_ids
from mixlaw.runs.schema import RUN_LEVEL_COLUMNS, RunMeta, is_weight_column, validate_schedule, validate_table
from mixlaw.runs.store_ingest import infer_run_metas

__all__ = ["StoreWrites"]


class StoreWrites:
    """Writing methods of :class:`~mixlaw.runs.store.RunStore` (a mixin: it uses the store's transactions)."""

    path: str
    _con: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _put_run: Callable[..., RunMeta]

    def append_evals(
        self,
        run_id: str,
        rows: pd.DataFrame | Sequence[Mapping[str, Any]],
        *,
        source: str | None = None,
        allow_nan: bool = False,
        replace: bool = False,
    ) -> int:
        """Append evaluations of one run in ONE transaction.

        Parameters
        ----------
        run_id
            A run already in the store (:meth:`put_run` first).
        rows
            DataFrame or list of dicts with ``step`` and any of ``tokens``, ``lr``, ``loss``, ``loss_<set>``,
            ``tokens_<domain>``, ``compute_flops`` and other numeric columns. A ``run_id`` column, if
            present, must
            equal ``run_id``. Run-level columns (``n_params``, ``w_*``, ...) belong in :class:`RunMeta`.
        source
            Label for error messages (default ``append_evals(<run_id>)``).
        allow_nan
            Accept empty cells (they are not stored). Non-finite values are never stored.
        replace
            Overwrite values at steps already stored (merging columns) instead of refusing them.

        Returns
        -------
        int
            Number of rows (steps) written.

        Raises
        ------
        InputError
            Unknown run, invalid rows, or a ``(run_id, step)`` already stored (nothing is written then).
        """
        src = source or f"append_evals({run_id})"
        if isinstance(rows, pd.DataFrame):
            df = rows.copy()
        else:
            try:
                df = pd.DataFrame(list(rows))
            except (TypeError, ValueError) as exc:
                raise InputError(f"expected rows as a DataFrame or a list of dicts, got {exc} in {src}") from None
        if "run_id" in df.columns:
            other = [v for v in df["run_id"].astype(object) if str(v) != run_id]
            if other:
                raise InputError(f"expected run_id {run_id!r} in every row, got {other[0]!r} in {src}:run_id")
        df["run_id"] = run_id
        if "step" not in df.columns:
            raise InputError(f"expected a column 'step', got columns {list(df.columns)} in {src}:step")
        bad = [c for c in df.columns if c in RUN_LEVEL_COLUMNS or is_weight_column(str(c))]
        if bad:
            raise InputError(
                f"expected evaluation columns (run-level ones go in RunMeta), got {bad[0]!r} in {src}:{bad[0]}"
            )
        table = validate_table(df, src, allow_nan=False, allow_missing=allow_nan, require_loss=False)
        with self._tx() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise InputError(f"expected a run in the store (put_run first), got unknown run_id {run_id!r}")
            self._write_evals(con, table, src, replace=replace)
        return len(table)

    def _write_evals(self, con: sqlite3.Connection, table: pd.DataFrame, source: str, *, replace: bool) -> None:
        value_cols = [c for c in table.columns if c not in ("run_id", "step") and table[c].dtype.kind in "fiu"]
        rids = table["run_id"].to_numpy()
        steps = table["step"].to_numpy()
        step_rows = [(str(r), int(s)) for r, s in zip(rids, steps, strict=True)]
        if replace:
            con.executemany("INSERT OR IGNORE INTO steps (run_id, step) VALUES (?, ?)", step_rows)
        else:
            # Check first so that the message names the clash; the PRIMARY KEY is the real guard.
            for rid in dict.fromkeys(r for r, _ in step_rows):
                stored = {int(x[0]) for x in con.execute("SELECT step FROM steps WHERE run_id = ?", (rid,))}
                if not stored:
                    continue
                for i, (r, st) in enumerate(step_rows):
                    if r == rid and st in stored:
                        rows = table.attrs.get("rows")
                        row = int(rows[i]) if rows is not None and len(rows) == len(table) else i + 1
                        raise InputError(
                            f"expected a new (run_id, step), got ({r!r}, {st}) already in the store "
                            f"{self.path} in {source}:{row}:step"
                        )
            try:
                con.executemany("INSERT INTO steps (run_id, step) VALUES (?, ?)", step_rows)
            except sqlite3.IntegrityError as exc:
                raise InputError(f"expected new (run_id, step) rows, got '{exc}' in {source}") from None
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        sql = f'{verb} INTO evals (run_id, step, "column", value) VALUES (?, ?, ?, ?)'
        rid_list = [r for r, _ in step_rows]
        step_list = [st for _, st in step_rows]
        for c in value_cols:
            vals = table[c].to_numpy(dtype="float64")
            ok = np.isfinite(vals)
            if ok.all():
                con.executemany(sql, zip(rid_list, step_list, itertools.repeat(c), vals.tolist()))
            else:
                idx = np.flatnonzero(ok).tolist()
                vl = vals.tolist()
                con.executemany(sql, ((rid_list[i], step_list[i], c, vl[i]) for i in idx))

    # ------------------------------------------------------------------------------------------------ ingest

    def ingest_table(
        self,
        df: pd.DataFrame,
        source: str = "<table>",
        *,
        replace: bool = False,
        allow_nan: bool = False,
        allow_missing: bool = False,
        validated: bool = False,
        schedules: Mapping[str, Mapping[str, Any]] | None = None,
        spellings: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """Validate a whole RunTable and write it in ONE transaction (the store is unchanged if anything
        fails).

        Run metadata is inferred per run from columns that must be constant within a run: ``n_params``,
        ``n_params_total``, ``phase``, ``parent_run``, ``seed``, ``schedule`` (JSON), the mixture ``w_*``,
        ``unique_tokens_*`` and every text column (stored in ``RunMeta.meta``). Such a column varying within
        a run
        is an :class:`InputError`. ``phase`` defaults to ``"cpt"`` where ``parent_run`` is given, else
        ``"pt"``.
        Every other numeric column is stored per (run, step).

        Parameters
        ----------
        df, source
            The table and its file name for messages.
        replace
            Overwrite conflicting run metadata and already-stored steps instead of refusing them.
        allow_nan, allow_missing
            Passed to :func:`~mixlaw.runs.schema.validate_table`.
        validated
            ``df`` already went through :func:`validate_table` (the readers do this); skip re-validation.
        schedules
            Optional ``{run_id: schedule}`` (e.g. from ``--lr-table``) stored as each run's schedule.
        spellings
            ``{run_id: spelling}`` of the ids as the file wrote them (:mod:`mixlaw.runs.run_ids`; default the
            table's own, from :func:`validate_table`). A run already stored under another spelling (``"a"`` and
            ``"a "``, ``1`` and ``"1"``) is refused, naming both files.

        Returns
        -------
        dict
            ``{"runs": number of runs, "rows": number of (run, step) rows, "new_runs": runs not stored
            before}``.
        """
        table = df if validated else validate_table(df, source, allow_nan=allow_nan, allow_missing=allow_missing)
        spelled = dict(spellings if spellings is not None else run_ids.of_table(table))
        metas = infer_run_metas(table, source)
        if schedules:
            unknown = sorted(set(schedules) - set(metas))
            if unknown:
                raise InputError(
                    f"expected schedules for runs in the table, got unknown run {unknown[0]!r} in {source}"
                )
            for rid, sched in schedules.items():
                m = metas[rid]
                if m.schedule is not None and validate_schedule(sched) != m.schedule:
                    raise InputError(f"expected one schedule for run {rid!r}, got two (table and lr table) in {source}")
                metas[rid] = RunMeta.from_dict({**m.to_dict(), "schedule": dict(sched)})
        eval_cols = ["run_id", "step"] + [
            c
            for c in table.columns
            if c not in ("run_id", "step")
            and c not in RUN_LEVEL_COLUMNS
            and not is_weight_column(c)
            and not c.startswith("unique_tokens_")
            and table[c].dtype.kind in "fiu"
        ]
        evals = table[eval_cols]
        new_runs = 0
        with self._tx() as con:
            named = run_ids.check(con, self.path, list(metas), spelled, source)  # before any run is written
            for meta in metas.values():
                if con.execute("SELECT 1 FROM runs WHERE run_id = ?", (meta.run_id,)).fetchone() is None:
                    new_runs += 1
                try:
                    self._put_run(con, meta, replace=replace)
                except InputError as exc:
                    raise InputError(f"{exc} (use --replace to overwrite) in {source}") from None
            self._write_evals(con, evals, source, replace=replace)
            run_ids.record(con, named)
        return {"runs": len(metas), "rows": len(table), "new_runs": new_runs}

