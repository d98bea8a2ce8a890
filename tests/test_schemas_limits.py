"""Every non-run file mixlaw reads is validated before use, every argument before work, every write is atomic.

Each case below was a traceback, a runaway or a silent acceptance through the real CLI (fit JSON given to
``predict``/``cpt``, CPT plan TOML, arguments); each is now one ``error:`` line naming the file and field or the
option, exit 1.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw import limits
from mixlaw.api import load_fit
from mixlaw.cli import app
from mixlaw.decide.cpt import load_plan
from mixlaw.errors import InputError
from mixlaw.fit import fit_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions
from mixlaw.safeio import atomic_write_text, check_output_path, loads_json

runner = CliRunner()


def _table(n: int = 30, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(7, 9, n), 10 ** rng.uniform(9, 11, n)
    y = (1.7 + 400 / N**0.34 + 1500 / D**0.3) * np.exp(0.01 * rng.standard_normal(n))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "n_params": N, "tokens": D, "loss": y})


@pytest.fixture(scope="module")
def fit_record() -> dict[str, Any]:
    res = fit_law(
        "chinchilla",
        _table(),
        FitOptions(starts=StartOptions(n_polish=4), bootstrap=BootstrapOptions(resamples=8), seed=0),
    )
    return json.loads(res.to_json())


def _mod(d: dict[str, Any], f: Any) -> str:
    d = copy.deepcopy(d)
    f(d)
    return json.dumps(d)


FIT_CASES: dict[str, tuple[Any, str]] = {
    "not_utf8": (lambda d: b"\xff\xfe" + json.dumps(d).encode(), "UTF-8"),
    "deep": (lambda d: "[" * 5000 + "]" * 5000, "nested at most"),
    "array": (lambda d: "[1, 2]", "JSON object, got a JSON list"),
    "params_list": (lambda d: _mod(d, lambda x: x.__setitem__("params", [1, 2])), "field 'params'"),
    "ranges_str": (lambda d: _mod(d, lambda x: x.__setitem__("input_ranges", "x")), "field 'input_ranges'"),
    "metrics_list": (lambda d: _mod(d, lambda x: x.__setitem__("metrics", [])), "field 'metrics'"),
    "law_list": (lambda d: _mod(d, lambda x: x.__setitem__("law", ["chinchilla"])), "field 'law'"),
    "calibration_no_lo": (lambda d: _mod(d, lambda x: x.__setitem__("calibration", {"hi": 1.0})),
                          "field 'calibration.lo': required"),  # fmt: skip
    "draws_missing_column": (lambda d: _mod(d, lambda x: [r.pop("alpha") for r in x["bootstrap"]["params"]]),
                             "bootstrap.params.0"),  # fmt: skip
    "huge_integer": (lambda d: json.dumps(d)[:-1] + ', "n": ' + "9" * 100_000 + "}", "at most 40 digits"),
    "duplicate_law": (lambda d: json.dumps(d).replace('"law": "chinchilla"', '"law": "chinchilla", "law": "x"'),
                      "'law' twice"),  # fmt: skip
    "alpha_inf": (lambda d: _mod(d, lambda x: x["params"].__setitem__("alpha", float("inf"))),
                  "field 'params.alpha': input should be a finite number"),  # fmt: skip
    "params_nan": (lambda d: _mod(d, lambda x: x["params"].__setitem__("A", float("nan"))), "'params.A'"),
    "range_nan": (lambda d: _mod(d, lambda x: x["input_ranges"].__setitem__("tokens", [float("nan"), 1.0])),
                  "input_ranges.tokens.0"),  # fmt: skip
    "newer_version": (lambda d: _mod(d, lambda x: x.__setitem__("schema", "mixlaw.fit/2")), "upgrade mixlaw"),
    "older_version": (lambda d: _mod(d, lambda x: x.__setitem__("schema", "mixlaw.fit/0")), "refit"),
    "no_schema": (lambda d: _mod(d, lambda x: x.pop("schema")), "not a mixlaw fit"),
    "missing_param": (lambda d: _mod(d, lambda x: x["params"].pop("beta")), "missing ['beta']"),
    "bool_count": (lambda d: _mod(d, lambda x: x.__setitem__("n_points", True)), "field 'n_points'"),
}


@pytest.mark.parametrize("case", sorted(FIT_CASES))
def test_malformed_fit_json_is_one_line_naming_file_and_field(
    case: str, fit_record: dict[str, Any], tmp_path: Path
) -> None:
    make, expected = FIT_CASES[case]
    body = make(fit_record)
    p = tmp_path / "fit.json"
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(InputError) as ei:
        load_fit(p)
    msg = str(ei.value)
    assert expected in msg and str(p) in msg and "\n" not in msg, msg
    r = runner.invoke(app, ["predict", str(p), "--at", "n_params=1e8,tokens=1e10"])
    assert r.exit_code == 1 and "Traceback" not in r.output and "error:" in r.output, r.output
    r = runner.invoke(app, ["cpt", "critical", str(p)])
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output


def test_valid_fit_json_round_trips(fit_record: dict[str, Any], tmp_path: Path) -> None:
    p = tmp_path / "fit.json"
    p.write_text(json.dumps(fit_record))
    res = load_fit(p)
    assert res.params == pytest.approx(fit_record["params"])
    assert json.loads(res.to_json())["params"] == fit_record["params"]


PLAN_OK = '[cpt]\nschedule = "cosine:peak=2e-4,steps=100"\n'
PLAN_CASES: dict[str, tuple[str | bytes, str]] = {
    "branch_step_text": ('[pt]\nschedule = "wsd:peak=2e-4,steps=400,decay=80"\nbranch_step = "abc"\n' + PLAN_OK,
                         "pt.branch_step"),  # fmt: skip
    "section_as_text": ('cpt = "schedule"\n', "[cpt] schedule"),
    "schedule_table_incomplete": ('[cpt]\nschedule = {kind = "cosine"}\n', "[cpt] schedule"),
    "schedule_number": ("[cpt]\nschedule = 1\n", "cpt.schedule"),
    "bool_as_number": (PLAN_OK + "replay_ratio = true\n", "cpt.replay_ratio"),
    "not_utf8": (PLAN_OK.encode() + b"# \xff\n", "UTF-8"),
    "inf": (PLAN_OK + "peak_lr = inf\n", "cpt.peak_lr"),
    "deep": (PLAN_OK + "x = " + "[" * 2000 + "]" * 2000 + "\n", "nested at most"),
    "unknown_key": (PLAN_OK + "colour = 1\n", "colour"),
    "ratio_out_of_range": (PLAN_OK + "replay_ratio = 1.5\n", "cpt.replay_ratio"),
}


@pytest.mark.parametrize("case", sorted(PLAN_CASES))
def test_malformed_cpt_plan_is_one_line_naming_file_and_field(case: str, tmp_path: Path) -> None:
    body, expected = PLAN_CASES[case]
    p = tmp_path / "plan.toml"
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(InputError) as ei:
        load_plan(p)
    msg = str(ei.value)
    assert expected in msg and str(p) in msg and "\n" not in msg, msg


def test_a_huge_plan_stops_before_it_is_built_and_names_the_option(tmp_path: Path) -> None:
    p = tmp_path / "plan.toml"
    p.write_text('[cpt]\nschedule = "constant:peak=2e-4,steps=100000000"\n')  # 117 bytes that grew to 7-10 GB
    with pytest.raises(InputError, match=r"100,000,000 steps needs about 9\.3 GiB.*raise --max-memory"):
        load_plan(p)
    plan = load_plan(p, limit=limits.MemoryLimit(16 * 1024**3))  # raised: the schedule is built (lazily)
    assert plan.cpt.total_steps == 100_000_000


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["cpt", "predict", "FIT", "--plan", "PLAN", "--level", "1.5"], "--level in (0, 1)"),
        (["cpt", "predict", "FIT", "--plan", "PLAN", "--level", "-inf"], "--level in (0, 1)"),
        (["cpt", "predict", "FIT", "--plan", "PLAN", "--level", "1e30"], "--level in (0, 1)"),
        (["cpt", "critical", "FIT", "--horizon", "-1"], "--horizon in [1,"),
        (["fit", "TABLE", "--law", "chinchilla", "--every", "9223372036854775808"], "--every in [1,"),
        (["ingest", "TABLE", "--store", "STORE", "--every", "9223372036854775808"], "--every in [1,"),
        (["fit", "TABLE", "--law", "chinchilla", "--out", "MISSING/f.json"], "--out in an existing directory"),
        (["fit", "TABLE", "--law", "chinchilla", "--out", "DIR"], "--out to name a file"),
        (["cpt", "predict", "FIT", "--plan", "PLAN", "--max-memory", "lots"], "--max-memory as a size"),
    ],
)
def test_arguments_are_checked_before_work(
    argv: list[str], expected: str, fit_record: dict[str, Any], tmp_path: Path
) -> None:
    files = {
        "FIT": tmp_path / "fit.json",
        "PLAN": tmp_path / "plan.toml",
        "TABLE": tmp_path / "t.csv",
        "STORE": tmp_path / "s.db",
        "DIR": tmp_path,
    }
    files["FIT"].write_text(json.dumps(fit_record))
    files["PLAN"].write_text(PLAN_OK)
    _table().assign(step=0).to_csv(files["TABLE"], index=False)
    args = [str(files[a]) if a in files else a.replace("MISSING", str(tmp_path / "nope")) for a in argv]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert expected in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "s.db").exists()  # nothing was ingested


def test_limits_declare_the_ranges_once() -> None:
    assert limits.level(0.9) == 0.9
    for bad in (0, 1, float("nan"), float("inf"), -0.5, True, "0.9", 10**400):
        with pytest.raises(InputError, match="--level"):
            limits.level(bad)
    assert limits.count(5, "--n") == 5
    for bad in (0, -1, 2**63, 1.5, True):
        with pytest.raises(InputError, match="--n"):
            limits.count(bad, "--n")
    assert limits.parse_size("4G") == 4 * 1024**3 and limits.parse_size("512MiB") == 512 * 1024**2
    for bad in ("-1G", "0", "1e400", "x", "inf"):
        with pytest.raises(InputError, match="--max-memory"):
            limits.parse_size(bad)
    with pytest.raises(InputError, match=r"needs about 8\.0 GiB, above the limit of 4\.0 GiB: raise --max-memory"):
        limits.memory(8 * 1024**3, "a bootstrap of 1,000,000 resamples")
    limits.memory(1024**3, "a small job")  # below the limit: nothing


def test_atomic_write_keeps_the_previous_file_when_the_write_fails(tmp_path: Path, monkeypatch: Any) -> None:
    p = tmp_path / "fit.json"
    atomic_write_text(p, "old")
    assert p.read_text() == "old"

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(InputError, match="No space left on device.*previous file, if any, is unchanged"):
        atomic_write_text(p, "new" * 1000)
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["fit.json"]  # no temporary file left behind


def test_output_path_checks(tmp_path: Path) -> None:
    assert check_output_path(tmp_path / "a.json", "--out") == tmp_path / "a.json"
    with pytest.raises(InputError, match="--report to name a file"):
        check_output_path(tmp_path, "--report")
    with pytest.raises(InputError, match="existing directory"):
        check_output_path(tmp_path / "no" / "a.html", "--report")


def test_json_reader_refuses_duplicates_at_any_depth() -> None:
    with pytest.raises(InputError, match="'a' twice"):
        loads_json('{"x": {"a": 1, "a": 2}}', "f.json")
    assert loads_json('{"x": {"a": 1, "b": NaN}}', "f.json")["x"]["a"] == 1


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["cmr", "cmr_probe/runs.csv", "--general-eval", "general", "--domain-eval", "legal", "--size-column",
          "nope"], "--size-column to name a column"),  # fmt: skip
        (["cmr", "cmr_probe/runs.csv", "--general-eval", "general", "--domain-eval", "legal", "--bootstrap",
          "100000000"], "--bootstrap in [0, 1,000,000]"),  # fmt: skip
        (["cmr", "cmr_probe/runs.csv", "--general-eval", "general", "--domain-eval", "legal", "--level", "1.5"],
         "--level in (0, 1)"),  # fmt: skip
        (["plan", "--sizes", "25k,50k", "--target-size", "1.6m", "--budget", "3e15", "--domains", "a,b",
          "--floor-runs", str(2**63)], "--floor-runs in [1,"),  # fmt: skip
        (["plan", "--sizes", "25k,50k", "--target-size", "1.6m", "--budget", "3e15", "--domains", "a,b",
          "--simulate", "100000"], "--simulate in [0, 10,000]"),  # fmt: skip
        (["mix", "nested", "mixture_probe/runs.csv", "--domains", "bio,code,docs,general,legal", "--step-column",
          "run_id", "--target-size", "1e9", "--target-step", "1000", "--target", "loss_bio"],
         "expected column 'run_id' of runs.csv to be numeric"),  # fmt: skip
    ],
)
def test_argument_tracebacks_of_the_decisions_are_one_line(argv: list[str], expected: str) -> None:
    args = [str(EXAMPLES / a) if a.endswith(".csv") else a for a in argv]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert expected in r.output and "Traceback" not in r.output, r.output


SPEC = (EXAMPLES / "mixture_probe" / "spec.toml").read_text()


@pytest.mark.parametrize(
    "body, expected",
    [
        (SPEC.replace("tokens_per_param = 20.0", "tokens = inf", 1), "[pt].tokens"),
        (SPEC.replace("tokens_per_param = 20.0", "tokens = 9223372036854775807", 1), "[pt].tokens to be <= 1"),
        (SPEC.replace('data_dir = "/work/probe_work/data"', 'data_dir = "\\u0000"'), "[sweep].data_dir"),
        (SPEC + "\n[extra]\nx = " + "[" * 2000 + "]" * 2000 + "\n", "nested at most 32"),
        (SPEC.encode() + b"# \xff\n", "UTF-8"),
    ],
)
def test_sweep_spec_defects_are_one_line(body: str | bytes, expected: str, tmp_path: Path) -> None:
    from mixlaw.probe.sweep import load_spec

    p = tmp_path / "spec.toml"
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(InputError) as ei:
        load_spec(p)
    assert expected in str(ei.value) and str(p) in str(ei.value) and "\n" not in str(ei.value)
    p.write_text(SPEC)
    assert load_spec(p).path == p


def test_read_only_verbs_never_switch_the_journal_mode(tmp_path: Path) -> None:
    import sqlite3

    from mixlaw.runs.store import RunStore

    db = tmp_path / "s.db"
    table = tmp_path / "t.csv"
    _table().assign(step=0).to_csv(table, index=False)
    assert runner.invoke(app, ["ingest", str(table), "--store", str(db)]).exit_code == 0
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    con.close()
    before = db.read_bytes()
    for argv in (["runs", "--store", str(db)], ["fit", str(db), "--law", "chinchilla", "--n-polish", "2"]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 0, r.output
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()
    assert db.read_bytes() == before
    with RunStore(db, read_only=True) as st:
        assert len(st.runs(None)) == 30


def test_a_sqlite_file_with_a_version_but_no_tables_is_refused(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "s.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 1")
    con.close()
    for argv in (["runs", "--store", str(db)], ["fit", str(db), "--law", "chinchilla"]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 1 and "without the tables" in r.output and "Traceback" not in r.output, r.output


def test_predict_at_refuses_table_options_it_would_ignore(fit_record: dict[str, Any], tmp_path: Path) -> None:
    p = tmp_path / "fit.json"
    p.write_text(json.dumps(fit_record))
    for extra in (["--where", "n_params > 0"], ["--derive", "tokens=tokens*2"]):
        r = runner.invoke(app, ["predict", str(p), "--at", "n_params=1e8,tokens=1e10", *extra])
        assert r.exit_code == 1 and f"expected {extra[0]} only with --table" in r.output, r.output
    r = runner.invoke(app, ["predict", str(p), "--at", "n_params=1e8,tokens=1e10", "--json"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("where", ["DIR", "MISSING/r.html"])
def test_mix_optimize_checks_its_report_path_before_the_run(where: str, tmp_path: Path) -> None:
    target = str(tmp_path) if where == "DIR" else str(tmp_path / "nope" / "r.html")
    r = runner.invoke(app, ["mix", "optimize", str(EXAMPLES / "mixture_probe" / "runs.csv"), "--domains",
                            "bio,code,docs,general,legal", "--report", target])  # fmt: skip
    assert r.exit_code == 1 and "--report" in r.output and "Traceback" not in r.output, r.output
