"""The health of a CAMEL fit and the choice of its number of components ``k`` by held-out error.

CAMEL (laws.md §12.2; Li, Gu and Zhang 2026, arXiv:2603.08022):

.. math:: L(r, M) = C + \\sum_{i=1}^{k} K_i \\langle t_i, r \\rangle^{-\\alpha_i} (M / M_0)^{-\\beta_i}

Why fits run to bounds
----------------------
On the shipped probes and on SlimPajama a ``k = 2`` fit ends with ``K_i`` near the smallest double (1e-318),
``alpha_i`` in the hundreds and ``t_i`` within 1e-3 of the barycentre of the simplex. That is not a switched-off
component: with ``<t_i, r> = b + <u_i, r>`` (``b = 1/n``, ``u_i`` small),
``K_i <t_i, r>^(-alpha_i) = K_i b^(-alpha_i) exp(-alpha_i log(1 + <u_i, r>/b)) → K'_i exp(<v_i, r>)`` as
``alpha_i → ∞``, ``u_i → 0`` with ``alpha_i u_i / b = −v_i`` fixed. The data prefer a loss that is log-linear in the
mixture weights (the Data Mixing Laws form, laws.md §7.1), which the power of a share reaches only in this limit,
and the solver walks towards it until ``K_i`` underflows. Rescaling ``M`` (``size_unit``) changes only ``K_i`` by
``M_0^{beta_i}`` and leaves the fit where it was (checked: ``size_unit`` 1e8 and 5e4 end at the same objective).
``C`` at 0 is a second, separate boundary: four sizes over a factor 8.6 (probes) or a fitted range whose tokens per
parameter fall from 164 to 38 (SlimPajama, a confound the law has no term for, laws.md §12.8) do not determine an
irreducible loss.

What this module does
---------------------
:func:`camel_health` classifies each component of a fit (:class:`ComponentStatus`): ``active``, ``switched_off``
(its term is below ``1e-3`` of the loss on every row), ``exponential_limit`` (``alpha_i > 20``: the limit above, not
a power of a share) or ``size_free`` (``beta_i`` at 0: a mixture-dependent floor, still a CAMEL component), and
counts the components that are CAMEL components (``k_effective``). :func:`select_k` fits ``k = 1 … k_max`` on the
smaller sizes, predicts the largest fitted size (the paper's Fig. 10 ablation over ``k``, judged on held-out error)
and chooses the ``k`` with the lowest held-out error among the fits that are healthy on all the data; a requested
``k`` whose fit is degenerate is reduced and the result says so (:class:`KChoice`), it is never reported as a
``k``-component law.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

__all__ = [
    "ALPHA_LIMIT",
    "OFF_SHARE",
    "CamelHealth",
    "ComponentHealth",
    "ComponentStatus",
    "FitStatus",
    "KCandidate",
    "KChoice",
    "KChoiceStatus",
    "at_exponential_limit",
    "camel_health",
    "fit_camel",
    "select_k",
]

#: A component whose share exponent exceeds this is the exponential limit of the power form, not a share power law.
ALPHA_LIMIT = 20.0
#: A component whose term is below this fraction of the predicted loss on every row is switched off.
OFF_SHARE = 1e-3
#: ``beta_i`` below this: the component does not change with size.
BETA_ZERO = 1e-6
#: ``C`` below this fraction of the smallest predicted loss: no irreducible loss identified.
C_ZERO = 1e-6


class ComponentStatus(StrEnum):
    """What one CAMEL component is in a fit (reason code of :class:`ComponentHealth`)."""

    ACTIVE = "active"
    SIZE_FREE = "size_free"
    SWITCHED_OFF = "switched_off"
    EXPONENTIAL_LIMIT = "exponential_limit"

    @property
    def is_camel(self) -> bool:
        """The component is a power of a share (``active`` or ``size_free``)."""
        return self in (ComponentStatus.ACTIVE, ComponentStatus.SIZE_FREE)


class FitStatus(StrEnum):
    """The health of a whole CAMEL fit (:class:`CamelHealth`)."""

    HEALTHY = "healthy"
    """Every component is a CAMEL component."""
    DEGENERATE = "degenerate"
    """At least one component is switched off or at the exponential limit: the fit is not a ``k``-component law."""


_COMPONENT_TEXT = {
    ComponentStatus.ACTIVE: "component {i}: active (alpha {alpha:.3g}, beta {beta:.3g})",
    ComponentStatus.SIZE_FREE: "component {i}: does not change with size (beta {beta:.2g} at 0)",
    ComponentStatus.SWITCHED_OFF: "component {i}: switched off (at most {share:.1e} of the loss on any row)",
    ComponentStatus.EXPONENTIAL_LIMIT: (
        "component {i}: exponential limit (alpha {alpha:.3g} > {limit:g}, loading within {spread:.1e} of uniform): "
        "exp(linear in the mixture), not a power of a share"
    ),
}


@dataclass(frozen=True)
class ComponentHealth:
    """One component: its status (the reason code) and the numbers its text is rendered from."""

    index: int
    status: ComponentStatus
    alpha: float
    beta: float
    max_share: float
    """The largest fraction of the predicted loss this component's term makes up on any row."""
    loading_spread: float
    """``max_j |t_ij − 1/n|``: how far the loading is from the barycentre."""

    @property
    def text(self) -> str:
        return _COMPONENT_TEXT[self.status].format(
            i=self.index, alpha=self.alpha, beta=self.beta, share=self.max_share, limit=ALPHA_LIMIT,
            spread=self.loading_spread,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "status": self.status.value, "alpha": self.alpha, "beta": self.beta,
            "max_share": self.max_share, "loading_spread": self.loading_spread, "text": self.text,
        }  # fmt: skip


