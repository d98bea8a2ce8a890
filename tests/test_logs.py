"""Your own training logs in one command (issue 14, items 2-6): many files at once, --meta, the row selectors, the
same table options on every verb, tidy output, read-only verbs that create nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.runs.columns import format_numbers
from mixlaw.runs.select import TableOptions, load_runs, parse_steps, select_rows
from mixlaw.runs.store import RunStore

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cmr_probe" / "runs.csv"


def _wandb_logs(folder: Path, sizes: dict[str, float], seed: int = 0) -> list[Path]:
    """One W&B history CSV per run (no run id, no size inside): ``<size>-<k>xC.csv``, sparse eval rows."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for size, n in sizes.items():
        for k in (1, 4):
            steps = np.arange(0, 1000 * k + 1, 250)
            tokens = steps * 4096.0
            loss = 1.8 + 400 / n**0.34 + 2000 / np.maximum(tokens, 1e4) ** 0.36
            noisy = loss * np.exp(1e-3 * rng.standard_normal(loss.size))
            df = pd.DataFrame({"_step": steps, "throughput/total_tokens": tokens, "train/loss": loss + 0.05,
                               "eval/web_loss": noisy, "_runtime": steps / 10.0})  # fmt: skip
            df["train/loss"] = df["train/loss"].astype(object)
            df.loc[0, "train/loss"] = ""  # W&B leaves a metric's cell empty at the steps it was not logged
            p = folder / f"{size}-{k}xC.csv"
            df.to_csv(p, index=False)
            paths.append(p)
    return paths


SIZES = {"10M": 1e7, "30M": 3e7, "100M": 1e8}


def _meta(tmp_path: Path) -> Path:
    p = tmp_path / "meta.csv"
    p.write_text("file,n_params,label\n10M-*,10000000,small\n30M-*,30000000,\n100M-*,100000000,large\n")
    return p


def test_ingest_a_folder_glob_and_files_in_one_command_with_meta(tmp_path: Path) -> None:
    logs = _wandb_logs(tmp_path / "logs", SIZES)
    db = tmp_path / "s.db"
    r = runner.invoke(app, ["ingest", str(tmp_path / "logs"), "--meta", str(_meta(tmp_path)), "--store", str(db)])
    assert r.exit_code == 0, r.output
    assert "ingested" in r.stdout and "6 runs (6 new) from 6 of 6 files" in r.stdout
    for name in ("10M-1xC.csv", "100M-4xC.csv", "mapped", "skipped"):
        assert name in r.stdout  # the summary table
    with RunStore(db) as st:
        f = st.to_frame()
        assert sorted(f["run_id"].unique()) == sorted(p.stem for p in logs)
        assert st.get_run("30M-4xC").n_params == 30_000_000 and st.get_run("10M-1xC").meta["label"] == "small"
        assert "label" not in st.get_run("30M-1xC").meta  # an empty meta cell gives nothing
    assert {"loss_web", "loss_train", "tokens"} <= set(f.columns)
    # a glob, and a second ingest of the same runs: every file fails alone, the summary says so, exit 1
    r = runner.invoke(app, ["ingest", str(tmp_path / "logs" / "*-1xC.csv"), "--store", str(db)])
    assert r.exit_code == 1 and "3 failed" in r.stderr and "already in the store" in r.stderr
    with RunStore(db) as st:
        assert len(st.to_frame()) == len(f)  # nothing of a failed file was written


