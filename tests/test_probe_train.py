"""Probe training on the shipped slice: a debug sweep end to end, exact resume, failure reporting."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mixlaw.errors import InputError
from mixlaw.probe.corpora import prepare
from mixlaw.probe.model import GPT, SIZES, gpt_config
from mixlaw.probe.sweep import load_spec, plan, run_sweep, sweep_status
from mixlaw.probe.train import RunConfig, TrainingDiverged, eval_steps, lr_fraction_steps, train_run
from mixlaw.runs.store import RunStore
from mixlaw.schedules import Schedule


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("probe_data")
    prepare(out, source="slice", vocab_size=300, corpora=("general", "legal", "code"))
    return out


def _cfg(data_dir: Path, work: Path, **kw: object) -> RunConfig:
    base: dict[str, object] = {
        "run_id": "r",
        "data_dir": str(data_dir),
        "work_dir": str(work),
        "size": "debug",
        "mixture": {"general": 0.5, "code": 0.5},
        "schedule": "wsd:peak=3e-3,steps=24,warmup=3,decay=6",
        "block_size": 32,
        "batch_size": 4,
        "eval_every": 6,
        "eval_tokens": 256,
    }
    base.update(kw)
    return RunConfig(**base)  # type: ignore[arg-type]


def test_sizes_cover_debug_to_20m() -> None:
    counts = {s: GPT(gpt_config(s, vocab_size=256, block_size=64)).n_params for s in ("debug", "25m")}
    assert counts["debug"] < 10_000 and counts["25m"] >= 20_000_000
    assert list(SIZES)[0] == "debug"


def test_model_loss_at_init_is_log_vocab() -> None:
    torch.manual_seed(0)
    m = GPT(gpt_config("debug", vocab_size=300, block_size=16))
    x, y = torch.randint(0, 300, (4, 16)), torch.randint(0, 300, (4, 16))
    logits, loss = m(x, y)
    assert logits.shape == (4, 16, 300)
    assert loss is not None and abs(float(loss.detach()) - math.log(300)) < 0.1


def test_eval_and_checkpoint_steps() -> None:
    assert eval_steps(20, 5) == [0, 5, 10, 15, 20]
    assert eval_steps(10, 4) == [0, 4, 8, 10]
    assert set(eval_steps(100, 50, log_points=4)) >= {0, 1, 5, 22, 50, 100}
    s = Schedule(kind="wsd", peak_lr=1.0, total_steps=100, decay_steps=20)  # linear decay over steps 81..100
    got = lr_fraction_steps(s, (1.0, 0.5, 0.0))
    assert s.lr([got[0.5]])[0] <= 0.5 < s.lr([got[0.5] - 1])[0]
    assert got[0.0] == 100


def test_debug_sweep_pt_and_two_cpt_ratios(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f"""
[sweep]
name = "t"
data_dir = "{data_dir}"
work_dir = "runs"
block_size = 32
batch_size = 4
eval_tokens = 256

[pt]
sizes = ["debug"]
tokens = 3072
schedule = {{kind = "wsd", peak_lr = 3e-3, warmup_fraction = 0.1, decay_fraction = 0.5, final_lr = 3e-4}}
evals = 4
save_at_lr_fractions = [0.5]

