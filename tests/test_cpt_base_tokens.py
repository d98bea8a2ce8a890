"""``--base-tokens`` on the ``cpt`` verbs: a base model known only by its pre-training token count.

Its PT history is assumed a constant LR (``--base-lr``, default the CPT schedule's peak) for ``tokens /
--tokens-per-step`` steps (:class:`mixlaw.decide.cpt.BaseTokens`: ``S1_pt = N/B·η``, ``S2_pt = 0``), in place of the
plan's ``[pt]`` schedule, and the ``base:`` line says so. Checked against the same plan with that schedule written
out; the paper's Fig. 3 D_pt law; well under a second per verb.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw import api
from mixlaw.cli.cpt import app
from mixlaw.decide.cpt import BaseTokens, CptFits, LawFit
from mixlaw.errors import InputError
from mixlaw.laws import get_law
from mixlaw.laws.cpt import base_assumption

CPT = "cosine:peak=2e-4,steps=3000,warmup=100"


def _fits(tmp_path: Path, **options: str) -> Path:
    law = get_law("cpt", **options)
    p = dict(law.example_params)
    fits = CptFits(fits={"loss_c4": LawFit(law, p, max_lr=2e-4), "loss_law": LawFit(law, {**p, "B": -0.79},
                                                                                     max_lr=2e-4)},
                   pt_set="loss_c4", cpt_set="loss_law")  # fmt: skip
    fits.save(tmp_path / "fit.json")
    return tmp_path / "fit.json"


def _plan(tmp_path: Path, pt: str | None = None) -> Path:
    path = tmp_path / ("plan.toml" if pt is None else "plan_pt.toml")
    head = "" if pt is None else f'[pt]\nschedule = "{pt}"\n'
    path.write_text(f'{head}[cpt]\nschedule = "{CPT}"\n[areas]\neval_every = 500\n')
    return path


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def test_base_tokens_are_the_written_out_constant_schedule(tmp_path: Path) -> None:
    fit = str(_fits(tmp_path))
    code, out = _run("predict", fit, "--plan", str(_plan(tmp_path)), "--base-tokens", "1e9", "--tokens-per-step",
                     "5e5", "--json")  # fmt: skip
    assert code == 0, out
    got = json.loads(out)
    code, out = _run("predict", fit, "--plan", str(_plan(tmp_path, "constant:peak=2e-4,steps=2000")), "--json")
    assert code == 0, out
    same = json.loads(out)
    assert got["final"] == pytest.approx(same["final"], rel=1e-12)
    assert got["base"].startswith("base model's PT history from its token count: constant LR 0.0002 (the CPT "
                                  "schedule's peak) for 1e+09 / 500000 tokens per step = 2,000 steps, S1_pt = 0.4, "
                                  "S2_pt = 0")  # fmt: skip
    assert "base_schedule=constant:peak=0.0002,steps=2000" in got["base"]
    # a longer pre-training at the same LR: a lower D_pt loss at the end of the plan (larger S1_pt)
    code, out = _run("predict", fit, "--plan", str(_plan(tmp_path)), "--base-tokens", "4e9", "--tokens-per-step",
                     "5e5", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["final"]["loss_c4"] < got["final"]["loss_c4"]


def test_the_base_line_and_the_assumed_plan_say_it(tmp_path: Path) -> None:
    fit = str(_fits(tmp_path))
    code, out = _run("predict", fit, "--plan", str(_plan(tmp_path)), "--base-tokens", "1e9", "--tokens-per-step",
                     "5e5", "--base-lr", "1e-4")  # fmt: skip
    assert code == 0, out
    assert "base: base model's PT history from its token count: constant LR 0.0001 for" in out
    assert "(fits: PT history from each CPT run's parent run)" in out
    code, out = _run("critical", fit, "--base-tokens", "1e9", "--tokens-per-step", "5e5")
    assert code == 0, out
    first = out.splitlines()[0]
    assert first.startswith("assumed plan (no --plan given): PT constant:peak=0.0002,steps=2000 (from --base-tokens)")


def test_base_tokens_are_refused_where_they_cannot_apply(tmp_path: Path) -> None:
    fit = str(_fits(tmp_path))
    bad = [
        (["--plan", str(_plan(tmp_path, "wsd:peak=2e-4,steps=4000,decay=800")), "--base-tokens", "1e9",
          "--tokens-per-step", "5e5"], "give one of the two"),
        (["--plan", str(_plan(tmp_path)), "--base-tokens", "1e9"], "--tokens-per-step"),
        (["--plan", str(_plan(tmp_path)), "--tokens-per-step", "5e5"], "go with --base-tokens"),
        (["--plan", str(_plan(tmp_path)), "--base-tokens", "1e3", "--tokens-per-step", "5e5"], "fewer than one step"),
        (["--plan", str(_plan(tmp_path)), "--base-tokens", "-1", "--tokens-per-step", "5e5"], "positive"),
    ]  # fmt: skip
    for args, said in bad:
        code, out = _run("predict", fit, *args)
        assert code == 1 and said in out and "Traceback" not in out, (args, out)
    (tmp_path / "bb").mkdir()
    black = str(_fits(tmp_path / "bb", base="blackbox"))
    code, out = _run("predict", black, "--plan", str(_plan(tmp_path)), "--base-tokens", "1e9", "--tokens-per-step",
                     "5e5")  # fmt: skip
    assert code == 1 and "black box" in out, out


def test_the_same_history_as_a_fit_option() -> None:
    base = BaseTokens(3e9, 1e6, 3e-4)
    assert base.steps == 3000 and base.schedule.kind == "constant" and base.schedule.peak_lr == 3e-4
    law = api.build_law("cpt", {"base_schedule": base.spec})  # what the line tells to pass at fit time
    assert base.spec in base_assumption(law)
    with pytest.raises(InputError):
        BaseTokens(float("nan"), 1e6, 3e-4)