@dataclass(frozen=True)
class CamelHealth:
    """The health of one CAMEL fit: per component, and whether an irreducible loss was identified."""

    k: int
    components: tuple[ComponentHealth, ...]
    c: float
    c_at_zero: bool

    @property
    def k_effective(self) -> int:
        """Components that are CAMEL components (a power of a share, switched on)."""
        return sum(c.status.is_camel for c in self.components)

    @property
    def status(self) -> FitStatus:
        return FitStatus.HEALTHY if self.k_effective == self.k else FitStatus.DEGENERATE

    @property
    def reason_codes(self) -> tuple[str, ...]:
        codes = sorted({c.status.value for c in self.components if c.status is not ComponentStatus.ACTIVE})
        return (*codes, "no_irreducible_loss") if self.c_at_zero else tuple(codes)

    @property
    def text(self) -> str:
        """One sentence: ``k = 2 fitted, 0 CAMEL components: component 0: exponential limit …``."""
        bad = [c.text for c in self.components if c.status is not ComponentStatus.ACTIVE]
        head = (
            f"k = {self.k}: healthy"
            if self.status is FitStatus.HEALTHY
            else f"k = {self.k} fitted, {self.k_effective} CAMEL component(s)"
        )
        if self.c_at_zero:
            bad.append(f"C = {self.c:.2g} (no irreducible loss identified)")
        return head + ("; " + "; ".join(bad) if bad else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k, "k_effective": self.k_effective, "status": self.status.value,
            "reason_codes": list(self.reason_codes), "c": self.c, "c_at_zero": self.c_at_zero,
            "components": [c.to_dict() for c in self.components], "text": self.text,
        }  # fmt: skip


