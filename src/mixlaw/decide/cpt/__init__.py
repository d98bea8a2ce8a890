"""Continual pre-training decisions from fitted schedule-aware laws (Wang et al., arXiv:2505.07796; laws.md
§5).

What it answers, for a **plan** (PT schedule, branch step / loss potential, CPT schedule, CPT peak LR,
replay ratio):

* :func:`predict_plan` — the predicted loss trajectory of every fitted eval set (D_pt, D_cpt, OOD
  combinations and the weighted composite) over the whole PT + CPT run, with bootstrap interval bands when
  the fits carry bootstrap parameters;
* :func:`optimize` — the best loss potential, CPT peak LR or replay ratio for weights ``(w_pt, w_cpt)`` on the
  signed objective ``w_pt·L_pt + w_cpt·L_cpt`` at the final CPT step (laws.md §5.7 item 1), searched
  **inside a schedule family** (a 1-D grid over one hyper-parameter, never a free per-step schedule,
  laws.md §4.4 item 3);
* :func:`critical_point` and :func:`turning_length` — the PT step whose CPT curve converges back to its start,
  and the CPT steps until the D_pt loss (or the composite) returns to its start (``inf`` with a reason when it
  does not within the horizon, and the asymptotic class reported separately, laws.md §5.5);
* :func:`schedule_aware_cmr` — the critical mixture ratio under the user's CPT schedule from a fitted
  replay law;
* :func:`identifiability` — which parameter directions the data do not determine (B, E, β in particular).

Guards (laws.md §4.4): an :class:`~mixlaw.errors.ExtrapolationWarning` when a plan's peak LR exceeds the
LRs the fit saw, and when a plan keeps stepping after its LR is ≈ 0 (the annealing area keeps growing
there, so the law keeps lowering the loss although nothing is being learned).

Fits enter as :class:`LawFit` (law + natural-unit parameters + optional bootstrap parameters); anything with
``law``, ``params`` and ``bootstrap_params`` attributes (the engine's ``FitResult``) converts through
:meth:`LawFit.from_any`. A :class:`CptFits` bundle maps eval-set names to fits and names the D_pt and D_cpt
sets.
"""

from mixlaw.decide.cpt.critical import (
    CriticalPoint,
    TurningLength,
    critical_point,
    critical_s1_constant,
    turning_length,
)
from mixlaw.decide.cpt.fits import CptFits, LawFit, load_fits
from mixlaw.decide.cpt.identify import identifiability
from mixlaw.decide.cpt.plan import BaseTokens, CptPlan, load_plan, plan_areas, plan_from_dict
from mixlaw.decide.cpt.predict import OptimizeResult, optimize, optimum_vs_weight, predict_plan
from mixlaw.decide.cpt.schedule_cmr import ScheduleCMR, schedule_aware_cmr

__all__ = [
    "BaseTokens",
    "LawFit",
    "CptFits",
    "CptPlan",
    "predict_plan",
    "plan_areas",
    "optimize",
    "OptimizeResult",
    "optimum_vs_weight",
    "critical_point",
    "CriticalPoint",
    "critical_s1_constant",
    "turning_length",
    "TurningLength",
    "schedule_aware_cmr",
    "ScheduleCMR",
    "identifiability",
    "load_fits",
    "load_plan",
    "plan_from_dict",
]
