"""Seed replicates of chosen (size, ratio) cells of the CMR probe grid, from the grid's own PT bases.

``mixlaw probe`` has one seed per sweep, and a second sweep with another seed would need its own PT bases (and
its run ids would collide with the grid's). This script plans ``spec.toml`` exactly as ``mixlaw probe run`` does,
keeps the CPT runs of the requested cells, and re-runs them with other seeds: same parent checkpoint (weights and
AdamW state), same schedule and evaluations, only the seed of the CPT data sampler (which sequences are drawn, in
which order) differs. Run ids get ``-seed<k>``; ``parent_run`` stays the grid's PT run, so the replicates join the
grid's RunTable (column ``seed``) and ``mixlaw cmr`` sees two runs at those (size, ratio) cells.

The spread it measures is CPT data-order spread at a fixed base, which is what a lab deciding the mixture for
*its* base model faces; it does not vary the base's initialisation.

Usage::

    python examples/cmr_probe/seeds.py examples/cmr_probe/spec.toml --store /work/probe_work/cmr/cmr.db \\
        --cell 25k:0.5 --cell 100k:0.5 --seed 1 --workers 2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from mixlaw.errors import MixlawError
from mixlaw.probe.sweep import Job, load_spec, plan, run_sweep


def replicate_jobs(spec: Path, cells: list[tuple[str, float]], seeds: list[int]) -> list[Job]:
    """The grid's CPT jobs at ``cells`` (size, domain share R), once per seed, with ``-seed<k>`` run ids."""
    jobs = [j for j in plan(load_spec(spec)) if j.config.phase == "cpt"]
    out: list[Job] = []
    for size, r in cells:
        hits = [j for j in jobs if j.config.size == size and abs(float(j.config.meta["ratio"]) - r) < 1e-12]
        if not hits:
            raise SystemExit(f"error: spec {spec} has no CPT runs at size {size!r} and R = {r:g}")
        for j in hits:
            for k in seeds:
                cfg = dataclasses.replace(j.config, run_id=f"{j.run_id}-seed{k}", seed=k)
                out.append(Job(cfg, depends_on=j.depends_on))  # parent outside this job list: its checkpoint
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--cell", action="append", required=True, help="SIZE:R, e.g. 25k:0.5 (repeat)")
    ap.add_argument("--seed", action="append", type=int, required=True, help="seed of the replicate (repeat)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--log", type=Path, default=None)
    args = ap.parse_args()
    cells = []
    for c in args.cell:
        size, _, r = c.partition(":")
        try:
            cells.append((size, float(r)))
        except ValueError:
            raise SystemExit(f"error: --cell {c!r}: expected SIZE:R, e.g. 25k:0.5") from None
    if 0 in args.seed:
        raise SystemExit("error: --seed 0 is the grid's own seed")
    try:
        jobs = replicate_jobs(args.spec, cells, args.seed)
        log = args.log or args.store.with_suffix(args.store.suffix + ".log")
        results = run_sweep(jobs, args.store, workers=args.workers, log_path=log)
    except MixlawError as e:
        raise SystemExit(f"error: {e}") from None
    bad = {k: v for k, v in results.items() if v != "finished"}
    print(f"{len(results) - len(bad)}/{len(results)} replicate runs finished; store {args.store}")
    for k, v in bad.items():
        print(f"{k}: {v}", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
