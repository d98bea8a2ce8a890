"""Every fit JSON and every probe checkpoint records the package version and the git SHA that produced it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import mixlaw
from mixlaw._provenance import provenance
from mixlaw.fit import FitResult, fit_law
from mixlaw.options import FitOptions

SHA = re.compile(r"^[0-9a-f]{40}(\+dirty)?$")


def _check(p: dict[str, object]) -> None:
    assert p["mixlaw_version"] == mixlaw.__version__
    sha = p["git_sha"]
    assert sha is None or (isinstance(sha, str) and SHA.match(sha)), sha


def test_fit_json_records_version_and_sha_and_reads_back() -> None:
    rng = np.random.default_rng(0)
    tokens = np.geomspace(1e6, 1e9, 12)
    loss = (1.5 + 30 * tokens**-0.25) * np.exp(1e-3 * rng.standard_normal(tokens.size))
    table = pd.DataFrame({"run_id": [f"r{i}" for i in range(tokens.size)], "tokens": tokens, "loss": loss})
    res = fit_law("power_law", table, FitOptions(seed=0))
    d = res.to_dict()
    _check(d["provenance"])
    back = FitResult.from_json(res.to_json())  # the reader tolerates the record
    assert back.params == res.params and back.to_dict()["provenance"] == d["provenance"]


def test_probe_checkpoint_records_version_and_sha(tmp_path: Path) -> None:
    from mixlaw.probe.corpora import prepare
    from mixlaw.probe.train import RunConfig, checkpoint_path, train_run
    from mixlaw.runs.store import RunStore

    data = tmp_path / "data"
    prepare(data, source="slice", vocab_size=300, corpora=("general",))
    cfg = RunConfig(
        run_id="r",
        data_dir=str(data),
        work_dir=str(tmp_path / "work"),
        size="debug",
        mixture={"general": 1.0},
        schedule="constant:peak=1e-3,steps=6",
        block_size=16,
        batch_size=2,
        eval_every=3,
        eval_tokens=64,
    )
    assert train_run(cfg, RunStore(tmp_path / "s.db")) == "finished"
    ck = torch.load(checkpoint_path(cfg.work_dir, "r", "final"), map_location="cpu", weights_only=True)
    assert ck["provenance"] == provenance()
    _check(ck["provenance"])
