"""Learning-rate schedules and the LR areas of the schedule-aware laws (one package for probe training and
laws).

Modules: :mod:`~mixlaw.schedules.schedule` (the :class:`Schedule` value), :mod:`~mixlaw.schedules.areas` (S1, S2,
the PT/CPT split), :mod:`~mixlaw.schedules.multi_power` (the multi-power history columns) and
:mod:`~mixlaw.schedules.features` (all of them as RunTable columns). Nothing here imports a law: laws and the
fitting layer read these features, never the other way round.

Step convention
---------------
Steps are optimizer updates counted from 1. ``Schedule.lr(s)`` is the LR ``η_s`` applied at update ``s``
(``s = 1..total_steps``); a loss logged "at step s" is measured after ``s`` updates, so its forward area is
``S1(s) = Σ_{i=1..s} η_i``. ``lr(0) = η_0`` is the LR in force before the first update (the warm-up start,
or the peak when there is no warm-up); it is the reference of the first decrement of the annealing area.

Areas (Tissue et al., arXiv:2408.11029; Wang et al., arXiv:2505.07796)
--------------------------------------------------------------------
* forward area ``S1(s) = Σ_{i≤s} η_i`` (LR·steps, raw LR values);
* annealing momentum ``m_i = decay·m_{i−1} + (η_{i−1} − η_i)`` with ``m_0 = 0``; annealing area
  ``S2(s) = Σ_{i≤s} m_i`` (no ``(1 − decay)`` factor: the limit after a long tail is ``(η_0 − η_end)/(1 −
  decay)``, the form whose published C values are ≈ 0.3).

Every area function returns cumulative arrays of length ``T + 1`` indexed by step (index 0 is step 0, area
0), so ``s1[step]`` is the area at a logged step.

Warm-up convention (``warmup=``): ``"peak"`` (Tissue et al.: warm-up steps count at the peak LR in S1 and
add nothing to S2; the default), ``"logged"`` (Luo et al.'s multi-power law, arXiv:2503.12811: S1 sums the
actual warm-up LRs, the annealing sums start at the end of warm-up) or ``"raw"`` (every LR as logged; LR
increases give negative S2). Re-warm-up inside a continual pre-training schedule always uses the actual LRs
(laws.md §5.7 item 2).

PT/CPT split of S2 (``split=``): ``"time"`` (default): ``S2_pt = S2(T_pt)`` frozen, ``S2_cpt = S2(t) −
S2(T_pt)`` on the concatenated schedule; ``"origin"``: momentum of the PT decrements keeps accruing into
``S2_pt`` during CPT and ``S2_cpt`` only holds the momentum of decrements inside CPT. Both sum to the same
total (laws.md §5.7 item 3).
"""

from mixlaw.schedules.areas import (
    Areas,
    CptAreas,
    annealing_area,
    annealing_momentum,
    areas,
    concat_lr,
    cpt_areas,
    forward_area,
)
from mixlaw.schedules.features import (
    SCHEDULE_FEATURES,
    add_schedule_features,
    features_for_law,
    needs_schedule_features,
)
from mixlaw.schedules.multi_power import mpl_columns, multi_power_exact, multi_power_features
from mixlaw.schedules.schedule import DECAY_SHAPES, DEFAULT_DECAY, KINDS, Schedule, as_schedule

__all__ = [
    "Schedule",
    "Areas",
    "CptAreas",
    "KINDS",
    "DECAY_SHAPES",
    "DEFAULT_DECAY",
    "forward_area",
    "annealing_momentum",
    "annealing_area",
    "areas",
    "cpt_areas",
    "concat_lr",
    "as_schedule",
    "add_schedule_features",
    "features_for_law",
    "needs_schedule_features",
    "SCHEDULE_FEATURES",
    "mpl_columns",
    "multi_power_features",
    "multi_power_exact",
]
