"""Bounded bootstraps: ``fit``, ``cmr`` and ``mix optimize`` estimate the bootstrap's memory (resamples × rows ×
parameters) before any fitting; above ``--max-memory`` (default 4 GiB) they stop with one line naming the request
and the option to raise, and no solver runs. Requests within the limit are untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw import limits
from mixlaw.cli import app
from mixlaw.errors import InputError

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _no_solve(*_a: object, **_k: object) -> None:
    raise AssertionError("a solver ran before the bootstrap was bounded")


@pytest.fixture
def chinchilla_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    N, D = 10 ** rng.uniform(7, 10, 400), 10 ** rng.uniform(9, 12, 400)
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(rng.normal(0, 0.01, 400))
    p = tmp_path / "t.csv"
    frame = pd.DataFrame({"run_id": [f"r{i}" for i in range(400)], "n_params": N, "tokens": D, "loss": loss})
    frame.to_csv(p, index=False)
    return p


def test_estimate_is_linear_in_each_factor() -> None:
    base = limits.bootstrap_bytes(100, 1000, 5)
    assert limits.bootstrap_bytes(200, 1000, 5) == pytest.approx(2 * base)
    assert limits.bootstrap_bytes(100, 2000, 5) == pytest.approx(2 * base, rel=0.01)
    assert base >= 100 * 1000 * 8  # at least the (B, n) float64 weights


def test_limit_refuses_above_and_passes_below() -> None:
    lim = limits.MemoryLimit(limits.parse_size("1G"))
    limits.bootstrap(1000, 1000, 5, lim)  # ~48 MB: fine
    limits.bootstrap(0, 10**9, 5, lim)  # no bootstrap: nothing to bound
    with pytest.raises(InputError, match=r"--bootstrap 100,000 .* raise --max-memory"):
        limits.bootstrap(100_000, 1000, 5, lim)


def test_fit_bootstrap_refused_before_the_point_fit(chinchilla_csv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.fit.solver.multi as multi  # the point fit's polish runs through its requests

    monkeypatch.setattr(multi, "solve", _no_solve)
    r = runner.invoke(app, ["fit", str(chinchilla_csv), "--law", "chinchilla", "--bootstrap", "1000000"])
    assert r.exit_code == 1
    line = r.output.strip()
    assert "\n" not in line and "--bootstrap 1,000,000 (400 rows × 5 parameters" in line and "--max-memory" in line
    r = runner.invoke(app, ["fit", str(chinchilla_csv), "--law", "chinchilla", "--bootstrap", "10000",
                            "--max-memory", "64M"])  # fmt: skip
    assert r.exit_code == 1 and "above the limit of 64 MiB" in r.output


def test_fit_max_memory_is_validated_before_work(chinchilla_csv: Path) -> None:
    r = runner.invoke(app, ["fit", str(chinchilla_csv), "--law", "chinchilla", "--max-memory", "lots"])
    assert r.exit_code == 1 and "--max-memory as a size" in r.output


def test_cmr_bootstrap_bounded_by_memory_before_fitting(monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.api.cmr as cmr  # the facade the CLI looks the engine up through (imported before patching)

    monkeypatch.setattr(cmr, "critical_mixture_ratio_by_domain", _no_solve)
    args = ["cmr", str(EXAMPLES / "cmr_probe" / "runs.csv"), "--general-eval", "general", "--domain-eval", "legal"]
    r = runner.invoke(app, [*args, "--bootstrap", "1000000"])
    assert r.exit_code == 1 and "needs about" in r.output and "--max-memory" in r.output, r.output
    r = runner.invoke(app, [*args, "--bootstrap", "100000000"])  # the reproducer: refused by its range
    assert r.exit_code == 1 and "--bootstrap in [0, 1,000,000]" in r.output


def test_mix_optimize_bootstrap_bounded_by_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.api.mixture as mix_api

    monkeypatch.setattr(mix_api, "optimize", _no_solve)
    runs = str(EXAMPLES / "mixture_probe" / "runs.csv")
    args = ["mix", "optimize", runs, "--domains", "bio,code,docs,general,legal", "--target-size", "1e9"]
    r = runner.invoke(app, [*args, "--bootstrap", "1000000"])
    assert r.exit_code == 1 and "--bootstrap 1,000,000" in r.output and "--max-memory" in r.output, r.output
