"""The error of a *regret* extrapolated in size, measured on a nested size holdout, to widen the verdict's interval.

``mix optimize`` judges the chosen mixture against a default (uniform, natural) by their paired regret at the target
size. The paired bootstrap resamples the mixtures at the fitted sizes; it does not contain the error of extrapolating
the regret beyond them, and on real probes that error is as large as the regrets themselves (the shipped mixture
example: the chosen mixture predicted 0.013 nats better than uniform at 2.2x the largest fitted size, measured over
six seeds 0.009 worse). This module measures that error where it can be observed:

1. every law is refitted on the runs below the largest fitted size ``N_top`` and predicts the runs at ``N_top``;
2. for every pair ``(i, j)`` of those runs the regret error is
   ``e_ij = (O_i - O_j) - (P_i - P_j)`` (observed minus predicted objective difference; a common level error
   cancels), and the pair's distance is the L1 distance of the mixtures, ``d_ij = sum_k |w_ik - w_jk|``;
3. the error per unit distance is the least-squares slope of ``e^2`` on ``d^2`` through the origin,
   ``s1^2 = sum e_ij^2 / sum d_ij^2`` (pairs far apart weigh more; near-identical mixtures, seed replicates, carry
   no information about the law and are skipped);
4. the error grows linearly with the extrapolation distance in e-folds of size: at the target
   ``delta_t = ln(N_target / N_top)`` against the holdout's ``delta_h = ln(N_top / N_inner)``, so the regret of
   mixtures ``c`` and ``x`` carries an extra standard deviation ``s1 * d(c, x) * delta_t / delta_h``.

The widened interval adds that standard deviation to the paired interval's half-widths in quadrature, and
``P(chosen better)`` becomes the normal probability of the combined spread. The same refits give the objective's
own miss at ``N_top``, ``sqrt(mean (O_i - P_i)^2)`` (bias included, since a level does not cancel it); grown the
same way, it widens the intervals of the predicted objective at the target (the optimum's and each candidate's),
and each loss's own miss those of its predicted loss at the optimum.
A target inside the fitted sizes (``delta_t <= 0``) is not widened. The nested fits see fewer sizes than the full
fit, so the widening is conservative where the full fit extrapolates better than its nested fits did.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "RegretCalibStatus",
    "RegretCalibration",
    "calibrate_regret",
    "nested_from",
    "nested_refit",
    "nested_weights",
    "pair_errors",
    "widen_candidate",
    "widen_level",
]


class RegretCalibStatus(StrEnum):
    """Reason code of a :class:`RegretCalibration`."""

    CALIBRATED = "calibrated"
    """Measured on the nested holdout; the target extrapolates beyond the fitted sizes, intervals are widened."""
    INSIDE_RANGE = "inside_range"
    """The target lies within the fitted sizes: nothing to widen."""
    TOO_FEW_SIZES = "too_few_sizes"
    """Fewer than three fitted sizes: the nested fit would rest on one size."""
    TOO_FEW_RUNS = "too_few_runs"
    """Fewer than three distinct mixtures at the largest fitted size have every target loss."""
    FIT_FAILED = "fit_failed"
    """A nested fit gave no finite prediction."""
    NOT_APPLICABLE = "not_applicable"
    """The objective is a benchmark score or the law has no size input."""


_TEXT = {
    RegretCalibStatus.CALIBRATED: "regret intervals widened for the size extrapolation",
    RegretCalibStatus.INSIDE_RANGE: "the target lies within the fitted sizes; regret intervals not widened",
    RegretCalibStatus.TOO_FEW_SIZES: "fewer than 3 fitted sizes: the size-extrapolation error of the regrets is "
    "not measured, and the paired intervals do not contain it",
    RegretCalibStatus.TOO_FEW_RUNS: "fewer than 3 mixtures at the largest fitted size: the size-extrapolation "
    "error of the regrets is not measured, and the paired intervals do not contain it",
    RegretCalibStatus.FIT_FAILED: "a nested fit failed: the size-extrapolation error of the regrets is not "
    "measured, and the paired intervals do not contain it",
    RegretCalibStatus.NOT_APPLICABLE: "no size-extrapolation calibration of the regrets (benchmark objective or "
    "a size-blind law)",
}


@dataclass(frozen=True)
class RegretCalibration:
    """The regret error per unit L1 distance on the nested size holdout, and how far the target extrapolates."""

    status: RegretCalibStatus
    per_l1: float = 0.0
    """``s1``: the regret error's standard deviation per unit L1 distance at the holdout's extrapolation."""
    growth: float = 0.0
    """``delta_t / delta_h``: the target's e-folds beyond the fitted sizes over the holdout's."""
    heldout_size: float | None = None
    inner_size: float | None = None
    n_runs: int = 0
    n_pairs: int = 0
    errors: tuple[tuple[str, str, float, float], ...] = field(default=(), repr=False)
    """Per pair: the two run ids, the regret error ``e_ij`` and the distance ``d_ij``."""
    level_rms: float = 0.0
    """The objective's own error on the holdout, ``sqrt(mean (O_i - P_i)^2)`` (bias included): what a *level*
    extrapolated as far misses by, where a regret's common part cancels."""
    level_rms_by_target: tuple[tuple[str, float], ...] = ()
    """The same per target loss (unweighted), for the per-loss predictions at the target."""

    def sd(self, d: float) -> float:
        """The extra standard deviation of a regret between mixtures at L1 distance ``d`` at the target."""
        if self.status is not RegretCalibStatus.CALIBRATED:
            return 0.0
        return float(self.per_l1 * d * self.growth)

    def level_sd(self, target: str | None = None) -> float:
        """The extra standard deviation of the objective's level at the target (:attr:`level_rms` × growth), or of
        one target loss's prediction (``target``)."""
        if self.status is not RegretCalibStatus.CALIBRATED:
            return 0.0
        rms = self.level_rms if target is None else dict(self.level_rms_by_target).get(target, 0.0)
        return float(rms * self.growth)

    @property
    def text(self) -> str:
        if self.status is RegretCalibStatus.CALIBRATED:
            return (
                f"regret error on the size holdout (fitted below {self.inner_size:.3g}, predicted {self.n_runs} runs "
                f"at {self.heldout_size:.3g}): {self.per_l1:.3f} nats per unit L1 distance between mixtures; at the "
                f"target ×{self.growth:.2f} that extrapolation, so regret intervals are widened; the objective's level "
                f"missed by {self.level_rms:.3f} nats (rms) there, and its intervals are widened by that too"
            )
        return _TEXT[self.status]

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value, "per_l1": self.per_l1, "growth": self.growth,
            "heldout_size": self.heldout_size, "inner_size": self.inner_size, "n_runs": self.n_runs,
            "n_pairs": self.n_pairs, "level_rms": self.level_rms, "level_sd": self.level_sd(), "text": self.text,
        }  # fmt: skip


