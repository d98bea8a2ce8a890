"""examples/pool_probe/analyze.py: the leave-one-pool-out comparison of CausalMix and pool-blind RegMix runs end to
end on its simulated pool experiment (8 pools × 5 runs) and on the probe runs of examples/pool_probe/runs.csv, and
the figures docs/mix.md and the example's README quote are what it prints."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pool_probe_analyze", ROOT / "examples" / "pool_probe" / "analyze.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_simulated_pool_experiment_table_and_docs() -> None:
    mod = _module()
    out = mod.main(["--simulate"]).set_index("model")
    cm, rm = out.loc["causalmix"], out.loc["regmix"]
    # a pool-aware model follows the optimum across pools; the pool-blind one cannot (the truth moves with the pool)
    assert cm["true_regret"] < 0.1 * rm["true_regret"] and cm["picked_regret"] < rm["picked_regret"]
    assert cm["spearman"] > 0.9 > rm["spearman"]
    # the simulated figures quoted in docs/mix.md are this script's
    doc = (ROOT / "docs" / "mix.md").read_text(encoding="utf-8")
    num = r"\s*([0-9]+\.[0-9]+)\s*"
    m = re.search(rf"simulated pool experiment\s+\(8 pools × 5 runs\).*?causalmix{num}/{num}/{num},\s*"
                  rf"regmix \(linear\){num}/{num}/{num}", doc, re.S)  # fmt: skip
    assert m, "docs/mix.md quotes the simulated pool table"
    quoted = [float(v) for v in m.groups()]
    measured = [cm["picked_regret"], cm["spearman"], cm["true_regret"], rm["picked_regret"], rm["spearman"],
                rm["true_regret"]]  # fmt: skip
    assert quoted == pytest.approx(measured, abs=6e-4)
    if importlib.util.find_spec("lightgbm") is not None:  # the optional extra's row, quoted beside it
        lgb = mod.main(["--simulate", "--backend", "lightgbm"]).set_index("model").loc["regmix"]
        m = re.search(rf"RegMix with LightGBM \(5-run leaves\){num}/{num}/{num}", doc)
        assert m and [float(v) for v in m.groups()] == pytest.approx(
            [lgb["picked_regret"], lgb["spearman"], lgb["true_regret"]], abs=6e-4
        )
        assert cm["true_regret"] < lgb["true_regret"]


def test_a_table_without_the_pool_statistics_is_a_one_line_error(tmp_path: Path) -> None:
    from mixlaw.errors import InputError

    mod = _module()
    t = mod.simulate(n_pools=3, runs=4).drop(columns=["quality_b"])
    with pytest.raises(InputError, match="quality_b"):
        mod.compare_pools(t, mod.SIM_DOMAINS, mod.SIM_COVS)


def test_the_experiment_spec_makes_its_40_runs_in_8_pools() -> None:
    from mixlaw.probe.sweep import load_spec, plan

    jobs = plan(load_spec(ROOT / "examples" / "pool_probe" / "spec.toml"))
    pools = sorted({j.config.pool for j in jobs if j.config.pool is not None})
    assert len(jobs) == 40 and len(pools) == 8  # the same five mixtures in each pool
    assert all(j.run_id.endswith(f"-{j.config.pool}") and j.config.meta["pool"] == j.config.pool for j in jobs)
    capped = {j.config.pool: set(j.config.pool_max_tokens) for j in jobs}
    for d in ("general", "legal", "docs", "bio", "code"):  # each corpus varies across pools left in every fold
        assert sum(d in c for c in capped.values()) == 3
    # the 262k variant is the same grid at twice the tokens
    longer = plan(load_spec(ROOT / "examples" / "pool_probe" / "spec_262k.toml"))
    assert [j.run_id.replace("pools262k-", "pools-") for j in longer] == [j.run_id for j in jobs]
    assert {j.tokens for j in longer} == {262_144} and {j.tokens for j in jobs} == {131_072}


def _probe_summary(mod: ModuleType, csv: str, drop: str | None = None) -> dict[str, tuple[float, float]]:
    args = [str(ROOT / "examples" / "pool_probe" / csv), "--probe"] + (["--drop-mixture", drop] if drop else [])
    out = mod.main(args).set_index("model")
    return {m: (float(out.loc[m, "picked_regret"]), float(out.loc[m, "spearman"])) for m in out.index}


# (runs table, tokens per run, where its figures start in docs/mix.md, its rows' tag in the README's table)
PROBE_TABLES = [
    ("runs.csv", 131_072, "On real probe runs", r"\(`--probe"),
    ("runs_262k.csv", 262_144, "At 262k tokens per run", r"262k tokens \(`runs_262k.csv --probe"),
]


@pytest.mark.parametrize(("csv", "tokens", "doc_anchor", "readme_tag"), PROBE_TABLES)
def test_probe_pool_experiment_runs_table_and_docs(csv: str, tokens: int, doc_anchor: str, readme_tag: str) -> None:
    import pandas as pd

    mod = _module()
    runs = mod.probe_table(pd.read_csv(ROOT / "examples" / "pool_probe" / csv))
    # the 40 runs the spec makes, and their pools are what the caps say (a capped corpus is repeated by its heavy run)
    assert len(runs) == 40 and (runs.groupby("pool").size() == 5).all() and runs["pool"].nunique() == 8
    assert (runs["tokens"] == tokens).all()
    caps = {"small_legal": 16000, "all_64k": 64000, "all_16k": 16000, "full": None}
    for pool, cap in caps.items():
        legal = runs[runs["pool"] == pool]
        assert (legal["pool_tokens_legal"] == (cap or legal["pool_tokens_legal"].iloc[0])).all()
        heavy = legal.loc[legal["w_legal"].idxmax()]
        assert (heavy["epochs_legal"] > 5) if cap == 16000 else (heavy["epochs_legal"] < 4)
    # the figures docs/mix.md and the README quote are what the script computes from the runs table
    all5, skewed = _probe_summary(mod, csv), _probe_summary(mod, csv, "m000")
    num = r"\s*([0-9]+\.[0-9]+)\s*"
    doc = (ROOT / "docs" / "mix.md").read_text(encoding="utf-8")
    doc = doc[doc.index(doc_anchor) :]
    readme = (ROOT / "examples" / "pool_probe" / "README.md").read_text(encoding="utf-8")
    quote = rf"\s*causalmix{num}/{num},\s*regmix \(linear\){num}/{num},\s*a random pick{num}"
    heads = ((all5, "all five mixtures:"), (skewed, r"the four skewed mixtures \(`--drop-mixture m000`\).*?:"))
    for summ, head in heads:
        m = re.search(head + quote, doc, re.S)
        assert m, f"docs/mix.md quotes the probe pool table ({doc_anchor}, {head})"
        measured = [*summ["causalmix"], *summ["regmix"], summ["random pick"][0]]
        assert [float(v) for v in m.groups()] == pytest.approx(measured, abs=6e-5)
    rows = ((all5, "all five mixtures"), (skewed, "the four skewed mixtures"))
    for summ, head in rows:
        m = re.search(rf"\| {head},? [^|]*?{readme_tag}[^|]*\|{num}/{num}\|{num}/{num}\|{num}\|", readme)
        assert m, f"the README's table has the row {head} ({csv})"
        measured = [*summ["causalmix"], *summ["regmix"], summ["random pick"][0]]
        assert [float(v) for v in m.groups()] == pytest.approx(measured, abs=6e-5)
