"""The base checkpoint of CPT runs given on the command line (``--base-eval general=2.31,legal=2.87``).

CPT logs rarely hold a step-0 evaluation; the ``T = 0`` reference the CMR and the CPT laws need is then the base
checkpoint's losses, given as a one-row ``phase = pt`` run (or as ``--meta`` rows, one per model size).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mixlaw.errors import InputError

__all__ = ["add_base_eval", "parse_base_eval"]


def parse_base_eval(text: str) -> dict[str, float]:
    """``"general=2.31,legal=2.87"`` (``--base-eval``) -> ``{"loss_general": 2.31, "loss_legal": 2.87}``."""
    out: dict[str, float] = {}
    for part in str(text).split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"expected --base-eval EVAL=LOSS[,EVAL=LOSS...], got {text!r}")
        try:
            v = float(value)
        except ValueError:
            raise InputError(f"expected a number for the base loss of {name!r}, got {value.strip()!r}") from None
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"expected a finite loss >= 0 for the base loss of {name!r}, got {value.strip()!r}")
        out[name if name == "loss" or name.startswith("loss_") else f"loss_{name}"] = v
    return out


def add_base_eval(df: pd.DataFrame, text: str, run_id: str = "base") -> pd.DataFrame:
    """The base checkpoint's losses (``--base-eval general=2.31,legal=2.87``) as a ``phase = pt`` run of one row at
    step 0, tokens 0, of the table's one model size: the ``T = 0`` reference of CPT runs that log no step-0
    evaluation. A table with several sizes needs one base run per size (``--meta`` rows) instead."""
    losses = parse_base_eval(text)
    row: dict[str, Any] = {"run_id": run_id, "step": 0, "tokens": 0.0, "phase": "pt", **losses}
    if "n_params" in df.columns:
        sizes = pd.to_numeric(df["n_params"], errors="coerce").dropna().unique()
        if len(sizes) > 1:
            raise InputError(
                f"expected one model size for --base-eval, got {len(sizes)}: give each size's base run as a --meta "
                f"row (run_id, phase=pt, n_params, its losses)"
            )
        if len(sizes) == 1:
            row["n_params"] = float(sizes[0])
    if "run_id" in df.columns and (df["run_id"].astype(str) == run_id).any():
        raise InputError(f"expected no run named {run_id!r} beside --base-eval, got one in the table")
    attrs = dict(df.attrs)
    out = pd.concat([df, pd.DataFrame([row])], ignore_index=True)
    out.attrs.update({k: v for k, v in attrs.items() if k != "rows"})
    return out
