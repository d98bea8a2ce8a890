"""Token memmaps, the mixture sampler and the fixed evaluation batches.

Prepared data (see :mod:`mixlaw.probe.corpora`) is one uint16 file per corpus and split. A training batch is
``batch_size`` sequences; each sequence's corpus is drawn from the mixture weights by a seeded
``np.random.Generator`` and its start uniformly among the corpus' train positions (sampling with replacement,
so repeated data is possible and counted). Per corpus the sampler counts tokens drawn and the distinct token
positions covered (a bitmap), the quantities repetition-aware laws need (tokens seen, unique tokens, epochs).

A *data pool* caps some corpora's training split (:func:`pool_prefix`, :meth:`TokenData.pool`): the sampler then
draws only from the kept tokens, so a small pool is repeated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.probe.corpora import load_manifest

__all__ = ["MixtureSampler", "TokenData", "eval_batches", "pool_prefix"]


def pool_prefix(tokens: np.ndarray, eot_id: int, max_tokens: int) -> np.ndarray:
    """The first ``max_tokens`` tokens of a training split's documents in a fixed hash order.

    Documents are the runs of tokens that start at an end-of-text token (the prepared layout; tokens before the
    first one count as a document). They are ranked by the SHA-256 of their token bytes (ties by position), so the
    kept documents are spread over the corpus' sources rather than the first source's, and the same on every
    machine; they are concatenated in that order and cut at ``max_tokens`` (the last one kept is a prefix). A cap at
    or above the split's size returns ``tokens`` itself.
    """
    n = len(tokens)
    if max_tokens >= n:
        return tokens
    if max_tokens < 1:
        raise InputError(f"expected a pool cap of at least 1 token, got {max_tokens}")
    arr = np.asarray(tokens)
    starts = np.flatnonzero(arr == eot_id)  # (n_docs,)
    if starts.size == 0 or starts[0] != 0:
        starts = np.concatenate([[0], starts])
    ends = np.append(starts[1:], n)
    keys = [hashlib.sha256(arr[a:b].tobytes()).digest() for a, b in zip(starts, ends, strict=True)]
    order = sorted(range(len(starts)), key=lambda i: (keys[i], i))
    out = np.empty(max_tokens, dtype=arr.dtype)
    filled = 0
    for i in order:
        take = min(int(ends[i] - starts[i]), max_tokens - filled)
        out[filled : filled + take] = arr[starts[i] : starts[i] + take]
        filled += take
        if filled == max_tokens:
            break
    return out


class TokenData:
    """Read-only memmaps of a prepared data directory: ``data.train[corpus]``, ``data.val[corpus]``."""

    def __init__(self, data_dir: str | Path) -> None:
        self.dir = Path(data_dir)
        self.manifest = load_manifest(self.dir)
        self.corpora: tuple[str, ...] = tuple(self.manifest["corpora"])
        self.vocab_size: int = int(self.manifest["tokenizer"]["vocab_size"])
        self.train: dict[str, np.memmap] = {}
        self.val: dict[str, np.memmap] = {}
        for c in self.corpora:
            self.train[c] = np.memmap(self.dir / c / "train.bin", dtype=np.uint16, mode="r")
            self.val[c] = np.memmap(self.dir / c / "val.bin", dtype=np.uint16, mode="r")

    @property
    def hash(self) -> str:
        return str(self.manifest["hash"])

    def pool(self, max_tokens: Mapping[str, int], share: Mapping[str, float]) -> dict[str, np.ndarray]:
        """The training splits of a data pool: each corpus capped at ``max_tokens[c]`` tokens or ``share[c]`` of
        its split (at least one token; :func:`pool_prefix`), the others whole (their memmaps)."""
        unknown = sorted((set(max_tokens) | set(share)) - set(self.corpora))
        if unknown:
            raise InputError(f"expected a pool to cap corpora of {list(self.corpora)}, got unknown {unknown[0]!r}")
        eot = int(self.manifest["tokenizer"]["eot_id"])
        out: dict[str, np.ndarray] = dict(self.train)
        for c, arr in self.train.items():
            if c in max_tokens:
                out[c] = pool_prefix(arr, eot, int(max_tokens[c]))
            elif c in share:
                out[c] = pool_prefix(arr, eot, max(1, int(float(share[c]) * len(arr))))
        return out


class MixtureSampler:
    """Draw batches of ``(x, y)`` next-token pairs from a mixture of corpora.

    Parameters
    ----------
    train
        Corpus name -> token array (the train split).
    weights
        Corpus name -> mixture weight (non-negative, sums to 1; zero-weight corpora are allowed and never drawn).
    block_size, batch_size
        Sequence length and sequences per batch.
    seed
        Seed of the sampler's own ``np.random.Generator`` (never the global one).
    """

    def __init__(
        self,
        train: Mapping[str, np.ndarray],
        weights: Mapping[str, float],
        *,
        block_size: int,
        batch_size: int,
        seed: int,
    ) -> None:
        missing = [c for c in weights if c not in train]
        if missing:
            raise InputError(f"mixture names corpora {missing} that the data does not have ({list(train)})")
        self.names = [c for c in weights]
        w = np.asarray([float(weights[c]) for c in self.names])
        if np.any(w < 0) or not np.isclose(w.sum(), 1.0, atol=1e-6):
            raise InputError(f"mixture weights must be non-negative and sum to 1, got {dict(weights)}")
        self.p = w / w.sum()
        for c, wc in zip(self.names, self.p, strict=True):
            if wc > 0 and len(train[c]) <= block_size + 1:
                raise InputError(f"corpus {c!r} has {len(train[c])} train tokens (in its pool), fewer than "
                                 "block_size + 2")  # fmt: skip
        self.train = {c: train[c] for c in self.names}
        self.block_size = block_size
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.tokens_seen = {c: 0 for c in self.names}
        self.covered = {c: np.zeros(len(train[c]), dtype=bool) for c in self.names if weights[c] > 0}

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``x, y`` of shape ``(batch_size, block_size)``, int64; ``y`` is ``x`` shifted by one token."""
        T = self.block_size
        which = self.rng.choice(len(self.names), size=self.batch_size, p=self.p)  # (B,) corpus index
        rows = np.empty((self.batch_size, T + 1), dtype=np.int64)  # (B, T+1)
        for i, k in enumerate(which):
            c = self.names[k]
            start = int(self.rng.integers(0, len(self.train[c]) - T - 1))
            rows[i] = self.train[c][start : start + T + 1]
            self.tokens_seen[c] += T
            self.covered[c][start : start + T] = True
        t = torch.from_numpy(rows)
        return t[:, :-1], t[:, 1:]  # (B, T), (B, T)

    def accounting(self) -> dict[str, float]:
        """Per corpus: ``tokens_<c>`` drawn, ``unique_<c>`` distinct positions covered, ``epochs_<c>``."""
        out: dict[str, float] = {}
        for c in self.names:
            out[f"tokens_{c}"] = float(self.tokens_seen[c])
            if c in self.covered:
                out[f"unique_{c}"] = float(np.count_nonzero(self.covered[c]))
                out[f"epochs_{c}"] = self.tokens_seen[c] / len(self.train[c])
        return out

    # --- exact resume: everything as tensors / plain containers (loadable with weights_only=True)
    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": json.dumps(self.rng.bit_generator.state),
            "tokens_seen": dict(self.tokens_seen),
            "covered": {c: torch.from_numpy(np.packbits(v)) for c, v in self.covered.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = json.loads(state["rng"])
        self.tokens_seen = {c: int(v) for c, v in state["tokens_seen"].items()}
        for c, packed in state["covered"].items():
            self.covered[c] = np.unpackbits(packed.numpy(), count=len(self.train[c])).astype(bool)


def eval_batches(val: np.ndarray, *, block_size: int, n_tokens: int, batch_size: int) -> list[torch.Tensor]:
    """Fixed evaluation batches: ``n_tokens // block_size`` sequences at evenly spaced offsets of a split.

    Returns a list of ``(b, block_size + 1)`` int64 tensors (inputs are ``[:, :-1]``, targets ``[:, 1:]``). Spacing
    the sequences over the whole split samples every validation document, not just the first; using the same
    batches at every evaluation makes the noise of a loss difference between two steps come from the model only.
    """
    if (len(val) - 1) < block_size:
        raise InputError(f"validation split of {len(val)} tokens is shorter than block_size + 1 = {block_size + 1}")
    n_seq = max(1, min(n_tokens // block_size, (len(val) - 1) // block_size))
    starts = np.linspace(0, len(val) - block_size - 1, n_seq).astype(np.int64)  # (n_seq,)
    rows = np.stack([np.asarray(val[s : s + block_size + 1], dtype=np.int64) for s in starts])  # (n_seq, T+1)
    t = torch.from_numpy(rows)
    return [t[i : i + batch_size] for i in range(0, n_seq, batch_size)]
