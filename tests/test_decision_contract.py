"""The Decision contract: a decision written here gets the CLI (--json), the report section and intervals with no
other edit; results round-trip; statuses and reasons are codes; options are validated; built-ins are registered."""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import mixlaw
from mixlaw import api
from mixlaw.cli import app
from mixlaw.decide.contract import (
    Decision,
    DecisionContext,
    DecisionResult,
    Estimate,
    Reason,
    Status,
    reason,
)
from mixlaw.decide.registry import DECISIONS, register_decision
from mixlaw.errors import InputError
from mixlaw.options import IntervalOptions, SolverOptions

TOO_FEW = reason("test_too_few_runs", "only {n} runs; need {need}")


@dataclass(frozen=True)
class MeanOptions:
    column: str = "loss"
    min_runs: int = 3

    def __post_init__(self) -> None:
        if self.min_runs < 1:
            raise InputError(f"expected min_runs >= 1, got {self.min_runs}", column="min_runs")


@register_decision
class FinalMean(Decision):
    """The mean final loss over runs (a decision small enough to check by hand)."""

    name = "test_final_mean"
    summary = "Mean final loss over runs."
    Options = MeanOptions

    def estimate(self, table: pd.DataFrame, options: MeanOptions, ctx: DecisionContext) -> Estimate:
        final = table.sort_values("step").groupby("run_id")[options.column].last()
        if len(final) < options.min_runs:
            return Estimate({"mean_loss": None}, Status.NO_ANSWER, (Reason(TOO_FEW, {"n": len(final),
                                                                                   "need": options.min_runs}),))
        return Estimate({"mean_loss": float(final.mean())}, units={"mean_loss": "nats"})


def _runs(rng: np.random.Generator, n_runs: int, mu: float = 3.0, sd: float = 0.1) -> pd.DataFrame:
    rows = []
    for r in range(n_runs):
        final = mu + sd * rng.standard_normal()
        for step in (100, 200, 300):
            rows.append({"run_id": f"r{r}", "step": step, "loss": final + 0.5 * (300 - step) / 300})
    return pd.DataFrame(rows)


def test_a_decision_written_here_is_registered_and_listed() -> None:
    assert DECISIONS["test_final_mean"] is FinalMean
    names = [d["name"] for d in api.list_decisions()]
    assert "test_final_mean" in names
    assert {"cmr", "mix_optimize", "mix_compare", "mix_nested", "plan"} <= set(names)


def test_its_intervals_come_from_the_contract_and_cover_the_truth() -> None:
    """Run-level bootstrap percentile intervals of a mean over 40 seeded data sets cover the true mean ~95 %."""
    covered = 0
    seeds = range(40)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        res = api.decide(_runs(rng, 25), "test_final_mean", {"column": "loss"},
                         intervals=IntervalOptions(level=0.95, resamples=300, seed=seed))
        a = res.answer("mean_loss")
        assert a.interval is not None and a.interval.n_resamples == 300 and a.interval.n_unusable == 0
        assert a.interval.lo < a.value < a.interval.hi
        covered += a.interval.contains(3.0)
    assert 0.85 <= covered / len(seeds) <= 1.0


def test_a_resample_without_an_answer_is_counted_not_dropped() -> None:
    rng = np.random.default_rng(1)
    res = api.decide(_runs(rng, 4), "test_final_mean", {"min_runs": 3},
                     intervals=IntervalOptions(resamples=200, seed=3))
    iv = res.answer("mean_loss").interval
    assert iv is not None
    # a resample of 4 runs draws fewer than 3 distinct runs with probability > 0 — yet duplicated runs are new runs,
    # so every resample has 4 runs: none is unusable
    assert iv.n_unusable == 0
    res = api.decide(_runs(rng, 4), "test_final_mean", {"min_runs": 5}, intervals=IntervalOptions(resamples=50))
    assert res.status is Status.NO_ANSWER and res.reason_codes == ("test_too_few_runs",)
    assert res.reasons[0].text == "only 4 runs; need 5"
    assert res.answer("mean_loss").value is None and res.answer("mean_loss").interval is None


