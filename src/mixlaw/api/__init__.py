"""The Python API behind every CLI verb: load a table, fit, predict, validate; ingest and list runs.

The CLI (:mod:`mixlaw.cli`) is a thin layer over these functions; everything it does can be scripted from here.
Every table goes through :func:`mixlaw.fit.problem.features.add_features`, so the derived inputs a law declares (LR
areas,
the multi-power history, …) are built the same way for fitting, prediction and validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.api.probe import plan_sweep, prepare_corpora, run_sweep, sweep_status
from mixlaw.errors import InputError, attach_lines, source_lines
from mixlaw.expr import derive_column, filter_rows
from mixlaw.fit import FitResult, fit_law
from mixlaw.fit.evaluate.validate import ValidationResult, validate_law
from mixlaw.fit.problem.features import add_features
from mixlaw.laws import LAWS, Law, get_law, law_names, load_law_file
from mixlaw.limits import MemoryLimit
from mixlaw.options import BootstrapOptions, FitOptions, ObjectiveOptions, SolverOptions, StartOptions
from mixlaw.runs.select import TableOptions

__all__ = [
    "BootstrapOptions",
    "FitOptions",
    "ObjectiveOptions",
    "SolverOptions",
    "StartOptions",
    "load_table",
    "fit",
    "predict",
    "validate",
    "list_laws",
    "fit_summary",
    "load_fit",
    "build_law",
    "load_law_files",
    "parse_assignments",
    "parse_options",
    "ingest",
    "list_runs",
    "export_runs",
    "read_lr_table",
    "parse_set",
    "prepare_corpora",
    "plan_sweep",
    "sweep_status",
    "run_sweep",
    "InputError",
    "decide",
    "list_decisions",
    "load_decision_files",
    "decision_report",
]

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


def _coerce(v: str) -> Any:
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def parse_options(items: Sequence[str] | None, what: str = "--law-option key=value") -> dict[str, Any]:
    """``["n_bins=8", "tie_exponents=true"]`` → ``{"n_bins": 8, "tie_exponents": True}`` (ints, floats, bools)."""
    return {k: _coerce(v) for k, v in parse_assignments(items, what).items()}


def load_law_files(paths: Sequence[str | Path] | None) -> list[str]:
    """Import users' law files (see :func:`mixlaw.laws.load_law_file`); the names of the laws they registered."""
    names: list[str] = []
    for path in paths or ():
        names += load_law_file(str(path))
    return names


def build_law(name: str | Law, options: Mapping[str, Any] | None = None) -> Law:
    r""":func:`mixlaw.laws.get_law` with option mistakes as one-line ``InputError``\ s naming the law's options."""
    try:
        return get_law(name, **dict(options or {}))
    except TypeError as exc:  # an unknown or missing keyword of the law's constructor
        import inspect

        cls = type(name) if isinstance(name, Law) else LAWS.get(name)
        params = [] if cls is None else list(inspect.signature(cls.__init__).parameters)[1:]
        known = ", ".join(p for p in params if p != "options") or "none"
        raise InputError(f"law '{name}': {exc} (options: {known})", column="--law-option") from None


