"""Sweeps that are safe to run twice (issue 12, items 5–7): validated specs, run claims, per-process temp files,
config fingerprints on resume, path validation, and ``train_loss`` kept across a kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli.probe import app as probe_app
from mixlaw.errors import InputError
from mixlaw.probe.checkpoints import checkpoint_path
from mixlaw.probe.corpora import prepare
from mixlaw.probe.sweep import load_spec, plan, run_sweep
from mixlaw.probe.train import RunConfig, train_run
from mixlaw.runs.schema import RunMeta
from mixlaw.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]

SPEC = """
[sweep]
name = "c"
data_dir = "{data}"
work_dir = "runs"
block_size = 32
batch_size = 4
eval_tokens = 256

[pt]
sizes = ["debug"]
tokens = 2048
schedule = {{kind = "constant", peak_lr = 3e-3}}
evals = 2

[cpt]
domains = ["code"]
ratios = [0.25, 0.5, 1.0]
tokens = 1024
evals = 2
"""


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


# --------------------------------------------------------------------------------------------------- specs
BAD_SPECS = [
    ("evals = 2\n\n[cpt]", "evals = 0\n\n\n[cpt]", r"expected \[pt\]\.evals to be >= 1, got 0"),
    ('name = "c"', 'name = "c"\nseed = "abc"', r"\[sweep\]\.seed to be an integer, got 'abc'"),
    ('name = "c"', 'name = "c"\ncompile = "false"', r"\[sweep\]\.compile to be true or false, got 'false'"),
    ('name = "c"', 'name = "c"\nthreads = 1000000', r"\[sweep\]\.threads to be <= 256, got 1000000"),
    ("batch_size = 4", "batch_size = -4", r"\[sweep\]\.batch_size to be >= 1, got -4"),
    ("block_size = 32", "block_size = 0", r"\[sweep\]\.block_size to be >= 2"),
    ('name = "c"', 'name = "c"\ndevice = "tpu"', r"\[sweep\]\.device to be 'cpu', 'cuda'.*got 'tpu'"),
    ('name = "c"', 'name = "../../x"', r"\[sweep\]\.name to be a plain name.*got '\.\./\.\./x'"),
    ('name = "c"', 'name = "a/b"', r"\[sweep\]\.name to be a plain name"),
    ("ratios = [0.25, 0.5, 1.0]", "ratios = 0.5", r"\[cpt\]\.ratios to be a list, got 0\.5"),
    ("ratios = [0.25, 0.5, 1.0]", "ratios = [1.5]", r"\[cpt\]\.ratios\[0\] to be <= 1"),
    ("ratios = [0.25, 0.5, 1.0]", "ratios = [0.25]\nparent = '../../etc/x'", r"\[cpt\]\.parent"),
    ("ratios = [0.25, 0.5, 1.0]", "ratios = [0.25]\nparent = 'lrfrac0.5'", r"\[cpt\]\.parent to be one of"),
    ('domains = ["code"]', 'domains = ["general"]', r"\[cpt\]\.replay to be a corpus other than"),
    ('domains = ["code"]', 'domains = ["nope"]', r"\[cpt\]\.domains to name corpora of.*'nope'"),
    ("evals = 2\n\n[cpt]", "evals = 2\nmixture = {general = 0.5}\n\n[cpt]", r"\[pt\]\.mixture to be weights summing"),
    ("evals = 2\n\n[cpt]", "evals = 2\nmixture = {general = 1.5, code = -0.5}\n\n[cpt]", r"\[pt\]\.mixture\.code"),
    ("evals = 2\n\n[cpt]", "evals = 2\nmixture = {bogus = 1.0}\n\n[cpt]", r"\[pt\]\.mixture to name corpora"),
    ("evals = 2\n\n[cpt]", "evals = 2\nsave_at_lr_fractions = [1.5]\n\n[cpt]", r"save_at_lr_fractions\[0\] to be <= 1"),
    ("evals = 2\n\n[cpt]", "evals = 2\nevlas = 3\n\n[cpt]", r"\[pt\]\.evlas to be a known key"),
    ("tokens = 2048", 'tokens = "2048"', r"\[pt\]\.tokens to be an integer, got '2048'"),
    ("tokens = 2048", "tokens = -5", r"\[pt\]\.tokens to be > 0"),
    ("tokens = 2048", "", r"\[pt\]\.tokens to be given"),
    ("tokens = 1024", "tokens = 1024\ntokens_per_param = 2", r"\[cpt\]\.tokens to be given without"),
    ('sizes = ["debug"]', 'sizes = ["huge"]', r"unknown sizes \['huge'\]"),
    ('sizes = ["debug"]', "sizes = []", r"\[pt\]\.sizes to be non-empty"),
    ('{kind = "constant", peak_lr = 3e-3}', "5", r"\[pt\]\.schedule to be a table, got 5"),
    ('{kind = "constant", peak_lr = 3e-3}', '{kind = "warp", peak_lr = 1}', r"valid schedule at \[pt\]\.schedule"),
    ('{kind = "constant", peak_lr = 3e-3}', '{kind = "constant", peak_lr = "x"}', r"valid schedule"),
    ('{kind = "constant", peak_lr = 3e-3}', '{kind = "wsd", peak_lr = 1, decay_fraction = 2}', "decay_fraction"),
    ("eval_tokens = 256", "eval_tokens = 16", r"\[sweep\]\.eval_tokens to be at least block_size \+ 1"),
]


@pytest.mark.parametrize("old, new, match", BAD_SPECS)
def test_bad_specs_are_one_error_naming_the_key(data_dir: Path, tmp_path: Path, old: str, new: str, match: str) -> None:
    text = SPEC.format(data=data_dir)
    assert old in text, old
    path = tmp_path / "spec.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=match + r".* in .*spec\.toml$") as err:
        plan(load_spec(path))
    assert "\n" not in str(err.value)
    # the CLI prints it as one line, no traceback
    res = CliRunner().invoke(probe_app, ["plan", str(path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


def test_cpt_as_a_scalar_and_non_table_sections(tmp_path: Path) -> None:
    for text, match in [
        ('cpt = 3\n[pt]\nsizes = ["debug"]\ntokens = 10\n', r"\[cpt\] to be a table, got 3"),
        ('sweep = "x"\n[pt]\nsizes = ["debug"]\ntokens = 10\n', r"\[sweep\] to be a table"),
        ("[pt]\nsizes = 'debug'\ntokens = 10\n", r"\[pt\]\.sizes to be a list"),
        ('[pt]\nsizes = ["debug"]\ntokens = 10\n[extra]\nx = 1\n', r"extra to be a known key"),
    ]:
        path = tmp_path / "s.toml"
        path.write_text(text)
        with pytest.raises(InputError, match=match):
            plan(load_spec(path))


def test_valid_spec_plans_as_before(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(data=data_dir))
    jobs = plan(load_spec(path))
    assert [j.run_id for j in jobs] == ["c-debug-pt", "c-debug-cpt-code-r0.25", "c-debug-cpt-code-r0.5",
                                        "c-debug-cpt-code-r1"]  # fmt: skip
    assert all(Path(j.config.work_dir) == tmp_path / "runs" for j in jobs)
    assert jobs[1].config.mixture == {"general": 0.75, "code": 0.25}


def test_checkpoint_paths_never_leave_the_work_dir(tmp_path: Path) -> None:
    for rid, name in [("../x", "last"), ("a/b", "last"), ("r", "../../etc/passwd"), (".hidden", "last")]:
        with pytest.raises(InputError, match="path component"):
            checkpoint_path(tmp_path, rid, name)
    assert checkpoint_path(tmp_path, "c-debug-pt", "lrfrac0.5") == tmp_path / "c-debug-pt" / "lrfrac0.5.pt"


# -------------------------------------------------------------------------------------------------- claims
def test_claims_are_exclusive_expire_and_refuse_finished_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as a, RunStore(tmp_path / "s.db") as b:
        assert a.claim("r", "A", lease_s=0.5) is None
        assert (why := b.claim("r", "B", lease_s=0.5)) is not None and "claimed by A" in why
        assert a.claim("r", "A", lease_s=0.5) is None  # re-entrant for its owner
        assert a.heartbeat("r", "A", lease_s=0.5) and not b.heartbeat("r", "B", lease_s=0.5)
        assert b.holds("r", "A") and not b.holds("r", "B")
        time.sleep(0.6)  # A stops beating: its lease runs out and B may take the run over
        assert b.claim("r", "B", lease_s=5) is None
        assert not a.heartbeat("r", "A") and b.holds("r", "B")
        b.release("r", "A")  # not A's any more: nothing happens
        assert b.holds("r", "B")
        b.release("r", "B")
        assert a.claims() == []
        a.put_run(RunMeta("r"))
        a.set_status("r", "finished")
        assert b.claim("r", "B") == "finished"


def test_claims_table_does_not_change_the_store_dump(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as s:
        s.put_run(RunMeta("r"))
        before = s.dump()
        s.claim("r", "X")
        assert s.dump() == before and s.schema_version == 1


def _sweep_proc(spec: Path, store: Path, log: Path) -> subprocess.Popen[str]:
    """A separate process running the whole sweep on ``store`` (as a second ``mixlaw probe run`` would)."""
    script = (
        "import json, sys; from mixlaw.probe.sweep import load_spec, plan, run_sweep; "
        f"r = run_sweep(plan(load_spec({str(spec)!r})), {str(store)!r}, log_path={str(log)!r}, poll_s=0.5); "
        "print(json.dumps(r))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


@pytest.mark.slow
def test_two_sweeps_on_one_store_train_each_run_once(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=data_dir))
    store = tmp_path / "s.db"
    procs = [_sweep_proc(spec, store, tmp_path / f"{k}.log") for k in "ab"]
    outs = [p.communicate(timeout=400) for p in procs]
    ids = [j.run_id for j in plan(load_spec(spec))]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert json.loads(out) == dict.fromkeys(ids, "finished")  # both report every run finished
    logs = [(tmp_path / f"{k}.log").read_text() if (tmp_path / f"{k}.log").exists() else "" for k in "ab"]
    trained = [m.group(1) for log in logs for m in re.finditer(r"^\S+ (\S+) finished in \d+s by ", log, re.M)]
    assert sorted(trained) == sorted(ids)  # each run trained exactly once, by one of the two processes
    for rid in ids:  # and no chunk of it trained twice
        steps = [m.group(1) for log in logs for m in re.finditer(rf"^\S+ {re.escape(rid)} step (\d+)/", log, re.M)]
        assert len(steps) == len(set(steps)) > 0, (rid, steps)
    assert "FAILED" not in "".join(logs)
    with RunStore(store) as st:
        assert set(st.runs()["status"]) == {"finished"} and st.claims() == []
        f = st.to_frame()
    assert not f.duplicated(["run_id", "step"]).any() and set(f["run_id"]) == set(ids)


def test_a_run_claimed_elsewhere_is_waited_for_not_trained(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=data_dir).replace("ratios = [0.25, 0.5, 1.0]", "ratios = [0.5]"))
    jobs = plan(load_spec(spec))
    store_path = tmp_path / "s.db"
    with RunStore(store_path) as other:
        assert other.claim("c-debug-pt", "elsewhere", lease_s=60) is None

    def elsewhere() -> None:  # another worker holds the PT claim and trains it while the sweep starts
        time.sleep(1.0)
        with RunStore(store_path) as s:
            train_run(jobs[0].config, s)
            s.release("c-debug-pt", "elsewhere")

    t = threading.Thread(target=elsewhere)
    t.start()
    events: list[tuple[str, str, str | None]] = []
    try:
        results = run_sweep(jobs, store_path, poll_s=0.1, on_event=lambda *e: events.append(e))
    finally:
        t.join()
    assert results == {"c-debug-pt": "finished", "c-debug-cpt-code-r0.5": "finished"}
    assert ("c-debug-pt", "finished", "trained by another worker") in events
    assert events[-1][:2] == ("c-debug-cpt-code-r0.5", "finished")  # the child started after the parent


def test_a_killed_workers_claim_expires_and_the_run_is_taken_over(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=data_dir).replace("ratios = [0.25, 0.5, 1.0]", "ratios = [0.5]"))
    jobs = plan(load_spec(spec))
    store_path = tmp_path / "s.db"
    with RunStore(store_path) as dead:  # a worker claimed the PT, then died without releasing it
        assert dead.claim("c-debug-pt", "dead-worker", lease_s=1.0) is None
    results = run_sweep(jobs, store_path, poll_s=0.2, lease_s=5)
    assert set(results.values()) == {"finished"}  # the dead worker's expired claim was taken over


# ------------------------------------------------------------------------------------- stale work dirs, resume
def test_fresh_store_with_an_old_work_dir_records_every_evaluation(data_dir: Path, tmp_path: Path) -> None:
    """A fresh store pointed at an old work dir used to mark runs finished from the stale final checkpoint with
    1 of N evaluation rows; now the run is trained again (same config: same checkpoints) with every row."""
    cfg = _cfg(data_dir, tmp_path / "w")
    with RunStore(tmp_path / "old.db") as old:
        assert train_run(cfg, old) == "finished"
        want = old.to_frame()
    assert len(want) == 5
    with RunStore(tmp_path / "fresh.db") as fresh:
        assert train_run(cfg, fresh) == "finished"
        got = fresh.to_frame()
    cols = ["step", "tokens", "lr", "loss_general", "loss_code", "train_loss"]
    pd.testing.assert_frame_equal(got[cols], want[cols])
    # through a sweep: every run of the fresh store has all its evaluations
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=data_dir).replace('work_dir = "runs"', f'work_dir = "{tmp_path / "w2"}"'))
    jobs = plan(load_spec(spec))[:2]
    assert set(run_sweep(jobs, tmp_path / "a.db").values()) == {"finished"}
    assert set(run_sweep(jobs, tmp_path / "b.db").values()) == {"finished"}
    with RunStore(tmp_path / "a.db") as a, RunStore(tmp_path / "b.db") as b:
        for rid in (j.run_id for j in jobs):
            assert b.steps(rid) == a.steps(rid) and len(a.steps(rid)) == 3


def test_old_work_dir_of_another_config_is_refused_and_kept(data_dir: Path, tmp_path: Path) -> None:
    with RunStore(tmp_path / "old.db") as old:
        assert train_run(_cfg(data_dir, tmp_path / "w"), old) == "finished"
    final = tmp_path / "w" / "r" / "final.pt"
    before = final.read_bytes()
    with RunStore(tmp_path / "fresh.db") as fresh:
        with pytest.raises(InputError, match=r"final\.pt to come from this run's config.*another sweep"):
            train_run(_cfg(data_dir, tmp_path / "w", seed=1), fresh)
        assert fresh.run_status("r") != "finished" and fresh.steps("r") == []
    assert final.read_bytes() == before  # nothing of the other sweep's work dir is overwritten


def test_config_fingerprint_mismatch_is_refused(data_dir: Path, tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        assert train_run(_cfg(data_dir, tmp_path / "w"), store, stop_after_step=12) == "stopped"
        with pytest.raises(InputError, match=r"trained with another config"):
            train_run(_cfg(data_dir, tmp_path / "w", seed=1), store)
        store.delete_run("r")  # the store forgets it; the checkpoint at step 12 is still another config's
        with pytest.raises(InputError, match=r"checkpoint .*last\.pt to come from this run's config"):
            train_run(_cfg(data_dir, tmp_path / "w", seed=1), store)
        # settings that do not change the numbers do not count
        assert config_independent(data_dir, tmp_path)


def config_independent(data_dir: Path, tmp_path: Path) -> bool:
    with RunStore(tmp_path / "t.db") as store:
        assert train_run(_cfg(data_dir, tmp_path / "t"), store, stop_after_step=12) == "stopped"
        return train_run(_cfg(data_dir, tmp_path / "t", threads=2), store) == "finished"


def test_no_temp_file_is_shared_or_left_behind(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    import mixlaw.probe.checkpoints as ck

    seen: list[str] = []
    real = torch.save

    def spy(obj: object, f: object, *a: object, **k: object) -> None:
        seen.append(str(f))
        real(obj, f, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(ck.torch, "save", spy)
    with RunStore(tmp_path / "s.db") as store:
        train_run(_cfg(data_dir, tmp_path / "w"), store)
    assert seen and all(re.search(rf"\.{os.getpid()}\.[0-9a-f]{{8}}\.tmp$", s) for s in seen)
    assert len(set(seen)) == len(seen)
    assert not list((tmp_path / "w").rglob("*.tmp"))


def _uninterrupted(data_dir: Path, tmp_path: Path) -> pd.DataFrame:
    with RunStore(tmp_path / "ref.db") as ref:
        train_run(_cfg(data_dir, tmp_path / "ref"), ref)
        return ref.to_frame()


@pytest.mark.parametrize("seed", [0, 1])
def test_kill_between_checkpoint_and_store_keeps_train_loss(data_dir: Path, tmp_path: Path, seed: int) -> None:
    """kill -9 at a seeded random evaluation step, after its checkpoint and before its row is stored: the
    resumed run loses and duplicates no row and matches the uninterrupted one, train_loss included."""
    kill_at = int(np.random.default_rng(seed).choice([6, 12, 18]))
    cfg = _cfg(data_dir, tmp_path / "k")
    script = f"""
