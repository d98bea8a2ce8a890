"""The option set of every verb is pinned: scripts and docs depend on these names; change them on purpose only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.cli._group import VERBS

runner = CliRunner()

COMMON_FIT = {"--law", "--store", "--where", "--loss-column", "--law-option", "--law-file", "--map", "--derive"}
#: canonical names shown by every verb; the old spellings (--random-state, --loss-column) stay as hidden aliases
CANON = {"--seed", "--target"}
TABLE = {"--map", "--set", "--drop", "--where", "--derive", "--final", "--every", "--steps", "--allow-missing"}
TABLE |= {"--meta"}
#: The base checkpoint's PT history of the cpt verbs, as a constant LR for N tokens.
BASE = {"--base-tokens", "--tokens-per-step", "--base-lr"}
EXPECTED: dict[str, set[str]] = {
    "laws": {"--law-file", "--json", "--long"},
    "fit": COMMON_FIT
    | {"TABLE", "--n-starts", "--n-polish", "--strategy", "--bootstrap", "--random-state", "--loss", "--delta"}
    | {"--drop-highest", "--out", "--report", "--validate", "--json", "--max-iter", "--resample", "--max-memory"}
    | CANON
    | TABLE,
    "predict": {"FIT_JSON", "--at", "--table", "--where", "--map", "--derive", "--law-file", "--json"}
    | {"--level", "--interval", "--method"}
    | TABLE,
    "validate": COMMON_FIT
    | {"TABLE", "--scheme", "--size-column", "--order-column", "--group-column", "--quantile", "--drop-highest"}
    | {"--random-state", "--json", "--holdout", "--largest", "--loss", "--max-iter", "--bootstrap", "--resample"}
    | {"--level", "--interval", "--coverage", "--method"}
    | CANON
    | TABLE,
    "ingest": {"FILE", "--map", "--store", "--lr-table", "--run-id", "--run-id-from-row", "--evalset-column", "--set"}
    | {"--drop", "--format", "--allow-nan", "--allow-missing", "--replace", "--json"}
    | {"--meta", "--run-id-pattern", "--where", "--derive", "--final", "--every", "--steps"},
    "runs": {"--store", "--where", "--export", "--json", "--columns"},
    "cmr": {"TABLE", "--general-eval", "--domain-eval", "--ratio-column", "--size-column", "--where", "--epsilon"}
    | {"--law", "--ratio-law", "--pin-zero", "--c-method", "--lambda", "--bootstrap", "--seed", "--json"}
    | {"--schedule", "--tokens-per-step", "--budget-steps", "--budget-tokens", "--query-ratio", "--report"}
    | {"--paper-decision", "--relative-to-control", "--validate", "--level", "--max-iter"}
    | {"--meta", "--base-eval", "--config", "--max-memory"}
    | TABLE,
    "cpt predict": {"FIT", "--plan", "--weights", "--level", "--json", "--max-memory", "--report"} | BASE,
    "cpt optimize": {"FIT", "--plan", "--weights", "--over", "--grid", "--level", "--json", "--max-memory", "--report"}
    | BASE,
    "cpt critical": {"FIT", "--plan", "--weights", "--horizon", "--level", "--json", "--max-memory", "--report"}
    | BASE,
    "cpt bundle": {"PT_FIT", "CPT_FIT", "--out", "--json"},
    "probe run": {"SPEC", "--store", "--workers", "--ray-address", "--log", "--data-dir", "--work-dir"},
    "probe status": {"SPEC", "--store", "--json", "--data-dir", "--work-dir"},
    "probe plan": {"SPEC"},
    "corpora prepare": {"--out", "--source", "--cache", "--tokenizer", "--vocab-size", "--json"},
    "mix compare": {"RUNS", "--domains", "--target", "--holdout", "--models", "--size-column", "--where", "--map"}
    | {"--random-state", "--json", "--bootstrap", "--level", "--max-iter", "--seed", "--config"}
    | TABLE,
    "mix optimize": {"RUNS", "--domains", "--law", "--target", "--weights", "--target-size", "--size-column"}
    | {"--law-option", "--objective", "--report", "--holdout", "--evaluate"}
    | {"--cap", "--floor", "--fix", "--max-epochs", "--unique-tokens", "--target-tokens", "--prior", "--kl-max"}
    | {"--kl-weight", "--bootstrap", "--sizes", "--where", "--map", "--random-state", "--json"}
    | {"--level", "--max-iter", "--seed", "--config", "--max-memory", "--pool-stats", "--pool"}
    | TABLE,
    "mix nested": {"RUNS", "--domains", "--target-size", "--target-step", "--target", "--max-fit-step"}
    | {"--step-column", "--size-column", "--law", "--law-option", "--where", "--map", "--random-state", "--json"}
    | {"--tie-size-exponent", "--max-iter", "--seed", "--config"}
    | TABLE,
    "decide": {"NAME", "TABLE", "--option", "-o", "--bootstrap", "--level", "--seed", "--max-iter", "--report"}
    | {"--decision-file", "--json"}
    | TABLE,
    "decisions": {"--decision-file", "--json"},
    "plan": {"--sizes", "--target-size", "--budget", "--domains", "--strategy", "--compare", "--simulate", "--out"}
    | {"--tokens-per-param", "--flops-per-s", "--floor-runs", "--cap-runs", "--prior", "--mixture-floor"}
    | {"--mixtures", "--max-mixtures", "--k", "--noise", "--seed", "--name", "--data-dir", "--work-dir"}
    | {"--block-size", "--batch-size", "--eval-tokens", "--cost-runs", "--cost-column", "--json", "--max-iter"}
    | {"--config", "--max-memory"},
}


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> dict[str, set[str]]:
    if hasattr(cmd, "list_commands"):
        out: dict[str, set[str]] = {}
        for name in cmd.list_commands(None):
            out |= _walk(cmd.get_command(None, name), (*path, name))
        return out
    names = set()
    for p in cmd.params:
        names |= set(p.opts) if p.param_type_name == "option" else {p.name.upper()}
    return {" ".join(path): names}


def test_every_verb_has_exactly_its_pinned_options() -> None:
    found = _walk(typer.main.get_command(app))
    assert set(found) == set(EXPECTED), "verbs added or removed: update EXPECTED on purpose"
    for verb, opts in EXPECTED.items():
        assert found[verb] == opts, f"{verb}: {sorted(found[verb] ^ opts)}"


def test_root_help_lists_each_verb_with_its_own_one_line_help() -> None:
    root = typer.main.get_command(app)
    for name, (_, _, short) in VERBS.items():
        cmd = root.get_command(None, name)
        assert (cmd.help or "").strip().startswith(short), name  # the static help is the verb's docstring line


@pytest.fixture()
def runs_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    n = np.repeat([1e7, 1e8, 1e9], 4)
    d = n * np.tile([5, 20, 80, 320], 3)
    loss = (1.8 + 400 / n**0.34 + 2000 / d**0.36) * np.exp(2e-3 * rng.standard_normal(len(n)))
    path = tmp_path / "runs.csv"
    pd.DataFrame(
        {"run_id": [f"r{i}" for i in range(len(n))], "step": 0, "n_params": n, "tokens": d, "loss": loss}
    ).to_csv(path, index=False)
    return path


def _one_line_error(res: Any) -> str:
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


def test_law_option_mistakes_are_one_line_errors(runs_csv: Path) -> None:
    err = _one_line_error(runner.invoke(app, ["fit", str(runs_csv), "--law", "power_law", "--law-option", "inptu=x"]))
    assert "power_law" in err and "inptu" in err and "input" in err  # names the law, the mistake and its options
    err = _one_line_error(runner.invoke(app, ["validate", str(runs_csv), "--law", "chinchilla", "--law-option", "a=1"]))
    assert "chinchilla" in err
    _one_line_error(runner.invoke(app, ["fit", str(runs_csv), "--law", "chinchilla", "--law-option", "novalue"]))


LAW_FILE = '''
import numpy as np
import torch

from mixlaw.laws import Law, ParamSpec, register


@register
class OffsetPower(Law):
    """L = E + A * tokens^(-alpha) (a user's law for the --law-file test)."""

    name = "user_offset_power_{tag}"
    inputs = ("tokens",)
    param_specs = (ParamSpec("E", 0.0, np.inf), ParamSpec("A", 0.0, np.inf), ParamSpec("alpha", 0.0, 2.0))
    example_params = {{"E": 2.0, "A": 50.0, "alpha": 0.3}}
    formula = "L = E + A*D^(-alpha)"

    def predict(self, x, p):
        return p["E"] + p["A"] * x["tokens"] ** (-p["alpha"])

    def start_grid(self):
        return {{"E": np.array([0.5, 1.5]), "A": np.array([5.0, 500.0]), "alpha": np.array([0.1, 0.6])}}
'''


def test_law_file_adds_a_law_to_laws_fit_predict_and_validate(tmp_path: Path) -> None:
    law_py = tmp_path / "my_law.py"
    law_py.write_text(LAW_FILE.format(tag="cli"))
    name = "user_offset_power_cli"
    rng = np.random.default_rng(2)
    tokens = np.geomspace(1e6, 1e10, 24)
    loss = (2.0 + 50.0 * tokens**-0.3) * np.exp(1e-3 * rng.standard_normal(tokens.size))
    table = tmp_path / "t.csv"
    pd.DataFrame({"run_id": "r", "step": np.arange(tokens.size), "tokens": tokens, "loss": loss}).to_csv(
        table, index=False
    )
    res = runner.invoke(app, ["laws", "--law-file", str(law_py), "--json"])
    assert res.exit_code == 0, res.output
    assert name in {r["name"] for r in json.loads(res.stdout)["laws"]}
    out = tmp_path / "fit.json"
    fit = [str(table), "--law", name, "--law-file", str(law_py)]
    res = runner.invoke(app, ["fit", *fit, "--random-state", "0", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["alpha"] == pytest.approx(0.3, abs=0.02)
    res = runner.invoke(app, ["predict", str(out), "--law-file", str(law_py), "--at", "tokens=1e9", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["predicted"] == pytest.approx(2.0 + 50.0 * 1e9**-0.3, rel=5e-3)
    res = runner.invoke(app, ["validate", *fit, "--scheme", "rollout", "--random-state", "0", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mre"] < 0.01


def test_a_broken_law_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    assert "boom" in _one_line_error(runner.invoke(app, ["laws", "--law-file", str(bad)]))
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert "register" in _one_line_error(runner.invoke(app, ["laws", "--law-file", str(empty)]))
    assert "no such file" in _one_line_error(runner.invoke(app, ["laws", "--law-file", str(tmp_path / "nope.py")]))


def test_laws_table_shows_each_laws_options_with_defaults_and_help() -> None:
    res = runner.invoke(app, ["laws"], env={"COLUMNS": "240"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "input='tokens'" in text  # power_law's option with its default
    assert "tie_exponents=False" in text
    assert "(145 columns)" in text  # multi_power's history inputs are summarised, not listed