def load_table(
    source: str | Path | pd.DataFrame,
    *,
    where: str | None = None,
    column_map: Mapping[str, str] | None = None,
    derive: Mapping[str, str] | None = None,
    drop_highest: int = 0,
    target: str | None = None,
    set_values: Mapping[str, Any] | None = None,
    drop: Sequence[str] = (),
    final: bool = False,
    every: int | None = None,
    steps: tuple[int | None, int | None] | str | None = None,
    allow_missing: bool = False,
    meta: str | Path | None = None,
    options: TableOptions | None = None,
) -> pd.DataFrame:
    """Load a RunTable from a file (CSV, JSONL, Parquet, TensorBoard, W&B export) or a RunStore (``*.db``).

    The table options of the CLI verbs are keywords here (``set_values``, ``drop``, ``final``, ``every``,
    ``steps``, ``allow_missing``, ``meta``; or one :class:`~mixlaw.runs.select.TableOptions` as ``options``):
    with any of them, or a file's ``target``, the rows go through :func:`mixlaw.runs.select.load_runs` (``target``
    is the needed column: logging steps without it are left out, ``attrs["notes"]`` says how many).

    Parameters
    ----------
    source
        Path of a table file or of a RunStore, or a DataFrame.
    where
        Row filter in :meth:`pandas.DataFrame.query` syntax (e.g. ``"phase == 'cpt' and n_params > 1e6"``).
    column_map
        ``{canonical: foreign}`` column renames for files.
    derive
        ``{new_column: expression}`` computed by the safe expression evaluator (:mod:`mixlaw.expr`) after renaming, e.g.
        ``{"tokens": "`Training FLOP` / (6 * n_params)"}`` (Chinchilla: D = C / 6N).
    drop_highest
        Drop the rows with the ``drop_highest`` largest ``target`` values (the Chinchilla replication drops 5).
    target
        The target column ``drop_highest`` ranks by (and the column the table options need).
    set_values, drop, final, every, steps, allow_missing, meta
        As ``--set``, ``--drop``, ``--final``, ``--every``, ``--steps`` (``"1000:5000"`` or a pair),
        ``--allow-missing`` and ``--meta`` of the CLI (:class:`~mixlaw.runs.select.TableOptions`).
    options
        All table options at once (``column_map``, ``derive`` and ``where`` given here are merged in).
    """
    extra = bool(set_values or drop or final or every or steps or allow_missing or meta is not None)
    # a file's target alone is a needed column too (as `mixlaw fit FILE --target`): logging rows are left out
    extra = extra or (target is not None and not drop_highest and not isinstance(source, pd.DataFrame))
    if options is not None or extra:
        from dataclasses import replace

        from mixlaw.runs.select import load_runs, parse_steps

        opts = options or TableOptions()
        opts = replace(
            opts,
            column_map={**opts.column_map, **(column_map or {})},
            derive={**opts.derive, **(derive or {})},
            where=where or opts.where,
            set_values={**opts.set_values, **(set_values or {})},
            drop=(*opts.drop, *drop),
            final=final or opts.final,
            every=every or opts.every,
            steps=(parse_steps(steps) if isinstance(steps, str) else steps) or opts.steps,
            allow_missing=allow_missing or opts.allow_missing,
            meta=meta if meta is not None else opts.meta,
        )
        df = load_runs(source, opts, needed=[target] if target else ())
        return _drop_highest(df, drop_highest, target, "table") if drop_highest else df
    lines = None
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

            with RunStore(str(path), read_only=True) as store:
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
            df = df.reset_index(drop=True)
            lines = source_lines(df)  # the file line of every row (index = position), for later messages
    for col, expr in (derive or {}).items():
        try:
            df[col] = derive_column(df, expr)
        except Exception as exc:  # pandas raises many types for a bad expression
            raise InputError(
                f"expected a valid expression for --derive {col}, got {expr!r} ({exc}) in {name}"
            ) from None
    if where:
        try:
            df = filter_rows(df, where)
        except Exception as exc:
            raise InputError(f"expected a valid --where filter, got {where!r} ({exc}) in {name}") from None
    if drop_highest:
        df = _drop_highest(df, drop_highest, target, name)
    if len(df) == 0:
        raise InputError(f"expected rows to work with, got none after filtering in {name}")
    out = df.reset_index(drop=True)
    return out if lines is None else attach_lines(out, lines[df.index.to_numpy()])


def _drop_highest(df: pd.DataFrame, k: int, target: str | None, name: str) -> pd.DataFrame:
    """Drop the rows with the ``k`` largest ``target`` values (``drop_highest``; CLI ``--drop-highest``)."""
    if target is None or target not in df:
        raise InputError(f"expected a target column to rank for drop_highest, got {target!r} in {name}")
    if k < 0 or k >= len(df):
        raise InputError(f"expected 0 <= drop_highest < {len(df)} rows, got {k}", column="drop_highest")
    keep = np.argsort(pd.to_numeric(df[target]).to_numpy(), kind="stable")[: len(df) - k]
    return df.iloc[np.sort(keep)]