import os, signal
from mixlaw.probe.train import RunConfig, train_run
from mixlaw.runs.store import RunStore
real = RunStore.append_evals
def append(self, run_id, rows, **kw):
    if rows[0]["step"] == {kill_at}:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, run_id, rows, **kw)
RunStore.append_evals = append
train_run(RunConfig(**{cfg.to_dict()!r}), RunStore({str(tmp_path / "k.db")!r}))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with RunStore(tmp_path / "k.db") as killed:
        assert killed.last_step("r") == kill_at - 6  # the interrupted step's row was never written
        assert train_run(cfg, killed) == "finished"
        got = killed.to_frame()
    want = _uninterrupted(data_dir, tmp_path)
    cols = ["step", "tokens", "lr", "loss_general", "loss_code", "loss_legal", "train_loss"]
    assert got["train_loss"].iloc[1:].notna().all()
    pd.testing.assert_frame_equal(got[cols], want[cols])


def test_a_dead_local_process_claim_is_taken_at_once(tmp_path: Path) -> None:
    import socket

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with RunStore(tmp_path / "s.db") as s:
        assert s.claim("r", f"{socket.gethostname()}:{gone.pid}:dead", lease_s=3600) is None
        assert s.claims()[0]["expired"]  # its process is gone: no need to wait an hour
        assert s.claim("r", "B", lease_s=60) is None
        assert not s.claims()[0]["expired"] and s.holds("r", "B")
        assert s.claim("r", f"{socket.gethostname()}:{os.getpid()}:me") is not None  # B is no local process


