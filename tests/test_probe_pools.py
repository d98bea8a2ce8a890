"""Data pools in the probe spec: a per-corpus cap on the training split, the pool's name on the run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from mixlaw.errors import InputError
from mixlaw.probe.checkpoints import config_fingerprint
from mixlaw.probe.corpora import prepare
from mixlaw.probe.data import MixtureSampler, TokenData, pool_prefix
from mixlaw.probe.spec import validate_spec
from mixlaw.probe.sweep import load_spec, plan, run_sweep
from mixlaw.runs.store import RunStore

EOT = 0


def _corpus(n_docs: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """EOT-led documents whose tokens name their document (doc i is made of token i + 1): a token says where it
    came from."""
    rng = np.random.default_rng(seed)
    docs = [np.concatenate([[EOT], np.full(int(rng.integers(5, 60)), i + 1)]).astype(np.uint16) for i in range(n_docs)]
    return np.concatenate(docs), docs


def test_pool_prefix_is_whole_documents_in_hash_order_cut_at_the_cap() -> None:
    arr, docs = _corpus(200, seed=1)
    cap = len(arr) // 7
    pool = pool_prefix(arr, EOT, cap)
    assert len(pool) == cap and pool.dtype == arr.dtype
    order = sorted(range(len(docs)), key=lambda i: (hashlib.sha256(docs[i].tobytes()).digest(), i))
    expect = np.concatenate([docs[i] for i in order])[:cap]
    np.testing.assert_array_equal(pool, expect)
    # spread over the corpus, not its first documents; deterministic; a cap at the size keeps the split itself
    kept = set(np.unique(pool[pool != EOT]).tolist())
    assert max(kept) > 100 and min(kept) < 100
    np.testing.assert_array_equal(pool_prefix(arr, EOT, cap), pool)
    assert pool_prefix(arr, EOT, len(arr)) is arr and pool_prefix(arr, EOT, 10 * len(arr)) is arr
    with pytest.raises(InputError, match="at least 1 token"):
        pool_prefix(arr, EOT, 0)


def test_a_capped_pools_sampler_never_reads_past_the_cap() -> None:
    arr, _ = _corpus(300, seed=2)
    other, _ = _corpus(50, seed=3)
    cap = 900
    pool = pool_prefix(arr, EOT, cap)
    allowed = set(np.unique(pool).tolist())
    s = MixtureSampler({"a": pool, "b": other}, {"a": 0.8, "b": 0.2}, block_size=16, batch_size=8, seed=0)
    drawn_a = []
    for _ in range(60):
        x, y = s.next_batch()
        rows = np.concatenate([x.numpy(), y.numpy()[:, -1:]], axis=1)
        drawn_a += [r for r in rows if not set(r.tolist()) & set(range(51, 301)) and set(r.tolist()) <= allowed]
    acct = s.accounting()
    # every token of "a" it read lies in the pool's documents; the pool is repeated, and counted as such
    assert len(s.covered["a"]) == cap and acct["unique_a"] <= cap
    assert acct["epochs_a"] == pytest.approx(acct["tokens_a"] / cap) and acct["epochs_a"] > 3
    assert acct["unique_a"] > 0.8 * cap
    outside = set(np.unique(arr).tolist()) - allowed
    assert outside and len(drawn_a) > 0
    for r in drawn_a:
        assert not set(r.tolist()) & outside


def _raw(**pools: object) -> dict[str, object]:
    return {"pt": {"sizes": ["debug"], "tokens": 1000}, "pools": pools}


def test_pool_spec_mistakes_name_the_key() -> None:
    ok = validate_spec(_raw(full={}, small={"max_tokens": {"code": 4000}, "share": {"legal": 0.1}}))
    assert ok.pools is not None and ok.pools["small"].max_tokens == {"code": 4000}
    cases = [
        (_raw(p={"max_tokens": {"code": 100}}), r"^expected \[pools.p\].max_tokens.code to be >= block_size \+ 2"),
        (_raw(p={"share": {"code": 1.5}}), r"^expected \[pools.p\].share.code to be <= 1"),
        (_raw(p={"share": {"code": 0}}), r"^expected \[pools.p\].share.code to be > 0"),
        (_raw(p={"cap": {"code": 0.1}}), r"^expected \[pools.p\].cap to be a known key"),
        (
            _raw(p={"max_tokens": {"code": 4000}, "share": {"code": 0.5}}),
            r"^expected \[pools.p\].share.code to be "
            r"absent where max_tokens",
        ),  # fmt: skip
        (_raw(**{"a/b": {}}), r"^expected \[pools.a/b\] to be a plain name"),
        (_raw(), r"^expected \[pools\] to be non-empty"),
        ({**_raw(p={}), "cpt": {"domains": ["code"], "tokens": 10}}, r"^expected \[cpt\] to be absent with \[pools\]"),
    ]
    for raw, pattern in cases:
        with pytest.raises(InputError, match=pattern):
            validate_spec(raw)


def _write(tmp: Path, data: Path, pools: str) -> Path:
    p = tmp / "spec.toml"
    p.write_text(
        f'[sweep]\nname = "pl"\ndata_dir = "{data}"\nwork_dir = "{tmp / "runs"}"\nblock_size = 32\nbatch_size = 4\n'
        'eval_tokens = 256\n[pt]\nsizes = ["debug"]\ntokens = 4096\nevals = 1\n'
        "[pt.mixtures]\nu = { general = 0.5, code = 0.5 }\nc = { general = 0.1, code = 0.9 }\n" + pools
    )
    return p


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pool_data")
    prepare(out, source="slice", tokenizer="bytes", corpora=("general", "code"))
    return out


def test_runs_carry_their_pool_and_its_statistics(data_dir: Path, tmp_path: Path) -> None:
    pools = "[pools.full]\n[pools.tiny]\nmax_tokens = { code = 600 }\n[pools.half]\nshare = { general = 0.5 }\n"
    jobs = plan(load_spec(_write(tmp_path, data_dir, pools)))
    assert [j.run_id for j in jobs] == [f"pl-debug-pt-{m}-{p}" for p in ("full", "tiny", "half") for m in ("u", "c")]
    assert len({config_fingerprint(j.config, "h") for j in jobs}) == 6  # the pool is part of what a run computes
    assert set(run_sweep(jobs, tmp_path / "pl.db").values()) == {"finished"}
    full = TokenData(data_dir).train
    with RunStore(tmp_path / "pl.db") as store:
        metas = {j.run_id: store.get_run(j.run_id).meta for j in jobs}
        last = store.to_frame().sort_values("step").groupby("run_id").tail(1).set_index("run_id")
    for rid, meta in metas.items():
        pool = rid.rsplit("-", 1)[1]
        assert meta["pool"] == pool
        code = 600 if pool == "tiny" else len(full["code"])
        general = len(full["general"]) // 2 if pool == "half" else len(full["general"])
        assert (meta["pool_tokens_code"], meta["pool_tokens_general"]) == (code, general)
        assert meta["pool_share_code"] == pytest.approx(code / len(full["code"]))
        assert 1 <= meta["pool_docs_code"] <= (3 if pool == "tiny" else 10**6)
        assert meta["unique_tokens_code"] <= code
        assert last.loc[rid, "epochs_code"] == pytest.approx(meta["seen_tokens_code"] / code)
    # the code-heavy run repeats the 600-token pool; in the full pool it sees each token at most about once
    assert last.loc["pl-debug-pt-c-tiny", "epochs_code"] > 4 > 0.1 > last.loc["pl-debug-pt-c-full", "epochs_code"]


def test_a_spec_without_pools_is_planned_as_before(data_dir: Path, tmp_path: Path) -> None:
    jobs = plan(load_spec(_write(tmp_path, data_dir, "")))
    assert [j.run_id for j in jobs] == ["pl-debug-pt-u", "pl-debug-pt-c"]
    d = jobs[0].config.to_dict()
    assert "pool" not in d and "pool_max_tokens" not in d and "pool" not in jobs[0].config.meta
    with pytest.raises(InputError, match=r"\[pools.p\].max_tokens to name corpora of .*unknown 'bio'"):
        plan(load_spec(_write(tmp_path, data_dir, "[pools.p]\nmax_tokens = { bio = 4000 }\n")))
