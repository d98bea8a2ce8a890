"""Your own CPT logs to a decision: one meta table, gappy logs, a base run without hand-written files, errors in
plain words, and the walkthrough of docs/own-logs.md run exactly as documented on logs of four trainers."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.runs.ingest import expand_sources, ingest_files
from mixlaw.runs.select import TableOptions, load_runs
from mixlaw.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "own-logs.md"
runner = CliRunner()


def _make_logs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_logs", REPO / "examples" / "own_logs" / "make_logs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_logs"] = mod
    spec.loader.exec_module(mod)
    return mod


ML = _make_logs()


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("own_logs")
    return ML.write_logs(out) | {"root": out}  # the logs `python examples/own_logs/make_logs.py` writes


def _documented(marker: str) -> list[list[str]]:
    """The commands of the bash block after ``<!-- own-logs:MARKER -->`` in docs/own-logs.md."""
    text = DOC.read_text()
    block = re.search(rf"<!-- own-logs:{marker} -->\s*```bash\n(.*?)```", text, flags=re.S)
    assert block is not None, marker
    cmds = [shlex.split(line) for line in block.group(1).strip().splitlines()]
    assert all(c[0] == "mixlaw" for c in cmds)
    return [c[1:] for c in cmds]


def _invoke(args: list[str], cwd: Path) -> object:
    import os

    here = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, args)
    finally:
        os.chdir(here)


# ------------------------------------------------------------------------------------- the walkthrough


def test_documented_two_commands_give_the_true_cmr(grid: dict[str, Path]) -> None:
    """Item 6: W&B, HF, TensorBoard and Lightning logs of one CPT grid -> `ingest` + `cmr` as documented."""
    ingest, cmr = _documented("cmr")
    r = _invoke(ingest, grid["root"])
    assert r.exit_code == 0, r.output
    with RunStore(grid["root"] / "s.db", read_only=True) as st:
        assert sorted(st.run_ids()) == sorted(["base-125m", *(ML.run_name(x) for x in ML.RATIOS if x != 0.6)]
                                              + [f"{ML.run_name(0.6)}-version_0"])  # fmt: skip
        frame = st.to_frame()
    cpt = frame[frame["phase"] == "cpt"]
    assert (cpt["tokens"] == cpt["step"] * ML.TOKENS_PER_STEP).all()  # tokens = tokens_per_step x step
    assert set(np.round(cpt["w_legal"], 6)) == set(ML.RATIOS) and (frame["n_params"] == ML.N_PARAMS).all()
    r = _invoke(cmr, grid["root"])  # exactly as documented: its output is the one the page shows
    assert r.exit_code == 0, r.output
    page = DOC.read_text()
    shown = re.search(r"<!-- own-logs:cmr -->.*?\n```\n(cmr: left out.*?)\n(legal: CMR .*?)\n```", page, re.S)
    assert shown is not None
    assert shown.group(1) in r.stderr and r.stdout.splitlines()[0] == shown.group(2)
    r = _invoke([*cmr, "--json"], grid["root"])
    assert r.exit_code == 0, r.output
    (size,) = json.loads(r.stdout)["cmr"]
    assert abs(size["cmr"] - ML.true_cmr()) < 0.05, (size["cmr"], ML.true_cmr())
    assert size["budget_tokens"] == pytest.approx(ML.STEPS * ML.TOKENS_PER_STEP)


def test_documented_grid_is_the_generated_one(grid: dict[str, Path]) -> None:
    """The page's meta table and log listing are what `make_logs.py` writes (the page cannot drift from the test)."""
    page = DOC.read_text()
    meta = re.search(r"```csv\n(run_id,phase,.*?)```", page, re.S)
    assert meta is not None and meta.group(1) == grid["meta"].read_text()
    listing = re.search(r"```\n(logs/.*?)```", page, re.S)
    assert listing is not None
    shown = sorted(line.split()[0] for line in listing.group(1).splitlines())
    written = sorted(p.relative_to(grid["root"]).as_posix() for p in grid["logs"].rglob("*") if p.is_file())
    assert shown == written
    assert min(ML.RATIOS) < ML.true_cmr() < max(ML.RATIOS)  # the grid brackets the CMR it is meant to locate


