"""The new-pool flags of ``mix optimize --law causalmix`` (``--pool-stats``, ``--pool``) and its report writer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["PoolOpt", "PoolStatsOpt", "pool_report", "pool_target"]

PoolStatsOpt = Annotated[
    list[str] | None,
    typer.Option("--pool-stats", help="--law causalmix: the new pool's statistics, stat=value,... (the covariates)."),
]
PoolOpt = Annotated[
    str | None, typer.Option("--pool", help="--law causalmix: propose for this pool of the table (its statistics).")
]


def pool_target(stats: list[str] | None, name: str | None, law: str) -> dict[str, Any]:
    """The law option ``new_pool`` of ``--law causalmix``: ``--pool-stats`` or ``--pool`` (not both; ``{}`` when
    neither; one-line errors)."""
    from mixlaw.cli._common import parse_weights
    from mixlaw.errors import InputError

    if not stats and name is None:
        return {}
    if law != "causalmix":
        raise InputError("--pool/--pool-stats: only --law causalmix proposes for a data pool")
    if stats and name is not None:
        raise InputError("--pool-stats and --pool: give the new pool one way")
    return {"new_pool": parse_weights(stats, "--pool-stats") if stats else name}


def pool_report(path: Path, out: dict[str, Any], source: str) -> str:
    """Write the causalmix report (the shares-vs-statistic plots, the leave-one-pool-out check); its path."""
    from mixlaw.report.causalmix_plot import write_causalmix_report

    return str(write_causalmix_report(path, out, source=source))
