"""Input checks and data preparation of the mixture decisions: mixture rows, holdouts, targets with empty cells.

Every user mistake is a one-line :class:`~mixlaw.errors.InputError` naming the file, row, column or option.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.columns import mixture_groups

__all__ = [
    "MIXTURE_ATOL",
    "check_mixture",
    "holdout_folds",
    "load_runs",
    "metrics",
    "mixture_groups",
    "target_rows",
]

MIXTURE_ATOL = 1e-6


def load_runs(
    path: str | Path, *, where: str | None = None, column_map: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Read a runs table for ``mixlaw mix``: like :func:`mixlaw.api.load_table`, but empty numeric cells are kept.

    A table of runs often lacks some evaluations (the SlimPajama table has no ``github_loss`` in some rows); the
    decisions leave such rows out for that target only (:func:`target_rows`) instead of refusing the file. A
    RunStore is read as :func:`~mixlaw.api.load_table` reads it.
    """
    from mixlaw import api
    from mixlaw.runs.io import read_table

    p = Path(path)
    if p.suffix.lower() in api.STORE_SUFFIXES or not p.is_file():
        return api.load_table(p, where=where, column_map=column_map)
    try:
        df = read_table(p, column_map=column_map, allow_missing=True)
    except InputError as exc:
        if not (getattr(exc, "column", None) == "run_id" and getattr(exc, "row", None) is None):
            raise
        df = read_table(p, column_map=column_map, allow_missing=True, run_id_from_row=True)
    if where:
        from mixlaw.expr import filter_rows

        df = filter_rows(df, where)
        if len(df) == 0:
            raise InputError(f"--where {where!r}: leaves no rows of {p.name}")
    return df.reset_index(drop=True)


def check_mixture(table: pd.DataFrame, domains: Sequence[str], source: str = "table") -> None:
    """Every domain has a ``w_<domain>`` column; weights are finite, non-negative and sum to 1 within 1e-6 per row."""
    doms = list(domains)
    if len(doms) < 2 or len(set(doms)) != len(doms):
        raise InputError(f"--domains: expected at least two distinct domains, got {','.join(doms) or 'none'}")
    have = [c for c in table.columns if str(c).startswith("w_")]
    for d in doms:
        if f"w_{d}" not in table.columns:
            raise InputError(
                f"--domains {d}: {source} has no column 'w_{d}' (mixture columns: {', '.join(have) or 'none'})"
            )
    cols = [f"w_{d}" for d in doms]
    w = table[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    rid = table["run_id"].astype(str).to_numpy() if "run_id" in table else None

    def where(i: int) -> str:
        return f"{source} row {i + 1}" + (f" (run {rid[i]})" if rid is not None else "")

    bad = np.argwhere(~np.isfinite(w) | (w < 0))
    if len(bad):
        i, j = (int(v) for v in bad[0])
        raise InputError(f"{where(i)}, column {cols[j]}: expected a finite non-negative weight, got {float(w[i, j])!r}")
    s = w.sum(axis=1)
    off = np.flatnonzero(np.abs(s - 1.0) > MIXTURE_ATOL)
    if off.size:
        i = int(off[0])
        raise InputError(f"{where(i)}: the weights {'+'.join(cols)} sum to {s[i]:.9g}, expected 1 within 1e-6")


def target_rows(table: pd.DataFrame, target: str, source: str = "table") -> tuple[pd.DataFrame, int]:
    """The rows with a value of ``target`` and the number left out (empty cells); an error when none has one."""
    y = pd.to_numeric(table[target], errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(y)
    if not ok.any():
        raise InputError(f"--target {target}: no row of {source} has a value in column '{target}'")
    sub = table[ok].reset_index(drop=True)
    return sub.assign(**{target: y[ok]}), int((~ok).sum())


def holdout_folds(table: pd.DataFrame, holdout: str, domains: Sequence[str], seed: int = 0) -> list[np.ndarray]:
    """Test-row masks: one for a filter expression (safe :mod:`mixlaw.expr` grammar), K for ``mixtures:K``."""
    if holdout.startswith("mixtures:"):
        try:
            k = int(holdout.split(":", 1)[1])
        except ValueError:
            raise InputError(f"--holdout {holdout}: expected mixtures:K with an integer K >= 2") from None
        ids = mixture_groups(table, domains)
        n_mix = int(ids.max()) + 1 if ids.size else 0
        if not 2 <= k <= n_mix:
            raise InputError(f"--holdout {holdout}: expected 2 <= K <= {n_mix} (the distinct mixtures)")
        perm = np.random.default_rng(seed).permutation(n_mix)
        fold_of = np.empty(n_mix, dtype=np.int64)
        fold_of[perm] = np.arange(n_mix) % k
        masks = [fold_of[ids] == f for f in range(k)]
    else:
        from mixlaw.expr import evaluate

        try:
            mask = evaluate(table, holdout, what="--holdout")
        except InputError as exc:
            raise InputError(f"--holdout {holdout!r}: {exc}") from None
        masks = [np.asarray(pd.Series(mask, index=table.index).astype(bool), dtype=bool)]
    for m in masks:
        if m.all():
            raise InputError(f"--holdout {holdout}: leaves no training rows")
        if not m.any():
            raise InputError(f"--holdout {holdout}: selects no test rows")
    return masks


def metrics(pred: np.ndarray, obs: np.ndarray) -> dict[str, float]:
    """MAE, MRE (mean |p − o| / o), bias (signed mean relative error) and Spearman ρ over the finite predictions."""
    ok = np.isfinite(pred) & np.isfinite(obs)
    p, o = pred[ok], obs[ok]
    if not ok.any():
        return {"mae": math.nan, "mre": math.nan, "bias": math.nan, "spearman": math.nan}
    rel = (p - o) / np.abs(o)
    rho = math.nan
    if p.size >= 3 and np.ptp(p) > 0 and np.ptp(o) > 0:
        rp = pd.Series(p).rank().to_numpy()
        ro = pd.Series(o).rank().to_numpy()
        rho = float(np.corrcoef(rp, ro)[0, 1])
    return {
        "mae": float(np.mean(np.abs(p - o))),
        "mre": float(np.mean(np.abs(rel))),
        "bias": float(np.mean(rel)),
        "spearman": rho,
    }
