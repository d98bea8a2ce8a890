"""Which parameter directions of a fitted CPT law the data do not determine (laws.md §5.7 item 5)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.decide.cpt.fits import LawFit
from mixlaw.errors import InputError


def identifiability(
    fit: Any,
    table: pd.DataFrame,
    *,
    input_map: Mapping[str, str] | None = None,
    cond_limit: float = 1e8,
    share_limit: float = 0.1,
    near_optimal: float = 1.0,
    spread_factor: float = 3.0,
) -> dict[str, Any]:
    """Flag parameter directions the data do not determine (laws.md §5.7 item 5).

    Computes the Jacobian of the (log-)predictions on the table's rows with respect to the internal
    (unconstrained) parameters at the fitted values, scales its columns to unit norm and takes its SVD.
    Directions with singular value below ``s_max/√cond_limit`` are near-null; every parameter carrying more
    than ``share_limit`` of such a direction is flagged. This local test misses distant optima, so with the
    engine's per-start table (``FitResult.starts``) every parameter whose values among the converged starts
    within ``(1 + near_optimal)×`` the best objective span more than ``spread_factor`` (ratio for positive
    parameters) is flagged as multi-modal. With bootstrap parameters, the relative spread (IQR/|median|) per
    parameter is reported too (> 1 is flagged). Returns ``{"flagged": [...], "condition": κ,
    "null_directions": [...], "multimodal": {...}, "spread": {...}, "message": str}``.
    """
    lf = LawFit.from_any(fit)
    law = lf.law
    imap = dict(input_map or {})
    cols = {c: imap.get(c, c) for c in law.inputs}
    missing = [v for v in cols.values() if v not in table.columns]
    if missing:
        raise InputError(f"identifiability needs columns {missing}")
    x = {c: torch.from_numpy(np.array(table[v], dtype=np.float64)) for c, v in cols.items()}
    u0 = torch.as_tensor(law.to_internal(lf.params)).reshape(1, -1)

    def f(u: torch.Tensor) -> torch.Tensor:
        p = law.to_natural(u.reshape(1, -1))
        y = law.log_predict(x, p) if law.fit_space == "log" else law.predict(x, p)
        return y.reshape(-1)

    J = torch.autograd.functional.jacobian(f, u0.reshape(-1)).numpy()  # (n, P)
    norms = np.linalg.norm(J, axis=0)
    flagged: list[str] = [n for n, v in zip(law.param_names, norms, strict=True) if v == 0]
    Js = J / np.where(norms > 0, norms, 1.0)
    _, s, vt = np.linalg.svd(Js, full_matrices=False)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else math.inf
    null_dirs = []
    for i, si in enumerate(s):
        if si == 0 or s[0] / si > math.sqrt(cond_limit):
            comp = vt[i] ** 2
            names = [law.param_names[j] for j in np.argsort(-comp) if comp[j] > share_limit]
            null_dirs.append(names)
            flagged.extend(n for n in names if n not in flagged)
    multimodal: dict[str, float] = {}
    starts = getattr(fit, "starts", None)
    if starts is None and isinstance(fit, Mapping):
        starts = fit.get("starts")
    if starts is None and isinstance(fit, LawFit) and fit.record is not None:
        starts = fit.record.get("starts")
    if starts is not None:
        st = pd.DataFrame(starts)
        if {"objective", "status"} <= set(st.columns) and set(law.param_names) <= set(st.columns):
            ok = st[st["status"] == "converged"]
            if len(ok):
                best = float(ok["objective"].min())
                near = ok[ok["objective"] <= best + max(abs(best), 1e-300) * near_optimal]
                for n in law.param_names:
                    v = near[n].to_numpy(dtype=np.float64)
                    lo, hi = float(np.min(v)), float(np.max(v))
                    pos = law.spec(n).lower >= 0 and lo > 0
                    ratio = hi / lo if pos else (hi - lo) / max(abs(float(lf.params[n])), 1e-12) + 1.0
                    if ratio > spread_factor:
                        multimodal[n] = ratio
                        if n not in flagged:
                            flagged.append(n)
    spread: dict[str, float] = {}
    if lf.bootstrap is not None and lf.bootstrap.shape[0] >= 5:
        for j, n in enumerate(law.param_names):
            b = lf.bootstrap[:, j]
            med = float(np.median(b))
            iqr = float(np.quantile(b, 0.75) - np.quantile(b, 0.25))
            spread[n] = iqr / abs(med) if med != 0 else math.inf
            if spread[n] > 1.0 and n not in flagged:
                flagged.append(n)
    msg = (
        "all parameters identifiable on these data"
        if not flagged
        else f"not identifiable on these data (interpret only jointly): {', '.join(flagged)}"
    )
    return {
        "flagged": flagged,
        "condition": cond,
        "null_directions": null_dirs,
        "multimodal": multimodal,
        "spread": spread,
        "message": msg,
    }
