"""Read time of a 2-row CSV with 20,000 columns (issue 12 item 4: it took more than 30 s; target < 3 s).

    PYTHONPATH=src python benchmarks/wide_csv.py [--columns 20000] [--profile]

Writes the file to a temporary directory, reads it with :func:`mixlaw.runs.io.read_table` (the reader and the
one validator) and prints the wall and CPU seconds (on a shared machine the CPU time is the steadier figure); the
last line is ``seconds=<wall read time>``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path


def write_wide(path: Path, n_columns: int) -> None:
    names = ["run_id", "step", "n_params", "tokens", "loss"] + [f"eval_{j}" for j in range(n_columns - 5)]
    rows = [["a", "0", "1e6", "1e9", "3.0"], ["a", "100", "1e6", "2e9", "2.9"]]
    for r, row in enumerate(rows):
        row.extend(f"{2.5 + 0.001 * (j % 997) + 0.1 * r:.4f}" for j in range(n_columns - 5))
    path.write_text("\n".join(",".join(r) for r in [names, *rows]) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", type=int, default=20_000)
    ap.add_argument("--profile", action="store_true", help="print the 15 most expensive calls")
    args = ap.parse_args()
    from mixlaw.runs.io import read_table

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.csv"
        write_wide(path, args.columns)
        read_table(path)  # warm the imports
        prof = cProfile.Profile(time.process_time) if args.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        table = read_table(path)
        if prof is not None:
            prof.disable()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
    print(f"read a 2-row CSV with {args.columns:,} columns ({table.shape[1]:,} stored) in {dt:.2f} s ({cpu:.2f} s CPU)")
    print(f"seconds={dt:.3f}")


if __name__ == "__main__":
    main()
