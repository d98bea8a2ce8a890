"""Critical mixture ratio (CMR): how much domain data a continual pre-training (CPT) mix can hold.

The question: for a model size and a CPT token budget ``T_max``, what is the largest domain share ``R`` of the
CPT mix such that the domain loss improves while the general loss does not rise by more than a tolerance ``ε``?
The package answers it from runs following the CMR scaling law (Gu et al., arXiv:2407.17467; laws.md §6), with
the Data Mixing Laws view of the same question as an option (Ye et al., arXiv:2403.16952; laws.md §7.4).

Per model size (:func:`critical_mixture_ratio`), the modules in reading order:

1. :mod:`.common` — the settings (:class:`~.common.CMRSettings`), statuses, the one feasibility rule
   (:func:`~.common.unmet_criteria`) and the **increments** ``ΔL(T) = L(T) − L(0)``, optionally relative to the
   R = 0 control.
2. :mod:`.curves` — **per-ratio curves** ``ΔL_dom = α1 T^s1 + β1``, ``ΔL_gen = α2 T^s2 + α3 T^s3 + β2`` (Eq. 6) by
   exact profiled least squares (:mod:`mixlaw.fit.solver.profiled`): amplitudes in closed form, exponents searched;
   their residual bootstrap.
3. :mod:`.feasibility` — **T0**, the turning point of ``g = dΔL_dom/dT + λ dΔL_gen/dT`` (a peak, after a rise),
   checked against the observed increments; the **ratio law** at the budget, the **tolerance boundary** and the
   model-free crossing. Feasible: ``ΔL_gen(T_max) ≤ ε``, ``ΔL_dom(T_max) < 0``, ``T0 ≤ T_max``.
4. :mod:`.decision` — per-ratio verdicts, the **CMR law** ``R = α4 T^s4 + β3`` (Eq. 8) through ``(T0(R_j), R_j)``,
   and the headline ``min(CMR law at T_max, tolerance boundary)``, bracketed by the observations.
5. :mod:`.result` — :class:`SizeCMR`, :class:`CMRDecision`, the reading and bracket of a headline, the size trend.
6. :mod:`.pipeline` — one size end to end: fits, batched bootstrap, λ × ε sensitivity, ``weak`` statuses.
7. :mod:`.main` — the entry points, the request that crosses to worker processes, the held-out checks.

Uncertainty: a residual bootstrap within runs, every resample's refits batched per size. Units: tokens; the
token-axis laws use ``T = tokens / token_unit`` (default ``budget / 100``, so ``T_max = 100`` as in the paper).
"""

from __future__ import annotations

from mixlaw.decide.cmr.common import (
    DEFAULT_EPSILONS,
    DEFAULT_LAMBDAS,
    DEFAULT_SETTINGS,
    MIN_RATIOS_CMR_LAW,
    STATUS_ALL_FEASIBLE,
    STATUS_LAW_ABOVE_1,
    STATUS_LAW_BELOW_0,
    STATUS_NO_FEASIBLE,
    STATUS_NO_ROOT,
    STATUS_OK,
    STATUS_WEAK,
    CMRSettings,
    prepare_increments,
    relative_to_control,
    resolve_columns,
    status_too_few,
)
from mixlaw.decide.cmr.feasibility import (
    RatioLawFit,
    T0Result,
    critical_tokens,
    fit_ratio_law,
    model_free_crossing,
    observed_shape,
    resolve_ratio_law,
    tolerance_boundary,
)
from mixlaw.decide.cmr.main import critical_mixture_ratio, critical_mixture_ratio_by_domain
from mixlaw.decide.cmr.pipeline import cmr_size_trend
from mixlaw.decide.cmr.result import CMRDecision, SizeCMR
from mixlaw.laws.ratio_exp import corr_grid_c

__all__ = [
    "STATUS_OK", "STATUS_WEAK", "STATUS_NO_FEASIBLE", "STATUS_ALL_FEASIBLE", "STATUS_NO_ROOT", "STATUS_LAW_ABOVE_1",
    "STATUS_LAW_BELOW_0", "MIN_RATIOS_CMR_LAW", "DEFAULT_LAMBDAS", "DEFAULT_EPSILONS", "DEFAULT_SETTINGS",
    "CMRSettings", "status_too_few",
    "CMRDecision", "SizeCMR", "RatioLawFit", "T0Result", "critical_mixture_ratio", "critical_mixture_ratio_by_domain",
    "critical_tokens", "observed_shape", "fit_ratio_law", "prepare_increments",
    "relative_to_control", "resolve_columns", "resolve_ratio_law", "tolerance_boundary", "model_free_crossing",
    "corr_grid_c", "cmr_size_trend",
]  # fmt: skip
