"""Run tables → increments ``ΔL(T) = L(T) − L(0)`` per CPT evaluation, and the reading relative to the R = 0 control.

Simulated CPT runs with a known CMR law: a truth for tests, benchmarks and probe-design studies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.laws.cmr_law import CMRLaw

__all__ = ["resolve_columns", "prepare_increments", "relative_to_control", "has_control", "simulate_cmr_runs"]


@dataclass(frozen=True)
class _Columns:
    general: str
    domain: str
    ratio: str
    size: str | None


def _resolve_loss_column(table: pd.DataFrame, name: str, what: str) -> str:
    for cand in (name, f"loss_{name}"):
        if cand in table.columns:
            return cand
    from mixlaw.runs.io.rules import closest_hint

    known = [c for c in table.columns if str(c).startswith("loss_")]
    hint = closest_hint(name, map(str, table.columns), table.attrs.get("column_sources"))
    raise InputError(f"{what} eval column '{name}' not found; loss columns: {', '.join(known) or 'none'}{hint}")


def resolve_columns(
    table: pd.DataFrame,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
) -> _Columns:
    """Resolve the user's column names (``loss_`` prefix optional; ratio defaults to ``w_<domain>``)."""
    gen = _resolve_loss_column(table, general_eval, "general")
    dom = _resolve_loss_column(table, domain_eval, "domain")
    if gen == dom:
        raise InputError(f"general and domain eval are the same column '{gen}'")
    if ratio_column is None:
        dname = dom[len("loss_") :] if dom.startswith("loss_") else dom
        for cand in (f"w_{dname}", "ratio"):
            if cand in table.columns:
                ratio_column = cand
                break
        else:
            ws = [c for c in table.columns if str(c).startswith("w_")]
            raise InputError(
                f"no ratio column w_{dname} for domain eval '{dom}'; pass --ratio-column (mixture columns: "
                f"{', '.join(ws) or 'none'})"
            )
    elif ratio_column not in table.columns:
        raise InputError(f"ratio column '{ratio_column}' not found", column=ratio_column)
    if size_column is None:
        has = "n_params" in table.columns and bool(pd.to_numeric(table["n_params"], errors="coerce").notna().any())
        size_column = "n_params" if has else None  # a store lists n_params even when no run records it
    elif size_column not in table.columns:
        raise InputError(f"size column '{size_column}' not found", column=size_column)
    return _Columns(gen, dom, ratio_column, size_column)


