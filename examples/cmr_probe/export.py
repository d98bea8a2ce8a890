"""Export the CMR probe's RunStores to one RunTable CSV (``runs.csv``), later stores superseding earlier ones.

Each store is read with ``RunStore(path).to_frame(include_schedule=True)``. A run id present in a later store
replaces the same id of every earlier store (a retrained base), and a run of an earlier store whose parent run was
replaced is dropped (a CPT run of a base that no longer exists). The columns keep the order of the first store's
frame (new ones appended), except ``config_fingerprint``: the store's resume key of a run's configuration (recorded
only by runs trained after it was introduced), not data. The file is written with ``float_format="%.10g"``.

Usage::

    python examples/cmr_probe/export.py examples/cmr_probe/runs.csv \\
        --store /work/probe_work/cmr/cmr.db --store /work/probe_work/cmr12/cmr12.db
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from mixlaw.runs.store import RunStore

INTERNAL = ("config_fingerprint",)


def merge_stores(stores: list[Path]) -> pd.DataFrame:
    """The stores' RunTables merged run by run; see the module docstring for the superseding rule."""
    frames: list[pd.DataFrame] = []
    for path in stores:
        if not path.exists():
            raise SystemExit(f"error: store {path} not found")
        new = RunStore(str(path)).to_frame(include_schedule=True)
        replaced = set(new["run_id"])
        kept = []
        for f in frames:
            stale = f["run_id"].isin(replaced) | f["parent_run"].isin(replaced)
            kept.append(f[~stale])
        frames = [*kept, new]
    columns: list[str] = []
    for f in frames:
        columns += [c for c in f.columns if c not in columns and c not in INTERNAL]
    return pd.concat([f.reindex(columns=columns) for f in frames], ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--store", type=Path, action="append", required=True, help="RunStore (repeat; later wins)")
    args = ap.parse_args()
    frame = merge_stores(args.store)
    frame.to_csv(args.out, index=False, float_format="%.10g")
    runs = frame["run_id"].nunique()
    no_schedule = frame.groupby("run_id")["schedule"].apply(lambda s: s.isna().all())
    print(f"{runs} runs, {len(frame)} rows -> {args.out}; runs without a schedule: {int(no_schedule.sum())}")


if __name__ == "__main__":
    main()