def test_a_killed_owners_claim_on_a_finished_run_is_reaped_live_ones_kept(tmp_path: Path) -> None:
    """The window CI hit: a worker stored the run as finished and was killed before releasing its claim. The
    next sweep skips the finished run without claiming it, so the claim must be dropped by the sweep itself."""
    import socket

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = f"{socket.gethostname()}:{os.getpid()}:me"
    with RunStore(tmp_path / "s.db") as s:
        for rid in ("dead", "live", "open"):
            s.put_run(RunMeta(rid))
        assert s.claim("dead", f"{socket.gethostname()}:{gone.pid}:x", lease_s=3600) is None
        assert s.claim("live", me, lease_s=3600) is None
        assert s.claim("open", f"{socket.gethostname()}:{gone.pid}:y", lease_s=3600) is None
        s.set_status("dead", "finished")
        s.set_status("live", "finished")
        assert s.reap() == ["dead"]  # a live owner releases its own; an unfinished run's claim is taken over
        assert sorted(c["run_id"] for c in s.claims()) == ["live", "open"]
        s.set_status("open", "finished")
    assert run_sweep([], tmp_path / "s.db") == {}  # a sweep starting on the store reaps too
    with RunStore(tmp_path / "s.db") as s:
        assert [c["run_id"] for c in s.claims()] == ["live"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_sweep_killed_at_a_random_point_resumes_to_the_uninterrupted_result(
    data_dir: Path, tmp_path: Path, seed: int
) -> None:
    """kill -9 a running sweep after a seeded number of stored chunks, run it again: no row lost or duplicated,
    every loss (train_loss included) identical to an uninterrupted sweep."""
    text = SPEC.format(data=data_dir).replace("ratios = [0.25, 0.5, 1.0]", "ratios = [0.25, 1.0]")
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "spec.toml").write_text(text)
    (tmp_path / "k").mkdir()
    spec = tmp_path / "k" / "spec.toml"
    spec.write_text(text)
    ref_jobs = plan(load_spec(tmp_path / "ref" / "spec.toml"))
    assert set(run_sweep(ref_jobs, tmp_path / "ref.db").values()) == {"finished"}

    chunks = int(np.random.default_rng(seed).integers(1, 6))  # 6 chunk rows are written in all
    log = tmp_path / "k.log"
    proc = _sweep_proc(spec, tmp_path / "k.db", log)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(re.findall(r" step \d+/", log.read_text())) >= chunks:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)

    results = run_sweep(plan(load_spec(spec)), tmp_path / "k.db", poll_s=0.2)
    assert set(results.values()) == {"finished"}
    with RunStore(tmp_path / "ref.db") as ref, RunStore(tmp_path / "k.db") as k:
        want, got = ref.to_frame(), k.to_frame()
        assert k.claims() == [] and set(k.runs()["status"]) == {"finished"}
    cols = ["run_id", "step", "tokens", "lr", "loss_general", "loss_code", "loss_legal", "train_loss"]
    assert not got.duplicated(["run_id", "step"]).any()
    assert got[got["step"] > 0]["train_loss"].notna().all()
    pd.testing.assert_frame_equal(got[cols], want[cols])
