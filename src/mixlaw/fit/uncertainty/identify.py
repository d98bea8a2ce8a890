"""Which parameters the data do not pin down: the local identifiability of a fit at its optimum.

At the point estimate ``u*`` (internal, unconstrained coordinates) the Jacobian ``J`` (n × P) of the residuals in
the law's fit space gives the Gauss–Newton Hessian of the objective, ``H ≈ Jᵀ W J``. With the columns of ``J``
scaled to unit norm (so that the answer does not depend on the units of a parameter), the singular values
``s_1 ≥ … ≥ s_P`` of the scaled ``J`` measure how strongly the data fix each direction of the parameter space
(the eigenvalues of the scaled Hessian are ``s_k²``):

- ``s_k / s_1 < RANK_TOL`` (``≈ 0`` in float64): the direction is **not determined at all** — moving along it
  leaves every prediction unchanged. Fewer rows than parameters, or a constant input the law needs variation in
  (a constant ``n_params`` for ``E + A/N^α + …``: ``E``, ``A`` and ``α`` only enter as one number), give such
  directions. The fit's status is then ``unidentifiable`` whatever the solver said.
- ``κ = (s_1 / s_P)² > WEAK_CONDITION``: the direction is determined only **weakly** (an elongated valley of the
  objective, e.g. the E–α trade-off of a power law fitted over a small range); the fit keeps its status and the
  weakly determined parameters are listed.

A parameter *carries* a direction when its squared loading on the direction's (unit) eigenvector is above
``SHARE``. This is the local test of the multi-power law's profile check and of
:func:`mixlaw.decide.cpt.identify.identifiability`, applied to every fit. Parameters whose column of ``J`` is
exactly zero because they sit on a bound of their range are reported by the bound check, not here.

References: Bates & Watts, *Nonlinear Regression Analysis and Its Applications* (1988), ch. 2 (conditioning of
the Gauss–Newton Hessian); Raue et al., *Bioinformatics* 25 (2009) 1923 (structural vs practical
non-identifiability).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mixlaw.fit.solver.pools import trim_heap
from mixlaw.fit.solver.solve import TRIM_CELLS
from mixlaw.laws import Law

__all__ = ["RANK_TOL", "SHARE", "WEAK_CONDITION", "assess", "assess_fit", "identify_summary"]

RANK_TOL = 1e-7
"""Relative singular value of the column-scaled Jacobian below which a direction counts as undetermined."""
WEAK_CONDITION = 1e8
"""Condition number of the scaled Gauss–Newton Hessian above which a direction counts as weakly determined."""
SHARE = 0.1
"""Squared loading above which a parameter carries a (null or weak) direction."""


def _owners(law: Law) -> list[str]:
    return [s.name for s in law.param_specs for _ in range(s.n_internal)]


def _jacobian(law: Law, x: Mapping[str, torch.Tensor], y: torch.Tensor, u: np.ndarray) -> np.ndarray:
    """``J`` (n × P) of the fit-space residuals at internal ``u`` (one reverse pass, a parameter copy per row)."""
    from mixlaw.fit.problem.data import make_residuals
    from mixlaw.fit.solver.solve import _residuals_and_jacobian

    residuals = make_residuals(law, x, y)
    U = torch.as_tensor(np.asarray(u, dtype=np.float64).reshape(1, -1))
    _, J = _residuals_and_jacobian(residuals, U, torch.zeros(1, dtype=torch.long), int(y.shape[-1]))
    out = J[0].numpy()
    return np.where(np.isfinite(out), out, 0.0)


def _spectrum(J: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column norms, relative singular values (padded with zeros to P) and right singular vectors (P × P)."""
    n, P = J.shape
    norms = np.linalg.norm(J, axis=0)
    Js = J / np.where(norms > 0, norms, 1.0)
    if n == 0 or P == 0 or not np.any(norms > 0):
        return norms, np.zeros(P), np.eye(P)
    if n > P:  # R of a QR has the singular values and right vectors of Js: memory n × P, never n × n
        Js = np.asarray(np.linalg.qr(Js, mode="r"), dtype=np.float64)
    _, s, vt = np.linalg.svd(Js, full_matrices=True)  # (min(n, P) × P): vt stays P × P when n < P
    rel = np.zeros(P)
    rel[: s.size] = s / s[0] if s[0] > 0 else 0.0
    return norms, rel, vt


def _carriers(vt: np.ndarray, rows: np.ndarray, owners: Sequence[str], keep: Sequence[bool]) -> list[str]:
    """Parameters whose squared loading on the directions ``rows`` of ``vt`` exceeds :data:`SHARE`."""
    if rows.size == 0:
        return []
    load = (vt[rows] ** 2).sum(axis=0)
    out: list[str] = []
    for j, name in enumerate(owners):
        if keep[j] and load[j] > SHARE and name not in out:
            out.append(name)
    return out


