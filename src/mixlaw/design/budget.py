"""Compute accounting for probe designs: what a run costs and what a budget buys.

The default cost of a training run is the dense-transformer estimate (Kaplan et al. 2020, arXiv:2001.08361;
Hoffmann et al. 2022, arXiv:2203.15556)

.. math:: C = 6 \\, N \\, D

with ``N`` the non-embedding (or, for a mixture-of-experts model, the *active*) parameter count and ``D`` the
training tokens; evaluation is not counted. A user cost replaces it: a callable ``cost(n_params, tokens)`` or a
table column (:func:`costs_from_column`). Budgets are given in FLOPs (``"3e15"``, ``"3e15flops"``), in GPU-hours at
a stated FLOP/s (``"12gpu-h"`` with ``flops_per_s``, or ``"12gpu-h@4e14"``), or in *target-run equivalents*
(``"2.0x-target"``: twice the cost of one run at the target size).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mixlaw.errors import InputError

__all__ = [
    "Budget",
    "CostFn",
    "SizeSpec",
    "costs_from_column",
    "measured_cost",
    "flops_6nd",
    "parse_budget",
    "parse_count",
    "resolve_sizes",
]

CostFn = Callable[[float, float], float]
"""``cost(n_params, tokens) -> FLOPs`` (or any additive unit the budget is stated in)."""

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


def flops_6nd(n_params: float, tokens: float) -> float:
    """Training FLOPs ``6 N D`` of a dense transformer (``N`` non-embedding or active parameters).

    Parameters
    ----------
    n_params
        Non-embedding (dense) or active (MoE) parameter count ``N``.
    tokens
        Training tokens ``D``.
    """
    return 6.0 * float(n_params) * float(tokens)


def parse_count(text: str | float, what: str = "--sizes") -> float:
    """``"25k"`` → 25000, ``"1.6m"`` → 1.6e6, ``"7b"`` → 7e9, ``"3e5"`` → 3e5 (``InputError`` otherwise)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _COUNT.match(str(text))
        if m is None:
            raise InputError(f"{what}: expected a count such as 25k, 1.6m or 3e5, got {text!r}")
        value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what}: expected a positive count, got {text!r}")
    return value


@dataclass(frozen=True)
class SizeSpec:
    """One model size of a design: its label, the probe size that trains it, its parameters, tokens and cost.

    ``n_params`` is what the cost and the law use (non-embedding, or active); ``probe_size`` is the named size of
    :data:`mixlaw.probe.model.SIZES` that trains it (``None`` for a size no probe model has, e.g. a target
    larger than every named size).
    """

    label: str
    n_params: float
    tokens: float
    cost: float
    probe_size: str | None = None


def _probe_counts() -> dict[str, int]:
    from mixlaw.probe.model import SIZES, n_params_of

    return {s: n_params_of(s) for s in SIZES}


