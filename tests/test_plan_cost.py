"""`mixlaw plan --cost-runs/--cost-column`: a measured cost per run replaces 6·N·D (issue 11 item 1)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.design.budget import measured_cost, parse_budget, resolve_sizes
from mixlaw.errors import InputError


def _runs(rng: np.random.Generator) -> pd.DataFrame:
    """Three sizes, two runs each, two evaluation rows per run; seconds = 1e-9·N^1.2·D (a made-up cost law)."""
    rows = []
    for n in (13_000.0, 50_000.0, 113_000.0):
        for k in range(2):
            d = 20 * n
            for frac in (0.5, 1.0):
                rows.append(
                    {
                        "run_id": f"r{n:g}-{k}",
                        "n_params": n,
                        "tokens": frac * d,
                        "step": int(frac * 10),
                        "loss": 5.0 - frac,
                        "wall_s": 1e-9 * n**1.2 * frac * d * (1 + 0.01 * rng.standard_normal()),
                    }
                )
    return pd.DataFrame(rows)


def test_measured_cost_uses_each_runs_last_row_and_interpolates_in_log_n() -> None:
    rng = np.random.default_rng(0)
    cost = measured_cost(_runs(rng), "wall_s")
    for n in (13_000.0, 50_000.0, 113_000.0):  # measured sizes: within the 1 % noise of the true cost
        assert cost(n, 20 * n) == pytest.approx(1e-9 * n**1.2 * 20 * n, rel=0.03)
    n = 30_000.0  # between sizes, and beyond the largest: the power law is exact under log-log interpolation
    assert cost(n, 1e6) == pytest.approx(1e-9 * n**1.2 * 1e6, rel=0.03)
    assert cost(250_000.0, 5e6) == pytest.approx(1e-9 * 250_000.0**1.2 * 5e6, rel=0.05)
    assert cost(1e5, 2e6) == pytest.approx(2 * cost(1e5, 1e6))  # linear in tokens


def test_measured_cost_rejects_bad_cells_naming_the_column() -> None:
    t = _runs(np.random.default_rng(1))
    t.loc[3, "wall_s"] = -1.0
    with pytest.raises(InputError, match="wall_s"):
        measured_cost(t, "wall_s", source="runs.csv")
    with pytest.raises(InputError, match="gpu_seconds"):
        measured_cost(t, "gpu_seconds")


def test_budget_in_the_measured_unit() -> None:
    b = parse_budget("3600", cost_unit="wall_s")
    assert b.flops == 3600 and "wall_s" in b.describe()
    assert parse_budget("2x-target", target_cost=50.0, cost_unit="wall_s").flops == 100.0
    with pytest.raises(InputError, match="GPU-hour"):
        parse_budget("2gpu-h@1e14", cost_unit="wall_s")
    with pytest.raises(InputError, match="not FLOPs"):
        parse_budget("3e15flops", cost_unit="wall_s")


def test_plan_cli_with_a_measured_cost(tmp_path) -> None:
    path = tmp_path / "runs.csv"
    _runs(np.random.default_rng(2)).to_csv(path, index=False)
    base = [
        "plan",
        "--sizes",
        "12k,25k,50k,100k",
        "--target-size",
        "250k",
        "--budget",
        "6x-target",
        "--domains",
        "general,legal,code",
        "--json",
    ]
    r = CliRunner().invoke(app, [*base, "--cost-runs", str(path), "--cost-column", "wall_s"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["budget"]["cost_unit"] == "wall_s"
    (tgt,), _ = resolve_sizes(["250k"])
    assert out["target"]["cost"] == pytest.approx(1e-9 * tgt.n_params**1.2 * tgt.tokens, rel=0.05)
    alloc = out["allocation"]
    assert 0 < alloc["spent"] <= alloc["budget"] * (1 + 1e-12) and alloc["budget"] == out["budget"]["flops"]
    flops = json.loads(CliRunner().invoke(app, base).output)
    # a cost growing as N^2.2 (not the N^2 of 6·N·D at fixed tokens per parameter) shifts runs to small sizes
    assert not math.isclose(out["target"]["cost"], flops["target"]["cost"])
    r = CliRunner().invoke(app, [*base, "--cost-column", "wall_s"])
    assert r.exit_code != 0 and "--cost-runs" in r.output
