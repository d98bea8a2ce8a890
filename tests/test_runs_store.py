"""RunStore: round trips, all-or-nothing writes, WAL, schema version, concurrency and kill -9 safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.runs.io import read_table
from mixlaw.runs.schema import Mixture, RunMeta
from mixlaw.runs.store import SCHEMA_VERSION, RunStore

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _meta(run_id: str = "s1m-cpt-code-0.25", **kw: object) -> RunMeta:
    base: dict = dict(
        phase="cpt",
        n_params=1_000_000,
        n_params_total=1_500_000,
        mixture=Mixture({"general": 0.75, "code": 0.25}),
        parent_run="s1m-pt",
        seed=0,
        schedule={"kind": "table", "lr": [float(x) for x in np.linspace(1e-3, 1e-4, 300)]},
        meta={"size": "s1m", "unique_tokens_code": 5_000_000},
    )
    base.update(kw)
    return RunMeta(run_id=run_id, **base)  # type: ignore[arg-type]


def _rows(steps: range, *, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.asarray(list(steps))
    return pd.DataFrame(
        {
            "step": s,
            "tokens": s * 4096.0,
            "lr": np.full(len(s), 1e-3),
            "loss_general": 3.0 + rng.random(len(s)),
            "loss_code": 2.0 + rng.random(len(s)),
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "mixlaw.db")
    yield s
    s.close()


def test_wal_and_schema_version(store: RunStore, tmp_path: Path) -> None:
    assert store.journal_mode == "wal"
    assert store.schema_version == SCHEMA_VERSION
    con = sqlite3.connect(tmp_path / "mixlaw.db")
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_newer_schema_refused(tmp_path: Path) -> None:
    p = tmp_path / "new.db"
    RunStore(p).close()
    con = sqlite3.connect(p)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(InputError, match="newer mixlaw"):
        RunStore(p)


def test_foreign_files_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(InputError, match="junk.db"):
        RunStore(junk)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="tables"):
        RunStore(other)
    with pytest.raises(InputError):
        RunStore(tmp_path / "no" / "such" / "dir.db")


def test_put_get_roundtrip_with_full_schedule(store: RunStore) -> None:
    m = _meta()
    store.put_run(m)
    got = store.get_run(m.run_id)
    assert got == m
    assert got.schedule is not None and len(got.schedule["lr"]) == 300
    store.put_run(m)  # idempotent
    assert store.run_ids() == [m.run_id]
    with pytest.raises(InputError, match="unknown run_id"):
        store.get_run("nope")


def test_conflicting_metadata_refused_unless_replace(store: RunStore) -> None:
    m = _meta()
    store.put_run(m)
    with pytest.raises(InputError, match="n_params"):
        store.put_run(_meta(n_params=2_000_000))
    assert store.get_run(m.run_id) == m
    store.put_run(_meta(n_params=2_000_000), replace=True)
    assert store.get_run(m.run_id).n_params == 2_000_000
    # fields given on one side only merge
    store.put_run(RunMeta(m.run_id, phase="cpt", meta={"note": "x"}))
    assert store.get_run(m.run_id).meta["note"] == "x"
    assert store.get_run(m.run_id).n_params == 2_000_000


def test_append_evals_and_to_frame_roundtrip(store: RunStore) -> None:
    m = _meta()
    store.put_run(m)
    rows = _rows(range(0, 300, 10))
    assert store.append_evals(m.run_id, rows) == 30
    store.append_evals(m.run_id, _rows(range(300, 310, 10)).to_dict("records"))
    f = store.to_frame()
    assert len(f) == 31
    assert list(f.columns[:9]) == [
        "run_id",
        "step",
        "tokens",
        "lr",
        "n_params",
        "n_params_total",
        "phase",
        "parent_run",
        "seed",
    ]
    assert f["w_general"].unique().tolist() == [0.75] and f["w_code"].unique().tolist() == [0.25]
    assert f["unique_tokens_code"].unique().tolist() == [5_000_000]
    np.testing.assert_array_equal(f["loss_code"].to_numpy()[:30], rows["loss_code"].to_numpy())
    assert f["step"].dtype == np.int64
    assert store.last_step(m.run_id) == 300
    assert store.last_step("nope") is None


def test_duplicate_step_refused_nothing_written(store: RunStore) -> None:
    store.put_run(_meta())
    store.append_evals(_meta().run_id, _rows(range(0, 50, 10)))
    before = store.dump()
    # chunk with new steps plus one already stored
    with pytest.raises(InputError, match=r"already in the store"):
        store.append_evals(_meta().run_id, _rows(range(40, 100, 10)))
    # duplicate within the chunk
    with pytest.raises(InputError, match=r"one row per \(run_id, step\)"):
        store.append_evals(_meta().run_id, _rows(range(100, 120, 10)).pipe(lambda d: pd.concat([d, d])))
    assert store.dump() == before
    store.append_evals(_meta().run_id, _rows(range(40, 60, 10)), replace=True)
    assert store.last_step(_meta().run_id) == 50


def test_append_evals_refuses_bad_chunks(store: RunStore) -> None:
    store.put_run(_meta())
    rid = _meta().run_id
    before = store.dump()
    bad = [
        _rows(range(3)).assign(loss_code=[1.0, np.nan, 1.0]),
        _rows(range(3)).assign(tokens=[0.0, -1.0, 2.0]),
        _rows(range(3)).assign(n_params=1.0),
        _rows(range(3)).assign(w_code=1.0),
        _rows(range(3)).assign(run_id="other"),
        _rows(range(3)).drop(columns="step"),
    ]
    for chunk in bad:
        with pytest.raises(InputError):
            store.append_evals(rid, chunk)
    with pytest.raises(InputError, match="put_run first"):
        store.append_evals("unknown-run", _rows(range(3)))
    assert store.dump() == before


def test_status_and_delete(store: RunStore) -> None:
    store.put_run(_meta())
    rid = _meta().run_id
    assert store.run_status(rid) is None
    store.set_status(rid, "running")
    store.set_status(rid, "failed", message="non-finite loss at step 120")
    assert store.run_status(rid) == "failed"
    with pytest.raises(InputError):
        store.set_status(rid, "weird")
    with pytest.raises(InputError):
        store.set_status("nope", "running")
    store.append_evals(rid, _rows(range(3)))
    r = store.runs()
    assert r.loc[0, "status"] == "failed" and r.loc[0, "n_evals"] == 3 and r.loc[0, "last_step"] == 2
    assert r.loc[0, "message"].startswith("non-finite")
    store.delete_run(rid)
    assert store.run_ids() == [] and len(store.to_frame()) == 0
    assert all(v == [] for v in store.dump().values())
    with pytest.raises(InputError):
        store.delete_run(rid)


def _table(n_runs: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    recs = []
    for r in range(n_runs):
        w = rng.dirichlet([1.0, 1.0])
        for step in (0, 100, 200):
            recs.append(
                {
                    "run_id": f"run{r}",
                    "step": step,
                    "tokens": step * 1000,
                    "n_params": 10**6 * (r + 1),
                    "w_web": w[0],
                    "w_code": 1.0 - w[0],
                    "loss_web": 3 + rng.random(),
                    "size": f"s{r}",
                }
            )
    return pd.DataFrame(recs)


def test_ingest_table_infers_run_metadata(store: RunStore) -> None:
    summary = store.ingest_table(_table(), "t.csv")
    assert summary == {"runs": 3, "rows": 9, "new_runs": 3}
    m = store.get_run("run1")
    assert m.n_params == 2_000_000 and m.meta == {"size": "s1"} and m.phase == "pt"
    assert m.mixture is not None and set(m.mixture.domains) == {"web", "code"}
    f = store.to_frame()
    t = _table()
    np.testing.assert_allclose(f["loss_web"], t["loss_web"])
    np.testing.assert_allclose(f["w_web"], t["w_web"])


def test_failed_ingest_leaves_store_unchanged(store: RunStore) -> None:
    store.ingest_table(_table(2), "ok.csv")
    store.set_status("run0", "finished")
    before = store.dump()
    frame_before = store.to_frame()
    bad_tables = {
        "varying n_params": _table(4).assign(n_params=lambda d: np.arange(len(d)) + 1.0),
        "dup with store": _table(3),  # run0/run1 steps exist already
        "conflicting meta": _table(2).assign(n_params=7.0),
        "negative tokens": _table(4).assign(tokens=-1.0),
        "bad mixture": _table(4).assign(w_web=0.9, w_code=0.3),
    }
    for what, t in bad_tables.items():
        with pytest.raises(InputError):
            store.ingest_table(t, f"{what}.csv")
        assert store.dump() == before, what
    pd.testing.assert_frame_equal(store.to_frame(), frame_before)


def test_varying_run_column_names_row(store: RunStore) -> None:
    t = _table(1)
    t.loc[2, "size"] = "other"
    with pytest.raises(InputError, match=r"one value of 'size' per run.* in t\.csv:3:size$"):
        store.ingest_table(t, "t.csv")


def test_where_filter(store: RunStore) -> None:
    store.ingest_table(_table(), "t.csv")
    f = store.to_frame("n_params >= 2e6 and step > 0")
    assert set(f["run_id"]) == {"run1", "run2"} and set(f["step"]) == {100, 200}
    assert len(store.to_frame("size == 's0'")) == 3
    assert len(store.runs("n_params > 2e6")) == 1
    for bad in ("n_params >", "nope > 1", "@x > 1", "__import__('os')", "n_params.__class__"):
        with pytest.raises(InputError):
            store.to_frame(bad)


def test_mixture_union_and_missing(store: RunStore) -> None:
    store.put_run(RunMeta("a", mixture={"web": 1.0}))
    store.put_run(RunMeta("b", mixture={"web": 0.5, "code": 0.5}))
    store.put_run(RunMeta("c"))
    for r in "abc":
        store.append_evals(r, [{"step": 0, "loss": 1.0}])
    f = store.to_frame().set_index("run_id")
    assert f.loc["a", "w_code"] == 0.0 and f.loc["b", "w_code"] == 0.5
    assert np.isnan(f.loc["c", "w_web"])


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_export_read_ingest_roundtrip(store: RunStore, tmp_path: Path, suffix: str) -> None:
    store.ingest_table(_table(), "t.csv")
    store.put_run(_meta())
    store.append_evals(_meta().run_id, _rows(range(0, 30, 10)))
    out = store.export(tmp_path / f"export{suffix}")
    back = read_table(out, allow_missing=True)
    other = RunStore(tmp_path / "other.db")
    other.ingest_table(back, out.name, validated=True)
    a, b = store.to_frame(), other.to_frame()
    pd.testing.assert_frame_equal(a, b[a.columns], check_dtype=False)
    assert other.get_run(_meta().run_id).schedule == _meta().schedule
    assert other.get_run(_meta().run_id).mixture == _meta().mixture
    other.close()


def test_export_bad_suffix(store: RunStore, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="suffix|ending"):
        store.export(tmp_path / "x.xlsx")


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


_WRITER = """
import sys
sys.path.insert(0, {src!r})
import numpy as np
from mixlaw.runs.store import RunStore
from mixlaw.runs.schema import RunMeta
store = RunStore({db!r})
rid = {rid!r}
store.put_run(RunMeta(rid, n_params=1000))
for c in range({chunks}):
    steps = np.arange(c * {size}, (c + 1) * {size})
    store.append_evals(rid, [{{"step": int(s), "loss": 1.0 + s * 1e-6}} for s in steps])
