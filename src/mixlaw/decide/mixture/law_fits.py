"""The law fits of ``mix optimize``: building the mixture and benchmark laws, fitting them under the solver options,
CAMEL's component reduction, and what the result says about each fit (summary, extrapolation).

Every fit takes the decision's :class:`~mixlaw.options.SolverOptions` explicitly (``--max-iter``; default the
engine's adaptive limit). Warnings are recorded during a fit and emitted once, naming the law and the target.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.options import FitOptions, SolverOptions

__all__ = [
    "build_benchmark",
    "build_mixture_law",
    "camel_reduce",
    "emit_fit_warnings",
    "extrapolation_notes",
    "fit_all_recorded",
    "fit_emitting",
    "fit_recorded",
    "fit_summary",
]


def build_mixture_law(law_name: str, law_options: Mapping[str, Any], domains: Sequence[str], size_column: str) -> Any:
    from mixlaw.decide.mixture.compare import build_model

    law = build_model(law_name, law_options, domains, size_column)
    if not any(str(c).startswith("w_") for c in law.inputs):
        raise InputError(f"--law {law_name}: not a mixture law (it reads no w_<domain> column)")
    return law


def fit_recorded(
    law: Any, rows: pd.DataFrame, target: str, random_state: int, solver: SolverOptions, halt: Any = None
) -> tuple[Any, list[Any]]:
    """The fit under ``solver``'s cap and the warnings it raised (recorded, not emitted); ``halt``: the Fitter's
    rule for stopping once the kind of optimum is settled (:mod:`mixlaw.fit.solver.halt`)."""
    from mixlaw.fit import fit_law

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law(
            law,
            rows,
            FitOptions(solver=solver, seed=random_state),
            target=target,
            halt=halt,
        )
    return res, list(caught)


def emit_fit_warnings(law: Any, target: str, caught: Sequence[Any]) -> None:
    for w in caught:  # re-emit once, naming the law (boundary notes are expected on small fits)
        warnings.warn(f"{law.name} on {target}: {w.message}", w.category, stacklevel=4)


def fit_emitting(law: Any, rows: pd.DataFrame, target: str, random_state: int, solver: SolverOptions) -> Any:
    res, caught = fit_recorded(law, rows, target, random_state, solver)
    emit_fit_warnings(law, target, caught)
    return res


def fit_all_recorded(
    law: Any, rows: Mapping[str, pd.DataFrame], random_state: int, solver: SolverOptions, halt: Any = None
) -> dict[str, tuple[Any, list[Any]]]:
    """:func:`fit_recorded` for every target of ``rows`` (``{target: its rows}``), the polishes in one batched solve
    where the targets share their inputs (:func:`mixlaw.fit.many.fit_targets`; each fit as it is alone)."""
    from mixlaw.fit.many import fit_targets

    res, caught = fit_targets(
        law, rows, FitOptions(solver=solver, seed=random_state), halt=halt
    )
    return {t: (res[t], caught[t]) for t in rows}


def camel_reduce(
    law: Any, targets: Sequence[str], rows: Mapping[str, pd.DataFrame], random_state: int, solver: SolverOptions
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Fit CAMEL to every target, check each fit's health, refit a degenerate one with fewer components.

    A fit whose components are switched off or at the exponential limit
    (:func:`mixlaw.decide.mixture.camel_k.camel_health`) is not a ``k``-component CAMEL law: it is refitted with
    ``k − 1`` components (or as many as were CAMEL components, if fewer) until the fit is healthy or ``k = 1``;
    only the kept fit's warnings are emitted. Returns the kept fits and per target ``{"k_requested", "k",
    "status", "health", "dropped": [health of each refused fit]}`` (``status``: ``healthy``, ``reduced`` or
    ``degenerate``, the last when even ``k = 1`` is degenerate).

    The targets that need a fit with the same ``k`` are fitted together (:func:`fit_all_recorded`: one batched
    solve). A fit with ``k > 1`` is stopped once every start still running is at the exponential limit and holds
    the lowest objective (:func:`~mixlaw.decide.mixture.camel_k.at_exponential_limit`, :mod:`mixlaw.fit.solver.halt`):
    it would be refused wherever along that limit it ended (on the shipped probes 250 instead of 750-950 iterations
    per loss); a refused fit's record says ``halted``. A ``k = 1`` fit, which is kept whatever its health, always
    runs to its end.
    """
    from mixlaw.decide.mixture.camel_k import FitStatus, at_exponential_limit, camel_health

    fits: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    dropped: dict[str, list[dict[str, Any]]] = {t: [] for t in targets}
    pending = {t: int(law.k) for t in targets}  # the k each unfinished target is fitted with next
    while pending:
        k = max(pending.values())
        group = [t for t in targets if pending.get(t) == k]
        lw = law if k == law.k else build_mixture_law("camel", {**dict(law.options), "k": k}, law.domains, law.size_col)
        done = fit_all_recorded(lw, {t: rows[t] for t in group}, random_state, solver,
                                at_exponential_limit(lw) if k > 1 else None)  # fmt: skip
        for t in group:
            cur, caught = done[t]
            health = camel_health(cur.law, cur.params, rows[t])
            if health.status is FitStatus.DEGENERATE and k > 1:
                dropped[t].append({**health.to_dict(), "halted": bool(cur.settings.get("halted", False))})
                pending[t] = max(1, min(k - 1, health.k_effective))
                continue
            del pending[t]
            emit_fit_warnings(cur.law, t, caught)
            fits[t] = cur
            status = "degenerate" if health.status is FitStatus.DEGENERATE else ("reduced" if dropped[t] else "healthy")
            out[t] = {"k_requested": law.k, "k": cur.law.k, "status": status, "health": health.to_dict(),
                      "dropped": dropped[t]}  # fmt: skip
    return {t: fits[t] for t in targets}, {t: out[t] for t in targets}


def fit_summary(res: Any, n_rows: int) -> dict[str, Any]:
    ident = dict(res.identifiability or {})
    return {
        "law": res.law_name,
        "params": res.params,
        "n_points": res.n_points,
        "n_rows": n_rows,
        "status": str(res.status),
        "r2": res.metrics.get("r2"),
        "identifiability": str(ident.get("status", "")),
        "identifiable": None if not ident else ident.get("status") != "unidentifiable",
        "weakest": str(ident.get("weakest", "") or ""),
        "running_off": list(ident.get("running_off", []) or []),
        "weak": [*ident.get("undetermined", []), *ident.get("weak", [])],
        "at_bounds": list(res.at_bounds()),
    }


def build_benchmark(losses: Sequence[str], benchmark: str, scale: float) -> Any:
    from mixlaw.laws import get_law

    return get_law("benchmark_logistic", losses=tuple(losses), benchmark=benchmark, scale=scale)


def extrapolation_notes(
    fits: Mapping[str, Any], doms: Sequence[str], w: Any, fixed: Mapping[str, float]
) -> dict[str, str]:
    """Per fitted target, how far the optimum (its mixture at the fixed inputs, e.g. the target size) lies beyond
    the fitted range of each input (:mod:`mixlaw.fit.evaluate.extrapolation`; targets predicted inside every range are
    left out): "×2.2 in n_params beyond the largest fitted (1.13e+05)"."""
    from mixlaw.fit.evaluate.extrapolation import extrapolation_of

    at = {f"w_{d}": [float(v)] for d, v in zip(doms, np.asarray(w, dtype=np.float64), strict=True)}
    at |= {k: [float(v)] for k, v in fixed.items()}
    out = {}
    for t, res in fits.items():
        try:
            e = extrapolation_of(res, at)[0]
        except InputError:  # a benchmark law whose inputs are not the mixture's: nothing to say
            continue
        if e is not None:
            out[t] = str(e["text"])
    return out
