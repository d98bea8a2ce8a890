"""Multi-domain probe sweeps: a `mixlaw plan` spec runs as it is; device selection; old specs keep their ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.probe.checkpoints import config_fingerprint
from mixlaw.probe.corpora import prepare
from mixlaw.probe.spec import validate_spec
from mixlaw.probe.sweep import load_spec, plan, run_sweep
from mixlaw.probe.train import resolve_device
from mixlaw.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("md_data")
    prepare(out, source="slice", vocab_size=300, corpora=("general", "legal", "code"))
    return out


def test_a_plan_spec_runs_as_it_is_with_per_domain_losses_and_tokens(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    args = [
        "plan",
        "--sizes",
        "debug,12k",
        "--target-size",
        "50k",
        "--budget",
        "0.25x-target",
        "--strategy",
        "rectangle",
        "--domains",
        "general,legal,code",
        "--tokens-per-param",
        "1",
        "--block-size",
        "32",
        "--batch-size",
        "4",
        "--eval-tokens",
        "256",
        "--data-dir",
        str(data_dir),
        "--work-dir",
        str(tmp_path / "runs"),
        "--name",
        "md",
        "--mixture-floor",
        "0.05",
        "--out",
        str(spec),
        "--json",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["allocation"]["runs"] == 6 and [r["runs"] for r in out["allocation"]["sizes"]] == [3, 3]
    assert out["allocation"]["spent"] <= out["budget"]["flops"]
    jobs = plan(load_spec(spec))
    assert [j.run_id for j in jobs] == [f"md-{s}-pt-m00{i}" for s in ("debug", "12k") for i in range(3)]
    assert jobs[0].config.mixture == pytest.approx({"general": 1 / 3, "legal": 1 / 3, "code": 1 / 3}, abs=1e-6)
    assert sum(jobs[1].config.mixture.values()) == 1.0  # uniform anchor first; weights written to sum to 1
    results = run_sweep(jobs, tmp_path / "md.db")
    assert set(results.values()) == {"finished"}
    with RunStore(tmp_path / "md.db") as store:
        table = store.to_frame()
        for j in jobs:
            meta = store.get_run(j.run_id).meta
            assert meta["device"] == "cpu" and meta["mixture_name"] == j.run_id.rsplit("-", 1)[1]
            for c in ("general", "legal", "code"):
                assert meta[f"seen_tokens_{c}"] > 0 and meta[f"pool_tokens_{c}"] > 0
    last = table.sort_values("step").groupby("run_id").tail(1)
    assert len(last) == 6
    for c in ("general", "legal", "code"):
        assert last[f"loss_{c}"].notna().all() and (last[f"tokens_{c}"] > 0).all() and (last[f"epochs_{c}"] > 0).all()
        assert last[f"w_{c}"].between(0.05 - 1e-9, 0.9).all()
    # per-domain token accounting follows the mixture: the skewed mixtures draw most from their heavy domain
    for _, row in last.iterrows():
        heavy = max(("general", "legal", "code"), key=lambda c: row[f"w_{c}"])
        if row[f"w_{heavy}"] > 0.5:
            assert row[f"tokens_{heavy}"] == max(row[f"tokens_{c}"] for c in ("general", "legal", "code"))


def test_device_selection_without_a_gpu() -> None:
    assert resolve_device("auto", False, cuda_available=False) == ("cpu", False)
    assert resolve_device("auto", True, cuda_available=False) == ("cpu", True)
    assert resolve_device("auto", False, cuda_available=True) == ("cuda", True)  # CUDA: bf16 autocast
    assert resolve_device("cpu", False, cuda_available=True) == ("cpu", False)  # CPU stays the default
    assert resolve_device("cuda:1", False, cuda_available=True) == ("cuda:1", False)
    with pytest.raises(InputError, match="CUDA"):
        resolve_device("cuda", False, cuda_available=False)


def _spec(**pt: object) -> dict[str, object]:
    return {"pt": {"sizes": ["debug", "12k"], "tokens": 1000, **pt}}


def test_mixture_spec_mistakes_name_the_key() -> None:
    mix = {"a": {"general": 0.5, "code": 0.5}, "b": {"general": 1.0}}
    assert validate_spec(_spec(mixtures=mix, runs={"debug": ["a", "a"], "12k": ["b"]})).pt.mixtures is not None
    cases = [
        (_spec(mixtures={"a": {"general": 0.5, "code": 0.4}}), r"\[pt\].mixtures.a"),
        (_spec(mixtures=mix, runs={"debug": ["c"], "12k": ["a"]}), r"\[pt\].runs.debug"),
        (_spec(mixtures=mix, runs={"debug": ["a"]}), r"\[pt\].runs .*missing \['12k'\]"),
        (_spec(mixtures=mix, mixture={"general": 1.0}), r"\[pt\].mixture "),
        (_spec(runs={"debug": ["a"]}), r"\[pt\].runs"),
        ({**_spec(mixtures=mix), "cpt": {"domains": ["code"], "tokens": 10}}, r"\[cpt\]"),
        ({**_spec(), "sweep": {"device": "gpu"}}, r"\[sweep\].device"),
    ]
    for raw, pattern in cases:
        with pytest.raises(InputError, match=pattern):
            validate_spec(raw)


def test_repeated_mixture_is_a_seed_replicate(tmp_path: Path) -> None:
    raw = _spec(mixtures={"a": {"general": 1.0}}, runs={"debug": ["a", "a"], "12k": ["a"]})
    raw["sweep"] = {"seed": 5, "device": "auto"}
    p = tmp_path / "s.toml"
    p.write_text(
        '[sweep]\nseed = 5\ndevice = "auto"\n[pt]\nsizes = ["debug", "12k"]\ntokens = 1000\n'
        '[pt.mixtures]\na = { general = 1.0 }\n[pt.runs]\ndebug = ["a", "a"]\n12k = ["a"]\n'
    )
    jobs = plan(load_spec(p))
    assert [(j.run_id, j.config.seed) for j in jobs] == [
        ("sweep-debug-pt-a", 5),
        ("sweep-debug-pt-a-rep1", 6),
        ("sweep-12k-pt-a", 5),
    ]
    assert validate_spec(raw).sweep.device == "auto"


def test_the_cmr_example_keeps_its_run_ids_and_fingerprints() -> None:
    jobs = plan(load_spec(REPO / "examples/cmr_probe/spec.toml", data_dir="/tmp/nodata", work_dir="/tmp/nowork"))
    fps = json.dumps({j.run_id: config_fingerprint(j.config, "h") for j in jobs}, sort_keys=True) + "\n"
    # The hash of the shipped spec's fingerprints under the code before multi-domain sweeps (commit a048fc4) on the
    # spec with the 12k base at 5M PT tokens (the retrained example; 96771c6fa3599f3c with its earlier 2M tokens,
    # also reproduced by this code on that spec).
    assert len(jobs) == 39 and hashlib.sha256(fps.encode()).hexdigest()[:16] == "c05ea31f042fc2d1"


def test_natural_prior_is_the_share_of_prepared_training_tokens(data_dir: Path) -> None:
    from mixlaw.design.plan import natural_prior
    from mixlaw.probe.corpora import load_manifest

    doms = ["general", "legal", "code"]
    prior = natural_prior(data_dir, doms)
    tokens = {d: load_manifest(data_dir)["corpora"][d]["tokens"]["train"] for d in doms}
    assert prior == pytest.approx({d: tokens[d] / sum(tokens.values()) for d in doms})
    with pytest.raises(InputError, match="--domains bio"):
        natural_prior(data_dir, ["general", "bio"])
