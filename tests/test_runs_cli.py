"""CLI verbs ``ingest`` and ``runs`` (mounted as the top-level CLI mounts them), via typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from mixlaw.cli.runs import ingest, runs
from mixlaw.runs.store import RunStore

EXTERNAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external"

app = typer.Typer()
app.command("ingest")(ingest)
app.command("runs")(runs)
runner = CliRunner()

CSV = """run,step,tokens,Model Size,p_web,p_code,val_loss
a,1,4096,1000000,0.75,0.25,4.0
a,3,12288,1000000,0.75,0.25,3.5
b,1,4096,2000000,0.5,0.5,4.1
"""
MAP = ["--map", "run_id=run", "--map", "n_params=Model Size", "--map", "w_web=p_web"]
MAP += ["--map", "w_code=p_code", "--map", "loss=val_loss"]


def _csv(tmp_path: Path, text: str = CSV, name: str = "runs.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _one_line_error(result: object) -> str:
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    err = result.stderr.strip()  # type: ignore[attr-defined]
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("error: expected ")
    return err


def test_ingest_and_list(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    r = runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db)])
    assert r.exit_code == 0, r.output
    assert "3 rows of 2 runs" in r.stdout
    r = runner.invoke(app, ["runs", "--store", str(db), "--json"])
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert [x["run_id"] for x in recs] == ["a", "b"]
    assert recs[0]["n_params"] == 1_000_000 and recs[0]["w_web"] == 0.75 and recs[0]["last_step"] == 3
    r = runner.invoke(app, ["runs", "--store", str(db), "--where", "n_params > 1.5e6", "--json"])
    assert [x["run_id"] for x in json.loads(r.stdout)] == ["b"]
    r = runner.invoke(app, ["runs", "--store", str(db)])
    assert r.exit_code == 0 and "2 runs" in r.stdout
    out = tmp_path / "export.csv"
    r = runner.invoke(app, ["runs", "--store", str(db), "--export", str(out), "--where", "step > 1"])
    assert r.exit_code == 0, r.output
    assert pd.read_csv(out)["run_id"].tolist() == ["a"]


def test_ingest_json_summary(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    r = runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["runs"] == 2 and d["rows"] == 3 and d["loss_columns"] == ["loss"]


def test_bad_file_exits_1_with_one_line_and_store_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    assert runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db)]).exit_code == 0
    store = RunStore(db)
    before = store.dump()
    store.close()
    bad = CSV.replace("b,1,4096", "c,1,-4096")
    err = _one_line_error(
        runner.invoke(app, ["ingest", str(_csv(tmp_path, bad, "bad.csv")), *MAP, "--store", str(db)])
    )
    assert err.endswith("in bad.csv:4:tokens")
    err = _one_line_error(runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db)]))
    assert "already in the store" in err
    _one_line_error(runner.invoke(app, ["ingest", str(_csv(tmp_path)), "--store", str(db)]))
    _one_line_error(runner.invoke(app, ["ingest", str(tmp_path / "nope.csv"), "--store", str(db)]))
    _one_line_error(runner.invoke(app, ["ingest", str(_csv(tmp_path)), "--map", "oops", "--store", str(db)]))
    store = RunStore(db)
    assert store.dump() == before
    store.close()
    _one_line_error(runner.invoke(app, ["runs", "--store", str(tmp_path / "none.db")]))
    _one_line_error(runner.invoke(app, ["runs", "--store", str(db), "--where", "n_params >"]))


def test_lr_table(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    lr = tmp_path / "lr.csv"
    lr.write_text("run_id,step,lr\na,0,0.0\na,1,0.001\na,2,0.002\na,3,0.001\nb,1,0.003\n")
    r = runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db), "--lr-table", str(lr)])
    assert r.exit_code == 0, r.output
    store = RunStore(db)
    assert store.get_run("a").schedule == {"kind": "table", "lr": [0.001, 0.002, 0.001], "lr0": 0.0}
    assert store.get_run("b").schedule == {"kind": "table", "lr": [0.003]}
    assert store.runs()["schedule_kind"].tolist() == ["table", "table"]
    store.close()
    from mixlaw.schedules import Schedule

    with RunStore(db) as st:
        sched = Schedule.from_dict(st.get_run("a").schedule or {})
    assert sched.total_steps == 3
    db2 = tmp_path / "m2.db"
    gap = tmp_path / "gap.csv"
    gap.write_text("run_id,step,lr\na,1,0.001\na,3,0.001\n")
    err = _one_line_error(
        runner.invoke(app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db2), "--lr-table", str(gap)])
    )
    assert "gap after step 1" in err and err.endswith("gap.csv:3:step")
    short = tmp_path / "short.csv"
    short.write_text("run_id,step,lr\na,1,0.001\na,2,0.001\n")
    err = _one_line_error(
        runner.invoke(
            app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db2), "--lr-table", str(short)]
        )
    )
    assert "last evaluated step 3" in err
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("run_id,step,lr\nzz,1,0.001\n")
    _one_line_error(
        runner.invoke(
            app, ["ingest", str(_csv(tmp_path)), *MAP, "--store", str(db2), "--lr-table", str(unknown)]
        )
    )
    with RunStore(db2) as st:
        assert not st.run_ids()


def test_set_and_drop_options(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    p = _csv(tmp_path, "step,loss,label\n0,3.0,x\n10,2.0,y\n", "one.csv")
    r = runner.invoke(
        app,
        ["ingest", str(p), "--run-id", "r1", "--set", "n_params=1000", "--drop", "label", "--store", str(db)],
    )
    assert r.exit_code == 0, r.output
    store = RunStore(db)
    assert store.get_run("r1").n_params == 1000
    assert store.to_frame()["loss"].tolist() == [3.0, 2.0]
    store.close()


def test_real_chinchilla_via_cli(tmp_path: Path) -> None:
    path = EXTERNAL / "analyzing-chinchilla" / "svg_extracted_data.csv"
    if not path.exists():
        pytest.skip(f"external data absent: {path}")
    db = tmp_path / "c.db"
    args = ["ingest", str(path), "--map", 'n_params="Model Size"', "--map", "compute_flops=Training FLOP"]
    r = runner.invoke(app, [*args, "--run-id-from-row", "--store", str(db)])
    assert r.exit_code == 0, r.output
    with RunStore(db) as st:
        f = st.to_frame()
    raw = pd.read_csv(path)
    assert len(f) == len(raw) == 245
    np.testing.assert_array_equal(f["loss"].to_numpy(), raw["loss"].to_numpy())
    # without --run-id-from-row the missing run_id is named
    err = _one_line_error(runner.invoke(app, [*args, "--store", str(tmp_path / "d.db")]))
    assert "run_id" in err


def test_real_mixinglaws_ct_via_cli(tmp_path: Path) -> None:
    path = EXTERNAL / "mixinglaws" / "tidy" / "ct.csv"
    if not path.exists():
        pytest.skip(f"external data absent: {path}")
    db = tmp_path / "ct.db"
    r = runner.invoke(
        app,
        [
            "ingest",
            str(path),
            "--map",
            "run_id=run",
            "--map",
            "tokens=tokens_assuming_4M_bsz",
            "--map",
            "w_pile=p_pile",
            "--map",
            "w_python=p_python",
            "--evalset-column",
            "valid_domain",
            "--set",
            "n_params=18915328",
            "--store",
            str(db),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["runs", "--store", str(db), "--json", "--where", "w_pile > 0.3"])
    assert sorted(x["run_id"] for x in json.loads(r.stdout)) == ["70M_ct_2-0.375-0.625", "70M_ct_3-0.5-0.5"]
