"""Write a continual pre-training grid as four trainers would log it, with a known critical mixture ratio.

A 125M model continued from one base checkpoint on a general + legal mix at legal shares 0.2, 0.3, 0.45, 0.6 and
0.8, 2,000 steps of 2^20 tokens each: train loss and learning rate every 10 steps, evaluations every 100 steps (none
at step 0), and -- as in real logs -- neither the mixture, the model size nor the token count in the files. The
grid brackets the CMR (0.589): 0.8 lies above it, as a probe grid meant to locate the CMR must (with every share
below the CMR the answer can only be "CMR >= the largest share tried"). The runs are written by four loggers:

- ``wandb/cpt-legal-0.2.csv`` and ``wandb/cpt-legal-0.8.csv``: W&B history exports (``_step``, ``train/loss``,
  ``eval/general_loss``, ...);
- ``hf/cpt-legal-0.3/checkpoint-2000/trainer_state.json``: a Hugging Face Trainer state (``log_history``);
- ``tb/cpt-legal-0.45/events.out.tfevents...``: TensorBoard event files;
- ``lightning/cpt-legal-0.6/version_0/metrics.csv``: a Lightning ``CSVLogger`` file.

The general-loss increments follow `mixlaw.design.simulate_cmr` with the CMR law ``TRUE_CMR_LAW``
(laws.md §6.6 with a shifted offset), so the true CMR at the 2,000-step budget is :func:`true_cmr`. Also written:
``meta.csv``, the one side table the walkthrough ``docs/own-logs.md`` asks the user to write.

Usage: ``python examples/own_logs/make_logs.py OUT_DIR`` (prints the true CMR).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pandas as pd

RATIOS = (0.2, 0.3, 0.45, 0.6, 0.8)
TOKENS_PER_STEP = 2**20
STEPS = 2000
EVAL_EVERY = 100
TRAIN_EVERY = 10
N_PARAMS = 125_000_000
BASE = {"general": 2.0, "legal": 2.5}  # the base checkpoint's eval losses (T = 0)
LR = 1e-4
WARMUP = 50
#: CMR law R = alpha4 * T^s4 + beta3 (T in units of 20 steps' tokens, so the budget is T = 100).
TRUE_CMR_LAW = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.19}
TOKEN_UNIT = STEPS * TOKENS_PER_STEP / 100
WRITERS = ("wandb", "hf", "tb", "lightning")


def true_cmr() -> float:
    """The CMR law's share at the budget (T = 100): the answer the decision should recover."""
    p = TRUE_CMR_LAW
    return float(p["alpha4"] * 100.0 ** p["s4"] + p["beta3"])


def run_name(ratio: float) -> str:
    return f"cpt-legal-{ratio:g}"


def _lr(step: int) -> float:
    return LR * min(1.0, step / WARMUP)


def _curves(seed: int, noise: float) -> dict[float, pd.DataFrame]:
    """Per ratio: the eval rows (steps 100..2000) and the train rows (every 10 steps) of one run."""
    from mixlaw.design.simulate_cmr import simulate_cmr_runs

    sim = simulate_cmr_runs(RATIOS, TRUE_CMR_LAW, token_unit=TOKEN_UNIT, noise=noise, n_params=N_PARAMS,
                            domain="legal", loss_general=BASE["general"], loss_domain=BASE["legal"],
                            random_state=seed)  # fmt: skip
    rng = np.random.default_rng(seed + 1)
    out: dict[float, pd.DataFrame] = {}
    for r, (_, run) in zip(RATIOS, sim.groupby("run_id", sort=False), strict=True):
        ev = run[run["step"] > 0].set_index("step")[["loss_general", "loss_legal"]]
        steps = np.arange(TRAIN_EVERY, STEPS + 1, TRAIN_EVERY)
        train = (1 - r) * np.interp(steps, ev.index, ev["loss_general"]) + r * np.interp(
            steps, ev.index, ev["loss_legal"]
        )
        frame = pd.DataFrame({"step": steps, "loss_train": train + 0.02 * rng.standard_normal(steps.size),
                              "lr": [_lr(int(s)) for s in steps]})  # fmt: skip
        out[r] = frame.merge(ev.reset_index(), on="step", how="left")
    return out


def _cell(v: float) -> str:
    return "" if not np.isfinite(v) else repr(float(v))