def camel_health(law: Any, params: Mapping[str, Any], rows: pd.DataFrame | Mapping[str, Any]) -> CamelHealth:
    """Classify every component of a CAMEL fit ``params`` of ``law`` on the input ``rows`` (module docstring).

    Each term ``T_i = K_i <t_i, r>^(-alpha_i) (M/M_0)^(-beta_i)`` is evaluated in log space on every row, so an
    underflowing ``K_i`` with an overflowing share power is measured, not read as 0.
    """
    if getattr(law, "name", "") != "camel":
        raise InputError(f"camel_health: expected a camel law, got '{getattr(law, 'name', law)}'")
    w = np.column_stack([np.asarray(rows[c], dtype=np.float64) for c in law.w_cols])
    log_m = np.log(np.asarray(rows[law.size_col], dtype=np.float64) / law.size_unit)
    c = float(params["C"])
    log_terms = []
    for i in range(law.k):
        t = np.asarray(params[f"t_{i}"], dtype=np.float64)
        share = np.maximum(w @ t, 1e-300)
        k_i = max(float(params[f"K_{i}"]), 1e-320)
        log_terms.append(
            math.log(k_i) - float(params[f"alpha_{i}"]) * np.log(share) - float(params[f"beta_{i}"]) * log_m
        )
    lt = np.vstack(log_terms)
    log_total = np.logaddexp.reduce(np.vstack([np.full(lt.shape[1], math.log(max(c, 1e-320))), lt]), axis=0)
    n = w.shape[1]
    comps = []
    for i in range(law.k):
        alpha, beta = float(params[f"alpha_{i}"]), float(params[f"beta_{i}"])
        share_max = float(np.exp(np.max(lt[i] - log_total)))
        spread = float(np.max(np.abs(np.asarray(params[f"t_{i}"], dtype=np.float64) - 1.0 / n)))
        if share_max < OFF_SHARE:
            st = ComponentStatus.SWITCHED_OFF
        elif alpha > ALPHA_LIMIT:
            st = ComponentStatus.EXPONENTIAL_LIMIT
        elif beta < BETA_ZERO:
            st = ComponentStatus.SIZE_FREE
        else:
            st = ComponentStatus.ACTIVE
        comps.append(ComponentHealth(i, st, alpha, beta, share_max, spread))
    c_zero = c < C_ZERO * float(np.exp(np.min(log_total)))
    return CamelHealth(law.k, tuple(comps), c, bool(c_zero))


