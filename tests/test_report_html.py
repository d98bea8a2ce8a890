"""The self-contained HTML report: structure, no network references, extensibility, headless-Chromium render."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.cmr import CMRDecision, critical_mixture_ratio
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.report.cmr_page import cmr_report
from mixlaw.report.html import Section, render_report, table_html

P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}
P940 = {"alpha4": 0.7520627, "s4": 0.13720245, "beta3": -1.06581937}


@pytest.fixture(scope="module")
def decision() -> CMRDecision:
    runs = pd.concat(
        [
            simulate_cmr_runs((0.125, 0.25, 0.5), P460, noise=1e-4, random_state=1),
            simulate_cmr_runs((0.125, 0.25, 0.5), P940, noise=1e-4, random_state=2, n_params=940_000_000),
        ],
        ignore_index=True,
    )
    return critical_mixture_ratio(
        runs, general_eval="general", domain_eval="code", bootstrap=2, random_state=0,
        sensitivity_lambdas=(1000.0, math.inf), sensitivity_epsilons=(0.0, 0.05),
    )  # fmt: skip


def test_render_report_is_self_contained_and_extensible(decision: CMRDecision) -> None:
    extra = Section("CPT trajectories", "<p id='cpt'>from another helper</p>")
    page = cmr_report(decision, title="CMR <test>", source="synthetic", extra_sections=[extra])
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "CMR &lt;test&gt;" in page  # titles are escaped
    for title in ("Answer", "Data", "Critical mixture ratio per size", "Per trained ratio", "Fit quality",
                  "Plots", "Sensitivity", "Assumptions", "CPT trajectories"):  # fmt: skip
        assert f"<h2>{title}" in page
    assert page.index("Assumptions") < page.index("CPT trajectories")
    assert len(re.findall(r'src="data:image/png;base64,', page)) >= 4
    # no network: nothing is fetched from elsewhere
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<script" not in page


def test_table_html_escapes_and_formats() -> None:
    t = table_html([{"a": "<b>", "x": 1.23456789, "n": None, "ok": True}])
    assert "&lt;b&gt;" in t and "1.2346" in t and "—" in t and "yes" in t
    page = render_report("t", [Section("s", t)])
    assert "<section><h2>s</h2>" in page


def test_chromium_renders_a_non_blank_page(decision: CMRDecision, tmp_path: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    html_file = tmp_path / "report.html"
    html_file.write_text(cmr_report(decision, title="CMR report render test"))
    shot = tmp_path / "shot.png"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
           html_file.as_uri()]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    gray = img[..., :3].mean(axis=2)
    assert float(np.var(gray)) > 1e-3  # not a blank page
    # the header band is dark, the body light: the CSS was applied
    assert gray[:40].mean() < 0.5 < gray[200:].mean()
