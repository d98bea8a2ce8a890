"""``mix optimize --law auto``: choose the mixture law by a nested size holdout, never resting on an unhealthy fit.

Every candidate law (size-aware mixture laws: ``camel``, ``mixture_additive``, ``mixture_joint``) is fitted to each
target loss on the runs below the largest fitted size and predicts the runs at that size (held-out MRE and bias,
averaged over the targets). In the order of those scores, each is then fitted on every run (as ``mix optimize``
would fit it) and that fit's health is recorded: ``unidentifiable`` (the data do not determine it), parameters at a
bound, and for CAMEL a degenerate component (:mod:`mixlaw.decide.mixture.camel_k`; CAMEL enters as the ``k`` its
health allows, and is scored again at that ``k``). The chosen law has the lowest held-out MRE among the healthy
candidates, so the fits on every run stop at the first healthy law that no unchecked one beats (the rest cannot win
and are marked not checked); only when no candidate is healthy does the choice fall on an unhealthy one, and its
status says so (:class:`LawChoiceStatus`). The winner's fits on every run are returned for the caller to use.

Size-blind laws (``dml``, ``bimix`` at one volume) cannot predict another size and are not candidates.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.intervals import REACH_SLACK, SizeStatus
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, FitOptions, SolverOptions

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
    checked: bool = True
    """Whether its fits on every run were made; ``False``: it could not win (a healthy law scored at least as well
    held out), so its health was not checked and ``healthy`` is ``False``."""

    def to_dict(self) -> dict[str, Any]:
        return {"law": self.law, "heldout_mre": self.mre, "heldout_bias": self.bias, "healthy": self.healthy,
                "checked": self.checked, "problems": list(self.problems), "k": self.k}  # fmt: skip


@dataclass(frozen=True)
class LawChoice:
    """The result of :func:`choose_law`."""

    law: str
    status: LawChoiceStatus
    heldout_size: float
    scores: tuple[LawScore, ...]
    fits: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The chosen law's fits on every run, per target (what ``mix optimize`` uses; not in :meth:`to_dict`)."""
    camel_k: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """CAMEL chosen: the ``k`` record per target (:func:`~mixlaw.decide.mixture.law_fits.camel_reduce`)."""
    reach_factor: float = float("nan")
    """How far the nested size holdout extrapolates: the largest fitted size over the next smaller one."""
    target_factor: float | None = None
    """The target size over the largest fitted size (``None``: no target given)."""

    @property
    def reach(self) -> SizeStatus | None:
        """Whether the target lies within the nested holdout's reach (``calibrated``: its intervals' size
        extrapolation error was measured that far) or beyond it (``beyond_nested``: extrapolated, not measured; on
        SlimPajama the 95 % intervals of CAMEL and ``mixture_additive`` covered 0 of 4 runs at 2.9x the largest
        fitted size, where the holdout reached 1.4x; ``docs/design/mix-size-cuts.md``). ``None`` without a target
        or below the largest fitted size."""
        if self.target_factor is None or not self.target_factor > 1.0 or not np.isfinite(self.reach_factor):
            return None
        far = np.log(self.target_factor) > np.log(self.reach_factor) + REACH_SLACK
        return SizeStatus.BEYOND_NESTED if far else SizeStatus.CALIBRATED

    @property
    def text(self) -> str:
        best = next(s for s in self.scores if s.law == self.law)
        head = f"law auto: {self.law} (held-out MRE {best.mre:.2%} at {self.heldout_size:.3g}, fitted below it)"
        if self.reach is SizeStatus.BEYOND_NESTED:
            head += (
                f"; its intervals at the target ({self.target_factor:.2f}x the largest fitted size) are NOT "
                f"calibrated at that extrapolation factor (the nested size holdout reaches {self.reach_factor:.2f}x)"
            )
        if self.status is LawChoiceStatus.ONLY_UNHEALTHY:
            return head + "; no candidate fit is healthy, so it rests on an unhealthy fit: " + "; ".join(best.problems)
        return head

    def to_dict(self) -> dict[str, Any]:
        reach = self.reach
        return {"law": self.law, "status": self.status.value, "heldout_size": self.heldout_size,
                "candidates": [s.to_dict() for s in self.scores], "text": self.text,
                **({"size_reach": {"status": reach.value, "reach_factor": self.reach_factor,
                                   "target_factor": self.target_factor}} if reach is not None else {})}  # fmt: skip


def _fit_quiet(law: Any, rows: pd.DataFrame, target: str, random_state: int, solver: SolverOptions) -> Any:
    from mixlaw.fit import fit_law

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # health is read from the result below
        return fit_law(
            law, rows, FitOptions(solver=solver, seed=random_state), target=target
        )


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


def _nested(
    name: str, opts: Mapping[str, Mapping[str, Any]], rows: Mapping[str, pd.DataFrame], domains: Sequence[str],
    size_column: str, top: float, random_state: int, solver: SolverOptions,
) -> tuple[float, float]:  # fmt: skip
    """Mean held-out MRE and bias over the targets of ``name`` fitted below ``top`` and predicting the runs at it
    (``opts``: the law's options per target, e.g. CAMEL's ``k``)."""
    from mixlaw.decide.mixture.compare import build_model

    mre, bias = [], []
    for target, r in rows.items():
        size = np.asarray(r[size_column], dtype=np.float64)
        law = build_model(name, opts[target], domains, size_column)
        res = _fit_quiet(law, r[size < top], target, random_state, solver)
        pred = np.asarray(res.predict(r[size >= top]), dtype=np.float64)
        obs = r.loc[size >= top, target].to_numpy(dtype=np.float64)
        rel = (pred - obs) / obs
        ok = bool(np.isfinite(rel).all())
        mre.append(float(np.mean(np.abs(rel))) if ok else np.inf)
        bias.append(float(np.mean(rel)) if ok else np.nan)
    return float(np.mean(mre)), float(np.mean(bias))