def fit(
    table: pd.DataFrame,
    law: str,
    options: FitOptions | None = None,
    *,
    target: str = "loss",
    law_options: Mapping[str, Any] | None = None,
    input_map: Mapping[str, str] | None = None,
    source: str = "table",
    progress: Any = None,
    memory_limit: MemoryLimit | None = None,
    n_threads: int | None = 1,
) -> FitResult:
    """Fit ``law`` to ``table`` with :class:`~mixlaw.options.FitOptions` (see :func:`mixlaw.fit.fit_law`; ``None``:
    every default). A user's fit carries its calibrated-interval model when it bootstraps: an unset
    ``options.bootstrap.calibrate`` is ``resamples > 0`` here.

    Derived inputs the law declares (:meth:`mixlaw.laws.Law.derived_inputs`: LR areas ``s1``, ``s2``, their PT/CPT
    split, the multi-power history) are computed from each run's stored schedule when the table lacks them; rows
    where the law is undefined (zero forward area before the first update) are left out
    (:func:`mixlaw.fit.problem.features.add_features`).
    """
    law_obj = build_law(law, law_options)
    table = add_features(table, law_obj, input_map=input_map)
    opts, bs = (FitOptions() if options is None else options), (options or FitOptions()).bootstrap
    opts = opts if bs.calibrate is not None else opts.replace(bootstrap=bs.replace(calibrate=bs.resamples > 0))
    return fit_law(law_obj, table, opts, target=target, input_map=input_map, source=source, progress=progress,
                   memory_limit=memory_limit, n_threads=n_threads)  # fmt: skip


def fit_summary(result: FitResult) -> dict[str, Any]:
    """The fit as one JSON-ready dict without the bulky per-start table and bootstrap draws (``mixlaw fit --json``)."""
    d = result.to_dict()
    d.pop("starts", None)
    if "bootstrap" in d:
        d["bootstrap"].pop("params", None)
    return d


def load_fit(path: str | Path) -> FitResult:
    """Read a fit saved with ``--out`` / :meth:`FitResult.to_json`."""
    from mixlaw.safeio import read_text

    p = Path(path)
    return FitResult.from_json(read_text(p, "fit JSON"), source=str(p))


def predict(
    result: FitResult,
    *,
    at: Mapping[str, float] | None = None,
    table: pd.DataFrame | None = None,
    level: float = 0.95,
    interval: str = "confidence",
    method: str = "auto",
) -> dict[str, Any]:
    """Predict at one point (``at``) or at every row of a table (with per-run MAE and MRE when observed), each with
    its ``level`` interval (``lo``/``hi``) from the fit's bootstrap draws (:mod:`mixlaw.fit.predict`; ``method``
    of prediction intervals: auto, calibrated, bootstrap)."""
    from mixlaw.fit.predict import predict_point, predict_rows

    if (at is None) == (table is None):
        raise InputError("expected exactly one of at (one point) or table (rows)")
    if at is not None:
        return predict_point(result, at, level=level, interval=interval, method=method)
    if table is None:  # unreachable: exactly one of at/table was checked above
        raise InputError("expected exactly one of at (one point) or table (rows)")
    table = add_features(table, result.law, input_map=result.input_map)
    return predict_rows(result, table, level=level, interval=interval, method=method)


