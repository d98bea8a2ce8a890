"""Fits that finish without a hard cap (issue 9 item 1): the noise-scaled stall test, the re-polish, the rescue of
failed resamples in every decision path, and batched fits from one shared start list."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from mixlaw.fit import fit_batch
from mixlaw.laws import get_law


def _power_data(rng: np.random.Generator, n: int = 12) -> tuple[pd.DataFrame, np.ndarray]:
    x = np.geomspace(1e6, 1e9, n)
    y = 1.8 + 420.0 * x ** -0.31
    return pd.DataFrame({"tokens": x}), y


def test_fit_batch_with_one_shared_start_list_warns_nothing_for_one_or_many_problems() -> None:
    rng = np.random.default_rng(5)
    x, y = _power_data(rng)
    law = get_law("power_law")
    start = {"E": 1.0, "A": 100.0, "alpha": 0.5}
    for B in (1, 3):  # one problem: the broadcast start view is contiguous and used to reach torch read-only
        Y = y[None, :] * np.exp(0.002 * rng.standard_normal((B, len(y))))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            batch = fit_batch(law, x, Y, starts=[start])
        assert batch.ok.all()
        assert all(abs(batch.row(b)["alpha"] - 0.31) < 0.05 for b in range(B))  # type: ignore[index]
