"""Critical mixture ratio (CMR): how much domain data a continual pre-training (CPT) mix can hold.

The question: for a model size and a CPT token budget ``T_max``, what is the largest domain share ``R`` of the
CPT mix such that the domain loss improves while the general loss does not rise by more than a tolerance ``ε``?
The package answers it from runs following the CMR scaling law (Gu et al., arXiv:2407.17467; laws.md §6), with
the Data Mixing Laws view of the same question as an option (Ye et al., arXiv:2403.16952; laws.md §7.4).

Per model size (:func:`critical_mixture_ratio`):

1. **Increments** ``ΔL(T) = L(T) − L(0)`` (:mod:`.data`), optionally relative to the R = 0 control.
2. **Per-ratio curves** ``ΔL_dom = α1 T^s1 + β1``, ``ΔL_gen = α2 T^s2 + α3 T^s3 + β2`` (Eq. 6) by exact profiled
   least squares (:mod:`.profile`, :mod:`.curves`): amplitudes in closed form, exponents searched.
3. **T0** (:mod:`.t0`): the turning point of ``g = dΔL_dom/dT + λ dΔL_gen/dT`` (a peak, after a rise), checked
   against the observed increments.
4. **Feasibility** (one rule, :func:`.common.unmet_criteria`; applied in :mod:`.decision`): ``ΔL_gen(T_max) ≤ ε``,
   ``ΔL_dom(T_max) < 0``, ``T0 ≤ T_max``.
5. **CMR law** ``R = α4 T^s4 + β3`` (Eq. 8) through ``(T0(R_j), R_j)``, clipped to [0, 1].
6. **Ratio law** at the budget and the **tolerance boundary** (:mod:`.ratio`), beside the model-free crossing.
7. Reported CMR ``min(CMR law at T_max, tolerance boundary)``; ``weak`` when the fits or the bootstrap say so.

Uncertainty: a residual bootstrap within runs, every resample's refits batched per size. Units: tokens; the
token-axis laws use ``T = tokens / token_unit`` (default ``budget / 100``, so ``T_max = 100`` as in the paper).
"""

from __future__ import annotations

from mixlaw.decide.cmr.common import (
    DEFAULT_EPSILONS,
    DEFAULT_LAMBDAS,
    MIN_RATIOS_CMR_LAW,
    STATUS_ALL_FEASIBLE,
    STATUS_LAW_ABOVE_1,
    STATUS_LAW_BELOW_0,
    STATUS_NO_FEASIBLE,
    STATUS_NO_ROOT,
    STATUS_OK,
    STATUS_WEAK,
    status_too_few,
)
from mixlaw.decide.cmr.data import prepare_increments, relative_to_control, resolve_columns, simulate_cmr_runs
from mixlaw.decide.cmr.main import critical_mixture_ratio, critical_mixture_ratio_by_domain
from mixlaw.decide.cmr.pipeline import cmr_size_trend
from mixlaw.decide.cmr.ratio import (
    RatioLawFit,
    corr_grid_c,
    fit_ratio_law,
    model_free_crossing,
    resolve_ratio_law,
    tolerance_boundary,
)
from mixlaw.decide.cmr.result import CMRDecision, SizeCMR
from mixlaw.decide.cmr.t0 import T0Result, critical_tokens, observed_shape

__all__ = [
    "STATUS_OK", "STATUS_WEAK", "STATUS_NO_FEASIBLE", "STATUS_ALL_FEASIBLE", "STATUS_NO_ROOT", "STATUS_LAW_ABOVE_1",
    "STATUS_LAW_BELOW_0", "MIN_RATIOS_CMR_LAW", "DEFAULT_LAMBDAS", "DEFAULT_EPSILONS", "status_too_few",
    "CMRDecision", "SizeCMR", "RatioLawFit", "T0Result", "critical_mixture_ratio", "critical_mixture_ratio_by_domain",
    "critical_tokens", "observed_shape", "simulate_cmr_runs", "fit_ratio_law", "prepare_increments",
    "relative_to_control", "resolve_columns", "resolve_ratio_law", "tolerance_boundary", "model_free_crossing",
    "corr_grid_c", "cmr_size_trend",
]  # fmt: skip