def validate(
    table: pd.DataFrame,
    law: str,
    options: FitOptions | None = None,
    *,
    scheme: str = "leave-largest-out",
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    size_column: str = "n_params",
    order_column: str = "tokens",
    group_column: str | None = None,
    quantile: float = 0.75,
    law_options: Mapping[str, Any] | None = None,
    holdout: str | None = None,
    largest: int | None = None,
    level: float = 0.95,
    interval: str = "prediction",
    coverage: bool = False,
    method: str = "auto",
) -> ValidationResult:
    """Held-out extrapolation check on the featured table: :func:`mixlaw.fit.evaluate.validate.validate_law`, whose
    arguments these are (``options``: the fold fits' :class:`~mixlaw.options.FitOptions`)."""
    table = add_features(table, build_law(law, law_options), input_map=input_map)
    return validate_law(law, table, options, scheme=scheme, target=target, input_map=input_map,  # type: ignore[arg-type]
                        size_column=size_column, order_column=order_column, group_column=group_column,
                        quantile=quantile, law_options=law_options, holdout=holdout, largest=largest, level=level,
                        interval=interval, coverage=coverage, method=method)  # fmt: skip


def list_laws() -> list[dict[str, Any]]:
    """Every registered law: name, formula, inputs, parameters, citation, options (name, default, help)."""
    from mixlaw.laws import describe_law

    return [describe_law(name) for name in law_names()]


# ---------------------------------------------------------------------- runs (mixlaw ingest / mixlaw runs)
def parse_set(items: Sequence[str] | None) -> dict[str, Any]:
    """``--set column=value`` items as a dict (:func:`mixlaw.runs.select.parse_set`, the one parser)."""
    from mixlaw.runs.select import parse_set as _parse_set

    return _parse_set(items)


def read_lr_table(path: str | Path, table: pd.DataFrame | None = None) -> dict[str, dict[str, Any]]:
    """Per-run LR schedules from a dense ``run_id, step, lr`` table (:func:`mixlaw.runs.lr_table.read_lr_table`)."""
    from mixlaw.runs.lr_table import read_lr_table as read

    return read(path, table)