def pair_errors(
    observed: np.ndarray, predicted: np.ndarray, weights: np.ndarray, min_distance: float = 1e-3
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Regret errors ``e_ij`` and L1 distances ``d_ij`` of every pair of runs farther apart than ``min_distance``."""
    obs, pred, w = (np.asarray(a, dtype=np.float64) for a in (observed, predicted, weights))
    i, j = np.triu_indices(obs.size, k=1)
    d = np.abs(w[i] - w[j]).sum(axis=1)
    keep = d > min_distance
    e = (obs[i] - obs[j]) - (pred[i] - pred[j])
    return e[keep], d[keep], list(zip(i[keep].tolist(), j[keep].tolist(), strict=True))


def calibrate_regret(
    rows: Mapping[str, pd.DataFrame],
    laws: Mapping[str, Any],
    loss_weights: Mapping[str, float],
    domains: Sequence[str],
    target_size: float | None,
    *,
    size_column: str = "n_params",
    refit: Callable[[str, float], Any] | None = None,
    fit: Callable[[Any, pd.DataFrame, str], Any] | None = None,
) -> RegretCalibration:
    """Measure the regret error on the nested size holdout (module docstring).

    ``rows``: each target loss's fitted rows (with ``run_id``, ``w_<domain>`` and the size column); ``laws``: the law
    each target was fitted with (CAMEL at its reduced ``k``); ``loss_weights``: the objective ``sum_t a_t L_t``;
    ``refit(target, top)``: the target's fit redone on its rows below size ``top`` (an object with
    ``predict(rows)``, or ``None`` when it failed), e.g. :func:`nested_refit` from the point fit; or ``fit(law,
    rows, target)``: a fit from scratch on the given rows (the nested rows are passed).
    """
    if (refit is None) == (fit is None):
        raise TypeError("calibrate_regret: give exactly one of refit= and fit=")
    if target_size is None or not loss_weights or any(size_column not in r.columns for r in rows.values()):
        return RegretCalibration(RegretCalibStatus.NOT_APPLICABLE)
    if any(size_column not in getattr(law, "inputs", ()) for law in laws.values()):
        return RegretCalibration(RegretCalibStatus.NOT_APPLICABLE)
    sizes = np.unique(np.concatenate([np.asarray(r[size_column], dtype=np.float64) for r in rows.values()]))
    if sizes.size < 3:
        return RegretCalibration(RegretCalibStatus.TOO_FEW_SIZES)
    top, inner_top = float(sizes[-1]), float(sizes[-2])
    if float(target_size) <= top:
        return RegretCalibration(RegretCalibStatus.INSIDE_RANGE, heldout_size=top, inner_size=inner_top)
    obs: dict[str, dict[str, float]] = {}
    pred: dict[str, dict[str, float]] = {}
    wcols = [f"w_{d}" for d in domains]
    mix: dict[str, np.ndarray] = {}
    by_target: dict[str, float] = {}
    for t, a in loss_weights.items():
        r = rows[t]
        size = np.asarray(r[size_column], dtype=np.float64)
        inner, outer = r[size < top], r[size >= top]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the nested fit's own notes are not the decision's
            res = refit(t, top) if refit is not None else fit(laws[t], inner, t)  # type: ignore[misc]
        p = np.asarray(res.predict(outer), dtype=np.float64) if res is not None else np.array([np.nan])
        if not np.isfinite(p).all():
            return RegretCalibration(RegretCalibStatus.FIT_FAILED, heldout_size=top, inner_size=inner_top)
        by_target[t] = float(np.sqrt(np.mean((outer[t].to_numpy(float) - p) ** 2)))
        for rid, o, q, w in zip(outer["run_id"].astype(str), outer[t].to_numpy(float), p,
                                outer[wcols].to_numpy(float), strict=True):  # fmt: skip
            obs.setdefault(rid, {})[t] = float(a) * o
            pred.setdefault(rid, {})[t] = float(a) * q
            mix[rid] = w / w.sum()
    ids = sorted(r for r in obs if len(obs[r]) == len(loss_weights))
    O = np.array([sum(obs[r].values()) for r in ids])
    P = np.array([sum(pred[r].values()) for r in ids])
    W = np.array([mix[r] for r in ids]).reshape(len(ids), len(domains))
    e, d, pairs = pair_errors(O, P, W)
    distinct = len({tuple(np.round(w, 3)) for w in W})
    if distinct < 3 or e.size == 0:
        return RegretCalibration(RegretCalibStatus.TOO_FEW_RUNS, heldout_size=top, inner_size=inner_top,
                                 n_runs=len(ids))  # fmt: skip
    per_l1 = float(np.sqrt(np.sum(e**2) / np.sum(d**2)))
    growth = math.log(float(target_size) / top) / math.log(top / inner_top)
    errs = tuple((ids[i], ids[j], float(x), float(y)) for (i, j), x, y in zip(pairs, e, d, strict=True))
    level_rms = float(np.sqrt(np.mean((O - P) ** 2)))
    return RegretCalibration(RegretCalibStatus.CALIBRATED, per_l1, growth, top, inner_top, len(ids), int(e.size), errs,
                             level_rms, tuple(by_target.items()))  # fmt: skip


def nested_weights(
    rows: Mapping[str, pd.DataFrame], target_size: float | None, size_column: str = "n_params"
) -> dict[str, np.ndarray]:
    """Per target, the ``(1, n_rows)`` point weights of its nested refit (1 below the largest fitted size, 0 at it),
    for :func:`~mixlaw.decide.mixture.paired.refit_all` to solve beside the resamples; empty where
    :func:`calibrate_regret` makes no nested refit (fewer than 3 sizes, a target inside the fitted sizes)."""
    if target_size is None or any(size_column not in r.columns for r in rows.values()):
        return {}
    sizes = np.unique(np.concatenate([np.asarray(r[size_column], dtype=np.float64) for r in rows.values()]))
    if sizes.size < 3 or float(target_size) <= float(sizes[-1]):
        return {}
    top = float(sizes[-1])
    return {t: (np.asarray(r[size_column], dtype=np.float64) < top).astype(np.float64)[None, :]
            for t, r in rows.items()}  # fmt: skip


def nested_from(res: Any, refit: Any) -> Any:
    """``res`` with the parameters of its nested refit ``refit`` (a :class:`~mixlaw.decide.mixture.objective.FittedLaw`
    from :func:`nested_weights`' problem; ``None``, a failed refit, gives ``None``): what :func:`nested_refit`
    returns, made in the resamples' batched solve."""
    import dataclasses

    return None if refit is None else dataclasses.replace(res, params=dict(refit.params))


def nested_refit(res: Any, rows: pd.DataFrame, size_column: str, top: float, max_iter: int | None) -> Any:
    """``res`` (a :class:`~mixlaw.fit.FitResult`) refitted on its rows below size ``top``, started from its own
    parameters: one weighted solve (the rows at ``top`` weigh 0) with the resample refits' rescue; ``None`` when it
    fails. Cheaper than a fit from scratch, and it measures the extrapolation of *this* fit's basin."""
    import dataclasses

    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.solver.batch import threads
    from mixlaw.fit.uncertainty.bootstrap import refit_resamples

    law = res.law
    data = FitData(law, rows, target=res.target, input_map=res.input_map, group_column=None)
    w = (np.asarray(rows[size_column], dtype=np.float64) < top).astype(np.float64)[None, :]
    seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
    with threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        boot = refit_resamples(law, data, data.y, w, seeds, params=res.params, scheme="sizes", unit="sizes",
                               loss=res.loss, delta=res.delta, max_iter=max_iter)  # fmt: skip
    if not bool(boot.ok[0]):
        return None
    return dataclasses.replace(res, params=law.unflatten(boot.params.to_numpy(dtype=np.float64)[0]))


def widen_level(interval: Sequence[float] | None, point: float, sd: float, level: float) -> list[float] | None:
    """A level's interval (``None``: none) widened by ``sd`` in quadrature on each side of ``point``."""
    if interval is None or sd <= 0:
        return list(interval) if interval is not None else None
    z = NormalDist().inv_cdf(0.5 + level / 2)
    lo, hi = float(interval[0]), float(interval[1])
    return [point - math.hypot(point - lo, z * sd), point + math.hypot(hi - point, z * sd)]


def widen_candidate(
    candidate: dict[str, Any], chosen: Sequence[float] | np.ndarray, calib: RegretCalibration, level: float
) -> None:
    """Widen one ``mix optimize`` candidate's paired regret interval and ``P`` by the calibration, in place.

    The paired interval and share are kept as ``regret_interval_paired`` and ``p_better_than_chosen_paired``;
    ``regret_sd_extrapolation`` is the added standard
    deviation. Without a paired interval the calibration alone gives one (normal, around the point regret).
    """
    w = np.asarray(list(candidate["weights"].values()), dtype=np.float64)
    sd = calib.sd(float(np.abs(w / w.sum() - np.asarray(chosen, dtype=np.float64)).sum()))
    candidate["regret_sd_extrapolation"] = sd
    if sd <= 0:
        return
    z = NormalDist().inv_cdf(0.5 + level / 2)
    r = float(candidate["regret"])
    iv = candidate.get("regret_interval")
    lo, hi = (float(iv[0]), float(iv[1])) if iv else (r, r)
    candidate["regret_interval_paired"] = list(iv) if iv else None
    candidate["p_better_than_chosen_paired"] = candidate.get("p_better_than_chosen")
    candidate["regret_interval"] = [r - math.hypot(r - lo, z * sd), r + math.hypot(hi - r, z * sd)]
    s_boot = (hi - lo) / (2 * z)
    # P(candidate better than the chosen mixture) = P(regret < 0) under the combined spread
    candidate["p_better_than_chosen"] = NormalDist().cdf(-r / math.hypot(s_boot, sd))
