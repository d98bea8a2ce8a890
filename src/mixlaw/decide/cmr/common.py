"""Shared constants, statuses and small helpers of the CMR decision (no heavy logic here).

Bootstrap intervals of a CMR that contain their point estimate: the bias-corrected percentile (BC) interval.

A plain percentile interval describes where the resampled CMRs fall; when their distribution is shifted against
the point estimate it can exclude the point estimate itself (issue 13: ``0.497 [0.507, 0.545]``). The root of that
shift was the resampling: every resampled end-of-budget increment was centred on the curve fit, which misses the
observation the point estimate uses (:func:`mixlaw.decide.cmr.curves.bootstrap_size` now centres them on the
observations). The BC interval (Efron 1987, "Better bootstrap confidence intervals", JASA 82:171; Efron &
Tibshirani 1993, §14.3) then corrects the percentile levels for the shift that remains:

.. math:: z_0 = \\Phi^{-1}(\\hat p_0), \\qquad [\\,\\hat G^{-1}(\\Phi(2 z_0 + z_{\\alpha/2})),\\;
          \\hat G^{-1}(\\Phi(2 z_0 + z_{1-\\alpha/2}))\\,]

with ``p̂0`` the share of resamples below the point estimate (ties count half) and ``Ĝ`` their empirical
distribution. It contains the point estimate exactly when ``|z0| < z_{1−α/2}``, i.e. when the point estimate is in
the central ``1 − α`` of its own resamples (as does the plain percentile interval, only less lopsided). Beyond
that, or at the edge of a discrete reading, the end on the point's side is moved to the point estimate and
``extended`` says so: the resampling then says nothing about that side, and the decision notes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np

from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.resampling import LOST_MAX
from mixlaw.laws import Law, get_law
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["bc_interval", "BCInterval", "cmr_interval"]


STATUS_OK = "ok"
STATUS_WEAK = "weak"
STATUS_NO_FEASIBLE = "no feasible ratio"
STATUS_ALL_FEASIBLE = "all ratios feasible — CMR ≥ largest tried"
STATUS_NO_ROOT = "no root in budget"
STATUS_LAW_ABOVE_1 = "CMR law exceeds 1 at this budget"
STATUS_LAW_BELOW_0 = "CMR law below 0 at this budget"
#: ``tolerance_status`` of a boundary that the observations overruled (the pipeline calls such a decision weak).
STATUS_TOL_OVERRULED = "model-free crossing (the ratio law's boundary lies outside the observed bracket)"
MIN_RATIOS_CMR_LAW = 3  # the CMR law has three parameters

#: A decision is ``weak`` when a candidate ratio's ΔL_gen fit explains less than this share of the variance of
#: its own increments (the CMR paper's Table 3 reports R² ≥ 0.87 for every ΔL_gen fit).
R2_MIN = 0.9
#: ... or when more than this share of the bootstrap resamples gave no CMR (the share that makes any interval weak).
BOOT_LOST_MAX = LOST_MAX

DEFAULT_LAMBDAS: tuple[float, ...] = (100.0, 300.0, 1000.0, 3000.0, 7000.0, math.inf)
DEFAULT_EPSILONS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1)


class Unmet(StrEnum):
    """A criterion of the CMR paper's feasibility rule that a domain share fails (laws.md §6.4)."""

    TOLERANCE = "tolerance"
    """The general loss rises by more than ε at the budget: ``ΔL_gen(T_max) > ε``."""
    DOMAIN_GAIN = "domain_gain"
    """The domain loss does not improve: ``ΔL_dom(T_max) ≥ 0``."""
    TURN = "turn"
    """The turning point is not inside the budget: ``T0 > T_max`` (or none, or one the data contradict)."""


def unmet_criteria(
    dloss_general: float, dloss_domain: float | None, epsilon: float, turn_in_budget: bool | None
) -> list[Unmet]:
    """THE feasibility rule of a domain share (CMR paper, laws.md §6.4): feasible when the list is empty.

    A share is feasible at a budget ``T_max`` when ``ΔL_gen(T_max) ≤ ε``, ``ΔL_dom(T_max) < 0`` and its turning
    point ``T0 ≤ T_max``. ``dloss_domain=None`` or ``turn_in_budget=None``: that criterion is not judged (no domain
    law; increments relative to the control, where a turning point means the gap to it closing). A NaN increment
    fails its criterion. The per-ratio table (:func:`mixlaw.decide.cmr.decision.ratio_rows`) and the query of an
    unseen share (:meth:`mixlaw.decide.cmr.result.SizeCMR.assess_ratio`) both decide by this function and render
    their reasons from its codes.
    """
    out = []
    if not dloss_general <= epsilon:
        out.append(Unmet.TOLERANCE)
    if dloss_domain is not None and not dloss_domain < 0:
        out.append(Unmet.DOMAIN_GAIN)
    if turn_in_budget is False:
        out.append(Unmet.TURN)
    return out


