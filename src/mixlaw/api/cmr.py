"""The critical mixture ratio (``mixlaw cmr``): per domain and size, for constant-LR grids and for LR schedules."""

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio_by_domain, resolve_ratio_law
from mixlaw.decide.cpt.schedule_size import resolve_schedule_law, schedule_cmr_by_size
from mixlaw.schedules import Schedule

__all__ = [
    "CMRSettings",
    "Schedule",
    "critical_mixture_ratio_by_domain",
    "resolve_ratio_law",
    "resolve_schedule_law",
    "schedule_cmr_by_size",
]
