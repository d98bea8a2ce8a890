"""The table options of every verb that reads runs, declared once: ``--map``, ``--set``, ``--drop``, ``--where``,
``--derive``, ``--final``, ``--every``, ``--steps``, ``--allow-missing``.

A verb declares the ones it takes with these annotated types and makes one call, :func:`load` (or
:func:`table_options` when it hands the bundle on), e.g.::

    def fit_cmd(table: TableArg = None, maps: MapOpt = None, set_: SetOpt = None, drop: DropOpt = None,
                where: WhereOpt = None, derive: DeriveOpt = None, final: FinalOpt = False,
                every: EveryOpt = None, steps: StepsOpt = None, allow_missing: AllowMissingOpt = False, ...):
        df = load(table or store, needed=[loss_column], **table_kw(locals()))

Only typer is imported at module level (``mixlaw --help`` stays fast); :mod:`mixlaw.runs.select` does the work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mixlaw.cli._common import DeriveOpt, MapOpt, WhereOpt

if TYPE_CHECKING:
    import pandas as pd

    from mixlaw.api.runs import TableOptions

__all__ = [
    "MapOpt",
    "SetOpt",
    "DropOpt",
    "WhereOpt",
    "DeriveOpt",
    "FinalOpt",
    "EveryOpt",
    "StepsOpt",
    "AllowMissingOpt",
    "MetaOpt",
    "TABLE_OPTION_NAMES",
    "table_options",
    "table_kw",
    "check_source",
    "load",
]

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Add a constant column, e.g. --set n_params=18915328 (repeatable).")
]
DropOpt = Annotated[
    list[str] | None, typer.Option("--drop", help="Leave a column out, by its logged or canonical name (repeatable).")
]
FinalOpt = Annotated[
    bool, typer.Option("--final", help="Keep each run's last evaluation (its largest step with a value).")
]
EveryOpt = Annotated[int | None, typer.Option("--every", help="Keep the steps that are multiples of K.")]
StepsOpt = Annotated[str | None, typer.Option("--steps", help="Keep steps FIRST:LAST (inclusive; 1000:, :5000).")]
MetaOpt = Annotated[
    Path | None,
    typer.Option(
        "--meta",
        help="CSV of run metadata (n_params, w_*, phase, parent_run, tokens_per_step, schedule) keyed by run_id "
        "or a glob over the run's id, folder or file.",
    ),
]
AllowMissingOpt = Annotated[
    bool,
    typer.Option("--allow-missing", help="Leave out rows with an empty needed cell (ingest: accept empty cells)."),
]

#: The verb parameters the bundle reads (a verb's ``locals()`` may hold any subset).
TABLE_OPTION_NAMES = ("maps", "set_", "drop", "where", "derive", "final", "every", "steps", "allow_missing")


def table_kw(scope: Mapping[str, Any]) -> dict[str, Any]:
    """The table options among a verb's parameters (pass ``locals()``), ``--meta`` included where the verb has it."""
    return {k: scope[k] for k in (*TABLE_OPTION_NAMES, "meta") if k in scope}


def _pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    from mixlaw.errors import InputError

    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"expected {what}, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip().strip("'\"").strip()
        if not k:
            raise InputError(f"expected {what} with a name before '=', got {item!r}")
        if k in out:
            raise InputError(f"expected one {what.split()[0]} per column, got {k!r} twice")
        out[k] = v.strip().strip("'\"").strip()
    return out


def table_options(
    *,
    maps: Sequence[str] | None = None,
    set_: Sequence[str] | None = None,
    drop: Sequence[str] | None = None,
    where: str | None = None,
    derive: Sequence[str] | None = None,
    final: bool = False,
    every: int | None = None,
    steps: str | None = None,
    allow_missing: bool = False,
    meta: str | Path | None = None,
) -> TableOptions:
    """The CLI's table options as one :class:`~mixlaw.runs.select.TableOptions`."""
    from mixlaw import limits
    from mixlaw.api.runs import TableOptions, parse_column_map, parse_set, parse_steps

    if every is not None:
        limits.count(every, "--every")  # before any work: 2^63 overflowed the step arithmetic
    return TableOptions(
        column_map=parse_column_map(maps),
        set_values=parse_set(list(set_ or ())),
        drop=tuple(drop or ()),
        where=where or None,
        derive=_pairs(derive, "--derive column=expression"),
        final=final,
        every=every,
        steps=parse_steps(steps),
        allow_missing=allow_missing,
        meta=meta,
    )


def check_source(source: object) -> None:
    """A table path that does not exist is the error :func:`mixlaw.runs.select.load_runs` gives, raised before
    pandas or the fitting engine loads (a typo in a path answers in a fraction of a second)."""
    if isinstance(source, str | Path) and not str(source).startswith("wandb://") and not Path(source).exists():
        from mixlaw.errors import InputError

        raise InputError(f"expected an existing file or store, got no such path {source}")


def load(
    source: str | Path,
    *,
    needed: Sequence[str | None] = (),
    include_schedule: bool = True,
    **options: Any,
) -> pd.DataFrame:
    """Read ``source`` (a table file or a RunStore) with the table options (``**table_kw(locals())``)."""
    check_source(source)
    from mixlaw.api.runs import load_runs

    df = load_runs(
        source, table_options(**options), needed=[c for c in needed if c], include_schedule=include_schedule
    )
    for note in df.attrs.get("notes", ()):
        typer.echo(note, err=True)
    return df
