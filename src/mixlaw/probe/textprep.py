"""Text preparation for the probe corpora: exact and near dedupe, the train/validation split, tokenizers."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np

from mixlaw.errors import InputError
from mixlaw.probe.sources import Document

EOT = "<|endoftext|>"

# ---------------------------------------------------------------------------------------------------------------
# Dedupe and split
# ---------------------------------------------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_N_PERM, _BANDS = 32, 8
_MASKS = np.random.default_rng(20240717).integers(0, 2**63, size=_N_PERM, dtype=np.int64).astype(np.uint64)


def _minhash(text: str, k: int = 5) -> np.ndarray | None:
    words = _WS.split(text.lower().strip())
    if len(words) < k + 31:  # fewer than 32 shingles: too short for a meaningful Jaccard estimate
        return None
    hashes = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(" ".join(words[i : i + k]).encode(), digest_size=8).digest(), "little")
            for i in range(len(words) - k + 1)
        ),
        dtype=np.uint64,
    )
    # XOR with random masks then min: a cheap family of hash permutations
    return np.min(hashes[None, :] ^ _MASKS[:, None], axis=1)  # (n_perm,)


def dedupe(docs: list[Document], *, threshold: float = 0.8) -> tuple[list[Document], dict[str, int]]:
    """Drop exact duplicates, then near-duplicates (MinHash Jaccard ≥ ``threshold``); keep the first seen.

    Returns the kept documents (input order) and counts ``{"raw", "exact_dup", "near_dup", "kept"}``.
    """
    seen: set[str] = set()
    exact: list[Document] = []
    for d in docs:
        key = hashlib.sha256(_WS.sub(" ", d.text).strip().encode()).hexdigest()
        if key not in seen and d.text.strip():
            seen.add(key)
            exact.append(d)
    rows = _N_PERM // _BANDS
    buckets: dict[tuple[int, bytes], list[int]] = {}
    sigs: list[np.ndarray | None] = []
    kept: list[Document] = []
    for d in exact:
        sig = _minhash(d.text)
        dup = False
        if sig is not None:
            cands = {j for b in range(_BANDS) for j in buckets.get((b, sig[b * rows : (b + 1) * rows].tobytes()), [])}
            for j in sorted(cands):
                other = sigs[j]
                if other is not None and float(np.mean(other == sig)) >= threshold:
                    dup = True
                    break
        if dup:
            continue
        idx = len(sigs)
        sigs.append(sig)
        kept.append(d)
        if sig is not None:
            for b in range(_BANDS):
                buckets.setdefault((b, sig[b * rows : (b + 1) * rows].tobytes()), []).append(idx)
    counts = {"raw": len(docs), "exact_dup": len(docs) - len(exact), "near_dup": len(exact) - len(kept)}
    counts["kept"] = len(kept)
    return kept, counts


def split_train_val(docs: list[Document], *, val_fraction: float = 0.02) -> tuple[list[Document], list[Document]]:
    """Split by document: rank by a hash of the id, give validation the first ``val_fraction`` of characters."""
    ranked = sorted(docs, key=lambda d: hashlib.sha256(d.doc_id.encode()).hexdigest())
    total = sum(len(d.text) for d in docs)
    val_ids: set[str] = set()
    chars = 0
    for d in ranked:
        if val_ids and chars >= val_fraction * total:
            break
        val_ids.add(d.doc_id)
        chars += len(d.text)
    if len(val_ids) == len(docs):
        raise InputError(f"corpus with {len(docs)} documents is too small to split into train and validation")
    train = [d for d in docs if d.doc_id not in val_ids]
    val = [d for d in docs if d.doc_id in val_ids]
    return train, val


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------


class ByteTokenizer:
    """Plain UTF-8 bytes; id 256 is end-of-text."""

    vocab_size = 257
    eot_id = 256

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [list(t.encode("utf-8")) for t in texts]


def train_bpe(texts: list[str], vocab_size: int) -> Any:
    """Byte-level BPE (GPT-2 style pre-tokenisation) trained with ``tokenizers`` on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok
