"""One law fitted to several targets of one table at once: the polishes of all the point fits in one batched solve.

:func:`fit_targets` runs one :class:`~mixlaw.fit.Fitter` per target up to its polish, serves every polish request
together (:func:`mixlaw.fit.solver.multi.solve_requests`: one solve where the targets share their inputs, else
one each) and finishes each fit from its own rows. Each result is the fit :func:`~mixlaw.fit.fit_law` gives for that
target alone (its own starts, screening, seed and re-polish), up to the rounding of batched kernels; what is shared
is the solver's fixed cost per iteration. Warnings are recorded per target, not emitted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.fit.fitter import Fitter
from mixlaw.fit.result import FitResult
from mixlaw.fit.solver.multi import solve_requests
from mixlaw.fit.solver.pools import threads
from mixlaw.laws import Law
from mixlaw.options import FitOptions

__all__ = ["fit_targets"]


def fit_targets(
    law: Law | str,
    tables: Mapping[str, pd.DataFrame],
    options: FitOptions | None = None,
    *,
    input_map: Mapping[str, str] | None = None,
    source: str = "table",
    n_threads: int | None = 1,
    halt: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[dict[str, FitResult], dict[str, list[warnings.WarningMessage]]]:
    """Fit ``law`` to ``tables[t]`` with target column ``t`` for every ``t``; the results and each fit's recorded
    warnings, both keyed by target. ``options``, ``n_threads`` and ``halt``: as :class:`~mixlaw.fit.Fitter` takes
    them, the same for every fit."""
    fitters = {t: Fitter(law, options, n_threads=n_threads, halt=halt) for t in tables}
    caught: dict[str, list[warnings.WarningMessage]] = {t: [] for t in tables}

    def step(t: str, fn: Any) -> Any:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                return fn()
            except StopIteration:
                return None
            finally:
                caught[t].extend(w)

    with threads(n_threads):
        gens = {
            t: f._fit_steps(tables[t], target=t, input_map=input_map, source=source) for t, f in fitters.items()
        }
        requests = {t: step(t, g.__next__) for t, g in gens.items()}
        solved = solve_requests(list(requests.values()))
        for (t, g), sol in zip(gens.items(), solved, strict=True):
            step(t, lambda g=g, sol=sol: g.send(sol))
    return {t: f.result for t, f in fitters.items()}, caught
