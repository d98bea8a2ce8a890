"""The mixture example's tables: ``seeds.json`` is what ``analyze.py seeds`` computes from ``runs_seeds.csv``,
and ``holdout.json`` is ``analyze.py holdout``'s; the README's tables quote them to the printed digits (so none can go
stale)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "examples" / "mixture_probe"
VERDICT_WORDS = {"beats": "better", "loses": "worse", "no_evidence": "no evidence"}


def _analyze():  # the example script, imported from its file
    spec = importlib.util.spec_from_file_location("mixture_probe_analyze", HERE / "analyze.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _num(text: str) -> float:
    return float(text.replace("−", "-").replace("+", ""))


@pytest.fixture(scope="module")
def summary() -> dict:
    return _analyze().seed_summary(HERE / "runs_seeds.csv")


def test_seeds_json_is_recomputed_from_the_runs(summary: dict) -> None:
    stored = json.loads((HERE / "seeds.json").read_text(encoding="utf-8"))
    assert stored.keys() == summary.keys()
    for name, m in summary["mixtures"].items():
        s = stored["mixtures"][name]
        assert s["seeds"] == m["seeds"] == list(range(6)), name
        assert s["objective"] == pytest.approx(m["objective"], abs=1e-9), name
        assert (s["mean"], s["sd"]) == pytest.approx((m["mean"], m["sd"]), abs=1e-9), name
    for key in ("camel_vs", "vs_uniform"):
        for name, c in summary[key].items():
            assert stored[key][name]["interval"] == pytest.approx(c["interval"], abs=1e-9), (key, name)
            assert stored[key][name]["verdict"] == c["verdict"], (key, name)


def test_every_seed_run_finished_its_budget() -> None:
    import pandas as pd

    table = pd.read_csv(HERE / "runs_seeds.csv")
    last = table.sort_values("step").groupby("run_id").tail(1)
    assert len(last) == 36 and (last["n_params"] == 252_720).all()
    assert (last["tokens"] == last["tokens"].max()).all()  # every run reached the same token budget


def test_the_readme_table_quotes_seeds_json(summary: dict) -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    num = r"([+−-]?\d+\.\d+)"
    for name, m in summary["mixtures"].items():
        row = re.search(rf"^\| {re.escape(name)}[^|]*\| (\d+) \| {num} \| {num} \| ([^|]*)\| ([^|]*)\|$", readme,
                        re.MULTILINE)  # fmt: skip
        assert row, f"no row for {name}"
        assert int(row.group(1)) == m["n"]
        assert (_num(row.group(2)), _num(row.group(3))) == pytest.approx((m["mean"], m["sd"]), abs=5.1e-5), name
        if name == "uniform":
            continue
        c = summary["vs_uniform"][name]
        got = re.fullmatch(rf"\s*{num} \[{num}, {num}\]\s*", row.group(4))
        assert got, name
        assert [_num(got.group(i)) for i in (1, 2, 3)] == pytest.approx([c["diff"], *c["interval"]], abs=5.1e-5)
        assert row.group(5).strip() == VERDICT_WORDS[c["verdict"]], name
    c = summary["camel_vs"]["uniform"]  # the sentence under the table
    lo, hi = (f"{x:+.3f}".replace("-", "−") for x in c["interval"])
    assert f"it is {-c['diff']:.3f} nats worse" in readme and f"[{lo}, {hi}]" in readme


def test_the_readme_holdout_table_quotes_holdout_json() -> None:
    """The 'Holding out the 100k size' table is ``analyze.py holdout``'s ``holdout.json`` (mix compare), per corpus
    and law: MRE, Spearman and coverage to the printed digits."""
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    rows = json.loads((HERE / "holdout.json").read_text(encoding="utf-8"))["rows"]
    laws = ["camel", "mixture_joint", "mixture_additive"]
    checked = 0
    for target, models in rows.items():
        corpus = target.removeprefix("loss_")
        row = re.search(rf"^\| {corpus} \|( [\d.]+ % / .*)\|$", readme, re.MULTILINE)
        assert row, corpus
        cells = [c.strip() for c in row.group(1).split("|")]
        assert len(cells) == len(laws) + 1, corpus
        for law, cell in zip(laws, cells, strict=False):
            m = models[law]
            mre, rho, cov = (x.strip() for x in cell.split("/"))
            assert float(mre.rstrip(" %")) == pytest.approx(100 * m["mre"], abs=0.051), (corpus, law)
            assert float(rho) == pytest.approx(m["spearman"], abs=0.0051), (corpus, law)
            if m["coverage"] is None:
                assert cov == "—", (corpus, law)
            else:
                assert float(cov.rstrip(" %")) == pytest.approx(100 * m["coverage"], abs=0.51), (corpus, law)
        assert float(cells[-1].rstrip(" %")) == pytest.approx(100 * models["blind"]["mre"], abs=0.051), corpus
        checked += 1
    assert checked == 5