def _full(
    name: str, opts: Mapping[str, Any], rows: Mapping[str, pd.DataFrame], domains: Sequence[str], size_column: str,
    random_state: int, solver: SolverOptions,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[Any]]:  # fmt: skip
    """The fits on every run (what ``mix optimize`` would use for ``name``), CAMEL's ``k`` record, their warnings."""
    from mixlaw.decide.mixture.law_fits import build_mixture_law, camel_reduce, fit_recorded

    law = build_mixture_law(name, opts, domains, size_column)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if name == "camel":  # a degenerate fit is refitted with fewer components, as for --law camel
            fits, camel_k = camel_reduce(law, list(rows), rows, random_state, solver)
        else:
            fits, camel_k = {}, {}
            for t, r in rows.items():
                fits[t], more = fit_recorded(law, r, t, random_state, solver)
                for w in more:
                    warnings.warn(f"{law.name} on {t}: {w.message}", w.category, stacklevel=2)
    return fits, camel_k, list(caught)


def choose_law(
    rows: Mapping[str, pd.DataFrame],
    domains: Sequence[str],
    *,
    size_column: str = "n_params",
    law_options: Mapping[str, Mapping[str, Any]] | None = None,
    candidates: Sequence[str] = AUTO_CANDIDATES,
    random_state: int = 0,
    solver: SolverOptions = DEFAULT_SOLVER,
    progress: Callable[[str], None] | None = None,
    target_size: float | None = None,
) -> LawChoice:
    """Choose among ``candidates`` by the nested size holdout (module docstring); ``rows``: ``{target: its rows}``;
    ``solver``: the caps of every fit; ``progress``: one line per stage.

    Cost: every candidate is fitted once below the largest size (its held-out score); the fits on every run, which
    give its health, are made in the order of the scores and stop at the first healthy candidate that no unchecked
    one beats (the others cannot win: their rows say ``not checked``). The winner's fits on every run are returned
    (:attr:`LawChoice.fits`), so the caller does not refit it. ``target_size``: the size ``mix optimize`` predicts;
    when it lies beyond the holdout's reach the choice's text says its intervals are not calibrated there
    (:attr:`LawChoice.reach`).
    """
    sizes = np.unique(np.concatenate([np.asarray(r[size_column], dtype=np.float64) for r in rows.values()]))
    if sizes.size < 3:
        raise InputError(f"--law auto: the size holdout needs at least 3 fitted sizes in '{size_column}' "
                         f"(found {sizes.size}); name a law with --law")  # fmt: skip
    top = float(sizes.max())
    base = {name: dict((law_options or {}).get(name, {})) for name in candidates}
    score: dict[str, tuple[float, float]] = {}
    for name in candidates:
        if progress:
            progress(f"law auto: {name} fitted below {top:.3g}, predicting it")
        score[name] = _nested(name, dict.fromkeys(rows, base[name]), rows, domains, size_column, top, random_state,
                              solver)  # fmt: skip
    full: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]], list[Any]]] = {}
    problems: dict[str, list[str]] = {}
    k_used: dict[str, int] = {}
    while len(full) < len(candidates):
        unchecked = [n for n in candidates if n not in full]
        name = min(unchecked, key=lambda n: score[n][0])
        if progress:
            progress(f"law auto: {name} fitted on every run (its health)")
        full[name] = fits, camel_k, _ = _full(name, base[name], rows, domains, size_column, random_state, solver)
        problems[name] = [p for t, r in rows.items() for p in _problems(fits[t], t, r)]
        if camel_k:
            k_used[name] = max(int(v["k"]) for v in camel_k.values())
            if any(int(v["k"]) != int(v["k_requested"]) for v in camel_k.values()):  # score the law as it is used
                opts = {t: {**base[name], "k": int(v["k"])} for t, v in camel_k.items()}
                score[name] = _nested(name, opts, rows, domains, size_column, top, random_state, solver)
        rest = [score[n][0] for n in candidates if n not in full]
        if not problems[name] and np.isfinite(score[name][0]) and all(score[name][0] <= m for m in rest):
            break
    scores = tuple(
        LawScore(n, score[n][0], score[n][1], n in full and not problems[n], tuple(problems.get(n, ())),
                 k_used.get(n), checked=n in full)
        for n in candidates
    )  # fmt: skip
    healthy = [s for s in scores if s.healthy and np.isfinite(s.mre)]
    pool = healthy or [s for s in scores if np.isfinite(s.mre)] or list(scores)
    best = min(pool, key=lambda s: s.mre)
    status = LawChoiceStatus.CHOSEN if healthy else LawChoiceStatus.ONLY_UNHEALTHY
    fits, camel_k, caught = full[best.law]
    for w in caught:  # the kept fits' notes, once
        warnings.warn(w.message, w.category, stacklevel=2)
    return LawChoice(best.law, status, top, scores, fits=fits, camel_k=camel_k, reach_factor=float(top / sizes[-2]),
                     target_factor=None if target_size is None else float(target_size) / top)  # fmt: skip
