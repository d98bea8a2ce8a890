"""Running any registered decision: options from strings or a dataclass, the context, the result.

:func:`run_decision` is what :func:`mixlaw.api.decide` and ``mixlaw decide`` call; :func:`describe_decisions` is
what ``mixlaw decisions`` lists.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mixlaw.decide.contract import DecisionContext, DecisionResult
from mixlaw.decide.registry import DECISIONS, build_options, decision_names, get_decision
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, IntervalOptions, SolverOptions

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["describe_decisions", "run_decision"]


def run_decision(
    table: pd.DataFrame | None,
    name: str,
    options: Any = None,
    *,
    intervals: IntervalOptions | None = None,
    solver: SolverOptions | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> DecisionResult:
    """Run the decision ``name`` on ``table``.

    ``options``: the decision's ``Options`` instance, or a mapping of field values (strings are coerced by the
    field types, as on the command line)."""
    decision = get_decision(name)
    if options is None or isinstance(options, Mapping):
        opts = build_options(decision, dict(options or {}))
    elif isinstance(options, decision.Options):
        opts = options
    else:
        raise InputError(f"expected options of decision {name!r} as {decision.Options.__name__} or a mapping, "
                         f"got {type(options).__name__}")  # fmt: skip
    if table is None and decision.needs_table:
        raise InputError(f"decision {name!r} needs a run table")
    ctx = DecisionContext(solver or DEFAULT_SOLVER, intervals or IntervalOptions(), progress)
    return decision.decide(table, opts, ctx)


def describe_decisions() -> list[dict[str, Any]]:
    """Every registered decision: name, summary and options (name, type, default)."""
    out = []
    for n in decision_names():
        cls = DECISIONS[n]
        hints = typing.get_type_hints(cls.Options)
        opts = []
        for f in dataclasses.fields(cls.Options):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # fmt: skip
            opts.append({"name": f.name, "type": str(hints[f.name]).replace("typing.", ""), "default": default})
        out.append({"name": n, "summary": cls.summary, "needs_table": cls.needs_table, "options": opts})
    return out
