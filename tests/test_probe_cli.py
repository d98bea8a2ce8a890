"""Probe CLI sub-apps (typer CliRunner) and the Ray executor."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw.cli.probe import app, corpora_app
from mixlaw.errors import InputError
from mixlaw.probe.sweep import load_spec, plan, run_sweep

SPEC = """
[sweep]
name = "c"
data_dir = "data"
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
ratios = [0.5]
tokens = 1024
evals = 2
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    res = CliRunner().invoke(
        corpora_app, ["prepare", "--out", str(d / "data"), "--source", "slice", "--vocab-size", "300", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["hash"]
    (d / "spec.toml").write_text(SPEC.format())
    return d


def test_probe_plan_run_status(workdir: Path) -> None:
    runner = CliRunner()
    spec, store = str(workdir / "spec.toml"), str(workdir / "store.db")
    res = runner.invoke(app, ["plan", spec])
    assert res.exit_code == 0 and "c-debug-pt" in res.stdout and "c-debug-cpt-code-r0.5" in res.stdout
    res = runner.invoke(app, ["status", spec, "--store", store, "--json"])
    assert res.exit_code == 0
    assert {json.loads(line)["status"] for line in res.stdout.splitlines()} == {"pending"}
    res = runner.invoke(app, ["run", spec, "--store", store])
    assert res.exit_code == 0, res.output
    assert "2/2 runs finished" in res.stdout
    res = runner.invoke(app, ["status", spec, "--store", store])
    assert res.exit_code == 0 and "2 finished" in res.stdout
    assert Path(store + ".log").read_text().count("finished") == 2


def test_probe_run_bad_spec_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[pt]\nsizes = ['huge']\n")
    res = CliRunner().invoke(app, ["run", str(bad), "--store", str(tmp_path / "s.db")])
    assert res.exit_code == 1
    assert "unknown sizes" in res.output and "Traceback" not in res.output


def test_ray_missing_names_the_extra(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    jobs = plan(load_spec(workdir / "spec.toml"))
    with pytest.raises(InputError, match=r"mixlaw\[ray\]"):
        run_sweep(jobs, workdir / "ray.db", ray_address="local")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MIXLAW_SKIP_RAY") == "1", reason="MIXLAW_SKIP_RAY=1")
def test_ray_local_instance_runs_the_sweep(workdir: Path) -> None:
    ray = pytest.importorskip("ray")
    jobs = plan(load_spec(workdir / "spec.toml"))
    try:
        results = run_sweep(jobs, workdir / "ray.db", workers=2, ray_address="local")
    finally:
        ray.shutdown()
    assert set(results.values()) == {"finished"}


@pytest.mark.slow
def test_process_pool_runs_the_sweep_parents_first(workdir: Path) -> None:
    """Two local worker processes: every run finishes, CPT runs only after their parent, all in the store."""
    from mixlaw.runs.store import RunStore

    jobs = plan(load_spec(workdir / "spec.toml"))
    results = run_sweep(jobs, workdir / "pool.db", workers=2)
    assert set(results.values()) == {"finished"} and len(results) == len(jobs)
    with RunStore(str(workdir / "pool.db")) as store:
        assert {r for r in store.run_ids()} == {j.run_id for j in jobs}