def prepare_increments(table: pd.DataFrame, cols: _Columns) -> pd.DataFrame:
    """CPT rows with their increments from the ``T = 0`` reference.

    Returns one row per CPT evaluation with columns ``size, run_id, ratio, tokens, loss_general, loss_domain,
    dloss_general, dloss_domain, ref_general, ref_domain`` (``tokens`` counted from the reference).
    """
    if "tokens" not in table.columns:
        raise InputError(
            "expected a 'tokens' column (tokens seen at each step), got none: give tokens_per_step (or batch_size "
            "and seq_len) in a --meta table, or --derive tokens=step*TOKENS_PER_STEP"
        )
    df = table.copy()
    if "run_id" not in df.columns:
        df["run_id"] = [
            f"{s}|{r}" for s, r in zip(df[cols.size] if cols.size else [""] * len(df), df[cols.ratio], strict=True)
        ]
    df["_size"] = df[cols.size] if cols.size else "all"
    is_pt = df["phase"].astype(str).eq("pt") if "phase" in df.columns else pd.Series(False, index=df.index)
    # A table holding CPT runs for several domains tags each run with its domain (probe runs: ``domain``):
    # keep the runs of this domain only (a run of another domain has w_<this domain> = 0, not a ratio-0 run).
    dname = cols.domain[len("loss_") :] if cols.domain.startswith("loss_") else cols.domain
    if "domain" in df.columns:
        this = df["domain"].astype(str).eq(dname)
        if (this & ~is_pt).any():
            df, is_pt = df[this | is_pt], is_pt[this | is_pt]
    for c in (cols.general, cols.domain, "tokens"):
        bad = ~np.isfinite(pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise InputError(_empty_cell_message(df, pos, c, int(bad.sum())))
    pt = df[is_pt]
    cpt = df[~is_pt]
    if cpt.empty:
        raise InputError(
            "expected continual pre-training runs, got every row with phase = pt (a run without parent_run counts "
            "as pt): give phase=cpt and parent_run in a --meta table, or --set phase=cpt"
        )
    out = []
    for run_id, run in cpt.groupby("run_id", sort=False):
        run = run.sort_values("tokens")
        ratios = pd.to_numeric(run[cols.ratio], errors="coerce").to_numpy(dtype=np.float64)
        ratios_pos = (
            ratios[run["tokens"].to_numpy(dtype=np.float64, copy=True) > run["tokens"].min()]
            if len(run) > 1
            else ratios
        )
        if not np.all(np.isfinite(ratios_pos)):
            raise InputError(f"run '{run_id}' has a missing ratio", column=cols.ratio)
        if np.ptp(ratios_pos) > 1e-9:
            raise InputError(f"run '{run_id}' changes its ratio during CPT", column=cols.ratio)
        ratio = float(ratios_pos[-1])
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"run '{run_id}': ratio must be in [0, 1], got {ratio}", column=cols.ratio)
        size = run["_size"].iloc[0]
        first = run.iloc[0]
        step0 = ("step" in run.columns and first["step"] == 0) or first["tokens"] == 0
        if step0 and len(run) > 1:
            ref_gen, ref_dom, t_ref = (
                float(first[cols.general]),
                float(first[cols.domain]),
                float(first["tokens"]),
            )
        else:
            parent = None
            if "parent_run" in run.columns and isinstance(first["parent_run"], str):
                par = df[df["run_id"] == first["parent_run"]]
                if not par.empty:
                    parent = par.sort_values("tokens").iloc[-1]
            if parent is None:
                same = pt[pt["_size"] == size]
                if same["run_id"].nunique() == 1:
                    parent = same.sort_values("tokens").iloc[-1]
            if parent is None:
                raise InputError(
                    f"expected a T = 0 reference for run '{run_id}', got no step-0 evaluation, no parent_run in the "
                    f"table and no single phase=pt run of its size: give the base checkpoint's losses with "
                    f"--base-eval {_base_hint(cols)}, or as a --meta row (run_id, phase=pt, {cols.general}, "
                    f"{cols.domain})"
                )
            ref_gen, ref_dom = float(parent[cols.general]), float(parent[cols.domain])
            t_par = float(parent["tokens"])
            t_ref = t_par if float(first["tokens"]) > t_par > 0 else 0.0
        out.append(
            pd.DataFrame(
                {
                    "size": size,
                    "run_id": run_id,
                    "ratio": ratio,
                    "tokens": run["tokens"].to_numpy(dtype=np.float64) - t_ref,
                    "loss_general": run[cols.general].to_numpy(dtype=np.float64),
                    "loss_domain": run[cols.domain].to_numpy(dtype=np.float64),
                    "ref_general": ref_gen,
                    "ref_domain": ref_dom,
                }
            )
        )
    if not out:
        raise InputError("expected continual pre-training runs with evaluations, got none after selecting rows")
    inc = pd.concat(out, ignore_index=True)
    inc["dloss_general"] = inc["loss_general"] - inc["ref_general"]
    inc["dloss_domain"] = inc["loss_domain"] - inc["ref_domain"]
    return inc


def _empty_cell_message(df: pd.DataFrame, pos: int, column: str, n_bad: int) -> str:
    """``expected a value of 'tokens' at run 'a' step 100, got an empty cell (3 rows) ...``: plain words, no repr."""
    raw = df[column].iloc[pos]
    v = pd.to_numeric(pd.Series([raw]), errors="coerce").iloc[0]
    got = "an empty cell" if pd.isna(v) else f"{float(v):g}"
    rid = df["run_id"].iloc[pos] if "run_id" in df.columns else "?"
    step = df["step"].iloc[pos] if "step" in df.columns else None
    at = f"run '{rid}'" + ("" if step is None or pd.isna(step) else f" step {int(step)}")
    more = f" (and {n_bad - 1} more rows)" if n_bad > 1 else ""
    fix = {
        "tokens": "; give tokens_per_step (or batch_size and seq_len) in a --meta table, or --derive "
        "tokens=step*TOKENS_PER_STEP",
    }.get(column, "; leave such rows out with --where, or --allow-missing")
    return f"expected a value of '{column}' at {at}, got {got}{more}{fix}"