def test_mixed_folder_is_one_source_per_log(grid: dict[str, Path], tmp_path: Path) -> None:
    found = [p.relative_to(grid["logs"]).as_posix() for p in expand_sources([grid["logs"]])]
    assert found == [
        "hf/cpt-legal-0.3/checkpoint-2000/trainer_state.json",
        "lightning/cpt-legal-0.6/version_0/metrics.csv",
        "tb/cpt-legal-0.45",
        "wandb/cpt-legal-0.2.csv",
        "wandb/cpt-legal-0.8.csv",
    ]
    assert expand_sources([grid["logs"] / "tb"]) == [grid["logs"] / "tb"]  # a TensorBoard folder: one source
    s = ingest_files([grid["logs"]], tmp_path / "s.db", meta=grid["meta"], keep_going=False)
    # every file named by its path below the folder (was: 'trainer_state.json' / 'metrics.csv' alone)
    assert [f["file"] for f in s["files"]] == [*found, "meta.csv (base runs)"]
    assert s["runs"] == 6 and s["failed"] == 0


# ------------------------------------------------------------------------------------- the meta table


def _meta(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_meta_rows_and_runs_that_match_nothing_are_named(grid: dict[str, Path], tmp_path: Path) -> None:
    hf = grid["logs"] / "hf"
    # a file-name glob tried on the run's folder (was: tried on 'trainer_state.json' only, silently nothing)
    m = _meta(tmp_path / "m.csv", "file,n_params,w_legal,w_general\ncpt-legal-0.3,125000000,0.3,0.7\n")
    ingest_files([hf], tmp_path / "a.db", meta=m, keep_going=False)
    with RunStore(tmp_path / "a.db", read_only=True) as st:
        assert st.get_run("cpt-legal-0.3").n_params == ML.N_PARAMS
    typo = _meta(tmp_path / "t.csv", "run_id,n_params\n*legal-0.33*,125000000\n")
    with pytest.raises(InputError, match=r"got no run for run_id '\*legal-0.33\*'.* in t.csv:2:run_id"):
        ingest_files([hf], tmp_path / "b.db", meta=typo)
    assert not (tmp_path / "b.db").exists() or RunStore(tmp_path / "b.db").run_ids() == []  # nothing written
    some = _meta(tmp_path / "s.csv", "run_id,n_params\n*legal-0.2*,125000000\n")
    with pytest.raises(InputError, match=r"expected a --meta row for every run, got none for run 'cpt-legal-0.3'"):
        ingest_files([grid["logs"] / "wandb" / "cpt-legal-0.2.csv", hf], tmp_path / "c.db", meta=some)
    clash = _meta(tmp_path / "c.csv", "run_id,n_params\n*legal-0.3*,1\ncpt-legal-0.3,2\n")
    with pytest.raises(InputError, match=r"got 1 \(line 2\) and 2 in c.csv:3:n_params"):
        ingest_files([hf], tmp_path / "d.db", meta=clash, keep_going=False)


def test_meta_schedule_spec_and_batch_tokens(grid: dict[str, Path], tmp_path: Path) -> None:
    spec = "cosine:peak=1e-4,steps=2000,warmup=100,final=1e-5"
    m = _meta(tmp_path / "m.csv", f'run_id,batch_size,seq_len,schedule\ncpt-legal-0.2,512,2048,"{spec}"\n')
    ingest_files([grid["logs"] / "wandb" / "cpt-legal-0.2.csv"], tmp_path / "a.db", meta=m, keep_going=False)
    with RunStore(tmp_path / "a.db", read_only=True) as st:
        sched = st.get_run("cpt-legal-0.2").schedule
        frame = st.to_frame()
    assert sched is not None and sched["kind"] == "cosine" and sched["peak_lr"] == pytest.approx(1e-4)
    assert (frame["tokens"] == frame["step"] * 512 * 2048).all()


def test_meta_on_a_verb_reading_a_file(grid: dict[str, Path], tmp_path: Path) -> None:
    """`--meta` works where runs are read, not only at ingest; the base row becomes a run at step 0."""
    lines = grid["meta"].read_text().splitlines()
    meta = _meta(tmp_path / "m.csv", "\n".join(lines[:3]) + "\n")  # the base row and the run of this file
    df = load_runs(grid["logs"] / "wandb" / "cpt-legal-0.2.csv", TableOptions(meta=meta), needed=["loss_general"])
    with pytest.raises(InputError, match=r"no run for run_id '\*legal-0.3\*'"):  # rows of runs not in this file
        load_runs(grid["logs"] / "wandb" / "cpt-legal-0.2.csv", TableOptions(meta=grid["meta"]))
    base = df[df["run_id"] == "base-125m"]
    assert len(base) == 1 and base["loss_general"].iloc[0] == 2.0 and base["tokens"].iloc[0] == 0
    assert "left out 180 of 201 rows" in df.attrs["notes"][0]


# ------------------------------------------------------------------------------------- gappy logs, --set, --derive


def test_derive_at_ingest_is_stored_and_set_fills_empty_columns(grid: dict[str, Path], tmp_path: Path) -> None:
    wb = grid["logs"] / "wandb"
    s = tmp_path / "wb.db"
    r = runner.invoke(app, ["ingest", str(wb), "--store", str(s), "--derive", "tokens=step*1048576"])
    assert r.exit_code == 0, r.output
    with RunStore(s, read_only=True) as st:
        f = st.to_frame()
    assert (f["tokens"] == f["step"] * 1048576).all()  # was: success reported, no tokens stored
    # a store lists phase / n_params for every run: --set fills them (was: refused, --drop first)
    df = load_runs(s, TableOptions(set_values={"phase": "cpt", "n_params": 1.25e8}), needed=["loss_general"])
    assert set(df["phase"]) == {"cpt"} and set(df["n_params"]) == {1.25e8}
    with pytest.raises(InputError, match="fill an empty one, got column 'tokens' with values"):
        load_runs(s, TableOptions(set_values={"tokens": 1}))


def test_cmr_on_gappy_logs_errors_in_plain_words(grid: dict[str, Path], tmp_path: Path) -> None:
    """Each error of the issue's session, reproduced: run, step and column in words; no numpy repr, no traceback."""
    s = tmp_path / "wb.db"
    wb = grid["logs"] / "wandb" / "cpt-legal-0.2.csv"  # one W&B run
    assert runner.invoke(app, ["ingest", str(wb), "--store", str(s)]).exit_code == 0
    base = ["cmr", str(s), "--general-eval", "general", "--domain-eval", "legal"]
    cases = [
        ([], "no ratio column w_legal"),
        (["--set", "w_legal=0.2", "--allow-missing"],
         "expected a value of 'tokens' at run 'cpt-legal-0.2' step 100, got an empty cell (and 19 more rows); "
         "give tokens_per_step"),
        (["--set", "w_legal=0.2", "--derive", "tokens=step*1048576"],
         "expected continual pre-training runs, got every row with phase = pt"),
        (["--drop", "phase", "--set", "phase=cpt", "--set", "w_legal=0.2", "--derive", "tokens=step*1048576"],
         "--base-eval general=LOSS,legal=LOSS"),
    ]  # fmt: skip
    for extra, msg in cases:
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 1 and msg in r.stderr, (extra, r.output)
        assert (
            "np.float64" not in r.stderr
            and "Traceback" not in r.output
            and r.exception is None
            or isinstance(r.exception, SystemExit)
        )
        assert r.stderr.strip().splitlines()[-1].startswith("error: ")
    r = runner.invoke(app, [*base, "--set", "phase=cpt", "--set", "w_legal=0.2", "--derive", "tokens=step*1048576",
                            "--base-eval", "general=2.0,legal=2.5", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["ratios"]
    assert row["ratio"] == pytest.approx(0.2) and row["t0_tokens"] is not None
    r = runner.invoke(app, [*base, "--base-eval", "general=2.0,legal=abc"])
    assert r.exit_code == 1 and "expected a number for the base loss of 'legal', got 'abc'" in r.stderr


def test_an_eval_row_without_the_needed_loss_is_still_an_error() -> None:
    """Only logging steps (no eval at all) are left out silently; a broken eval row is named."""
    def legal(s: int) -> float | None:
        return (2.5 if s != 200 else None) if s % 100 == 0 else None

    rows = [{"run_id": "a", "step": s, "loss_train": 3.0, "loss_general": 2.0 if s % 100 == 0 else None,
             "loss_legal": legal(s)} for s in range(10, 310, 10)]  # fmt: skip
    df = pd.DataFrame(rows)
    with pytest.raises(InputError, match="empty cell at run 'a' step 200"):
        load_runs(df, TableOptions(), needed=["loss_general", "loss_legal"])
    out = load_runs(df, TableOptions(allow_missing=True), needed=["loss_general", "loss_legal"])
    assert out["step"].tolist() == [100, 300] and len(out.attrs["notes"]) == 2


def test_logged_lr_becomes_the_schedule(grid: dict[str, Path]) -> None:
    """Item 3: a run with `lr` and no schedule gets the logged LR per step (interpolated), with a note."""
    from mixlaw.schedules import add_schedule_features

    df = load_runs(grid["logs"] / "wandb" / "cpt-legal-0.2.csv", TableOptions(), needed=["loss_general"])
    assert "from the logged lr" in df.attrs["schedule_note"]
    sched = json.loads(df["schedule"].iloc[0])
    lr = np.asarray(sched["lr"])
    assert lr.size == ML.STEPS and lr[ML.WARMUP :].max() == pytest.approx(ML.LR)
    warm = np.arange(10, ML.WARMUP + 1)  # the warm-up, logged every 10 steps, interpolated in between
    assert lr[warm - 1] == pytest.approx(ML.LR * warm / ML.WARMUP, rel=1e-12)
    assert (lr[:9] == lr[9]).all()  # before the first logged step: held
    feats = add_schedule_features(df)
    # constant LR after warm-up: S1 at step t is the LR area, sum of the per-step LRs
    assert feats["s1"].iloc[-1] == pytest.approx(lr.sum(), rel=1e-9)


def test_logged_lr_schedule_is_shared_by_a_runs_rows_not_copied_per_row() -> None:
    """A run's per-step LR table is one string that all of its rows refer to: a text column copied per row grew as
    rows x steps (gigabytes on the OLMo ladder's W&B exports, where `validate` spent a minute allocating)."""
    from mixlaw.runs.select import logged_lr_schedules

    steps = 4000
    rows = [{"run_id": f"r{k}", "step": t, "lr": 1e-3 * min(1.0, t / 100), "loss": 3.0} for k in range(3)
            for t in range(1, steps + 1)]  # fmt: skip
    df, note = logged_lr_schedules(pd.DataFrame(rows))
    assert note is not None and "3 run(s)" in note
    sched = df["schedule"].to_numpy()
    for k in range(3):
        cells = sched[df["run_id"].to_numpy() == f"r{k}"]
        assert len({id(c) for c in cells}) == 1  # one object per run, however many rows it has
        assert len(json.loads(cells[0])["lr"]) == steps
    # a stored schedule is kept and blank cells (None, "", "nan") are filled, judged once per distinct value
    df2, _ = logged_lr_schedules(pd.DataFrame(rows).assign(schedule=lambda d: np.where(
        d["run_id"] == "r0", '{"kind": "constant", "lr": 0.001}', np.where(d["run_id"] == "r1", "", None))))
    assert df2.loc[df2["run_id"] == "r0", "schedule"].iloc[0] == '{"kind": "constant", "lr": 0.001}'
    assert json.loads(df2.loc[df2["run_id"] == "r1", "schedule"].iloc[0])["kind"] == "table"
    assert json.loads(df2.loc[df2["run_id"] == "r2", "schedule"].iloc[0])["kind"] == "table"


def test_version_and_python_m(tmp_path: Path) -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and re.fullmatch(r"mixlaw \d+\.\d+\.\d+\S*\n", r.stdout)
    import subprocess

    p = subprocess.run([sys.executable, "-m", "mixlaw", "--version"], capture_output=True, text=True, check=False,
                       cwd=tmp_path, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert p.returncode == 0 and p.stdout.startswith("mixlaw "), p.stderr


def test_one_name_per_concept_with_hidden_old_spellings(grid: dict[str, Path]) -> None:
    """`--seed` and `--target` on every verb; `--random-state` / `--loss-column` still work, hidden from help."""
    wb = str(grid["logs"] / "wandb" / "cpt-legal-0.2.csv")
    base = ["fit", wb, "--law", "power_law", "--set", "n_params=1e8", "--derive", "tokens=step*1048576",
            "--law-option", "input=tokens", "--json"]  # fmt: skip
    new = runner.invoke(app, [*base, "--target", "loss_general", "--seed", "3"])
    old = runner.invoke(app, [*base, "--loss-column", "loss_general", "--random-state", "3"])
    assert new.exit_code == 0 and old.exit_code == 0, new.output + old.output
    a, b = json.loads(new.stdout), json.loads(old.stdout)
    assert a["params"] == b["params"] and a["target"] == "loss_general" and a["n_points"] == 20
    for verb in (["fit"], ["validate"], ["mix", "optimize"]):
        text = runner.invoke(app, [*verb, "--help"], env={"COLUMNS": "80"}).stdout
        assert "--seed" in text and "--random-state" not in text and "--loss-column" not in text, verb
        assert "<bool>" not in text and "…" not in text, verb


def _params(verb: list[str], args: list[str]) -> dict[str, object]:
    """What a verb's parser makes of ``args`` (no run): its parameter values."""
    import typer
    from typer._click import Context

    cmd = typer.main.get_command(app)
    ctx = Context(cmd)
    for name in verb:
        cmd = cmd.get_command(ctx, name)
    return dict(cmd.make_context(verb[-1], args, parent=ctx).params)


def test_config_file_reproduces_the_readme_mixture_command() -> None:
    """`mixlaw mix optimize --config examples/mixture_probe/optimize.toml` = the README's 1b command line."""
    readme = " ".join((REPO / "README.md").read_text().split())
    m = re.search(r"mixlaw mix optimize (examples/mixture_probe/runs\.csv .*?--target-size \d+)", readme)
    assert m, "README 1b command"
    long = _params(["mix", "optimize"], shlex.split(m.group(1)))
    toml = str(REPO / "examples" / "mixture_probe" / "optimize.toml")
    short = _params(["mix", "optimize"], ["--config", toml])
    assert long == short and len(long["target"]) == 5  # type: ignore[arg-type]
    # the command line wins over the file
    over = _params(["mix", "optimize"], ["--config", toml, "--law", "dml"])
    assert over["law"] == "dml" and over["target"] == long["target"]


def test_config_file_on_cmr_and_its_errors(grid: dict[str, Path], tmp_path: Path) -> None:
    cfg = tmp_path / "cmr.toml"
    cfg.write_text('general-eval = "general"\ndomain_eval = ["legal"]\nbase-eval = "general=2.0,legal=2.5"\n')
    args = ["cmr", str(grid["logs"] / "wandb" / "cpt-legal-0.2.csv"), "--set", "ratio=0.2", "--set", "phase=cpt",
            "--derive", "tokens=step*1048576", "--json"]  # fmt: skip
    a = runner.invoke(app, [*args, "--config", str(cfg)])
    b = runner.invoke(app, [*args, "--general-eval", "general", "--domain-eval", "legal", "--base-eval",
                            "general=2.0,legal=2.5"])  # fmt: skip
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert json.loads(a.stdout)["ratios"] == json.loads(b.stdout)["ratios"]
    cfg.write_text('general-evl = "general"\n')
    r = runner.invoke(app, [*args, "--config", str(cfg)])
    assert r.exit_code != 0 and "did you mean 'general_eval'" in r.output


def test_one_weights_syntax() -> None:
    """NAME=VALUE, repeated or comma-separated, on `mix` and `cpt`; cpt's older `W_PT,W_CPT` still parses."""
    from mixlaw.cli._common import parse_weights
    from mixlaw.cli.cpt import _weights
    from mixlaw.errors import MixlawError

    assert parse_weights(["a=0.5,b=0.25", "c=0.25"]) == {"a": 0.5, "b": 0.25, "c": 0.25}
    assert _weights("pt=0.3,cpt=0.7") == (0.3, 0.7) == _weights("cpt=0.7,pt=0.3") == _weights("0.3,0.7")
    for bad in ("pt=0.3", "pt=0.3,code=0.7", "0.3"):
        with pytest.raises(MixlawError):
            _weights(bad)


def test_runs_table_reads_at_80_columns(grid: dict[str, Path], tmp_path: Path) -> None:
    ingest_files([grid["logs"]], tmp_path / "s.db", meta=grid["meta"], keep_going=False)
    r = runner.invoke(app, ["runs", "--store", str(tmp_path / "s.db")], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(x.rstrip()) for x in lines) <= 80
    for word in ("cpt-legal-0.6-version_0", "general=0.4", "legal=0.6", "base-125m", "125M"):
        assert word in r.stdout, word  # ids, shares and sizes never split mid-word


def test_meta_on_fit(grid: dict[str, Path], tmp_path: Path) -> None:
    """`--meta` on a verb that reads a log file directly: tokens from tokens_per_step, no ingest needed."""
    meta = _meta(tmp_path / "m.csv", "run_id,n_params,tokens_per_step\ncpt-legal-0.2,125000000,1048576\n")
    wb = str(grid["logs"] / "wandb" / "cpt-legal-0.2.csv")
    args = ["fit", wb, "--meta", str(meta), "--law", "power_law", "--law-option", "input=tokens",
            "--target", "loss_legal", "--json"]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_points"] == 20 and "left out 180 of 200 rows" in r.stderr


def test_ingest_summary_reads_at_80_columns(grid: dict[str, Path], tmp_path: Path) -> None:
    """The per-file table of `ingest` at 80 columns: paths wrap between folders, never inside a name."""
    from mixlaw.cli.runs import wrap_path

    assert wrap_path("hf/cpt-legal-0.3/checkpoint-2000/trainer_state.json", 40) == (
        "hf/cpt-legal-0.3/checkpoint-2000/\ntrainer_state.json"
    )
    assert wrap_path("a/" + "x" * 25, 10) == "a/\nxxxxxxxxxx\nxxxxxxxxxx\nxxxxx"  # a name wider than the column
    args = ["ingest", str(grid["logs"]), "--meta", str(grid["meta"]), "--store", str(tmp_path / "s.db")]
    r = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    table = r.stdout.split("\ningested ")[0]
    assert max(len(x.rstrip()) for x in table.splitlines()) <= 80
    paths, part = [], ""
    for line in table.splitlines()[4:]:  # title, blank, header, rule; then the file column, first on each line
        first = line.split()[0] if line.strip() else ""
        part += first
        if part and not part.endswith("/"):
            paths.append(part)
            part = ""
    found = [p.relative_to(grid["logs"]).as_posix() for p in expand_sources([grid["logs"]])]
    assert set(found) <= set(paths), paths  # every path whole once its lines are joined: no name cut
    assert "ingested 1,001 rows of 6 runs" in r.stdout


def test_cmr_tables_read_at_80_columns(grid: dict[str, Path], tmp_path: Path) -> None:
    """On an 80-column terminal the CMR table is transposed and the reasons follow the per-ratio table: every
    number whole (was: '-0.03…', '(toke…', 'feasib…'), nothing wider than the terminal but the one-line headline."""
    import io

    from rich.console import Console

    from mixlaw.decide.cmr import critical_mixture_ratio
    from mixlaw.report.cmr_text import print_decision

    ingest_files([grid["logs"]], tmp_path / "s.db", meta=grid["meta"], keep_going=False)
    df = load_runs(tmp_path / "s.db", TableOptions(), needed=["loss_general", "loss_legal"])
    dec = critical_mixture_ratio(df, general_eval="loss_general", domain_eval="loss_legal")
    out = io.StringIO()
    print_decision(dec, "legal", console=Console(file=out, width=80, color_system=None))
    headline, *rest = out.getvalue().splitlines()
    assert headline.startswith("legal: CMR 0.62 ") and max(len(x.rstrip()) for x in rest) <= 80
    text = "\n".join(rest)
    flat = " ".join(text.split())
    assert "…" not in text
    (size,) = dec.sizes
    assert f"{size.cmr:.3f}" in text and "CMR law at the budget" in flat
    for row in size.ratios:
        for v in (row["dloss_general_at_budget"], row["observed_dloss_general_at_budget"],
                  row["dloss_domain_at_budget"]):  # fmt: skip
            assert f"{v:+.4f}" in text
        assert f"{row['r2_general']:.3f}/{row['r2_domain']:.3f}" in text
        if not row["feasible"]:
            assert f"125M ratio {row['ratio']:.4g}: {row['reason']}" in flat


def test_every_help_reads_at_80_columns() -> None:
    """Every verb's and sub-verb's --help at 80 columns: no line wider, no `<bool>` metavar, no raw RST
    (``--level``), and a group's command list shows each first sentence whole (was cut to 'for the...')."""
    from mixlaw.cli._group import VERBS

    groups = {"cpt": ["predict", "optimize", "critical", "bundle"], "mix": ["compare", "optimize", "nested"],
              "probe": ["run", "status", "plan"], "corpora": ["prepare"]}  # fmt: skip
    calls = [[v] for v in VERBS] + [[g, s] for g, subs in groups.items() for s in subs]
    for args in calls:
        r = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "80"})
        assert r.exit_code == 0, (args, r.output)
        lines = r.stdout.splitlines()
        assert max(len(x) for x in lines) <= 80, args
        assert "<bool>" not in r.stdout and "``" not in r.stdout, args
        if args[0] in groups and len(args) == 1:
            listing = r.stdout.split("Commands:")[1]
            assert not any(x.rstrip().endswith("...") for x in listing.splitlines()), (args, listing)
            assert all(s in listing for s in groups[args[0]])


def test_fit_says_when_the_lr_areas_come_from_the_logged_lr(grid: dict[str, Path]) -> None:
    """Item 3's note on `fit`: printed when the law reads LR areas, not for a law without them."""
    wb = str(grid["logs"] / "wandb" / "cpt-legal-0.2.csv")
    r = runner.invoke(app, ["fit", wb, "--law", "lr_annealing", "--target", "loss_general", "--n-polish", "4"])
    assert r.exit_code == 0, r.output
    assert "LR schedule of 1 run(s) without one taken from the logged lr" in r.stderr
    r = runner.invoke(app, ["fit", wb, "--law", "power_law", "--law-option", "input=step", "--target", "loss_general"])
    assert r.exit_code == 0, r.output
    assert "logged lr" not in r.stderr


def test_python_load_table_with_a_target_leaves_out_logging_rows(grid: dict[str, Path]) -> None:
    """`mixlaw.load_table(FILE, target=...)` keeps the rows `mixlaw fit FILE --target ...` keeps (was: all 200
    rows, then `api.fit` failed on 'np.float64(nan)')."""
    import mixlaw

    wb = grid["logs"] / "wandb" / "cpt-legal-0.2.csv"
    t = mixlaw.load_table(wb, target="loss_general")
    assert len(t) == 20 and t["loss_general"].notna().all() and "left out 180 of 200 rows" in t.attrs["notes"][0]
    assert len(mixlaw.load_table(wb)) == 200  # without a target every row stays


def test_a_missing_law_input_gets_no_unrelated_closest_name() -> None:
    """`expected column 'replay_ratio' ...; closest: 'loss_train'` sent users the wrong way: no hint when none is
    close, the right one when one is."""
    from mixlaw.runs.io.rules import closest_hint

    cols = ["run_id", "step", "tokens", "lr", "loss_train", "loss_general", "w_general", "w_legal", "schedule"]
    assert closest_hint("replay_ratio", cols) == ""
    assert closest_hint("loss_genral", cols).startswith("; closest: 'loss_general'")


def test_api_fit_names_an_empty_cell_in_words(grid: dict[str, Path]) -> None:
    """A gappy frame handed to the Python API: the error names run, step and column, not 'np.float64(nan)'."""
    from mixlaw import api

    raw = pd.read_csv(grid["logs"] / "wandb" / "cpt-legal-0.2.csv")
    df = raw.rename(columns={"_step": "step", "eval/general_loss": "loss_general"}).assign(run_id="a")
    with pytest.raises(InputError, match=r"got an empty cell at run 'a' step 10 in table:1:loss_general") as e:
        api.fit(df, "power_law", target="loss_general", law_options={"input": "step"})
    assert "np." not in str(e.value)


def test_validate_scheme_columns_are_named_by_their_options(grid: dict[str, Path]) -> None:
    """`validate --scheme rollout` without a tokens column said '... for rollout in tokens'; leave-group-out
    without --group-column said "group column 'None'"."""
    wb = str(grid["logs"] / "wandb" / "cpt-legal-0.2.csv")
    base = ["validate", wb, "--law", "power_law", "--law-option", "input=step", "--target", "loss_general"]
    cases = {
        "rollout": "expected an order column 'tokens' for rollout, got no such column (--order-column)",
        "leave-group-out": "expected a group column for leave-group-out, got none (--group-column)",
    }
    for scheme, msg in cases.items():
        r = runner.invoke(app, [*base, "--scheme", scheme])
        assert r.exit_code == 1 and r.stderr.strip().splitlines()[-1] == f"error: {msg}", r.output


def test_mix_other_mixtures_table_reads_at_80_columns(grid: dict[str, Path], tmp_path: Path) -> None:
    """`mix optimize` on the walkthrough's store, printed on an 80-column terminal: every weight and interval end
    whole (was 'general…', 'legal=0…', '[-0.011…')."""
    import io

    from rich.console import Console

    from mixlaw.report.mix_text import print_optimum

    ingest_files([grid["logs"]], tmp_path / "s.db", meta=grid["meta"], keep_going=False)
    args = ["mix", "optimize", str(tmp_path / "s.db"), "--law", "dml", "--domains", "general,legal", "--target",
            "loss_general", "--target", "loss_legal", "--final", "--where", "phase == 'cpt'", "--bootstrap", "4",
            "--json"]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    buf = io.StringIO()
    print_optimum(out, console=Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    (cand,) = out["candidates"]
    table = text.split("other mixtures")[1]
    assert "…" not in table and max(len(x.rstrip()) for x in table.splitlines()) <= 80
    for d, w in cand["weights"].items():
        assert f"{d}={w:.3f}" in table
    lo, hi = cand["regret_interval"]
    assert f"[{lo:+.4g}," in table and f"{hi:+.4g}]" in table
    # the optimum lies beyond the trained shares; the verdict's remark called a share a "fitted size"
    flat = " ".join(text.split())
    assert out["extrapolation"] and "verdict on the chosen mixture" in flat and "fitted sizes" not in flat

