"""``mix optimize --law auto``: choose the mixture law by a nested size holdout, never resting on an unhealthy fit.

Every candidate law (size-aware mixture laws: ``camel``, ``mixture_additive``, ``mixture_joint``) is fitted to each
target loss on the runs below the largest fitted size and predicts the runs at that size (held-out MRE and bias,
averaged over the targets); it is also fitted on every run, and that fit's health is recorded: ``unidentifiable``
(the data do not determine it), parameters at a bound, and for CAMEL a degenerate component
(:mod:`mixlaw.decide.mixture.camel_k`; CAMEL enters as the ``k`` its health allows). The chosen law has the lowest
held-out MRE among the healthy candidates; only when no candidate is healthy does the choice fall on an unhealthy
one, and its status says so (:class:`LawChoiceStatus`). The caller refits the winner on every run.

Size-blind laws (``dml``, ``bimix`` at one volume) cannot predict another size and are not candidates.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["AUTO_CANDIDATES", "LawChoice", "LawChoiceStatus", "LawScore", "choose_law"]

#: The laws ``--law auto`` compares (each must read a size column).
AUTO_CANDIDATES = ("camel", "mixture_additive", "mixture_joint")


class LawChoiceStatus(StrEnum):
    """How the law was chosen (reason code of :class:`LawChoice`)."""

    CHOSEN = "chosen"
    """The lowest held-out error among the healthy candidates."""
    ONLY_UNHEALTHY = "only_unhealthy"
    """No candidate fit is healthy: the lowest held-out error among all of them (every one is flagged)."""


@dataclass(frozen=True)
class LawScore:
    """One candidate: held-out MRE and bias at the largest fitted size (mean over targets) and its health."""

    law: str
    mre: float
    bias: float
    healthy: bool
    problems: tuple[str, ...]
    """Per target, what makes the fit on every run unhealthy (``loss_x: unidentifiable``, ``loss_x: at bounds C``)."""
    k: int | None = None
    """CAMEL: the number of components its health allowed (the largest healthy ``k`` up to the requested one)."""

    def to_dict(self) -> dict[str, Any]:
        return {"law": self.law, "heldout_mre": self.mre, "heldout_bias": self.bias, "healthy": self.healthy,
                "problems": list(self.problems), "k": self.k}  # fmt: skip


@dataclass(frozen=True)
class LawChoice:
    """The result of :func:`choose_law`."""

    law: str
    status: LawChoiceStatus
    heldout_size: float
    scores: tuple[LawScore, ...]

    @property
    def text(self) -> str:
        best = next(s for s in self.scores if s.law == self.law)
        head = f"law auto: {self.law} (held-out MRE {best.mre:.2%} at {self.heldout_size:.3g}, fitted below it)"
        if self.status is LawChoiceStatus.ONLY_UNHEALTHY:
            return head + "; no candidate fit is healthy, so it rests on an unhealthy fit: " + "; ".join(best.problems)
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"law": self.law, "status": self.status.value, "heldout_size": self.heldout_size,
                "candidates": [s.to_dict() for s in self.scores], "text": self.text}  # fmt: skip


def _fit_quiet(law: Any, rows: pd.DataFrame, target: str, random_state: int, solver: SolverOptions) -> Any:
    from mixlaw.fit import fit_law

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # health is read from the result below
        return fit_law(law, rows, target=target, random_state=random_state, max_iter=solver.cap(None))


def _problems(res: Any, target: str, rows: pd.DataFrame) -> list[str]:
    out = []
    if str(res.status) == "unidentifiable":
        out.append(f"{target}: unidentifiable")
    if res.law.name == "camel":
        from mixlaw.decide.mixture.camel_k import FitStatus, camel_health

        h = camel_health(res.law, res.params, rows)
        if h.status is FitStatus.DEGENERATE:
            out.append(f"{target}: {h.text}")
        bounds = [b for b in res.at_bounds() if b != "C" and not b.startswith("beta_") and not b.startswith("t_")]
        if h.c_at_zero:
            out.append(f"{target}: C at 0")
    else:
        bounds = [b for b in res.at_bounds() if "[" not in b]  # a simplex entry at 0 is a share, not a bound
    if bounds:
        out.append(f"{target}: at bounds {', '.join(bounds)}")
    return out


def choose_law(
    rows: Mapping[str, pd.DataFrame],
    domains: Sequence[str],
    *,
    size_column: str = "n_params",
    law_options: Mapping[str, Mapping[str, Any]] | None = None,
    candidates: Sequence[str] = AUTO_CANDIDATES,
    random_state: int = 0,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> LawChoice:
    """Choose among ``candidates`` by the nested size holdout (module docstring); ``rows``: ``{target: its rows}``;
    ``solver``: the caps of every fit."""
    from mixlaw.decide.mixture.compare import build_model

    sizes = np.unique(np.concatenate([np.asarray(r[size_column], dtype=np.float64) for r in rows.values()]))
    if sizes.size < 3:
        raise InputError(f"--law auto: the size holdout needs at least 3 fitted sizes in '{size_column}'")
    top = float(sizes.max())
    scores = []
    for name in candidates:
        opts = dict((law_options or {}).get(name, {}))
        mre, bias, problems = [], [], []
        k_used: int | None = None
        for target, r in rows.items():
            law = build_model(name, opts, domains, size_column)
            full = _fit_quiet(law, r, target, random_state, solver)
            if name == "camel":  # the k its health allows, as mix optimize would use it
                from mixlaw.decide.mixture.camel_k import FitStatus, camel_health

                while camel_health(full.law, full.params, r).status is FitStatus.DEGENERATE and full.law.k > 1:
                    law = build_model(name, {**opts, "k": full.law.k - 1}, domains, size_column)
                    full = _fit_quiet(law, r, target, random_state, solver)
                k_used = max(k_used or 0, full.law.k)
            problems += _problems(full, target, r)
            inner = r[np.asarray(r[size_column], dtype=np.float64) < top]
            outer = r[np.asarray(r[size_column], dtype=np.float64) >= top]
            res = _fit_quiet(law, inner, target, random_state, solver)
            pred = np.asarray(res.predict(outer), dtype=np.float64)
            obs = outer[target].to_numpy(dtype=np.float64)
            rel = (pred - obs) / obs
            mre.append(float(np.mean(np.abs(rel))) if np.isfinite(rel).all() else np.inf)
            bias.append(float(np.mean(rel)) if np.isfinite(rel).all() else np.nan)
        scores.append(LawScore(name, float(np.mean(mre)), float(np.mean(bias)), not problems, tuple(problems), k_used))
    healthy = [s for s in scores if s.healthy and np.isfinite(s.mre)]
    pool = healthy or [s for s in scores if np.isfinite(s.mre)] or scores
    best = min(pool, key=lambda s: s.mre)
    status = LawChoiceStatus.CHOSEN if healthy else LawChoiceStatus.ONLY_UNHEALTHY
    return LawChoice(best.law, status, top, tuple(scores))
