"""The OLMo ladder's 30 W&B exports in one ``mixlaw ingest``: sizes from a small meta table, the
Chinchilla law fitted per validation loss on the final checkpoints <= 1.3B and validated on the 3B runs — the example
of ``docs/runs.md``, run as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
LADDER = Path("../shared/data/external/OLMo-ladder/src/scripts/paper/data/ladder-runs")
META = ROOT / "examples" / "olmo_ladder" / "meta.csv"
DOMAINS = ["c4_en", "dolma_books", "dolma_common-crawl", "dolma_pes2o", "dolma_reddit", "dolma_stack"]
DOMAINS += ["dolma_wiki", "ice", "m2d2_s2orc", "pile", "wikitext_103"]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ladder = LADDER if LADDER.exists() else ROOT / LADDER
    if not ladder.exists():
        pytest.skip(f"external data absent: {LADDER}")
    db = tmp_path_factory.mktemp("olmo") / "olmo.db"
    r = runner.invoke(app, ["ingest", str(ladder / "*xC*.csv"), "--meta", str(META), "--store", str(db), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (len(s["files"]), s["runs"], s["failed"]) == (30, 30, 0)
    assert s["loss_columns"] == [f"loss_{d}" for d in DOMAINS]  # eval/<d>-validation/CrossEntropyLoss, recognised
    return db


def test_the_ladder_is_stored_with_sizes_tokens_and_lr(store: Path) -> None:
    with RunStore(store) as st:
        f = st.to_frame()
        assert st.get_run("1B-10xC").n_params == 1_279_395_840 and st.get_run("3B-1xC-rerun").meta["size"] == "3B"
    assert f["run_id"].nunique() == 30 and f["n_params"].nunique() == 5
    assert f.groupby("run_id")["replica"].first().sum() == 5  # the five -rerun files, by their file-name glob
    assert {"tokens", "lr", "step"} <= set(f.columns) and f["tokens"].notna().all()
    final = f[f["step"] == f.groupby("run_id")["step"].transform("max")]
    assert final.loc[final["run_id"] == "1B-10xC", "tokens"].item() == pytest.approx(2.559e11, rel=1e-3)


def _documented_mre() -> dict[str, float]:
    """The held-out MRE table of docs/runs.md (one row of column names, one of percentages)."""
    lines = (ROOT / "docs" / "runs.md").read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| c4_en | dolma_books"))
    names = [c.strip() for c in lines[head].strip("|").split("|")]
    values = [float(c.strip().rstrip("%")) / 100 for c in lines[head + 2].strip("|").split("|")]
    short = {"common-crawl": "dolma_common-crawl", "pes2o": "dolma_pes2o", "reddit": "dolma_reddit",
             "stack": "dolma_stack", "wiki": "dolma_wiki"}  # fmt: skip
    return {short.get(n, n): v for n, v in zip(names, values, strict=True)}


@pytest.mark.parametrize("domain", DOMAINS)
def test_chinchilla_per_validation_loss_predicts_the_3b_runs(store: Path, domain: str) -> None:
    r = runner.invoke(
        app,
        [
            "validate", str(store), "--law", "chinchilla", "--loss-column", f"loss_{domain}", "--final",
            "--where", "replica == 0 or n_params > 1.3e9", "--holdout", "n_params > 1.3e9", "--json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    fold = res["folds"][0]
    assert (fold["n_fit"], fold["n_held_out"]) == (20, 6)  # 4 sizes x 5 budgets; the 6 3B runs (rerun included)
    assert fold["status"] == "converged"
    assert res["mre"] < 0.02  # 0.77 % (m2d2_s2orc) to 1.81 % (wikitext_103)
    assert max(abs(p["rel_error"]) for p in res["points"]) < (0.045 if domain == "wikitext_103" else 0.04)  # 4.01 %
    assert res["mre"] == pytest.approx(_documented_mre()[domain], abs=5e-5)  # the docs table, to its digits
