"""The identifiability verdict of a fit known only by its parameters and rows (:meth:`FitHealth.assess
<mixlaw.decide.contract.FitHealth.assess>`), for decisions whose engines keep no fit result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["assess_fit"]


def assess_fit(
    cls: Any, name: str, law: Any, x: Mapping[str, Any], y: Any, params: Mapping[str, Any], status: str,
    at: Mapping[str, Any] | None,
) -> Any:  # fmt: skip
    """:meth:`FitHealth.assess <mixlaw.decide.contract.FitHealth.assess>` (``cls``: the FitHealth class)."""
    import numpy as np

    from mixlaw.fit.uncertainty.identify import assess
    from mixlaw.fit.uncertainty.profile import loose_parameters, profile_envelope

    xs = {k: np.asarray(x[k], dtype=np.float64).reshape(-1) for k in law.inputs}
    ys = np.asarray(y, dtype=np.float64).reshape(-1)
    flat = law.flatten(params)
    at_bound = [n for n, v in zip(law.flat_names, flat, strict=True) if law.spec(n).at_bound(float(v))]
    info = assess(law, xs, ys, law.to_internal(params), at_bound=sorted({n.split("[")[0] for n in at_bound}))
    with np.errstate(all="ignore"):
        pred = np.asarray(law.evaluate(xs, params), dtype=np.float64).reshape(-1)
        r = np.log(pred) - np.log(ys) if law.fit_space == "log" else pred - ys
    dof = ys.size - law.n_internal
    sd = float(np.sqrt(np.sum(r * r) / dof)) if dof > 0 and np.isfinite(r).all() else None
    flagged = [*info.get("undetermined", []), *info.get("weak", [])]
    loose = loose_parameters(law, xs, ys, params, sd, flagged)
    off = [str(p) for p in loose["running_off"]]
    verdict = "weak" if off and info["status"] == "ok" else str(info["status"])
    loose_names = list(dict.fromkeys([*flagged, *off]))
    moves = True
    if at is not None and verdict in ("weak", "unidentifiable"):
        xa = {k: np.asarray(at[k], dtype=np.float64).reshape(-1) for k in law.inputs}
        moves = _directions_move(law, xs, xa, law.to_internal(params))
        if not moves and off:  # the parameters that run off: profiled over their whole range where it is read
            if sd is None or not all(any(k.split("[")[0] == n.split("[")[0] for k in loose["profile"]) for n in off):
                moves = True
            else:
                env = profile_envelope(law, params, {k: v for k, v in loose["profile"].items()
                                                     if k.split("[")[0] in off or k in off}, xa)  # fmt: skip
                if env is not None:
                    with np.errstate(all="ignore"):
                        base = np.asarray(law.evaluate(xa, params), dtype=np.float64).reshape(-1)
                        base = np.log(base) if law.fit_space == "log" else base
                        shift = np.maximum(env[1] - base, base - env[0])
                    moves = not (np.isfinite(shift).all() and float(shift.max(initial=0.0)) <= 2.0 * sd)
    return cls(name=name, law=str(law.name), status=status, identifiable=verdict != "unidentifiable",
               at_bounds=tuple(at_bound), identifiability=verdict, weakest=str(info.get("weakest", "")),
               running_off=tuple(off), weak=tuple(loose_names), moves_answer=moves)  # fmt: skip


def _directions_move(law: Any, x: Mapping[str, Any], at: Mapping[str, Any], u: Any) -> bool:
    """Whether a direction the rows ``x`` do not pin down (null or weak: :mod:`mixlaw.fit.uncertainty.identify`)
    moves a prediction at ``at`` more than it moves the rows as a whole (‖J_at v‖∞ > ‖J v‖₂, to first order).

    The data allow a move along a direction ``v`` until the fit worsens by about the noise, ``δ ≈ σ / ‖J v‖₂``
    (unbounded along a null direction); the reading then moves by ``‖J_at v‖∞ δ``. It stays within the noise
    exactly when the reading is no more sensitive to ``v`` than the rows are: always at the fitted rows themselves,
    and where the decision extrapolates only if the direction does not reach there."""
    import numpy as np
    import torch

    from mixlaw.fit.uncertainty.identify import RANK_TOL, WEAK_CONDITION, _jacobian, _spectrum

    def tensors(d: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in d.items()}

    n, m = len(next(iter(x.values()))), len(next(iter(at.values())))
    J = _jacobian(law, tensors(x), torch.ones(n, dtype=torch.float64), u)
    Ja = _jacobian(law, tensors(at), torch.ones(m, dtype=torch.float64), u)
    norms, rel, vt = _spectrum(J)
    scale = np.where(norms > 0, norms, 1.0)
    floor = 10.0 * RANK_TOL * max(1.0, float(np.abs(Ja / scale).max(initial=0.0)))
    for k in np.flatnonzero(rel**2 < 1.0 / WEAK_CONDITION):
        v = vt[k] / scale
        if float(np.abs(Ja @ v).max(initial=0.0)) > max(float(np.linalg.norm(J @ v)), floor):
            return True
    return False