def test_a_run_drawn_twice_is_two_runs_with_all_its_rows() -> None:
    """Every resample has as many runs as the table, each with all the rows of the run it copies."""
    from mixlaw.fit.uncertainty.from_draws import bootstrap_answers

    table = _runs(np.random.default_rng(4), 7).sample(frac=1.0, random_state=1)  # rows of a run interleaved
    seen: list[pd.DataFrame] = []

    def stat(sample: pd.DataFrame) -> dict[str, float]:
        seen.append(sample)
        return {"n": float(sample["run_id"].nunique())}

    draws = bootstrap_answers(table, stat, ["n"], 60, np.random.default_rng(0))
    assert (draws[:, 0] == 7).all()
    repeats = 0
    for sample in seen:
        for rid, rows in sample.groupby("run_id"):
            base = str(rid).split("#")[0]
            assert sorted(rows["step"]) == [100, 200, 300]
            assert rows["loss"].to_numpy() == pytest.approx(
                table.loc[table["run_id"] == base].set_index("step").loc[rows["step"], "loss"].to_numpy())
            repeats += "#" in str(rid)
    assert repeats > 0  # some resample drew a run twice, and it was renamed


def test_result_round_trips_through_json() -> None:
    res = api.decide(_runs(np.random.default_rng(2), 10), "test_final_mean", intervals=IntervalOptions(resamples=50))
    text = res.to_json()
    back = DecisionResult.from_json(text)
    assert back == res
    assert json.loads(text)["schema_version"] == 1
    with pytest.raises(InputError, match="schema version"):
        DecisionResult.from_json(json.dumps({**json.loads(text), "schema_version": 99}))


def test_options_are_validated_once_with_one_line_errors() -> None:
    table = _runs(np.random.default_rng(0), 5)
    with pytest.raises(InputError, match=r"unknown option\(s\) colum .*options: column, min_runs"):
        api.decide(table, "test_final_mean", {"colum": "loss"})
    with pytest.raises(InputError, match="min_runs >= 1"):
        api.decide(table, "test_final_mean", {"min_runs": "0"})
    with pytest.raises(InputError, match="as a number"):
        api.decide(table, "test_final_mean", {"min_runs": "three"})
    with pytest.raises(InputError, match="did you mean 'test_final_mean'"):
        api.decide(table, "test_final_maen")
    with pytest.raises(InputError, match=r"level in \(0, 1\)"):
        IntervalOptions(level=1.5)
    with pytest.raises(InputError, match="max_iter"):
        SolverOptions(max_iter=0)


