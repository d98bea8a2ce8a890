"""``mix optimize`` at a (size, tokens) target: each law input gets its own value, checked against a brute-force grid.

Before, every non-mixture input (tokens and unique tokens included) was set to ``--target-size``, so the
repetition-aware law was optimised at 1e9 tokens of a 1e9-unique-token pool for a 1e9-parameter target.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import optimize
from mixlaw.decide.mixture.targets import tokens_rule
from mixlaw.errors import InputError
from mixlaw.laws import get_law

U = 5e8  # unique tokens of the scarce target pool


@pytest.fixture(scope="module")
def rep_runs() -> pd.DataFrame:
    """Simulated from the repetition-aware law (its example parameters), 10 shares × 4 sizes × 2 token budgets."""
    law = get_law("repetition_aware")
    rng = np.random.default_rng(7)
    rows = []
    for h in np.linspace(0.05, 0.9, 10):
        for n in (5e7, 1e8, 2e8, 4e8):
            for tpp in (20.0, 60.0):
                x = {"w_target": np.array([h]), "unique_tokens": np.array([U]), "n_params": np.array([n]),
                     "tokens": np.array([tpp * n])}  # fmt: skip
                y = float(law.evaluate(x, law.example_params)[0]) * np.exp(2e-3 * rng.standard_normal())
                rows.append({"run_id": f"h{h:.2f}_{n:.0e}_{tpp:g}", "w_target": h, "w_web": 1.0 - h,
                             "unique_tokens": U, "n_params": n, "tokens": tpp * n, "loss": y})  # fmt: skip
    return pd.DataFrame(rows)


def _grid_optimum(out: dict, lo: float = 0.0, hi: float = 1.0) -> float:
    """Brute force over the same fitted law at the same inputs: w_target on a 1e-4 grid."""
    law = get_law("repetition_aware")
    h = np.arange(lo, hi + 1e-12, 1e-4)
    h = h[h > 0]
    at = out["target_inputs"]["values"]
    x = {"w_target": h, **{k: np.full(h.size, v) for k, v in at.items()}}
    y = law.evaluate(x, out["fits"]["loss"]["params"])
    return float(h[int(np.argmin(y))])


def test_tokens_and_unique_tokens_reach_the_law_and_the_optimum_matches_a_grid(rep_runs: pd.DataFrame) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = optimize(rep_runs, law="repetition_aware", law_options={"domain": "target"}, domains=("target", "web"),
                       target="loss", target_size=1e9, target_tokens=2e10)  # fmt: skip
    at = out["target_inputs"]["values"]
    assert at == {"unique_tokens": U, "n_params": 1e9, "tokens": 2e10}
    assert out["target_inputs"]["sources"]["tokens"] == "--target-tokens"
    h = out["weights"]["target"]
    assert 0.02 < h < 0.98  # an interior optimum (all-in on the scarce domain was the old answer)
    assert h == pytest.approx(_grid_optimum(out), abs=1e-3)
    assert out["kkt"]["ok"], out["kkt"]  # interior optimum: stationary
    # a repetition limit from the table's unique tokens: at most 2 passes over the pool, the cap 2U/D = 0.05
    capped = rep_runs.assign(unique_tokens_target=U, unique_tokens_web=1e12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out2 = optimize(capped, law="repetition_aware", law_options={"domain": "target"}, domains=("target", "web"),
                        target="loss", target_size=1e9, target_tokens=2e10,
                        constraints={"max_epochs": {"target": 2.0}})  # fmt: skip
    h2 = out2["weights"]["target"]
    assert h2 <= 2 * U / 2e10 + 1e-9
    assert h2 == pytest.approx(_grid_optimum(out2, 0.0, 2 * U / 2e10), abs=1e-3)
    assert out2["kkt"]["ok"], out2["kkt"]


def test_default_tokens_follow_the_stated_rule(rep_runs: pd.DataFrame) -> None:
    ratio, what = tokens_rule(rep_runs, "n_params")
    assert ratio == pytest.approx(40.0) and "median tokens per parameter" in what  # half at 20, half at 60
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = optimize(rep_runs, law="repetition_aware", law_options={"domain": "target"}, domains=("target", "web"),
                       target="loss", target_size=1e9)  # fmt: skip
    assert out["target_inputs"]["values"]["tokens"] == pytest.approx(4e10)
    assert "tokens per parameter" in out["target_inputs"]["sources"]["tokens"]
    with pytest.raises(InputError, match="needs the unique tokens of 'target'"):
        varied = rep_runs.assign(unique_tokens=np.linspace(1e8, 1e9, len(rep_runs)))
        optimize(varied, law="repetition_aware", law_options={"domain": "target"}, domains=("target", "web"),
                 target="loss", target_size=1e9)  # fmt: skip
