"""The Python API behind every CLI verb: load a table, fit, predict, validate.

The CLI (``mixlaw.cli``) is a thin layer over these functions; everything it does can be scripted from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.fit import FitResult, fit_law
from mixlaw.fit.validate import ValidationResult, validate_law
from mixlaw.laws import get_law, law_names

__all__ = ["load_table", "fit", "predict", "validate", "list_laws", "parse_assignments"]

STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def parse_assignments(items: Sequence[str] | None, what: str = "name=value") -> dict[str, str]:
    """``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}`` (``InputError`` on a malformed item)."""
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"expected {what}, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k:
            raise InputError(f"expected {what} with a name before '=', got {item!r}")
        out[k] = v.strip().strip("'\"")
    return out


def load_table(
    source: str | Path | pd.DataFrame,
    *,
    where: str | None = None,
    column_map: Mapping[str, str] | None = None,
    derive: Mapping[str, str] | None = None,
    drop_highest: int = 0,
    target: str | None = None,
) -> pd.DataFrame:
    """Load a RunTable from a file (CSV, JSONL, Parquet, TensorBoard, W&B export) or a RunStore (``*.db``).

    Parameters
    ----------
    source
        Path of a table file or of a RunStore, or a DataFrame.
    where
        Row filter in :meth:`pandas.DataFrame.query` syntax (e.g. ``"phase == 'cpt' and n_params > 1e6"``).
    column_map
        ``{canonical: foreign}`` column renames for files.
    derive
        ``{new_column: expression}`` computed with :meth:`pandas.DataFrame.eval` after renaming, e.g.
        ``{"tokens": "`Training FLOP` / (6 * n_params)"}`` (Chinchilla: D = C / 6N).
    drop_highest
        Drop the rows with the ``drop_highest`` largest ``target`` values (the Chinchilla replication drops 5).
    target
        The target column ``drop_highest`` ranks by.
    """
    if isinstance(source, pd.DataFrame):
        df = source.copy()
        name = "table"
    else:
        path = Path(source)
        name = path.name
        if not path.exists() and not str(source).startswith("wandb://"):
            raise InputError(f"expected an existing file or store, got no such path {source}")
        if path.suffix.lower() in STORE_SUFFIXES:
            from mixlaw.runs.store import RunStore

            with RunStore(str(path)) as store:
                df = store.to_frame(where=None, include_schedule=True)
        else:
            from mixlaw.runs.io import read_table

            try:
                df = read_table(path, column_map=column_map)
            except InputError as exc:
                if not (getattr(exc, "column", None) == "run_id" and getattr(exc, "row", None) is None):
                    raise
                # A table of one row per run without ids (e.g. published fits' data): every row is its own run.
                df = read_table(path, column_map=column_map, run_id_from_row=True)
    for col, expr in (derive or {}).items():
        try:
            df[col] = df.eval(expr)
        except Exception as exc:  # pandas raises many types for a bad expression
            raise InputError(
                f"expected a valid expression for --derive {col}, got {expr!r} ({exc}) in {name}"
            ) from None
    if where:
        try:
            df = df.query(where)
        except Exception as exc:
            raise InputError(f"expected a valid --where filter, got {where!r} ({exc}) in {name}") from None
    if drop_highest:
        if target is None or target not in df:
            raise InputError(f"expected a target column to rank for --drop-highest, got {target!r} in {name}")
        if drop_highest < 0 or drop_highest >= len(df):
            raise InputError(f"expected 0 <= --drop-highest < {len(df)} rows, got {drop_highest}")
        keep = np.argsort(pd.to_numeric(df[target]).to_numpy(), kind="stable")[: len(df) - drop_highest]
        df = df.iloc[np.sort(keep)]
    if len(df) == 0:
        raise InputError(f"expected rows to work with, got none after filtering in {name}")
    return df.reset_index(drop=True)


def fit(
    table: pd.DataFrame,
    law: str,
    *,
    target: str = "loss",
    law_options: Mapping[str, Any] | None = None,
    input_map: Mapping[str, str] | None = None,
    source: str = "table",
    **settings: Any,
) -> FitResult:
    """Fit ``law`` to ``table`` (see :func:`mixlaw.fit.fit_law`).

    Laws over LR-schedule features (``s1``, ``s2``, their PT/CPT split, the multi-power history) get them computed
    from each run's stored schedule when the table lacks them; rows before the first update (zero forward area,
    where ``S1^(-alpha)`` is undefined) are left out of such fits.
    """
    law_obj = get_law(law, **dict(law_options or {}))
    missing = [c for c in law_obj.inputs if c not in table.columns and c not in (input_map or {})]
    if missing:
        from mixlaw.schedules import SCHEDULE_FEATURES, features_for_law

        if any(c in SCHEDULE_FEATURES or c.startswith("mpl_") for c in missing):
            if "schedule" not in table.columns:
                raise InputError(
                    f"law '{law_obj.name}' needs schedule features {missing}: give a RunStore (schedules are stored "
                    "per run) or a table with a 'schedule' column, or add the columns yourself"
                )
            table = features_for_law(table, law_obj)
            area = [c for c in ("s1", "mpl_s1") if c in law_obj.inputs]
            if "s1_pt" in law_obj.inputs:
                table = table.assign(_area=table["s1_pt"] + table["s1_cpt"])
                area = ["_area"]
            for col in area:
                table = table[table[col] > 0]
    return fit_law(law_obj, table, target=target, input_map=input_map, source=source, **settings)


def load_fit(path: str | Path) -> FitResult:
    """Read a fit saved with ``--out`` / :meth:`FitResult.to_json`."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"expected a readable fit JSON, got {exc.strerror} in {p}") from None
    return FitResult.from_json(text, source=p.name)