def tolerance_reason(dloss_general: float, epsilon: float, note: str = "") -> str:
    """The text of :attr:`Unmet.TOLERANCE`."""
    return f"general loss rises {dloss_general:+.4f} > ε = {epsilon:g} at the budget{note}"


def domain_reason(dloss_domain: float) -> str:
    """The text of :attr:`Unmet.DOMAIN_GAIN`."""
    return f"domain loss does not improve ({dloss_domain:+.4f})"


def check_args(
    epsilon: float, lagrange_mult: float, budget_tokens: float | None, bootstrap: int, level: float = 0.95
) -> None:
    """One-line errors for impossible settings."""
    if not 0 < level < 1:
        raise InputError(f"--level {level}: expected a number in (0, 1)")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"epsilon must be a finite number ≥ 0, got {epsilon}")
    if not lagrange_mult > 0:
        raise InputError(f"lagrange_mult must be > 0 or inf, got {lagrange_mult}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"budget_tokens must be > 0, got {budget_tokens}")
    if bootstrap < 0:
        raise InputError(f"bootstrap must be ≥ 0, got {bootstrap}")


@dataclass(frozen=True)
class CMRSettings:
    """How one size's CMR is decided: the settings every stage of the per-size pipeline reads.

    :func:`mixlaw.decide.cmr.critical_mixture_ratio` builds one from its arguments (their meaning is documented
    there) and hands the same object to every size, to the other reading and to the held-out checks.

    Parameters
    ----------
    epsilon
        Tolerated rise of the general loss at the budget (nats/token), ``>= 0``.
    lagrange_mult
        λ of the stationarity condition (``inf``: ``T0`` at the peak of ``ΔL_gen``), ``> 0``.
    budget_tokens, token_unit
        CPT budget in tokens and tokens per ``T`` unit (``None``: from the runs, and ``budget / 100``).
    ratio_law, c_method
        The ratio law (or ``"auto"``) and how ``ratio_exp`` finds its offset (``"fit"`` or ``"corr_grid"``).
    pin_zero
        Pin ``ΔL(0) = 0`` in the increment laws.
    fit_loss
        ``"l2"`` (exact profiled least squares) or ``"huber"`` (engine fits).
    level
        Coverage of the bootstrap intervals, in (0, 1).
    t0_search_factor
        How far beyond the budget (× the budget) ``T0`` is searched.
    batched
        Fit all resamples of a size in one solve per law (``False``: one by one, the reference).
    solver
        Iteration caps of every fit (:class:`~mixlaw.options.SolverOptions`).
    """

    epsilon: float = 0.05
    lagrange_mult: float = math.inf
    budget_tokens: float | None = None
    token_unit: float | None = None
    ratio_law: str = "auto"
    c_method: str = "fit"
    pin_zero: bool = False
    fit_loss: str = "l2"
    level: float = 0.95
    t0_search_factor: float = 10.0
    batched: bool = True
    solver: SolverOptions = DEFAULT_SOLVER

    def __post_init__(self) -> None:
        check_args(self.epsilon, self.lagrange_mult, self.budget_tokens, 0, self.level)
        if self.c_method not in ("fit", "corr_grid"):
            raise InputError(f"c_method must be 'fit' or 'corr_grid', got {self.c_method!r}")


@lru_cache(maxsize=256)
def _law_cached(name: str, options: tuple[tuple[str, Any], ...]) -> Law:
    return get_law(name, **dict(options))


def law_of(name: str, **options: Any) -> Law:
    """``get_law`` from the registry, memoised per (name, options): the decision asks for the same few laws
    thousands of times, and a registry lookup scans the law modules."""
    return _law_cached(name, tuple(sorted(options.items())))


def status_too_few(k: int = MIN_RATIOS_CMR_LAW) -> str:
    """Status when the CMR law cannot be fitted."""
    return f"too few ratios to fit (need ≥ {k})"


def evaluate(law: Law, x: Mapping[str, Any], params: Mapping[str, float]) -> np.ndarray:
    """The law's prediction at ``x``: through its separable form in numpy when it declares one (the decision
    evaluates thousands of small curves; same values as ``law.evaluate``, which is used otherwise, on writable
    float64 copies since pandas may hand out read-only views)."""
    xx = {k: np.array(v, dtype=np.float64, copy=True) for k, v in x.items()}
    design = getattr(law, "linear_design", None)
    if callable(design) and getattr(law, "from_profile", None) is None:
        pts = law.profile_points()  # type: ignore[attr-defined]
        names, cols = design(xx, {k: np.asarray(float(params[k])) for k in pts})
        out = np.asarray(cols @ np.array([float(params[k]) for k in names]), dtype=np.float64)
        return out.reshape(np.broadcast_shapes(*(v.shape for v in xx.values())))
    return law.evaluate(xx, params)


def r2_mse(y: np.ndarray, yhat: np.ndarray) -> tuple[float, float]:
    """Coefficient of determination and mean squared error of a fit."""
    resid = y - yhat
    mse = float(np.mean(resid**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return r2, mse


def size_json(size: Any) -> Any:
    """A model size as a JSON-friendly value (ints stay ints)."""
    if isinstance(size, (int, np.integer)):
        return int(size)
    if isinstance(size, (float, np.floating)):
        return int(size) if float(size).is_integer() else float(size)
    return size


def num(v: float | None) -> float | None:
    """A finite float or None."""
    return None if v is None or not math.isfinite(v) else float(v)


def is_number(v: Any) -> bool:
    """A positive finite number (a numeric model size)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)) and float(v) > 0


def input_ok(law: Law, x: Mapping[str, Any]) -> np.ndarray:
    """Where ``law`` is defined on inputs ``x`` (its own ``input_ok`` method; everywhere when it has none)."""
    fn = getattr(law, "input_ok", None)
    n = np.asarray(next(iter(x.values()))).shape
    return np.asarray(fn(x), dtype=bool) if callable(fn) else np.ones(n, dtype=bool)


_N = NormalDist()


class BCInterval(tuple[float, float]):
    """``(lo, hi)`` with ``extended``: True when an end had to be moved to the point estimate."""

    extended: bool

    def __new__(cls, lo: float, hi: float, extended: bool = False) -> BCInterval:
        obj = super().__new__(cls, (float(lo), float(hi)))
        obj.extended = bool(extended)
        return obj

    def __getnewargs__(self) -> tuple[float, float, bool]:  # type: ignore[override]  # pickled to the workers
        return (self[0], self[1], self.extended)


def bc_interval(boot: np.ndarray, point: float | None, level: float = 0.95) -> BCInterval | None:
    """The bias-corrected percentile interval of ``point`` from its bootstrap values ``boot`` (``None`` if empty).

    Without a point estimate it is the plain percentile interval. The arithmetic is
    :func:`mixlaw.fit.uncertainty.from_draws.bias_corrected_interval`, the one every decision uses."""
    from mixlaw.fit.uncertainty.from_draws import bias_corrected_interval

    iv = bias_corrected_interval(boot, point, level)
    return None if iv is None else BCInterval(iv.lo, iv.hi, iv.extended)


def cmr_interval(boot: np.ndarray, point: float | None, level: float = 0.95) -> BCInterval | None:
    """The CMR's interval from ``B`` bootstrap values: the bias-corrected percentile interval (:func:`bc_interval`),
    widened where needed to the Student-t interval ``point ± t(B−1)·sd`` on the resamples' standard deviation.

    Why: the 2.5 and 97.5 % quantiles of a few resamples sit inside the distribution's own (the range of 20 draws
    covers a new one only 19/21 = 90.5 % of the time), so a percentile interval from the default 20 resamples is
    too narrow; the t interval pays for estimating the spread from ``B`` values. With many resamples the two agree
    and the percentile interval (which follows a skewed distribution) decides. On 20 simulated grids with a known
    CMR (``tests/test_cmr_coverage_simulated.py``) this brings the 95 % answers from 16 to 19 covered."""
    iv = bc_interval(boot, point, level)
    b = np.asarray(boot, dtype=np.float64)
    if iv is None or point is None or b.size < 3:
        return iv
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + level / 2, b.size - 1)) * float(np.std(b, ddof=1))
    return BCInterval(min(iv[0], point - half), max(iv[1], point + half), iv.extended)
