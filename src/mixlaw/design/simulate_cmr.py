"""Simulated CPT runs with a known CMR law (Gu et al., arXiv:2407.17467; laws.md §6): a truth for tests,
benchmarks and probe-design studies of the critical mixture ratio (:mod:`mixlaw.decide.cmr`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.laws.cmr_law import CMRLaw

__all__ = ["simulate_cmr_runs"]


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