def at_exponential_limit(law: Any) -> Any:
    """``settled(U) -> (m,) bool`` for the internal points ``U`` ``(m, P)`` of ``law`` (a CAMEL law): some component's
    ``alpha_i`` is past :data:`ALPHA_LIMIT`, so the fit is degenerate there (the ``halt`` rule of
    :mod:`mixlaw.fit.solver.halt`, used on the candidate fits with ``k > 1`` of ``camel_reduce``)."""
    import torch

    names = [f"alpha_{i}" for i in range(law.k)]

    def settled(U: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            p = law.to_natural(torch.as_tensor(np.atleast_2d(np.asarray(U, dtype=np.float64))))
        a = torch.stack([p[n].reshape(-1) for n in names], dim=-1).numpy()
        return np.asarray((a > ALPHA_LIMIT).any(axis=-1), dtype=bool)

    return settled


def fit_camel(
    rows: pd.DataFrame,
    target: str,
    domains: Sequence[str],
    k: int,
    *,
    size_column: str = "n_params",
    size_unit: float | None = None,
    random_state: int = 0,
    max_iter: int | None = None,
) -> tuple[Any, CamelHealth]:
    """Fit CAMEL with ``k`` components to ``rows`` (boundary notes recorded, not re-emitted) and its health."""
    from mixlaw.fit import fit_law
    from mixlaw.laws import get_law
    from mixlaw.options import FitOptions, SolverOptions

    opts: dict[str, Any] = {"domains": tuple(domains), "k": int(k), "size": size_column}
    if size_unit is not None:
        opts["size_unit"] = float(size_unit)
    law = get_law("camel", **opts)
    options = FitOptions(solver=SolverOptions(max_iter=max_iter), seed=random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # boundary and identifiability notes: the health below says what they mean
        res = fit_law(law, rows, options, target=target)
    return res, camel_health(law, res.params, rows)


@dataclass(frozen=True)
class KCandidate:
    """One ``k`` of :func:`select_k`: held-out error at the largest fitted size and the health of the full fit."""

    k: int
    heldout_mre: float
    heldout_bias: float
    health: CamelHealth
    fit: Any = field(default=None, compare=False, repr=False)
    """The fit on every row (a :class:`~mixlaw.fit.FitResult`; not serialised)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k, "heldout_mre": self.heldout_mre, "heldout_bias": self.heldout_bias,
            "health": self.health.to_dict(),
        }  # fmt: skip


class KChoiceStatus(StrEnum):
    """How the number of components was chosen (reason code of :class:`KChoice`)."""

    CHOSEN = "chosen"
    """The ``k`` with the lowest held-out error among healthy fits."""
    REDUCED = "reduced"
    """A larger ``k`` had a lower held-out error but its fit is degenerate; the best healthy ``k`` is used."""
    NO_HEALTHY_FIT = "no_healthy_fit"
    """No ``k`` gave a healthy fit: CAMEL degenerates on these data at every ``k`` tried."""


@dataclass(frozen=True)
class KChoice:
    """The result of :func:`select_k`: the candidates, the chosen ``k``, and why."""

    target: str
    heldout_size: float
    candidates: tuple[KCandidate, ...]
    k: int
    status: KChoiceStatus
    best_degenerate_k: int | None = None

    @property
    def text(self) -> str:
        best = next(c for c in self.candidates if c.k == self.k)
        at = f"held-out MRE {best.heldout_mre:.2%} at {self.heldout_size:.3g}"
        if self.status is KChoiceStatus.CHOSEN:
            return f"{self.target}: k = {self.k} ({at}, the lowest of k = 1…{max(c.k for c in self.candidates)})"
        if self.status is KChoiceStatus.REDUCED:
            return (
                f"{self.target}: k = {self.k} ({at}); k = {self.best_degenerate_k} predicted better but its fit is "
                "degenerate, so it is not reported as a CAMEL law"
            )
        return f"{self.target}: no k gave a healthy CAMEL fit; k = {self.k} ({at}) is shown, degenerate"

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "heldout_size": self.heldout_size, "k": self.k, "status": self.status.value,
            "best_degenerate_k": self.best_degenerate_k, "candidates": [c.to_dict() for c in self.candidates],
            "text": self.text,
        }  # fmt: skip


def select_k(
    rows: pd.DataFrame,
    target: str,
    domains: Sequence[str],
    *,
    ks: Sequence[int] = (1, 2, 3, 4, 5, 6),
    size_column: str = "n_params",
    random_state: int = 0,
    max_iter: int | None = None,
) -> KChoice:
    """Choose CAMEL's ``k`` by a nested size holdout (fit the smaller sizes, predict the largest fitted size).

    Each ``k`` in ``ks`` is fitted twice: on the rows below the largest size (its held-out MRE and bias there) and
    on every row (its :class:`CamelHealth`). The chosen ``k`` has the lowest held-out MRE among the healthy fits;
    a degenerate ``k`` is never chosen (``REDUCED`` names the better-predicting degenerate ``k``).
    """
    sizes = np.asarray(rows[size_column], dtype=np.float64)
    top = float(sizes.max())
    inner = rows[sizes < top]
    outer = rows[sizes >= top]
    if inner[size_column].nunique() < 2:
        raise InputError(f"--law camel: k by size holdout needs at least 3 fitted sizes in '{size_column}'")
    cands = []
    for k in sorted({int(k) for k in ks}):
        res_in, _ = fit_camel(inner, target, domains, k, size_column=size_column, random_state=random_state,
                              max_iter=max_iter)  # fmt: skip
        pred = np.asarray(res_in.predict(outer), dtype=np.float64)
        obs = outer[target].to_numpy(dtype=np.float64)
        rel = (pred - obs) / obs
        res, health = fit_camel(rows, target, domains, k, size_column=size_column, random_state=random_state,
                                max_iter=max_iter)  # fmt: skip
        cands.append(KCandidate(k, float(np.mean(np.abs(rel))), float(np.mean(rel)), health, res))
    healthy = [c for c in cands if c.health.status is FitStatus.HEALTHY]
    best_all = min(cands, key=lambda c: c.heldout_mre)
    if not healthy:
        return KChoice(target, top, tuple(cands), best_all.k, KChoiceStatus.NO_HEALTHY_FIT, best_all.k)
    best = min(healthy, key=lambda c: c.heldout_mre)
    if best_all.heldout_mre < best.heldout_mre:
        return KChoice(target, top, tuple(cands), best.k, KChoiceStatus.REDUCED, best_all.k)
    return KChoice(target, top, tuple(cands), best.k, KChoiceStatus.CHOSEN)