def predict(
    result: FitResult,
    *,
    at: Mapping[str, float] | None = None,
    table: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Predict at one point (``at``) or at every row of a table (with per-run MAE and MRE when observed)."""
    if (at is None) == (table is None):
        raise InputError("expected exactly one of --at or --table")
    if at is not None:
        missing = [n for n in result.law.inputs if result.input_map.get(n, n) not in at and n not in at]
        if missing:
            raise InputError(f"expected values for inputs {missing} in --at")
        value = float(result.predict({k: np.array([float(v)]) for k, v in at.items()})[0])
        return {"law": result.law_name, "at": dict(at), "predicted": value}
    if table is None:  # pragma: no cover - excluded by the check above
        raise InputError("expected --table")
    pred = result.predict(table)
    rows = pd.DataFrame({"predicted": pred})
    rows["run_id"] = table["run_id"].to_numpy() if "run_id" in table else "all"
    rows["step"] = table["step"].to_numpy() if "step" in table else 0
    observed = table[result.target].to_numpy(dtype=np.float64) if result.target in table else None
    rows["observed"] = observed if observed is not None else np.nan
    out: dict[str, Any] = {"law": result.law_name, "target": result.target}
    out["rows"] = rows[["run_id", "step", "predicted", "observed"]].to_dict(orient="records")
    if observed is not None:
        err = rows["predicted"] - rows["observed"]
        per = rows.assign(abs_err=err.abs(), rel_err=(err / rows["observed"]).abs()).groupby("run_id")
        out["per_run"] = [
            {"run_id": rid, "mae": float(g["abs_err"].mean()), "mre": float(g["rel_err"].mean())} for rid, g in per
        ]
        out["mae"] = float(err.abs().mean())
        out["mre"] = float((err / rows["observed"]).abs().mean())
    return out


def validate(table: pd.DataFrame, law: str, **kwargs: Any) -> ValidationResult:
    """Held-out extrapolation check (see :func:`mixlaw.fit.validate.validate_law`)."""
    return validate_law(law, table, **kwargs)


def list_laws() -> list[dict[str, Any]]:
    """Every registered law: name, formula, inputs, parameters, citation."""
    out = []
    for name in law_names():
        try:
            law = get_law(name)
        except InputError:  # a law whose options have no defaults cannot be listed with an instance
            continue
        out.append(
            {
                "name": name,
                "formula": law.formula,
                "inputs": list(law.inputs),
                "params": list(law.param_names),
                "fit_space": law.fit_space,
                "citation": law.citation,
            }
        )
    return out


def _fitted_rows(table: pd.DataFrame, result: FitResult) -> pd.DataFrame:
    """The rows :func:`fit` fitted, with the law's derived schedule features (the same steps as in :func:`fit`)."""
    law_obj = result.law
    missing = [c for c in law_obj.inputs if result.input_map.get(c, c) not in table.columns]
    if missing and "schedule" in table.columns:
        from mixlaw.schedules import features_for_law

        table = features_for_law(table, law_obj)
        area: list[str] = [c for c in ("s1", "mpl_s1") if c in law_obj.inputs]
        if "s1_pt" in law_obj.inputs:
            table = table.assign(_area=table["s1_pt"] + table["s1_cpt"])
            area = ["_area"]
        for col in area:
            table = table[table[col] > 0]
    return table.reset_index(drop=True)


def fit_report(
    result: FitResult,
    table: pd.DataFrame,
    path: str | Path,
    *,
    validate: str | None = None,
    **validate_options: Any,
) -> dict[str, Any]:
    """Write the HTML report of a fit (:func:`mixlaw.report.fit_report.write_fit_report`) for ``mixlaw fit --report``.

    ``table`` is the table given to :func:`fit`; schedule features are added the same way. With ``validate`` (a
    scheme of :func:`validate`) the law is refitted on each fold with the fit's target, options and seed and the
    held-out errors are added to the report. Returns ``{"report": path, "validation": {...} | None}``.
    """
    from mixlaw.report.fit_report import write_fit_report

    rows = _fitted_rows(table, result)
    validation = None
    if validate is not None:
        has_tokens = "tokens" in rows and pd.to_numeric(rows["tokens"], errors="coerce").notna().any()
        if validate == "rollout" and not has_tokens and "step" in rows:
            validate_options.setdefault("order_column", "step")  # curves without a token count roll out in steps
        validation = validate_law(
            result.law_name,
            rows,
            scheme=validate,  # type: ignore[arg-type]
            target=result.target,
            input_map=result.input_map or None,
            law_options=result.law_options,
            random_state=result.settings.get("random_state"),
            **validate_options,
        )
    out = write_fit_report(result, rows, path, validation=validation)
    summary = None if validation is None else {"scheme": validate, "mre": validation.mre}
    return {"report": str(out), "validation": summary}