def _direction(v: np.ndarray, owners: Sequence[str]) -> str:
    """``0.71·A − 0.70·alpha``: the loadings (≥ 0.2 in size) of one unit eigenvector."""
    order = np.argsort(-np.abs(v))
    terms = [(float(v[j]), owners[j]) for j in order if abs(v[j]) >= 0.2][:4]
    if not terms:
        return "—"
    sign = 1.0 if terms[0][0] >= 0 else -1.0
    text = ""
    for k, (c, name) in enumerate(terms):
        c *= sign
        text += f"{c:.2f}·{name}" if k == 0 else f" {'+' if c >= 0 else '−'} {abs(c):.2f}·{name}"
    return text


def assess(
    law: Law,
    x: Mapping[str, np.ndarray],
    y: np.ndarray,
    u: np.ndarray,
    *,
    columns: Mapping[str, str] | None = None,
    at_bound: Sequence[str] = (),
) -> dict[str, Any]:
    """Identifiability of ``law`` at internal parameters ``u`` on inputs ``x`` and target ``y``.

    Parameters
    ----------
    law
        The fitted law.
    x, y
        The fitted inputs (canonical names, float64 arrays) and target (natural units, as fitted).
    u
        The point estimate in the law's internal coordinates (:meth:`~mixlaw.laws.Law.to_internal`).
    columns
        ``{input: table column}`` — the names the reason uses for the inputs.
    at_bound
        Parameters at a bound of their range (a zero Jacobian column there is the bound's doing, not the data's).

    Returns
    -------
    dict
        ``status`` (``"ok"``, ``"weak"`` or ``"unidentifiable"``), ``reason`` (one line, empty when ok),
        ``condition`` (κ of the column-scaled Gauss–Newton Hessian; ``inf`` when singular), ``rank``,
        ``n_parameters`` (internal coordinates), ``n_rows``, ``undetermined`` and ``weak`` (parameter names),
        ``constant_inputs`` (table columns with one value), ``weakest`` (the loadings of the least determined
        direction). All values are JSON-ready.
    """
    owners = _owners(law)
    cols = dict(columns or {})
    P, n = len(owners), int(np.asarray(y).size)
    xt = {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in x.items()}
    yt = torch.from_numpy(np.array(y, dtype=np.float64))
    with np.errstate(all="ignore"):
        J = _jacobian(law, xt, yt, u)
    norms, rel, vt = _spectrum(J)
    keep = [not (norms[j] == 0 and owners[j] in at_bound) for j in range(P)]
    null = np.flatnonzero(rel < RANK_TOL)
    kept = np.asarray(keep, dtype=bool)
    null = np.array([k for k in null if float((vt[k, kept] ** 2).sum()) > 0.5], dtype=np.int64)
    rank = int((rel >= RANK_TOL).sum())  # a bound's zero column counts here, not in the status
    smin = float(min((rel[k] for k in range(P) if k not in set(null.tolist())), default=1.0))
    condition = math.inf if null.size else (1.0 / smin**2 if smin > 0 else math.inf)
    weak_rows = np.flatnonzero((rel >= RANK_TOL) & (rel**2 < 1.0 / WEAK_CONDITION))
    undetermined = _carriers(vt, null, owners, keep)
    weak = [p for p in _carriers(vt, weak_rows, owners, keep) if p not in undetermined]
    constant = [name for name, v in x.items() if n > 1 and np.asarray(v).size and float(np.ptp(np.asarray(v))) == 0.0]
    weakest_row = int(null[0]) if null.size else int(np.argmin(np.where(keep, rel, np.inf))) if P else 0
    out: dict[str, Any] = {
        "status": "ok",
        "reason": "",
        "condition": condition,
        "rank": rank,
        "n_parameters": P,
        "n_rows": n,
        "undetermined": undetermined,
        "weak": weak,
        "constant_inputs": [cols.get(c, c) for c in constant],
        "weakest": _direction(vt[weakest_row], owners) if P else "—",
    }
    names = ", ".join(law.param_names)
    if n < P:
        out["status"] = "unidentifiable"
        out["undetermined"] = undetermined or list(law.param_names)
        out["reason"] = (
            f"{n} row{'s' if n != 1 else ''} for {P} parameters ({names}): the data cannot determine "
            f"{', '.join(out['undetermined'])}; fit at least {P} rows with varied inputs, or a law with fewer "
            "parameters"
        )
    elif null.size:
        out["status"] = "unidentifiable"
        blame = _blamed_inputs(law, x, yt, u, constant, rank) if constant else []
        who = ", ".join(undetermined) or names
        if blame:
            vals = ", ".join(f"'{cols.get(c, c)}' is constant ({float(np.asarray(x[c])[0]):.6g} in every row)"
                             for c in blame)  # fmt: skip
            out["reason"] = (
                f"input column {vals}, so the data cannot separate {who}; vary it across the fitted rows, or fit "
                "a law without it"
            )
        else:
            out["reason"] = (
                f"the data do not determine {who} (the Hessian of the objective is singular along "
                f"{out['weakest']}); add rows that vary the inputs, or fix one of them"
            )
    elif weak:
        out["status"] = "weak"
        out["reason"] = (
            f"weakly determined: {', '.join(weak)} (condition {condition:.2g} along {out['weakest']}); read them "
            "with their intervals"
        )
    return out