print("done")
"""


def test_concurrent_writers_do_not_corrupt(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    RunStore(db).close()
    procs = [
        subprocess.Popen(
            _py(_WRITER.format(src=SRC, db=db, rid=f"w{i}", chunks=15, size=20)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    s = RunStore(db)
    f = s.to_frame()
    assert f.groupby("run_id").size().to_dict() == {"w0": 300, "w1": 300}
    assert s._con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    s.close()


def test_kill_minus_9_chunk_is_all_or_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    RunStore(db).close()
    size = 200
    p = subprocess.Popen(
        _py(_WRITER.format(src=SRC, db=db, rid="k", chunks=100_000, size=size)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.2)
            con = sqlite3.connect(db, timeout=30)
            try:
                n = con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
            con.close()
            if n >= 3 * size:
                break
        time.sleep(0.037)  # land somewhere inside a later chunk
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=30)
    s = RunStore(db)
    n_steps = s._con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    n_evals = s._con.execute("SELECT COUNT(*) FROM evals").fetchone()[0]
    assert n_steps >= 3 * size
    assert n_steps % size == 0 and n_evals == n_steps
    assert s._con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the store stays writable and resumes after the last complete chunk
    last = s.last_step("k")
    assert last == n_steps - 1
    s.append_evals("k", [{"step": last + 1, "loss": 1.0}])
    s.close()


def test_ingest_replace_overwrites(store: RunStore) -> None:
    t = _table(2)
    store.ingest_table(t, "t.csv")
    t2 = t.assign(loss_web=t["loss_web"] + 1.0, n_params=t["n_params"] * 2)
    with pytest.raises(InputError, match="--replace"):
        store.ingest_table(t2, "t2.csv")
    store.ingest_table(t2, "t2.csv", replace=True)
    f = store.to_frame()
    np.testing.assert_allclose(f["loss_web"], t2["loss_web"])
    assert store.get_run("run0").n_params == 2_000_000


def test_schedule_column_from_jsonl(tmp_path: Path, store: RunStore) -> None:
    sched = {"kind": "cosine", "peak_lr": 1e-3, "total_steps": 100}
    recs = [{"run_id": "a", "step": s, "loss": 3.0 - s / 100, "schedule": sched} for s in (0, 50)]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs))
    store.ingest_table(read_table(p), p.name, validated=True)
    assert store.get_run("a").schedule == sched
    assert store.runs()["schedule_kind"].tolist() == ["cosine"]