def ingest(
    file: str | Path,
    store: str | Path,
    *,
    column_map: Mapping[str, str] | Sequence[str] | None = None,
    lr_table: str | Path | None = None,
    set_values: Mapping[str, Any] | None = None,
    allow_nan: bool = False,
    allow_missing: bool = False,
    replace: bool = False,
    fmt: str | None = None,
    run_id: str | None = None,
    run_id_from_row: bool = False,
    evalset_column: str | None = None,
    drop: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Validate a run log and add it to a RunStore, all or nothing (``mixlaw ingest``); ``fmt``, ``run_id``,
    ``run_id_from_row``, ``evalset_column`` and ``drop`` are :func:`mixlaw.runs.io.read_table`'s. ``column_map`` is
    ``{canonical: foreign}`` or the CLI's ``["canonical=foreign"]``. Returns the store's summary plus ``file``,
    ``store`` and ``loss_columns``."""
    from mixlaw.runs.io import parse_column_map, read_table
    from mixlaw.runs.store import RunStore

    file = Path(file)
    cmap = dict(column_map) if isinstance(column_map, Mapping) else parse_column_map(column_map)
    table = read_table(file, column_map=cmap, set_values=dict(set_values or {}), allow_nan=allow_nan,
                       allow_missing=True if allow_missing else None, fmt=fmt, run_id=run_id,
                       run_id_from_row=run_id_from_row, evalset_column=evalset_column, drop=drop)  # fmt: skip
    schedules = read_lr_table(lr_table, table) if lr_table is not None else None
    with RunStore(store) as st:
        summary = st.ingest_table(
            table, file.name, replace=replace, validated=True, schedules=schedules, allow_nan=allow_nan
        )
    loss_cols = [c for c in table.columns if c == "loss" or c.startswith("loss_")]
    return {"file": str(file), "store": str(store), **summary, "loss_columns": loss_cols}


def list_runs(store: str | Path, where: str | None = None) -> pd.DataFrame:
    """One row per run of a RunStore (``mixlaw runs``), filtered with a safe row filter (:mod:`mixlaw.expr`)."""
    from mixlaw.runs.store import RunStore

    if not Path(store).exists():
        raise InputError(f"expected an existing store, got no such file in {store}")
    with RunStore(store, read_only=True) as st:  # a read never switches the file's journal mode
        return st.runs(where)


def export_runs(store: str | Path, path: str | Path, where: str | None = None) -> tuple[Path, int | None]:
    """Write a store's RunTable to ``.csv``/``.jsonl``/``.parquet``; ``(path written, rows for a CSV)``."""
    from mixlaw.runs.store import RunStore

    if not Path(store).exists():
        raise InputError(f"expected an existing store, got no such file in {store}")
    with RunStore(store, read_only=True) as st:
        out = st.export(path, where)
    return out, (len(pd.read_csv(out)) if out.suffix.lower() == ".csv" else None)


def _fitted_rows(table: pd.DataFrame, result: FitResult) -> pd.DataFrame:
    """The rows :func:`fit` fitted: ``table`` with the law's derived inputs, through the one feature path."""
    return add_features(table, result.law, input_map=result.input_map).reset_index(drop=True)


def fit_report(
    result: FitResult,
    table: pd.DataFrame,
    path: str | Path,
    *,
    validate: str | None = None,
) -> dict[str, Any]:
    """Write the HTML report of a fit (:func:`mixlaw.report.fit_report.write_fit_report`) for ``mixlaw fit --report``.

    ``table`` is the table given to :func:`fit`; schedule features are added the same way. With ``validate`` (a
    scheme of :func:`validate`) the law is refitted on each fold with the fit's target, law options, seed and
    bootstrap (size and scheme) and the held-out errors are added to the report. Returns ``{"report": path,
    "validation": {...} | None}``.
    """
    from mixlaw.report.fit_report import write_fit_report

    rows = _fitted_rows(table, result)
    validation = None
    if validate is not None:
        has_tokens = "tokens" in rows and pd.to_numeric(rows["tokens"], errors="coerce").notna().any()
        # curves without a token count roll out in steps
        order_column = "step" if validate == "rollout" and not has_tokens and "step" in rows else "tokens"
        boot = BootstrapOptions()
        if result.n_bootstrap:  # every held-out prediction gets an interval from a bootstrap like the fit's
            boot = BootstrapOptions(resamples=result.n_bootstrap,
                                    scheme=result.settings.get("bootstrap_scheme") or "runs")  # fmt: skip
        validation = validate_law(
            result.law_name,
            rows,
            scheme=validate,  # type: ignore[arg-type]
            target=result.target,
            input_map=result.input_map or None,
            law_options=result.law_options,
            order_column=order_column,
            options=FitOptions(bootstrap=boot, seed=result.settings.get("random_state")),
        )
    out = write_fit_report(result, rows, path, validation=validation)
    summary = None
    if validation is not None:
        summary = {"scheme": validate, "mre": validation.mre, "intervals": validation.interval_note()}
    return {"report": str(out), "validation": summary}


def decide(table: pd.DataFrame | None, name: str, options: Any = None, *, intervals: Any = None,
           solver: Any = None, progress: Any = None) -> Any:
    """Run the registered decision ``name`` (``mixlaw decisions``) on a RunTable: a frozen DecisionResult (status,
    reason codes, answers with intervals, ``to_json``). ``options``: its options dataclass or a mapping of its fields;
    ``intervals``: :class:`~mixlaw.options.IntervalOptions`; ``solver``: :class:`~mixlaw.options.SolverOptions`."""
    from mixlaw.decide.run import run_decision

    return run_decision(table, name, options, intervals=intervals, solver=solver, progress=progress)


def list_decisions() -> list[dict[str, Any]]:
    """Every registered decision with its summary and options (``mixlaw decisions``)."""
    from mixlaw.decide.run import describe_decisions

    return describe_decisions()


def load_decision_files(paths: Sequence[str | Path] | None) -> list[str]:
    """Run users' decision files (each defines and registers a Decision); the names they added."""
    from mixlaw.decide.registry import load_decision_file

    return [n for p in paths or () for n in load_decision_file(p)]


def decision_report(result: Any, path: str | Path) -> Path:
    """Write the HTML report of a decision result (atomically)."""
    from mixlaw.report.decision_page import decision_report as write

    return write(result, path)
