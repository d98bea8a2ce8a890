"""A report for any fit (issue 8 item 8): ``mixlaw fit ... --report fit.html [--validate SCHEME]``,
``plot_fit(result, table, ax)`` and the report pieces, on the Epoch Chinchilla data and on a multi-power fit."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw import api
from mixlaw.cli import app
from mixlaw.options import FitOptions, StartOptions
from mixlaw.report.fit_report import natural_axis, param_table, plot_fit, starts_summary

runner = CliRunner()
EPOCH_ARGS = [
    "--law",
    "chinchilla",
    "--map",
    "n_params=Model Size",
    "--derive",
    "tokens=`Training FLOP` / (6 * n_params)",
    "--drop-highest",
    "5",
    "--random-state",
    "0",
]
MPL_SPECS = {
    "cosine_24000": "cosine:peak=3e-4,steps=24000,warmup=2160,final=3e-5",
    "constant_24000": "constant:peak=3e-4,steps=24000,warmup=2160",
    "wsdcon_9": f"multistep:peak=3e-4,steps=16000,warmup=2160,milestones=8000,gamma={9e-5 / 3e-4}",
}


def _pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def _self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched
    for png in _pngs(page):
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.fixture(scope="module")
def epoch_report(external, tmp_path_factory) -> tuple[Path, dict]:
    csv = external / "analyzing-chinchilla" / "svg_extracted_data.csv"
    out = tmp_path_factory.mktemp("epoch") / "fit.html"
    args = ["fit", str(csv), *EPOCH_ARGS, "--bootstrap", "20", "--report", str(out)]
    r = runner.invoke(app, [*args, "--validate", "leave-largest-out", "--json"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.stdout)


def test_epoch_report_has_every_piece(epoch_report) -> None:
    path, d = epoch_report
    page = path.read_text()
    _self_contained(page)
    assert len(_pngs(page)) == 3  # fitted curves, residuals, held-out errors
    assert d["report"]["report"] == str(path)
    # the parameter table: every parameter with its value, its 95 % interval and bounds
    for name in ("A", "B", "E", "alpha", "beta"):
        assert f"<td>{name}</td>" in page
    assert "95% lo" in page and "at bound" in page and "20 resamples of residuals (pooled) (scheme residuals)" in page
    assert "Identifiability: ok: rank 5/5" in page  # which parameters the data pin down, as the CLI says
    assert f"{d['params']['E']:.4f}" in page  # E = 1.8172, as published
    # the start table summary: Hoffmann's 4,500-start grid
    assert "4,500" in page and "best 5 starts" in page
    # the held-out errors: the largest model (16.2B) predicted from the others
    mre = d["report"]["validation"]["mre"]
    assert 0 < mre < 0.05 and f"{100 * mre:.3f} %" in page and "n_params=1.61833e+10" in page


def test_epoch_natural_axis_is_tokens_with_one_curve_per_size_group(external) -> None:
    import matplotlib.pyplot as plt

    table = api.load_table(
        external / "analyzing-chinchilla" / "svg_extracted_data.csv",
        column_map={"n_params": "Model Size"},
        derive={"tokens": "`Training FLOP` / (6 * n_params)"},
        drop_highest=5,
        target="loss",
    )
    res = api.fit(table, "chinchilla", FitOptions(starts=StartOptions(n_polish=4), seed=0))
    axis = natural_axis(res, table)
    assert (axis.x, axis.mode, axis.group, axis.log_x) == ("tokens", "grid", "n_params", True)
    fig, ax = plt.subplots()
    assert plot_fit(res, table, ax) is ax
    curves = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    assert len(curves) == 6 and ax.get_xscale() == "log" and ax.get_xlabel() == "tokens"
    # each curve is the fitted law at its group's model size: it decreases in tokens towards E
    for ln in curves:
        y = ln.get_ydata()
        assert np.all(np.diff(y) < 0) and y[-1] > res.params["E"]
    # without data: one curve over the fitted input ranges
    bare = plot_fit(res)
    assert len(bare.lines) == 1
    pt = param_table(res)
    assert list(pt["parameter"]) == ["A", "B", "E", "alpha", "beta"] and not pt["at bound"].any()
    summary, best = starts_summary(res)
    assert summary["starts"] == len(res.starts) and best["objective"].is_monotonic_increasing
    plt.close("all")


@pytest.fixture(scope="module")
def mpl_store(external, tmp_path_factory) -> Path:
    from mixlaw.runs.schema import Mixture, RunMeta
    from mixlaw.runs.store import RunStore
    from mixlaw.schedules import Schedule

    folder = external / "MultiPowerLaw" / "loss_curve_repo" / "csv_25"
    path = tmp_path_factory.mktemp("mpl") / "runs.db"
    store = RunStore(path)
    for name, spec in MPL_SPECS.items():
        s = Schedule.parse(spec)
        meta = RunMeta(run_id=name, phase="pt", n_params=25e6, mixture=Mixture({"general": 1.0}), schedule=s.to_dict())
        store.put_run(meta)
        df = pd.read_csv(folder / f"{name}.csv").iloc[::4]
        store.append_evals(name, pd.DataFrame({"step": df["step"], "lr": df["lr"], "loss": df["loss"]}))
    return path


def test_multi_power_report_from_a_store(mpl_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "mpl.html"
    args = ["fit", str(mpl_store), "--law", "multi_power", "--random-state", "0", "--report", str(out)]
    r = runner.invoke(app, [*args, "--validate", "rollout", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    page = out.read_text()
    _self_contained(page)
    assert len(_pngs(page)) == 3 and "Held-out validation" in page
    assert "step&gt;" in page or "step>" in page  # the rollout runs along steps (the store has no token counts)
    mre = d["report"]["validation"]["mre"]
    assert 0 < mre < 0.01  # the last quarter of each 25M curve predicted within 1 %
    assert "<td>gamma</td>" in page and "multi_power" in page


def test_validate_needs_report(external) -> None:
    csv = external / "analyzing-chinchilla" / "svg_extracted_data.csv"
    r = runner.invoke(app, ["fit", str(csv), *EPOCH_ARGS, "--n-polish", "2", "--validate", "rollout"])
    assert r.exit_code == 1
    assert r.stderr.strip() == "error: expected --report PATH with --validate SCHEME"


def test_chromium_renders_the_fit_report(epoch_report, tmp_path: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    path, _ = epoch_report
    shot = tmp_path / "shot.png"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2400",
           path.as_uri()]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    gray = img[..., :3].mean(axis=2)
    assert img.shape[0] >= 2000 and float(np.var(gray)) > 1e-3  # not blank
    assert gray[:40].mean() < 0.5 < gray[200:].mean()  # the header band is dark, the body light
    # the fitted-curve figure is drawn: many distinct colours in the upper half of the page
    top = (img[200:1100, :, :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(top, axis=0)) > 200
