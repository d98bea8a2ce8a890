"""Issue 9 item 2: every decision gives its intervals at ``--level`` (not only 95 %), and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app

REPO = Path(__file__).resolve().parents[1]
MIX = str(REPO / "examples" / "mixture_probe" / "runs.csv")
CMR = str(REPO / "examples" / "cmr_probe" / "runs.csv")
runner = CliRunner()


@pytest.mark.parametrize(
    "verb", [["predict"], ["validate"], ["cmr"], ["mix", "compare"], ["mix", "optimize"], ["cpt", "predict"]]
)
def test_every_verb_with_intervals_takes_level(verb: list[str]) -> None:
    r = runner.invoke(app, [*verb, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "--level" in r.output


def _cmr(level: float) -> dict:
    r = runner.invoke(app, ["cmr", CMR, "--general-eval", "general", "--domain-eval", "legal", "--bootstrap", "30",
                            "--level", str(level), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_cmr_intervals_follow_the_level() -> None:
    wide, narrow = _cmr(0.95), _cmr(0.6)
    pairs = [(w["ci"], n["ci"]) for w, n in zip(wide["cmr"], narrow["cmr"], strict=True) if w["ci"] and n["ci"]]
    assert pairs
    for (wlo, whi), (nlo, nhi) in pairs:  # the same resamples: a lower level sits inside the higher one
        assert wlo <= nlo <= nhi <= whi
    assert any(nhi - nlo < whi - wlo for (wlo, whi), (nlo, nhi) in pairs)
    r = runner.invoke(app, ["cmr", CMR, "--general-eval", "general", "--domain-eval", "legal", "--level", "1.5"])
    assert r.exit_code == 1 and "--level" in r.output and "1.5" in r.output and "Traceback" not in r.output


def test_mix_optimize_intervals_follow_the_level() -> None:
    args = ["mix", "optimize", MIX, "--law", "dml", "--domains", "general,legal,docs,bio,code", "--target",
            "loss_general", "--final", "--where", "n_params < 2e5", "--target-size", "252720", "--bootstrap", "12"]
    out = {}
    for level in ("0.95", "0.6"):
        r = runner.invoke(app, [*args, "--level", level, "--json"])
        assert r.exit_code == 0, r.output
        out[level] = json.loads(r.stdout)["bootstrap"]
    assert out["0.6"]["level"] == 0.6
    (wlo, whi), (nlo, nhi) = out["0.95"]["objective"], out["0.6"]["objective"]
    assert wlo <= nlo <= nhi <= whi and nhi - nlo < whi - wlo
    text = runner.invoke(app, [*args, "--level", "0.6"])
    assert text.exit_code == 0 and "60% interval" in text.output
