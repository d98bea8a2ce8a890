"""``mix optimize --objective …``: benchmark-weighted objectives through the loss-to-benchmark law, and the HTML
report (decision sentence first; a headless-Chromium screenshot that is not blank)."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.api.mixture import optimize
from mixlaw.cli import app
from mixlaw.decide.mixture import PRESETS
from mixlaw.errors import InputError
from mixlaw.laws import get_law

runner = CliRunner()
DOMS = ("web", "code", "math")
BENCH = list(PRESETS["balanced"])


def _table(seed: int = 0) -> pd.DataFrame:
    """20 mixtures at one size; two validation losses from dml; seven accuracies logistic in those losses.

    The 'code-like' benchmarks fall with loss_b (which code lowers), the others with loss_a (which web lowers)."""
    rng = np.random.default_rng(seed)
    law = get_law("dml", domains=DOMS)
    w = rng.dirichlet(np.ones(3), size=20)
    x = {f"w_{d}": w[:, j] for j, d in enumerate(DOMS)}
    la = law.evaluate(x, {"c": 2.0, "k": 0.9, "t": [-1.5, 0.4]}) * np.exp(2e-3 * rng.standard_normal(20))
    lb = law.evaluate(x, {"c": 1.6, "k": 1.1, "t": [0.5, -1.8]}) * np.exp(2e-3 * rng.standard_normal(20))
    df = pd.DataFrame({"run_id": [f"r{i}" for i in range(20)], "n_params": 3e8, **x, "loss_a": la, "loss_b": lb})
    df["w_math"] = 1.0 - df["w_web"] - df["w_code"]
    for j, b in enumerate(BENCH):
        code_like = b in ("humaneval", "gsm8k", "math")
        z = 6.0 * ((lb if code_like else la) - (1.6 if code_like else 2.0)) - 1.0 + 0.1 * j
        df[b] = 0.25 + 0.6 / (1 + np.exp(z)) + 0.003 * rng.standard_normal(20)
    return df


def test_objective_presets_weigh_benchmarks_and_move_the_optimum() -> None:
    df = _table()
    kw: dict[str, Any] = dict(law="dml", domains=DOMS, target=["loss_a", "loss_b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        code = optimize(df, objective="code", **kw)
        know = optimize(df, objective="knowledge", **kw)
        user = optimize(df, weights={"humaneval": 1.0}, **kw)
    assert code["benchmark_weights"] == PRESETS["code"] and code["goal"] == "maximise weighted accuracy"
    acc = code["predicted_accuracies"]
    assert set(acc) == set(BENCH)
    assert code["score"] == pytest.approx(sum(PRESETS["code"][b] * acc[b] for b in BENCH), rel=1e-9)
    assert code["objective"] == pytest.approx(-code["score"], rel=1e-12)
    # Code-heavy presets want more code (it lowers loss_b); the knowledge preset wants more web.
    assert user["weights"]["code"] > know["weights"]["code"] + 0.05
    assert know["weights"]["web"] > user["weights"]["web"] + 0.05
    # The loss-to-benchmark fits recover the simulated logistic closely.
    for b in BENCH:
        assert code["fits"][b]["law"] == "benchmark_logistic" and code["fits"][b]["r2"] > 0.95
    # No mixture does better on the goal than the optimum (a dense sample of the simplex).
    grid = np.random.default_rng(1).dirichlet(np.ones(3), size=400)
    from mixlaw.decide.mixture import FittedLaw, MixtureObjective

    ls = {t: FittedLaw(get_law("dml", domains=DOMS), code["fits"][t]["params"]) for t in ("loss_a", "loss_b")}
    bl = {b: FittedLaw(get_law("benchmark_logistic", losses="loss_a,loss_b", benchmark=b), code["fits"][b]["params"])
          for b in BENCH}  # fmt: skip
    obj = MixtureObjective(DOMS, ls, benchmarks=bl, benchmark_weights=PRESETS["code"])
    import torch

    assert all(code["objective"] <= float(obj(torch.as_tensor(g))) + 1e-9 for g in grid)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"objective": "speed"}, r"--objective speed: expected one of balanced, math, code, knowledge"),
        ({"weights": {"nosuch": 1.0}}, r"--weights nosuch: not one of the --target columns"),
        ({"weights": {"mmlu": 1.0, "loss_a": 1.0}}, r"weigh either validation losses or benchmarks"),
        ({"objective": "code", "weights": {"mmlu": 1.0}}, r"--objective code and benchmark --weights"),
    ],
)
def test_objective_mistakes_are_one_line(kw: dict[str, Any], match: str) -> None:
    df = _table()
    with pytest.raises(InputError, match=match) as e:
        optimize(df, law="dml", domains=DOMS, target=["loss_a", "loss_b"], **kw)
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match=r"--objective math: the table has no accuracy column 'gsm8k'"):
        optimize(df.drop(columns="gsm8k"), law="dml", domains=DOMS, target=["loss_a", "loss_b"], objective="math")


def test_report_leads_with_the_decision_and_renders(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    _table().to_csv(path, index=False)
    page = tmp_path / "mix.html"
    argv = ["mix", "optimize", str(path), "--law", "dml", "--domains", ",".join(DOMS), "--target", "loss_a"]
    argv += ["--target", "loss_b", "--objective", "balanced", "--bootstrap", "6", "--floor", "math=0.05"]
    argv += ["--holdout", "mixtures:2", "--report", str(page), "--json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    out = json.loads(next(ln for ln in res.output.splitlines() if ln.startswith("{")))
    assert out["report"] == str(page) and out["bootstrap"]["n"] + out["bootstrap"]["n_failed"] == 6
    html = page.read_text()
    first = html.index("<section>")
    assert html.index("Decision") < html.index("Optimal mixture") < html.index("held-out runs")
    assert "Train on " in html[first : first + 600] and "balanced benchmark score" in html
    for title in ("Predicted vs observed on held-out runs", "Optimal mixture vs model size", "Loss-to-benchmark fits"):
        assert title in html
    assert html.count("<img ") >= 3 and "http://" not in html and "https://" not in html
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    shot = tmp_path / "shot.png"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
           page.as_uri()]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    gray = img[..., :3].mean(axis=2)
    assert float(np.var(gray)) > 1e-3  # not a blank page
    assert gray[:40].mean() < 0.5 < gray[200:].mean()  # the dark header and light body: the CSS was applied