def _blamed_inputs(
    law: Law, x: Mapping[str, np.ndarray], y: torch.Tensor, u: np.ndarray, constant: Sequence[str], rank: int
) -> list[str]:
    """The constant inputs whose variation would restore rank (each varied alone, by a factor up to e)."""
    blame = []
    for c in constant:
        v = np.asarray(x[c], dtype=np.float64)
        spread = np.exp(np.linspace(-1.0, 1.0, v.size)) if v[0] > 0 else np.linspace(-1.0, 1.0, v.size)
        varied = {k: torch.from_numpy(np.array(w, dtype=np.float64)) for k, w in x.items()}
        varied[c] = torch.from_numpy(v * spread if v[0] > 0 else v + spread)
        with np.errstate(all="ignore"):
            J = _jacobian(law, varied, y, u)
        _, rel, _ = _spectrum(J)
        if int((rel >= RANK_TOL).sum()) > rank:
            blame.append(c)
    return blame or list(constant)


def assess_fit(law: Law, data: Any, u: np.ndarray, params: Mapping[str, Any], solver_status: str) -> dict[str, Any]:
    """:func:`assess` of a fit on its :class:`~mixlaw.fit.problem.data.FitData`, with ``solver_status`` (what the solver
    said before the identifiability check) recorded beside it."""
    flat = law.flatten(params)
    at_bound = [n for n, v in zip(law.flat_names, flat, strict=True) if law.spec(n).at_bound(float(v))]
    if law.symmetry is None:  # on a joint constraint the canonical form resolves (benchmark_logistic's C + A <= scale)
        raw = law.flatten(law.natural(u, canonical=False))
        at_bound += [n for n, a, b in zip(law.flat_names, raw, flat, strict=True)
                     if n not in at_bound and not np.isclose(a, b, rtol=1e-9, atol=0.0)]  # fmt: skip
    owners_at_bound = sorted({n.split("[")[0] for n in at_bound})
    info = assess(law, data.x_np, data.y, u, columns=data.input_map, at_bound=owners_at_bound)
    info["solver_status"] = solver_status
    info["at_bounds"] = at_bound
    _add_loose(law, data, params, info)
    if data.n * 22 >= TRIM_CELLS:  # the profile scans of a large fit: their freed tensors back to the OS
        trim_heap()
    return info


def _add_loose(law: Law, data: Any, params: Mapping[str, Any], info: dict[str, Any]) -> None:
    """Parameters the data do not bound (:func:`mixlaw.fit.uncertainty.profile.loose_parameters`): ``running_off`` and
    the
    ``profile`` ranges that intervals carry; a fit whose parameter runs off is ``weak``, saying which."""
    from mixlaw.fit.uncertainty.fitted import residual_sd
    from mixlaw.fit.uncertainty.profile import SCAN, loose_parameters

    flagged = [*info.get("undetermined", []), *info.get("weak", [])]
    loose = loose_parameters(law, data.x_np, data.y, params, residual_sd(law, data, params), flagged)
    info.update(loose)
    off = loose["running_off"]
    if off and info["status"] == "ok":
        info["status"] = "weak"
        info["reason"] = (
            f"the data do not bound {', '.join(off)}: a change by a factor {SCAN:g} moves no fitted prediction beyond "
            "the noise; a prediction that depends on it carries its whole profile range"
        )
        info["weak"] = [*info.get("weak", []), *[n for n in off if n not in info.get("weak", [])]]


def identify_summary(info: Mapping[str, Any] | None) -> str:
    """One report line: status, condition and the weakest direction (``""`` for fits saved before it existed)."""
    if not info:
        return ""
    cond = info.get("condition")
    ctext = "singular" if cond is None or not math.isfinite(float(cond)) else f"condition {float(cond):.3g}"
    head = f"{info.get('status')}: rank {info.get('rank')}/{info.get('n_parameters')}, {ctext}"
    tail = f"; {info['reason']}" if info.get("reason") else f"; weakest direction {info.get('weakest')}"
    return head + tail