def _base_hint(cols: _Columns) -> str:
    def short(c: str) -> str:
        return c[len("loss_") :] if c.startswith("loss_") else c

    return f"{short(cols.general)}=LOSS,{short(cols.domain)}=LOSS"


def has_control(inc: pd.DataFrame) -> bool:
    """Whether every model size has an R = 0 (general data only) control run."""
    return bool(inc.groupby("size")["ratio"].apply(lambda r: bool((r == 0).any())).all())


def relative_to_control(inc: pd.DataFrame) -> pd.DataFrame:
    """Increments relative to the R = 0 control of the same size: ``ΔL − ΔL_control`` at the same tokens.

    The control's increments are interpolated linearly in log tokens (its evaluations sit at the same steps in a
    sweep). What remains is the effect of the domain share itself, not the continued learning (or forgetting)
    that general replay alone causes. The control rows are dropped (their relative increment is zero by
    construction); ``dloss_*_abs`` keep the absolute increments.
    """
    if not has_control(inc):
        missing = sorted(map(str, set(inc["size"]) - set(inc.loc[inc["ratio"] == 0, "size"])))
        raise InputError(
            f"--relative-to-control needs an R = 0 control run for every size; missing for {', '.join(missing)}"
        )
    parts = []
    for _size, d in inc.groupby("size", sort=False):
        ctrl = d[d["ratio"] == 0].groupby("tokens", as_index=False)[["dloss_general", "dloss_domain"]].mean()
        ctrl = ctrl.sort_values("tokens")
        tc = np.log1p(ctrl["tokens"].to_numpy(dtype=np.float64))
        out = d[d["ratio"] != 0].copy()
        tt = np.log1p(out["tokens"].to_numpy(dtype=np.float64))
        for c in ("dloss_general", "dloss_domain"):
            out[f"{c}_abs"] = out[c]
            out[c] = out[c] - np.interp(tt, tc, ctrl[c].to_numpy(dtype=np.float64))
        parts.append(out)
    return pd.concat(parts, ignore_index=True)


def simulate_cmr_runs(
    ratios: Sequence[float],
    cmr_params: Mapping[str, float],
    *,
    token_unit: float = 2e8,
    t_units: np.ndarray | None = None,
    amp: float = 0.004,
    noise: float = 0.0,
    n_params: int = 460_000_000,
    domain: str = "code",
    loss_general: float = 2.0,
    loss_domain: float = 2.5,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """CPT runs (a RunTable) whose general-loss increment peaks exactly at ``T0(R)`` of a given CMR law.

    For each ratio ``R``: ``ΔL_gen(T) = a·T^0.5 − a/(2√T*)·T`` with its peak at ``T* = T0(R)`` of the inverse CMR
    law (so with ``λ = ∞`` the decision must recover the law), ``ΔL_dom(T) = −0.05·R^0.3·T^0.4``, plus Gaussian
    ``noise`` on both; one run per ratio with its step-0 evaluation, ``T`` in units of ``token_unit`` tokens
    (default evaluations at T = 5, 10, …, 100). A known truth for tests, benchmarks and probe-design studies.
    """
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    law = CMRLaw(token_unit=token_unit)
    t = np.arange(5.0, 101.0, 5.0) if t_units is None else np.asarray(t_units, dtype=np.float64)
    rows: list[dict[str, Any]] = []
    for r in ratios:
        ts = float(law.t0_tokens(r, cmr_params)) / token_unit
        if not math.isfinite(ts):
            raise InputError(f"ratio {r} has no T0 under the given CMR law")
        dg = amp * np.sqrt(t) - amp / (2 * math.sqrt(ts)) * t + noise * rng.standard_normal(t.size)
        dd = -0.05 * r**0.3 * t**0.4 + noise * rng.standard_normal(t.size)
        run = f"s{n_params}-{domain}-r{r:.4f}"
        base = {"run_id": run, "n_params": n_params, "phase": "cpt", f"w_{domain}": r, "w_general": 1 - r,
                "domain": domain}  # fmt: skip
        rows.append(base | {"step": 0, "tokens": 0.0, "loss_general": loss_general, f"loss_{domain}": loss_domain})
        for i, ti in enumerate(t):
            rows.append(
                base
                | {
                    "step": (i + 1) * 100,
                    "tokens": ti * token_unit,
                    "loss_general": loss_general + dg[i],
                    f"loss_{domain}": loss_domain + dd[i],
                }
            )
    return pd.DataFrame(rows)