def resolve_sizes(
    labels: Sequence[str],
    *,
    tokens_per_param: float = 20.0,
    tokens: Mapping[str, float] | float | None = None,
    cost: CostFn | None = None,
    probe: bool = True,
    tolerance: float = 0.15,
) -> tuple[list[SizeSpec], list[str]]:
    """Sizes from their labels, with tokens and cost; also the notes on how labels were matched to probe models.

    A label that names a probe size (``"50k"``) is that model with its exact non-embedding count; a plain count
    (``"400k"``, ``"3.5e5"``) is matched to the probe size nearest in log parameters when ``probe`` is true (a note
    says so when they differ by more than ``tolerance``), else it is used as it is. Tokens per run are
    ``tokens_per_param · N`` unless ``tokens`` gives them (one number, or per label).
    """
    counts = _probe_counts() if probe else {}
    out: list[SizeSpec] = []
    notes: list[str] = []
    cost_fn = cost or flops_6nd
    for label in labels:
        lab = str(label).strip()
        if lab in counts:
            n, probe_size = float(counts[lab]), lab
        else:
            n = parse_count(lab)
            probe_size = None
            if counts:  # nearest named model; "debug" only when asked for by name
                probe_size = min((s for s in counts if s != "debug"), key=lambda s: abs(math.log(counts[s] / n)))
                off = counts[probe_size] / n - 1.0
                if abs(off) > tolerance:
                    notes.append(
                        f"size {lab}: nearest probe model is {probe_size} ({counts[probe_size]:,} parameters, "
                        f"{off:+.0%}); costs use the probe model"
                    )
                n = float(counts[probe_size])
        if isinstance(tokens, Mapping):
            if lab not in tokens:
                raise InputError(f"--tokens: no token budget for size {lab}")
            d = float(tokens[lab])
        elif tokens is not None:
            d = float(tokens)
        else:
            d = float(tokens_per_param) * n
        if not (math.isfinite(d) and d > 0):
            raise InputError(f"size {lab}: expected a positive token budget, got {d!r}")
        c = float(cost_fn(n, d))
        if not (math.isfinite(c) and c > 0):
            raise InputError(f"size {lab}: the cost function gave {c!r}, expected a positive finite cost")
        out.append(SizeSpec(lab, n, d, c, probe_size))
    if len({s.label for s in out}) != len(out):
        raise InputError(f"--sizes: expected distinct sizes, got {list(labels)}")
    return out, notes


@dataclass(frozen=True)
class Budget:
    """A compute budget in the cost's unit (FLOPs by default) and how it was stated."""

    flops: float
    text: str
    unit: str  # "flops" | "gpu-h" | "x-target"

    cost_unit: str = "FLOPs"  # the unit of the cost function: FLOPs, or a user cost column's name

    def describe(self) -> str:
        return f"{self.flops:.3g} {self.cost_unit} ({self.text})"


_BUDGET = re.compile(
    r"^\s*(?P<v>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?P<u>x-?target|gpu-?h(?:ours?)?|flops?)?"
    r"\s*(?:@\s*(?P<r>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?))?\s*$",
    re.IGNORECASE,
)


def parse_budget(
    text: str | float,
    *,
    target_cost: float | None = None,
    flops_per_s: float | None = None,
    cost_unit: str = "FLOPs",
) -> Budget:
    """A budget from text: ``"3e15"`` / ``"3e15flops"`` (FLOPs), ``"12gpu-h"`` (GPU-hours at ``flops_per_s``, or
    ``"12gpu-h@4e14"``), ``"2.0x-target"`` (multiples of ``target_cost``, the cost of one target-size run).

    Raises
    ------
    InputError
        Unreadable text, a non-positive value, GPU-hours without a FLOP/s, or target multiples without a target.
    """
    raw = str(text)
    m = _BUDGET.match(raw)
    if m is None:
        raise InputError(f"--budget: expected FLOPs (3e15), GPU-hours (12gpu-h@4e14) or 2.0x-target, got {raw!r}")
    v = float(m.group("v"))
    unit = (m.group("u") or "flops").lower().replace("-", "")
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"--budget: expected a positive budget, got {raw!r}")
    if unit.startswith("xtarget"):
        if target_cost is None:
            raise InputError(f"--budget {raw}: target-run multiples need the target size (--target-size)")
        return Budget(v * float(target_cost), raw, "x-target", cost_unit)
    if unit.startswith("gpuh"):
        if cost_unit != "FLOPs":
            raise InputError(
                f"--budget {raw}: a GPU-hour budget needs the 6·N·D FLOP cost; with a measured cost "
                f"({cost_unit}) give the budget in {cost_unit} or as target-run multiples (2.0x-target)"
            )
        rate = float(m.group("r")) if m.group("r") else flops_per_s
        if rate is None or not (math.isfinite(rate) and rate > 0):
            raise InputError(f"--budget {raw}: GPU-hours need a FLOP/s (--flops-per-s, or {v:g}gpu-h@4e14)")
        return Budget(v * 3600.0 * rate, raw, "gpu-h")
    if m.group("r"):
        raise InputError(f"--budget {raw}: '@FLOP/s' belongs to a GPU-hour budget")
    if m.group("u") and cost_unit != "FLOPs":
        raise InputError(f"--budget {raw}: the costs are measured in {cost_unit}, not FLOPs; drop the unit")
    return Budget(v, raw, "flops" if cost_unit == "FLOPs" else cost_unit, cost_unit)


