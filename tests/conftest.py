"""Shared test set-up: headless plotting, one torch thread, paths to the external reference data."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
