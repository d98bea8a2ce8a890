"""Continual pre-training decisions (``mixlaw cpt``): plans, fitted CPT laws, trajectories, optima, critical points."""

from mixlaw.decide.cpt import (
    CptPlan,
    critical_point,
    critical_s1_constant,
    load_fits,
    load_plan,
    optimize,
    predict_plan,
    turning_length,
)
from mixlaw.decide.cpt.critical_draws import critical_point_interval, turning_length_interval
from mixlaw.decide.cpt.fits import CptFits
from mixlaw.schedules import Schedule

__all__ = [
    "CptFits",
    "CptPlan",
    "Schedule",
    "critical_point",
    "critical_point_interval",
    "critical_s1_constant",
    "load_fits",
    "load_plan",
    "optimize",
    "predict_plan",
    "turning_length",
    "turning_length_interval",
]
