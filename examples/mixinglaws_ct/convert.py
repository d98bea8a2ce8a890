"""Convert the Data Mixing Laws continual pre-training runs into a mixlaw RunTable (``runs.csv``).

Source: ``../../../shared/data/external/mixinglaws/tidy/ct.csv`` and ``pipeline/valid_weight.json`` (yegcjs/mixinglaws,
commit 8ad3e1244b53294ded55a96ae325f4112ce3bc63; see README.md here). Run from this folder:
``python convert.py [path/to/mixinglaws]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
TOKENS_PER_CPT_STEP = 4096 * 256  # pipeline/utils.py BSZ (unverified for the CPT runs, see README)
TOKENS_PER_PT_STEP = 1024 * 2048  # Pythia pre-training batch
N_PARAMS = 18_915_328  # Pythia-70M non-embedding (pipeline/utils.py)
PARENT = "pythia70m-step20000"


def main(src: Path) -> None:
    raw = pd.read_csv(src / "tidy" / "ct.csv")
    weights = json.loads((src / "pipeline" / "valid_weight.json").read_text())
    wide = raw.pivot_table(index=["run", "step"], columns="valid_domain", values="loss", aggfunc="first")
    missing = sorted(set(weights) - set(wide.columns))
    if missing:
        raise SystemExit(f"missing Pile domains in ct.csv: {missing}")
    general = sum(wide[d] * w for d, w in weights.items())
    rows = []
    for (run, step), loss in wide.iterrows():
        is_pt = run.startswith("base_")
        p_pile = None if is_pt else float(run.rsplit("_", 1)[1].split("-")[1])
        row = {
            "run_id": PARENT if is_pt else f"ct-pile{p_pile:g}",
            "step": 20000 if is_pt else int(step),
            "tokens": 20000 * TOKENS_PER_PT_STEP if is_pt else int(step) * TOKENS_PER_CPT_STEP,
            "n_params": N_PARAMS,
            "size": "70M",
            "phase": "pt" if is_pt else "cpt",
            "parent_run": "" if is_pt else PARENT,
            "split": "check" if p_pile == 0.28515625 else "fit",
            "w_general": 1.0 if is_pt else p_pile,
            "w_python": 0.0 if is_pt else 1.0 - p_pile,
            "loss_general": float(general.loc[(run, step)]),
            "loss_python": float(loss["python"]),
        }
        row.update({f"loss_pile_{d}": float(loss[d]) for d in sorted(weights)})
        rows.append(row)
    out = pd.DataFrame(rows).sort_values(["phase", "run_id", "step"], ascending=[False, True, True])
    out.to_csv(HERE / "runs.csv", index=False, float_format="%.10g")
    print(f"wrote {len(out)} rows to {HERE / 'runs.csv'}")


if __name__ == "__main__":
    default = HERE.parents[2] / "shared" / "data" / "external" / "mixinglaws"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
