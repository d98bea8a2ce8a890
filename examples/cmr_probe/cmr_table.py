"""The CMR decision of the example runs as a markdown table (``cmr_table.md``), produced by the main job's code.

Runs exactly what ``mixlaw cmr examples/cmr_probe/runs.csv --general-eval general --domain-eval legal --domain-eval
code --bootstrap 50`` decides (seed 0, ε = 0.05, λ = ∞) and writes one row per (domain, size): the answer as the
command prints it (a CMR with its 95 % interval, or the bracket of trained ratios when no law value agrees with the
per-ratio table), how it was read, the table's bracket (largest trained ratio marked feasible, smallest marked
infeasible), the tolerance boundary (largest share within ε at the budget, a separate number) and the model-free
crossing, and the CMR read relative to the R = 0 control with its interval. ``tests/test_cmr_example_table.py``
regenerates it and compares it with the file.

Usage: python examples/cmr_probe/cmr_table.py [--out examples/cmr_probe/cmr_table.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BOOTSTRAP = 50
SEED = 0


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def table_markdown(runs: pd.DataFrame, bootstrap: int = BOOTSTRAP, seed: int = SEED) -> str:
    """The markdown table of the main job's decision on ``runs``."""
    from mixlaw.decide.cmr import critical_mixture_ratio_by_domain
    from mixlaw.fmt import fmt_size

    decs = critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["legal", "code"],
                                            bootstrap=bootstrap, random_state=seed, workers=1)  # fmt: skip
    lines = [
        f"| domain | size | answer ({bootstrap} resamples, 95 %) | read from | table's bracket "
        "(largest feasible, smallest infeasible trained R) | tolerance boundary | model-free crossing | status | "
        "CMR relative to the R = 0 control |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d, dec in decs.items():
        for s in dec.sizes:
            ans = s.answer()
            if s.ci is not None:
                ans += f" [{s.ci[0]:.2f}, {s.ci[1]:.2f}]"
            lo, hi = s.bracket
            br = f"{'—' if lo is None else f'{lo:g}'}, {'—' if hi is None else f'{hi:g}'}"
            cr = s.control_reading or {}
            rel = _num(cr.get("cmr")) + (f" [{cr['ci'][0]:.3f}, {cr['ci'][1]:.3f}]" if cr.get("ci") else "")
            lines.append(f"| {d} | {fmt_size(s.n_params)} | {ans} | {s.cmr_source} | {br} | "
                         f"{_num(s.tolerance_boundary)} | {_num(s.model_free_crossing)} | {s.status} | "
                         f"{rel} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(HERE / "runs.csv"))
    ap.add_argument("--out", default=str(HERE / "cmr_table.md"))
    a = ap.parse_args()
    write_atomic(Path(a.out), table_markdown(pd.read_csv(a.runs)))


if __name__ == "__main__":
    main()
