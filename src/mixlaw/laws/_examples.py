"""Realistic simulated inputs for the schedule-aware laws (their ``example_inputs``).

LR-area inputs (S1, S2, their PT/CPT split, the multi-power history) are not independent numbers: they come from
real schedules. This builds a small RunTable of pre-training runs under several schedules and of continual
pre-training runs branched from them, computes the features with :func:`mixlaw.schedules.add_schedule_features`,
and samples rows from it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def schedule_feature_rows(
    n: int,
    rng: np.random.Generator,
    *,
    cpt: bool,
    replay: bool = False,
    multi_power_bins: int | None = None,
    peak_lr: float = 2e-4,
    pt_steps: int = 20_000,
    cpt_steps: int = 20_000,
) -> pd.DataFrame:
    """``n`` rows of schedule features drawn from simulated PT (and CPT) runs under varied schedules."""
    from mixlaw.schedules import add_schedule_features

    pt_specs = {
        "pt-const": f"constant:peak={peak_lr},steps={pt_steps},warmup=500",
        "pt-cos": f"cosine:peak={peak_lr},steps={pt_steps},warmup=500,final={peak_lr / 10}",
        "pt-wsd": f"wsd:peak={peak_lr},steps={pt_steps},warmup=500,decay={pt_steps // 5}",
        "pt-wsd-short": f"wsd:peak={peak_lr},steps={pt_steps},warmup=500,decay={pt_steps // 20}",
        "pt-step": f"multistep:peak={peak_lr},steps={pt_steps},warmup=500,milestones={pt_steps // 2}"
        f"/{3 * pt_steps // 4},gamma=0.3",
    }
    rows: list[dict[str, object]] = []
    schedules: dict[str, str] = {}
    # Early steps on a log grid, the annealing-heavy second half densely: the loss-drop terms live there.
    eval_steps = np.unique(
        np.concatenate([np.geomspace(50, pt_steps, 24), np.linspace(pt_steps / 2, pt_steps, 33)]).astype(int)
    )
    for rid, spec in pt_specs.items():
        schedules[rid] = spec
        rows += [{"run_id": rid, "step": int(s), "parent_run": None, "w_general": 1.0} for s in eval_steps]
    if cpt:
        cpt_eval = np.unique(np.geomspace(20, cpt_steps, 24).astype(int))
        shares = (0.1, 0.3, 0.5, 0.8) if replay else (0.0,)
        for parent in ("pt-const", "pt-wsd", "pt-cos"):
            for share in shares:
                for kind, spec in (
                    ("const", f"constant:peak={peak_lr},steps={cpt_steps},warmup=200"),
                    ("wsd", f"wsd:peak={peak_lr},steps={cpt_steps},warmup=200,decay={cpt_steps // 4}"),
                    ("cos", f"cosine:peak={peak_lr / 2},steps={cpt_steps},warmup=200,final={peak_lr / 20}"),
                ):
                    rid = f"cpt-{parent}-{kind}-{share}"
                    schedules[rid] = spec
                    rows += [
                        {"run_id": rid, "step": int(s), "parent_run": parent, "w_general": share} for s in cpt_eval
                    ]
    table = pd.DataFrame(rows)
    feats = add_schedule_features(
        table, schedules, replay_column="w_general" if replay else None, multi_power_bins=multi_power_bins
    )
    if cpt:
        feats = feats[feats["parent_run"].notna()]
    idx = rng.choice(len(feats), size=n, replace=n > len(feats))
    return feats.iloc[np.sort(idx)].reset_index(drop=True)
