"""The multi-power law fitted on the three 24k-step MultiPowerLaw schedules: what its verdict and its 72k miss rest on.

Checks the claims of ``docs/design/multi-power-short-schedules.md`` on the released curves (held out: the
72k-step cosine): the fit's ``C``–``γ`` values are pinned by the 24k data and do not decide the 72k prediction, and
even the paper's own loss-drop shape (``C``, ``β``, ``γ`` held at the published values, the rest refitted) misses
the 72k cosine at 400M by more than 0.012 nats — so a prior toward the documented scales cannot reach that goal.
The full table: ``benchmarks/mpl_short_schedules.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.laws.multi_power import PUBLISHED_MPL
from mixlaw.options import FitOptions
from mixlaw.schedules import Schedule
from mixlaw.schedules.multi_power import multi_power_features

EXTERNAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external"
MPL_DIR = EXTERNAL / "MultiPowerLaw" / "loss_curve_repo"
FITTED = ("cosine_24000", "constant_24000", "wsdcon_9")
needs_mpl = pytest.mark.skipif(not MPL_DIR.is_dir(), reason=f"external data not found at {MPL_DIR}")


def _schedule(name: str) -> Schedule:
    w = 2160
    if name.startswith("cosine_"):
        return Schedule.parse(f"cosine:peak=3e-4,steps={name.split('_')[1]},warmup={w},final=3e-5")
    if name.startswith("constant_"):
        return Schedule.parse(f"constant:peak=3e-4,steps={name.split('_')[1]},warmup={w}")
    k = int(name.split("_")[1])
    return Schedule.parse(f"multistep:peak=3e-4,steps=16000,warmup={w},milestones=8000,gamma={k * 1e-5 / 3e-4}")


def _table(size: str, names: tuple[str, ...]) -> pd.DataFrame:
    parts = []
    for name in names:
        d = pd.read_csv(MPL_DIR / f"csv_{size}" / f"{name}.csv").iloc[::4]
        s = _schedule(name)
        x = multi_power_features(s.lrs(), d["step"].to_numpy(), eta0=s.eta0, longest=72000)
        parts.append(pd.DataFrame(x).assign(run_id=name, loss=d["loss"].to_numpy()))
    return pd.concat(parts, ignore_index=True)


def _refit_holding(fit: pd.DataFrame, fixed: Mapping[str, float], start: Mapping[str, float]) -> dict[str, float]:
    """Huber (δ = 1e-3) on log losses, sum — the fitter's objective — with ``fixed`` held, from ``start``."""
    law = get_law("multi_power")
    x = {c: fit[c].to_numpy() for c in law.inputs}
    y = fit["loss"].to_numpy()
    free = [n for n in law.param_names if n not in fixed]

    def res(v: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            p = np.asarray(law.evaluate(x, {**fixed, **dict(zip(free, np.exp(v), strict=True))}), dtype=np.float64)
            r = np.log(p) - np.log(y)
        return np.where(np.isfinite(r), r, 1.0)

    sol = least_squares(res, np.log([start[n] for n in free]), loss="huber", f_scale=1e-3, max_nfev=2000)
    return {**fixed, **dict(zip(free, (float(v) for v in np.exp(sol.x)), strict=True))}


def _mae(held: pd.DataFrame, p: Mapping[str, float]) -> float:
    law = get_law("multi_power")
    pred = np.asarray(law.evaluate({c: held[c].to_numpy() for c in law.inputs}, dict(p)), dtype=np.float64)
    return float(np.mean(np.abs(pred - held["loss"].to_numpy())))


def _sse(fit: pd.DataFrame, p: Mapping[str, float]) -> float:
    law = get_law("multi_power")
    pred = np.asarray(law.evaluate({c: fit[c].to_numpy() for c in law.inputs}, dict(p)), dtype=np.float64)
    return float(np.sum((np.log(pred) - np.log(fit["loss"].to_numpy())) ** 2))


@needs_mpl
def test_gamma_is_pinned_by_24k_schedules_and_does_not_decide_the_72k_miss() -> None:
    fit, held = _table("100", FITTED), _table("100", ("cosine_72000",))
    r = fit_law("multi_power", fit, FitOptions(seed=0))
    free = {k: float(v) for k, v in r.params.items()}
    assert (r.identifiability or {}).get("status") == "ok"
    s2 = _sse(fit, free) / (len(fit) - 7)
    held_gamma = _refit_holding(fit, {"gamma": PUBLISHED_MPL["100M"]["gamma"]}, free)
    # the paper's γ is rejected by the fitted rows (a 95 % profile set accepts a rise of 3.84 σ̂²) ...
    assert (_sse(fit, held_gamma) - _sse(fit, free)) / s2 > 50.0
    # ... and moving γ there changes the 72k cosine's miss by less than a tenth of it
    miss = _mae(held, free)
    assert miss > 0.011
    assert abs(_mae(held, held_gamma) - miss) < 0.1 * miss


@needs_mpl
def test_the_papers_loss_drop_shape_still_misses_the_72k_cosine_at_400m() -> None:
    fit, held = _table("400", FITTED), _table("400", ("cosine_72000",))
    r = fit_law("multi_power", fit, FitOptions(seed=0))
    free = {k: float(v) for k, v in r.params.items()}
    pub = PUBLISHED_MPL["400M"]
    shape = _refit_holding(fit, {n: pub[n] for n in ("C", "beta", "gamma")}, free)
    assert _mae(held, free) > 0.015
    assert _mae(held, shape) > 0.012  # the goal of 0.012 is out of reach of a prior on the shape alone
    assert _mae(held, pub) < 0.007  # the published parameters (fitted differently) do reach it
