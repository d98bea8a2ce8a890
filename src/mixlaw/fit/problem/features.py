"""One feature path: the derived input columns a law declares, added to any table.

A law lists what it needs through :meth:`mixlaw.laws.Law.derived_inputs` (LR areas and the multi-power history
from each run's schedule, the PT/CPT split, …); :func:`add_features` builds whatever of that the table lacks and
leaves out the rows where the law is undefined. ``api.fit``, ``api.predict``, ``api.validate`` (and so the
bootstrap, which resamples the featured table) all go through it, so a law that fits on a table also predicts on
it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.laws._base import DerivedInput, Law

__all__ = ["add_features", "missing_derived", "DerivedInput", "BUILDERS"]


def _schedule(table: pd.DataFrame, law: Law, need: DerivedInput) -> pd.DataFrame:
    if "schedule" not in table.columns:
        raise InputError(
            f"law '{law.name}' needs schedule features {list(need.columns)}: give a RunStore (schedules are stored "
            "per run) or a table with a 'schedule' column, or add the columns yourself"
        )
    from mixlaw.schedules import add_schedule_features

    return add_schedule_features(table, **dict(need.options or {}))


#: ``source`` of a :class:`DerivedInput` → builder ``(table, law, need) -> table with the columns added``.
BUILDERS: dict[str, Callable[[pd.DataFrame, Law, DerivedInput], pd.DataFrame]] = {"schedule": _schedule}


def missing_derived(table: pd.DataFrame, law: Law, input_map: Mapping[str, str] | None = None) -> list[str]:
    """Derived columns of ``law`` that ``table`` lacks (under their ``input_map`` names)."""
    imap = dict(input_map or {})
    return [c for d in law.derived_inputs() for c in d.columns if imap.get(c, c) not in table.columns]


def add_features(
    table: pd.DataFrame,
    law: Law,
    *,
    input_map: Mapping[str, str] | None = None,
    drop_undefined: bool = True,
) -> pd.DataFrame:
    """Add the derived inputs ``law`` declares that ``table`` lacks; a table that has them all comes back as is.

    Parameters
    ----------
    table
        A RunTable (e.g. :func:`mixlaw.api.load_table` of a RunStore, which carries each run's ``schedule``).
    law
        The law whose :meth:`~mixlaw.laws.Law.derived_inputs` say what to build.
    input_map
        ``{law input: table column}``: a mapped column counts as present and is not rebuilt.
    drop_undefined
        Leave out the rows where a group's ``positive`` columns sum to ≤ 0 (e.g. step 0, where ``S1^(-alpha)`` is
        undefined). Only applied to groups that were built here, so a table given with its own features is never
        filtered.

    Returns
    -------
    pandas.DataFrame
        ``table`` itself when nothing was missing, else a new frame with the columns added (index reset when rows
        were dropped).
    """
    imap = dict(input_map or {})
    out = table
    for need in law.derived_inputs():
        if all(imap.get(c, c) in out.columns for c in need.columns):
            continue
        builder = BUILDERS.get(need.source)
        if builder is None:
            raise InputError(f"law '{law.name}' declares derived inputs from unknown source '{need.source}'")
        out = builder(out, law, need)
        absent = [c for c in need.columns if c not in out.columns]
        if absent:
            raise InputError(f"law '{law.name}': the '{need.source}' features lack columns {absent}")
        if drop_undefined and need.positive:
            total: Any = np.zeros(len(out))
            for c in need.positive:
                total = total + pd.to_numeric(out[c], errors="coerce").to_numpy(dtype=np.float64)
            out = out[total > 0].reset_index(drop=True)
    return out
