"""``mixlaw plan``: the allocation table, --compare, --simulate, --json, the written spec, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.probe.sweep import load_spec, plan

runner = CliRunner()
SRC = str(Path(__file__).resolve().parents[1] / "src")
ISSUE = [
    "plan",
    "--sizes",
    "25k,50k,100k,200k,400k",
    "--target-size",
    "1.6m",
    "--budget",
    "2.0x-target",
    "--domains",
    "general,legal,docs,bio,code",
    "--strategy",
    "hourglass",
]


def test_the_issue_command_prints_the_allocation_and_writes_a_runnable_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    res = runner.invoke(app, [*ISSUE, "--compare", "rectangle,triangle", "--out", str(spec)])
    assert res.exit_code == 0, res.output
    assert "hourglass (count space)" in res.stdout and "compared" in res.stdout and "rectangle" in res.stdout
    raw = tomllib.loads(spec.read_text())
    assert raw["sweep"]["device"] == "auto" and raw["pt"]["sizes"] == ["25k", "50k", "100k", "200k", "400k"]
    counts = [len(raw["pt"]["runs"][s]) for s in raw["pt"]["sizes"]]
    assert counts[0] > min(counts) and counts[-1] > min(counts)  # an hourglass: both ends above the waist
    jobs = plan(load_spec(spec))  # validates every key and expands to one PT run per (size, mixture)
    assert len(jobs) == sum(counts) and len({j.run_id for j in jobs}) == len(jobs)
    assert all(
        abs(sum(j.config.mixture.values()) - 1) < 1e-9 and min(j.config.mixture.values()) >= 0.01 - 1e-6 for j in jobs
    )


def test_json_with_simulation_scores_each_strategy() -> None:
    args = [
        "plan",
        "--sizes",
        "25k,50k,100k",
        "--target-size",
        "400k",
        "--budget",
        "1e13",
        "--domains",
        "general,legal,code",
        "--strategy",
        "hourglass",
        "--compare",
        "rectangle",
        "--simulate",
        "2",
        "--k",
        "1",
        "--json",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    a = out["allocation"]
    assert a["spent"] <= out["budget"]["flops"] and a["leftover"] == out["budget"]["flops"] - a["spent"]
    assert abs(sum(r["compute_share"] for r in a["sizes"]) - 1) < 1e-9
    rows = out["simulation"]["strategies"]
    assert [r["strategy"] for r in rows] == ["hourglass", "rectangle"] and rows[0]["rmse_diff"] == 0
    assert all(r["rmse"] > 0 and -1 <= r["spearman"] <= 1 and r["regret"] >= 0 for r in rows)


def _one_line_error(args: list[str]) -> str:
    res = runner.invoke(app, args)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


def test_mistakes_are_one_line_errors() -> None:
    base = dict(zip(ISSUE[1::2], ISSUE[2::2], strict=True))

    def run(**over: str) -> str:
        opts = {**base, **over}
        return _one_line_error(["plan", *(x for kv in opts.items() for x in kv)])

    assert "--budget" in run(**{"--budget": "lots"})
    assert "--strategy" in run(**{"--strategy": "pyramid"})
    assert "waist" in run(**{"--strategy": "hourglass:tip=0.3"})
    assert "--target-size" in run(**{"--target-size": "100k"})
    assert "--sizes" in run(**{"--sizes": "25k,tiny"})
    assert "floor" in run(**{"--budget": "1e9"})


def test_plan_help_imports_no_heavy_library() -> None:
    code = (
        "import sys; sys.argv = ['mixlaw', 'plan', '--help']\nfrom mixlaw.cli import main\n"
        "try: main()\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'scipy', 'pandas', 'numpy', 'matplotlib') if m in sys.modules))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert "--target-size" in res.stdout and res.stdout.strip().splitlines()[-1] == "[]"