def write_wandb(path: Path, run: pd.DataFrame) -> None:
    lines = ["_step,_runtime,train/loss,train/learning_rate,eval/general_loss,eval/legal_loss"]
    for row in run.itertuples():
        lines.append(f"{row.step},{row.step * 0.5:.1f},{row.loss_train!r},{row.lr!r},"
                     f"{_cell(row.loss_general)},{_cell(row.loss_legal)}")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_hf(path: Path, run: pd.DataFrame) -> None:
    history: list[dict[str, float | int]] = []
    for row in run.itertuples():
        epoch = round(row.step / STEPS, 4)
        history.append({"epoch": epoch, "grad_norm": 1.0, "learning_rate": row.lr, "loss": row.loss_train,
                        "step": row.step})  # fmt: skip
        if np.isfinite(row.loss_general):
            history.append({"epoch": epoch, "eval_general_loss": row.loss_general, "eval_legal_loss": row.loss_legal,
                            "eval_runtime": 3.2, "eval_samples_per_second": 80.0, "step": row.step})  # fmt: skip
    history.append({"epoch": 1.0, "step": STEPS, "total_flos": 1e18, "train_loss": float(run["loss_train"].mean()),
                    "train_runtime": 900.0, "train_samples_per_second": 9.1})  # fmt: skip
    state = {"global_step": STEPS, "max_steps": STEPS, "log_history": history, "logging_steps": TRAIN_EVERY,
             "eval_steps": EVAL_EVERY}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _field(num: int, wire: int, payload: bytes | int) -> bytes:
    key = _varint((num << 3) | wire)
    if isinstance(payload, int):
        return key + _varint(payload)
    return key + (_varint(len(payload)) + payload if wire == 2 else payload)


def _record(payload: bytes) -> bytes:
    from mixlaw.runs.io import _masked_crc

    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", _masked_crc(header)) + payload + struct.pack("<I", _masked_crc(payload))


def write_tensorboard(folder: Path, run: pd.DataFrame) -> None:
    def event(step: int, scalars: dict[str, float]) -> bytes:
        values = b"".join(_field(1, 2, _field(1, 2, k.encode()) + _field(2, 5, struct.pack("<f", v)))
                          for k, v in scalars.items())  # fmt: skip
        return _field(1, 1, struct.pack("<d", 1.7e9 + step)) + _field(2, 0, step) + _field(5, 2, values)

    events = [_field(1, 1, struct.pack("<d", 1.7e9)) + _field(3, 2, b"brain.Event:2")]
    for row in run.itertuples():
        events.append(event(row.step, {"train/loss": row.loss_train, "train/learning_rate": row.lr}))
        if np.isfinite(row.loss_general):
            events.append(event(row.step, {"eval/general/loss": row.loss_general, "eval/legal/loss": row.loss_legal}))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.out.tfevents.1700000000.host").write_bytes(b"".join(_record(e) for e in events))


def write_lightning(path: Path, run: pd.DataFrame) -> None:
    lines = ["epoch,lr-AdamW,step,train_loss,val_general_loss,val_legal_loss"]
    for row in run.itertuples():
        lines.append(f"0,{row.lr!r},{row.step},{row.loss_train!r},,")
        if np.isfinite(row.loss_general):
            lines.append(f"0,,{row.step},,{row.loss_general!r},{row.loss_legal!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


META_HEADER = "run_id,phase,parent_run,n_params,w_legal,w_general,tokens_per_step,loss_general,loss_legal"


def meta_csv() -> str:
    """The side table: the base checkpoint as a phase=pt row with its eval losses, then one glob per CPT run."""
    lines = [META_HEADER, f"base-125m,pt,,{N_PARAMS},,,,{BASE['general']},{BASE['legal']}"]
    for r in RATIOS:
        lines.append(f"*legal-{r:g}*,cpt,base-125m,{N_PARAMS},{r:g},{1 - r:g},{TOKENS_PER_STEP},,")
    return "\n".join(lines) + "\n"


def write_logs(out: Path, *, seed: int = 0, noise: float = 2e-4) -> dict[str, Path]:
    """Write the four logs and ``meta.csv`` under ``out``; returns ``{"logs": folder, "meta": file}``."""
    runs = _curves(seed, noise)
    logs = out / "logs"
    r1, r2, r3, r4, r5 = RATIOS
    write_wandb(logs / "wandb" / f"{run_name(r1)}.csv", runs[r1])
    write_wandb(logs / "wandb" / f"{run_name(r5)}.csv", runs[r5])
    write_hf(logs / "hf" / run_name(r2) / "checkpoint-2000" / "trainer_state.json", runs[r2])
    write_tensorboard(logs / "tb" / run_name(r3), runs[r3])
    write_lightning(logs / "lightning" / run_name(r4) / "version_0" / "metrics.csv", runs[r4])
    meta = out / "meta.csv"
    meta.write_text(meta_csv())
    return {"logs": logs, "meta": meta}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "own_logs")
    paths = write_logs(target)
    print(f"logs in {paths['logs']}, meta table {paths['meta']}; true CMR at the budget {true_cmr():.3f}")