def test_the_cli_json_and_report_of_a_decision_file(tmp_path: Path) -> None:
    """A user's decision file gets `mixlaw decide --json` and `--report` with no other edit."""
    src = tmp_path / "my_decision.py"
    src.write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from mixlaw.decide.contract import Decision, Estimate, Reason, Status, reason
        from mixlaw.decide.registry import register_decision

        SPREAD = reason("file_spread", "final losses spread over {spread:.3f} nats")

        @dataclass(frozen=True)
        class Opts:
            column: str = "loss"

        @register_decision
        class BestRun(Decision):
            name = "file_best_run"
            summary = "The lowest final loss."
            Options = Opts

            def estimate(self, table, options, ctx):
                final = table.sort_values("step").groupby("run_id")[options.column].last()
                return Estimate({"best_loss": float(final.min())}, Status.WEAK,
                                (Reason(SPREAD, {"spread": float(final.max() - final.min())}),))
    '''))
    runs = tmp_path / "runs.csv"
    _runs(np.random.default_rng(5), 8).to_csv(runs, index=False)
    report = tmp_path / "r.html"
    out = CliRunner().invoke(app, ["decide", "file_best_run", str(runs), "--decision-file", str(src), "--bootstrap",
                                   "40", "--json", "--report", str(report)])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "decide: 4/40 resamples" in out.stderr and "decide: 40/40 resamples" in out.stderr  # off a terminal
    d = json.loads(out.stdout)
    assert d["decision"] == "file_best_run" and d["status"] == "weak"
    assert d["reasons"][0]["code"] == "file_spread" and d["reasons"][0]["text"].startswith("final losses spread")
    (ans,) = d["answers"]
    assert ans["interval"]["n_resamples"] == 40 and ans["interval"]["lo"] <= ans["value"] + 1e-12
    assert d["data"]["n_runs"] == 8
    page = report.read_text()
    assert "file_best_run" in page and "best_loss" in page and "final losses spread" in page
    text = CliRunner().invoke(app, ["decide", "file_best_run", str(runs), "--decision-file", str(src)])
    assert text.exit_code == 0 and "weak" in text.stdout and "best_loss" in text.stdout
    bad = CliRunner().invoke(app, ["decide", "file_best_run", str(runs), "--decision-file", str(src), "-o", "x=1"])
    assert bad.exit_code == 1 and "unknown option(s) x" in bad.stderr and "Traceback" not in bad.output


def test_an_entry_point_registers_a_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from mixlaw.decide import registry

    @dataclass(frozen=True)
    class NoOpts:
        pass

    class Plugin(Decision):
        name = "plugin_decision"
        summary = "From a package."
        Options = NoOpts

        def estimate(self, table: pd.DataFrame, options: NoOpts, ctx: DecisionContext) -> Estimate:
            return Estimate({"n_rows": float(len(table))})

    class EP:
        name = "plugin_decision"

        def load(self) -> type[Decision]:
            return Plugin

    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [EP()] if group == registry.ENTRY_POINT_GROUP else real(group=group))
    monkeypatch.setitem(registry.LOADER.loaded, "plugins", False)
    try:
        res = api.decide(pd.DataFrame({"run_id": ["a", "b"], "step": [1, 1], "loss": [1.0, 2.0]}), "plugin_decision")
        assert res.answer("n_rows").value == 2.0
    finally:
        DECISIONS.pop("plugin_decision", None)


def test_the_public_api_exports_the_contract() -> None:
    for name in ("decide", "Decision", "DecisionResult", "Status", "register_decision", "IntervalOptions",
                 "SolverOptions", "TableOptions"):
        assert name in mixlaw.__all__ and getattr(mixlaw, name) is not None


def test_the_cmr_on_the_contract_agrees_with_the_engine() -> None:
    from mixlaw.decide.cmr.main import critical_mixture_ratio
    from mixlaw.runs.select import TableOptions, load_runs

    table = load_runs(Path(__file__).resolve().parents[1] / "examples/cmr_probe/runs.csv", TableOptions())
    res = api.decide(table, "cmr", {"general_eval": "general", "domain_eval": "legal"})
    direct = critical_mixture_ratio(table, general_eval="general", domain_eval="legal", control_reading=False)
    got = {a.name: a.value for a in res.answers if a.name.startswith("cmr@")}
    want = [s.cmr for s in direct.sizes]
    assert len(got) == len(want) == 3
    assert all(math.isclose(g, w) for g, w in zip(got.values(), want, strict=True) if w is not None)
    assert res.status in (Status.OK, Status.WEAK) and all(isinstance(r.code, str) for r in res.reasons)
    assert DecisionResult.from_json(res.to_json()) == res


def test_the_documented_decision_file_works(tmp_path: Path) -> None:
    """The example decision of docs/decisions.md, run as the page says (file → `mixlaw decide --decision-file`)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "decisions.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    src = tmp_path / "mine.py"
    src.write_text(code)
    runs = tmp_path / "runs.csv"
    _runs(np.random.default_rng(7), 6).rename(columns={"loss": "loss_general"}).to_csv(runs, index=False)
    out = CliRunner().invoke(app, ["decide", "best_final_loss", str(runs), "--decision-file", str(src),
                                   "--bootstrap", "30", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["status"] == "ok" and d["answers"][0]["name"] == "best" and d["answers"][0]["interval"] is not None
    few = CliRunner().invoke(app, ["decide", "best_final_loss", str(runs), "--decision-file", str(src),
                                   "-o", "min_runs=10", "--json"])  # fmt: skip
    assert json.loads(few.stdout)["reasons"][0]["text"] == "only 6 runs; need 10"
