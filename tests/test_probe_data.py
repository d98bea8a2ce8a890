"""Probe data: corpora preparation on the shipped slice, the mixture sampler, fixed eval batches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mixlaw.errors import InputError
from mixlaw.probe.corpora import Document, dedupe, load_manifest, prepare, split_train_val
from mixlaw.probe.data import MixtureSampler, TokenData, eval_batches


@pytest.fixture(scope="module")
def slice_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("slice")
    prepare(out, source="slice", vocab_size=512)
    return out


def test_prepare_slice_is_deterministic(slice_data: Path, tmp_path: Path) -> None:
    again = prepare(tmp_path / "again", source="slice", vocab_size=512)
    first = load_manifest(slice_data)
    assert again["hash"] == first["hash"]
    for c in first["corpora"]:
        a = (slice_data / c / "train.bin").read_bytes()
        b = (tmp_path / "again" / c / "train.bin").read_bytes()
        assert a == b


def test_manifest_records_sources_counts_and_licences(slice_data: Path) -> None:
    m = load_manifest(slice_data)
    assert set(m["corpora"]) == {"general", "legal", "docs", "bio", "code"}
    for c, info in m["corpora"].items():
        assert info["tokens"]["train"] > 5 * info["tokens"]["val"] > 0
        assert info["docs"]["train"] + info["docs"]["val"] == info["docs"]["kept"]
        assert info["sources"] and all(s["licence"] and s["version"] for s in info["sources"])
        arr = np.fromfile(slice_data / c / "train.bin", dtype=np.uint16)
        assert arr.size == info["tokens"]["train"] and arr.max() < m["tokenizer"]["vocab_size"]
    assert "finance" in m["notes"]


def test_edited_manifest_is_refused(slice_data: Path, tmp_path: Path) -> None:
    m = json.loads((slice_data / "manifest.json").read_text())
    m["corpora"]["general"]["tokens"]["train"] += 1
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="hash"):
        load_manifest(tmp_path)


def test_bytes_tokenizer(tmp_path: Path) -> None:
    m = prepare(tmp_path, source="slice", tokenizer="bytes", corpora=("general", "code"))
    assert m["tokenizer"]["vocab_size"] == 257
    text_len = m["corpora"]["general"]["chars"]["train"]
    assert m["corpora"]["general"]["tokens"]["train"] >= text_len  # bytes >= characters, plus EOT tokens


def test_dedupe_drops_exact_and_near_duplicates() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(500)]
    base = " ".join(rng.choice(words, size=300))
    near = base.split()
    near[150] = "CHANGED"  # one word of 300: Jaccard of 5-shingles ≈ 0.97
    other = " ".join(rng.choice(words, size=300))
    docs = [
        Document("a", base, "s"),
        Document("b", base + "  ", "s"),  # exact after whitespace normalisation
        Document("c", " ".join(near), "s"),
        Document("d", other, "s"),
    ]
    kept, counts = dedupe(docs)
    assert [d.doc_id for d in kept] == ["a", "d"]
    assert counts == {"raw": 4, "exact_dup": 1, "near_dup": 1, "kept": 2}


def test_split_is_by_document_and_stable() -> None:
    docs = [Document(f"d{i}", "x" * (100 + i), "s") for i in range(200)]
    train, val = split_train_val(docs, val_fraction=0.1)
    assert not {d.doc_id for d in train} & {d.doc_id for d in val}
    assert len(train) + len(val) == 200
    frac = sum(len(d.text) for d in val) / sum(len(d.text) for d in docs)
    assert 0.1 <= frac < 0.12
    train2, val2 = split_train_val(list(reversed(docs)), val_fraction=0.1)
    assert {d.doc_id for d in val2} == {d.doc_id for d in val}


@pytest.mark.parametrize("weights", [{"a": 0.7, "b": 0.3}, {"a": 0.2, "b": 0.5, "c": 0.3}, {"a": 1.0, "b": 0.0}])
def test_sampler_proportions_match_weights(weights: dict[str, float]) -> None:
    train = {c: np.arange(5000, dtype=np.uint16) for c in weights}
    s = MixtureSampler(train, weights, block_size=16, batch_size=50, seed=3)
    n_batches = 80
    for _ in range(n_batches):
        s.next_batch()
    n = n_batches * 50  # sequences drawn
    acct = s.accounting()
    for c, w in weights.items():
        k = acct[f"tokens_{c}"] / 16
        sd = math.sqrt(n * w * (1 - w))  # binomial standard deviation of the count
        assert abs(k - n * w) <= 4 * sd + 1e-9, (c, k, n * w, sd)
        if w == 0:
            assert k == 0


def test_sampler_is_seeded_and_resumable() -> None:
    train = {"a": np.arange(3000, dtype=np.uint16), "b": np.arange(3000, 6000, dtype=np.uint16)}
    s1 = MixtureSampler(train, {"a": 0.5, "b": 0.5}, block_size=8, batch_size=4, seed=1)
    for _ in range(5):
        s1.next_batch()
    state = s1.state_dict()
    rest1 = [s1.next_batch()[0] for _ in range(5)]
    s2 = MixtureSampler(train, {"a": 0.5, "b": 0.5}, block_size=8, batch_size=4, seed=99)
    s2.load_state_dict(state)
    rest2 = [s2.next_batch()[0] for _ in range(5)]
    assert all((x == y).all() for x, y in zip(rest1, rest2, strict=True))
    assert s1.accounting() == s2.accounting()


def test_sampler_batch_shapes_and_targets_shifted() -> None:
    train = {"a": np.arange(1000, dtype=np.uint16)}
    x, y = MixtureSampler(train, {"a": 1.0}, block_size=12, batch_size=3, seed=0).next_batch()
    assert x.shape == y.shape == (3, 12)
    assert (y[:, :-1] == x[:, 1:]).all() and (y[:, 0] == x[:, 0] + 1).all()


def test_sampler_rejects_unknown_corpus_and_bad_weights() -> None:
    train = {"a": np.arange(1000, dtype=np.uint16)}
    with pytest.raises(InputError, match="corpora"):
        MixtureSampler(train, {"zz": 1.0}, block_size=8, batch_size=2, seed=0)
    with pytest.raises(InputError, match="sum to 1"):
        MixtureSampler(train, {"a": 0.5}, block_size=8, batch_size=2, seed=0)


def test_eval_batches_are_fixed(slice_data: Path) -> None:
    data = TokenData(slice_data)
    a = eval_batches(data.val["general"], block_size=32, n_tokens=1000, batch_size=8)
    b = eval_batches(data.val["general"], block_size=32, n_tokens=1000, batch_size=8)
    assert sum(t.shape[0] for t in a) == 1000 // 32
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