[cpt]
domains = ["code"]
ratios = [0.25, 1.0]
tokens = 1536
schedules = [{{kind = "constant", peak_lr = 3e-4}}]
evals = 4
"""
    )
    jobs = plan(load_spec(spec))
    assert [j.run_id for j in jobs] == ["t-debug-pt", "t-debug-cpt-code-r0.25", "t-debug-cpt-code-r1"]
    store_path = tmp_path / "store.db"
    results = run_sweep(jobs, store_path)
    assert set(results.values()) == {"finished"}
    with RunStore(store_path) as store:
        df = store.to_frame()
        runs = store.runs()
    assert set(runs["status"]) == {"finished"}
    cpt = df[df["phase"] == "cpt"]
    assert set(cpt["parent_run"]) == {"t-debug-pt"}
    for _rid, g in cpt.groupby("run_id"):
        assert g["step"].iloc[0] == 0 and g["tokens"].iloc[0] == 0  # step-0 eval of the parent's weights
        assert g["domain"].iloc[0] == "code"
    pt_last = df[df["run_id"] == "t-debug-pt"].iloc[-1]
    first_cpt = cpt[cpt["step"] == 0].iloc[0]
    assert first_cpt["loss_general"] == pytest.approx(pt_last["loss_general"], abs=1e-6)
    assert set(np.round(cpt["w_code"].unique(), 6)) == {0.25, 1.0}
    assert {"loss_general", "loss_legal", "loss_code", "n_params", "n_params_total", "lr"} <= set(df.columns)
    assert df[["loss_general", "loss_code"]].notna().all().all()
    # loss-potential checkpoint: where the decaying LR first reached half its peak
    assert (tmp_path / "runs" / "t-debug-pt" / "lrfrac0.5.pt").exists()
    # a re-run skips finished runs
    assert set(run_sweep(jobs, store_path).values()) == {"finished"}
    with RunStore(store_path) as store:  # nothing was trained or written again
        assert store.runs().equals(runs) and store.to_frame().equals(df)
    assert {r["status"] for r in sweep_status(jobs, store_path)} == {"finished"}


def test_resume_equals_uninterrupted(data_dir: Path, tmp_path: Path) -> None:
    full_store = RunStore(tmp_path / "a.db")
    assert train_run(_cfg(data_dir, tmp_path / "a"), full_store) == "finished"
    part_store = RunStore(tmp_path / "b.db")
    cfg = _cfg(data_dir, tmp_path / "b")
    assert train_run(cfg, part_store, stop_after_step=12) == "stopped"
    assert part_store.last_step("r") == 12 and part_store.run_status("r") == "running"
    assert train_run(cfg, part_store) == "finished"  # a fresh call resumes from the step-12 checkpoint
    a, b = full_store.to_frame(), part_store.to_frame()
    cols = ["step", "tokens", "lr", "loss_general", "loss_code", "loss_legal", "tokens_code", "unique_code"]
    np.testing.assert_array_equal(a[cols].to_numpy(), b[cols].to_numpy())
    assert full_store.get_run("r").meta["unique_tokens_code"] == part_store.get_run("r").meta["unique_tokens_code"]


def test_cpt_needs_parent_and_records_it(data_dir: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s.db")
    with pytest.raises(InputError, match="parent_checkpoint"):
        train_run(_cfg(data_dir, tmp_path, run_id="c", phase="cpt", parent_run="p"), store)


def test_non_finite_loss_stops_with_step_and_mixture(data_dir: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s.db")
    cfg = _cfg(data_dir, tmp_path, schedule="constant:peak=1e9,steps=30", grad_clip=0.0)
    with pytest.raises(TrainingDiverged, match=r"step \d+ with mixture \{'general': 0.5, 'code': 0.5\}"):
        train_run(cfg, store)
    assert store.run_status("r") == "failed"


def test_kill_9_loses_at_most_the_unfinished_chunk(data_dir: Path, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    cfg = _cfg(data_dir, tmp_path / "k")
    script = f"""
import os, signal
from mixlaw.probe.train import RunConfig, train_run
from mixlaw.runs.store import RunStore
cfg = RunConfig(**{cfg.to_dict()!r})
def die(row):
    if row["step"] == 12:
        os.kill(os.getpid(), signal.SIGKILL)
train_run(cfg, RunStore({str(tmp_path / "k.db")!r}), progress=die)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    killed = RunStore(tmp_path / "k.db")
    assert killed.last_step("r") == 12 and killed.run_status("r") == "running"  # chunks up to 12 are safe
    assert train_run(cfg, killed) == "finished"
    ref = RunStore(tmp_path / "ref.db")
    train_run(_cfg(data_dir, tmp_path / "ref"), ref)
    cols = ["step", "loss_general", "loss_code", "loss_legal"]
    np.testing.assert_array_equal(ref.to_frame()[cols].to_numpy(), killed.to_frame()[cols].to_numpy())
    assert os.path.exists(tmp_path / "k" / "r" / "final.pt")
