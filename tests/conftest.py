"""Shared test set-up: headless plotting, one torch thread, paths to the external reference data."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = REPO.parent / "shared" / "data" / "external"


@pytest.fixture(scope="session")
def external() -> Path:
    """``../shared/data/external`` beside the checkout (skips the test when absent)."""
    if not EXTERNAL.is_dir():
        pytest.skip(f"external reference data not found at {EXTERNAL}")
    return EXTERNAL


#: The seven SlimPajama domains of the Explaining-Data-Mixing-Scaling-Laws grid.
SLIM_DOMAINS = ("arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia")


@pytest.fixture(scope="module")
def slim_310m(external: Path) -> pd.DataFrame:
    """The SlimPajama grid's 60 mixtures at 310M parameters, final checkpoint (``w_<domain>``, ``n_params``,
    ``tokens`` and the validation losses)."""
    path = external / "Explaining-Data-Mixing-Scaling-Laws" / "data" / "dmsl_llm_slimpajama.csv"
    d = pd.read_csv(path).rename(
        columns={f"weight_{x}": f"w_{x}" for x in SLIM_DOMAINS} | {"model_size": "n_params", "n_tokens": "tokens"}
    )
    last = d.groupby("n_params")["tokens"].transform("max")
    return d[(d["n_params"] == 3.1e8) & (d["tokens"] == last)].reset_index(drop=True)


def _camel_k1_table(seed: int, n_targets: int = 2) -> pd.DataFrame:
    """CAMEL k = 1 losses on 12 mixtures × 3 sizes of domains a, b, c, one column per target (different
    parameters), 1 % noise."""
    import numpy as np

    from mixlaw.laws import get_law

    rng = np.random.default_rng(seed)
    law = get_law("camel", domains=("a", "b", "c"), k=1)
    w = np.vstack([np.full(3, 1 / 3), rng.dirichlet(np.ones(3), size=11)])
    df = pd.DataFrame(np.repeat(w, 3, axis=0), columns=["w_a", "w_b", "w_c"])
    df["n_params"] = np.tile([2e7, 6e7, 2e8], len(w))
    x = {c: df[c].to_numpy() for c in law.inputs}
    for j in range(n_targets):
        p = dict(law.example_params) | {"C": 1.5 + 0.3 * j, "alpha_0": 0.3 + 0.2 * j}
        df[f"loss{j}"] = law.evaluate(x, p) * np.exp(rng.normal(0.0, 0.01, len(df)))
    df["run_id"] = [f"r{i}" for i in range(len(df))]
    return df


@pytest.fixture(scope="session")
def camel_k1_table() -> Callable[..., pd.DataFrame]:
    """A builder of small simulated CAMEL tables: ``camel_k1_table(seed, n_targets=2)``."""
    return _camel_k1_table


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