def costs_from_column(
    table: object, column: str, *, size_column: str = "n_params", source: str = "table"
) -> dict[float, float]:
    """Mean cost per run of each size from a user cost column (e.g. measured GPU-seconds of earlier runs).

    Returns ``{n_params: cost}``; every row must hold a positive, finite cost. ``table`` is a DataFrame with one
    row per run.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a table of runs, got {type(table).__name__}", file=source)
    for col in (column, size_column):
        if col not in table.columns:
            raise InputError(f"expected a column '{col}'", file=source, column=col)
    c = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(c) | (c <= 0))
    if bad.size:
        raise InputError(
            f"expected a positive cost, got {table[column].iloc[bad[0]]!r}",
            file=source,
            row=int(bad[0]) + 1,
            column=column,
        )
    n = pd.to_numeric(table[size_column], errors="coerce").to_numpy(dtype=np.float64)
    return {float(s): float(c[n == s].mean()) for s in np.unique(n[np.isfinite(n)])}


def measured_cost(
    table: object,
    column: str,
    *,
    size_column: str = "n_params",
    tokens_column: str = "tokens",
    run_column: str = "run_id",
    source: str = "table",
) -> CostFn:
    """A cost function from measured costs of earlier runs (a column such as ``gpu_seconds`` or ``wall_s``).

    Each run contributes its last row (largest ``tokens``): the cost per training token ``c / D`` of its size. The
    per-token cost of a size is the mean over its runs, and between and beyond the measured sizes it is
    interpolated linearly in ``log N`` (the end segments' slopes extrapolate; one measured size scales as ``N``,
    the 6·N·D shape). The returned ``cost(n_params, tokens)`` is ``tokens · c_tok(n_params)``, in the column's
    unit, so a budget is then stated in that unit (a plain number) or as target-run equivalents.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a table of runs, got {type(table).__name__}", file=source)
    for col in (column, size_column, tokens_column):
        if col not in table.columns:
            raise InputError(f"expected a column '{col}' (the measured cost needs it)", file=source, column=col)
    frame = table
    if run_column in table.columns:
        order = pd.to_numeric(table[tokens_column], errors="coerce")
        frame = table.assign(_t=order).sort_values("_t", kind="stable").groupby(run_column, sort=False).tail(1)
    c = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    d = pd.to_numeric(frame[tokens_column], errors="coerce").to_numpy(dtype=np.float64)
    n = pd.to_numeric(frame[size_column], errors="coerce").to_numpy(dtype=np.float64)
    for arr, col in ((c, column), (d, tokens_column), (n, size_column)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
        if bad.size:
            row = int(frame.index[bad[0]]) + 1 if isinstance(frame.index[bad[0]], int | np.integer) else None
            raise InputError(
                f"expected a positive number, got {frame[col].iloc[bad[0]]!r}", file=source, row=row, column=col
            )
    sizes = np.unique(n)
    log_n = np.log(sizes)
    log_c = np.log(np.array([np.mean(c[n == s] / d[n == s]) for s in sizes]))

    def cost(n_params: float, tokens: float) -> float:
        x = math.log(n_params)
        if len(sizes) == 1:
            return float(tokens * math.exp(log_c[0] + (x - log_n[0])))
        if x <= log_n[0]:
            i = 0
        elif x >= log_n[-1]:
            i = len(sizes) - 2
        else:
            i = int(np.searchsorted(log_n, x)) - 1
        slope = (log_c[i + 1] - log_c[i]) / (log_n[i + 1] - log_n[i])
        return float(tokens * math.exp(log_c[i] + slope * (x - log_n[i])))

    return cost