def test_one_transaction_per_file_a_bad_file_leaves_the_others_in(tmp_path: Path) -> None:
    logs = _wandb_logs(tmp_path / "logs", {"10M": 1e7})
    bad = logs[0].read_text().splitlines()
    bad[3] = bad[3].replace(bad[3].split(",")[1], "-5", 1)  # a negative token count on line 4
    logs[0].write_text("\n".join(bad) + "\n")
    db = tmp_path / "s.db"
    r = runner.invoke(app, ["ingest", *map(str, logs), "--store", str(db), "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["failed"] == 1 and out["runs"] == 1
    assert [x["status"][:6] for x in out["files"]] == ["error:", "ok"]
    assert "10M-1xC.csv:4:tokens" in out["files"][0]["status"]
    with RunStore(db) as st:
        assert st.run_ids() == ["10M-4xC"]


def test_run_id_pattern_and_meta_by_run_id(tmp_path: Path) -> None:
    logs = _wandb_logs(tmp_path / "logs", {"10M": 1e7, "30M": 3e7})
    meta = tmp_path / "m.csv"
    meta.write_text("run_id,n_params,schedule_name\n10M,10000000,cosine\n30M,30000000,wsd\n")
    db = tmp_path / "s.db"
    args = ["ingest", str(tmp_path / "logs" / "*-1xC.csv"), "--run-id-pattern", r"^(?P<run_id>[^-]+)-(?P<mult>\d+)xC"]
    r = runner.invoke(app, [*args, "--meta", str(meta), "--store", str(db)])
    assert r.exit_code == 0, r.output
    with RunStore(db) as st:
        assert sorted(st.run_ids()) == ["10M", "30M"]
        assert st.get_run("30M").n_params == 30_000_000 and st.get_run("30M").meta["schedule_name"] == "wsd"
        assert set(st.to_frame()["mult"]) == {1.0}  # a named group is a column
    assert len(logs) == 4
    bad = tmp_path / "bad.csv"
    bad.write_text("file,n_params\n10M-*,1\n*-1xC.csv,2\n")
    r = runner.invoke(app, ["ingest", str(logs[0]), "--meta", str(bad), "--store", str(tmp_path / "b.db")])
    assert r.exit_code == 1 and "bad.csv:3:n_params" in r.stderr and r.stderr.count("\n") == 1


def _table() -> pd.DataFrame:
    rows = []
    for rid, last in (("a", 1000), ("b", 750)):
        for s in range(0, last + 1, 250):
            rows.append({"run_id": rid, "step": s, "loss": 4.0 - s / 1000, "loss_code": np.nan if s == last else 5.0})
    return pd.DataFrame(rows)


def test_row_selectors() -> None:
    df = _table()
    fin = select_rows(df, TableOptions(final=True))
    assert fin.set_index("run_id")["step"].to_dict() == {"a": 1000, "b": 750}
    fin = select_rows(df, TableOptions(final=True), needed=["loss_code"])  # the last row that has the target
    assert fin.set_index("run_id")["step"].to_dict() == {"a": 750, "b": 500}
    assert select_rows(df, TableOptions(every=500))["step"].tolist() == [0, 500, 1000, 0, 500]
    assert select_rows(df, TableOptions(steps=parse_steps("250:500")))["step"].tolist() == [250, 500, 250, 500]
    assert select_rows(df, TableOptions(steps=parse_steps("750:")))["step"].tolist() == [750, 1000, 750]
    assert select_rows(df, TableOptions(steps=parse_steps(":0")))["step"].tolist() == [0, 0]
    sel = select_rows(df, TableOptions(where="run_id == 'a'", derive={"x": "2 * step"}, final=True))
    assert sel[["run_id", "x"]].values.tolist() == [["a", 2000]]
    with pytest.raises(InputError, match=r"empty cell at run 'a' step 1000 .*--allow-missing"):
        select_rows(df, TableOptions(), needed=["loss_code"])
    assert len(select_rows(df, TableOptions(allow_missing=True), needed=["loss_code"])) == len(df) - 2
    for bad in ("5:2", "a:b", "-1:", "1.5"):
        with pytest.raises(InputError, match="--steps"):
            parse_steps(bad)
    with pytest.raises(InputError, match="--every"):
        TableOptions(every=0)
    with pytest.raises(InputError, match="not allowed"):
        select_rows(df, TableOptions(where="run_id.__class__"))


def test_fit_and_validate_read_the_shipped_probe_runs_directly() -> None:
    if not EXAMPLE.exists():
        pytest.skip("example absent")
    whole = load_runs(EXAMPLE, TableOptions(), needed=["loss_general"])
    assert whole["unique_tokens_general"].isna().any()  # the empty cells that used to stop the reader
    df = load_runs(EXAMPLE, TableOptions(final=True, where="phase == 'pt'"), needed=["loss_general"])
    assert len(df) == df["run_id"].nunique() == 3
    with pytest.raises(InputError, match="--allow-missing"):
        load_runs(EXAMPLE, TableOptions(), needed=["unique_tokens_general"])
    pt = ["--law", "chinchilla", "--loss-column", "loss_general", "--where", "phase == 'pt' and step > 0"]
    r = runner.invoke(app, ["fit", str(EXAMPLE), *pt, "--json"])
    assert r.exit_code == 0, r.output
    n_pt = int(((whole["phase"] == "pt") & (whole["step"] > 0)).sum())
    assert json.loads(r.stdout)["n_points"] == n_pt > 30
    r = runner.invoke(app, ["validate", str(EXAMPLE), *pt, "--json"])
    assert r.exit_code == 0, r.output
    assert np.isfinite(json.loads(r.stdout)["mre"])


def test_table_options_on_the_verbs(tmp_path: Path) -> None:
    _wandb_logs(tmp_path / "logs", SIZES)
    one = tmp_path / "logs" / "10M-4xC.csv"
    # fit straight from a W&B file: automatic names, --set for the size the log lacks, --final, --drop of a raw name
    args = ["fit", str(one), "--law", "power_law", "--loss-column", "loss_web", "--set", "n_params=1e7"]
    r = runner.invoke(app, [*args, "--drop", "train/loss", "--steps", "250:", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_points"] == 16
    r = runner.invoke(app, [*args, "--every", "1000", "--steps", "1:", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_points"] == 4  # steps 1000..4000
    r = runner.invoke(app, [*args, "--map", "step=_stp"])
    assert r.exit_code == 1 and "closest: '_step'" in r.stderr
    r = runner.invoke(app, [*args, "--loss-column", "loss_webb"])
    assert r.exit_code == 1 and "'loss_web' (logged as 'eval/web_loss')" in r.stderr


def test_an_explicit_map_wins_on_every_verb_path(tmp_path: Path) -> None:
    p = tmp_path / "run.csv"
    p.write_text("_step,trainer/global_step,tokens,eval/general_loss\n0,0,1000,4\n1,10,2000,3.5\n2,20,4000,3.2\n")
    assert load_runs(p, TableOptions(column_map={"step": "_step"}))["step"].tolist() == [0, 1, 2]
    assert load_runs(p, TableOptions(column_map={"step": "trainer/global_step"}))["step"].tolist() == [0, 10, 20]
    assert load_runs(p, TableOptions(column_map={"loss": "eval/general_loss"}, drop=("_step",)))["loss"].size == 3
    assert load_runs(p, TableOptions(drop=("_step",)))["step"].tolist() == [0, 10, 20]


def test_runs_table_formats_each_column_one_way_and_lists_columns(tmp_path: Path) -> None:
    assert format_numbers([3312, 13150]) == ["3312", "13150"]
    assert format_numbers([3312, 1.315e5, None]) == ["3.312k", "131.5k", ""]
    assert format_numbers([1.9e8, 1.279e9]) == ["190M", "1.279B"]
    assert format_numbers([3e-4, 3e-2]) == ["0.0003", "0.03"]
    assert format_numbers([1e-6, 3e-2]) == ["1.000e-06", "3.000e-02"]
    _wandb_logs(tmp_path / "logs", SIZES)
    db = tmp_path / "s.db"
    r = runner.invoke(app, ["ingest", str(tmp_path / "logs" / "*-1xC.csv"), "--store", str(db)])
    assert r.exit_code == 0, r.output
    db2 = tmp_path / "s.db"
    four = str(tmp_path / "logs" / "*-4xC.csv")
    r = runner.invoke(app, ["ingest", four, "--meta", str(_meta(tmp_path)), "--store", str(db2)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["runs", "--store", str(db)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "100M" in r.stdout and "1e+08" not in r.stdout
    r = runner.invoke(app, ["runs", "--store", str(db), "--columns", "--json"])
    assert r.exit_code == 0, r.output
    cols = {c["column"]: c for c in json.loads(r.stdout)}
    assert cols["loss_web"]["unit"] == "nats/token" and cols["loss_web"]["runs"] == 6
    assert cols["n_params"]["runs"] == 3 and cols["n_params"]["level"] == "run"  # only the 4xC runs got sizes
    r = runner.invoke(app, ["runs", "--store", str(db), "--columns"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "3/6" in r.stdout and "nats/token" in r.stdout


def test_read_only_verbs_create_no_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    for args in (
        ["runs", "--store", str(missing)],
        ["runs", "--store", str(missing), "--columns"],
        ["fit", str(missing), "--law", "chinchilla"],
        ["validate", str(missing), "--law", "chinchilla"],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and "Traceback" not in r.output
        assert not missing.exists() and list(tmp_path.iterdir()) == []
    spec = tmp_path / "spec.toml"
    spec.write_text(PROBE_SPEC)
    r = runner.invoke(app, ["probe", "status", str(spec), "--store", str(missing), "--json"])
    assert r.exit_code == 0, r.output
    assert {json.loads(line)["status"] for line in r.stdout.splitlines()} == {"pending"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]  # the store was not created


PROBE_SPEC = """
[sweep]
name = "c"
data_dir = "data"
work_dir = "runs"

[pt]
sizes = ["debug"]
tokens = 2048
schedule = {kind = "constant", peak_lr = 3e-3}
evals = 2
"""


def test_cmr_and_mix_take_the_table_options_too(tmp_path: Path) -> None:
    """The bundle reaches the loader of cmr and mix: a --drop of an unknown column is refused there, with a hint."""
    if not EXAMPLE.exists():
        pytest.skip("example absent")
    for args in (
        ["cmr", str(EXAMPLE), "--general-eval", "general", "--domain-eval", "code"],
        ["mix", "compare", str(EXAMPLE), "--domains", "general,code", "--target", "loss_general", "--holdout", "x"],
        ["mix", "optimize", str(EXAMPLE), "--domains", "general,code"],
    ):
        r = runner.invoke(app, [*args, "--drop", "unique_tokens_genral"])
        assert r.exit_code == 1, r.output
        assert "unknown 'unique_tokens_genral'; closest: 'unique_tokens_general'" in r.stderr, r.stderr


def test_ingest_selects_the_rows_it_stores(tmp_path: Path) -> None:
    _wandb_logs(tmp_path / "logs", {"10M": 1e7})
    db = tmp_path / "s.db"
    r = runner.invoke(app, ["ingest", str(tmp_path / "logs"), "--final", "--set", "n_params=1e7", "--store", str(db)])
    assert r.exit_code == 0, r.output
    with RunStore(db) as st:
        f = st.to_frame()
    assert f.groupby("run_id")["step"].max().to_dict() == {"10M-1xC": 1000, "10M-4xC": 4000} and len(f) == 2
