"""User docs read as documentation, not as a log: no issue numbers or "this round", and every local link resolves.

Covers README.md, docs/*.md, docs/design/*.md and examples/*/README.md. A relative Markdown link ``[text](path)``
must name an existing file or folder (relative to the page), and its ``#anchor``, where it has one, a heading of that
page (GitHub's slug rule); a ``docs/….md`` path in backticks must exist relative to the repository root.
"""

from __future__ import annotations

import importlib
import json
import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _pages() -> list[Path]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    pages += sorted((REPO / "docs" / "design").glob("*.md"))
    pages += sorted((REPO / "examples").glob("*/README.md"))
    return [p for p in pages if p.is_file()]


PAGES = _pages()
IDS = [str(p.relative_to(REPO)) for p in PAGES]

# A reference to the tracker or to the project's working rounds, not to what the tool does.
HISTORY = re.compile(
    r"\bissues?\s*#?\s*\d+"  # issue 12, issue #12, (issue 9 item 1), issues 9
    r"|\b(?:this|last|previous|next|that|same|earlier)\s+round\b"  # this round, last round, re-run this round
    r"|\brounds?\s+ago\b"  # two rounds ago
    r"|\bround\s+(?:one|two|three|four|five)\b",  # round two / three
    re.IGNORECASE,
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
DOC_PATH = re.compile(r"`((?:\.\./)*docs/[A-Za-z0-9_./-]+\.md)(?:#[^`]*)?`")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The page without its fenced code blocks (a command may print anything)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return "\n".join(out)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, all but letters, digits, '_', '-' and spaces dropped, spaces → '-'."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    kept = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LM"
                   or unicodedata.category(c) in ("Nd", "Pc"))
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE))  # http:, https:, mailto:, …


def test_slug_rule() -> None:
    """The anchor rule itself, on headings of the kinds the docs use."""
    assert _slug("Coverage, measured") == "coverage-measured"
    assert _slug("`mixlaw cmr`: the decision") == "mixlaw-cmr-the-decision"
    assert _slug("Step 2 — fit the law (R ≥ 0.9)") == "step-2--fit-the-law-r--09"
    assert _slug("What **was** run") == "what-was-run"


def test_the_history_pattern_finds_what_it_should_and_nothing_else() -> None:
    for bad in ("issue 12", "issue #12", "(issue 9 item 1)", "Issue 13", "this round", "Re-run this round",
                "the cap of last round", "round two", "Round three", "two rounds ago", "previous round"):
        assert HISTORY.search(bad), bad
    for good in ("the issue names no case", "early stopping after 3 rounds on L1", "a JSON round trip",
                 "round-trip exactly", "rounded to 3 digits", "issues a warning"):
        assert not HISTORY.search(good), good


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_issue_numbers_or_rounds(page: Path) -> None:
    text = _prose(page.read_text(encoding="utf-8"))
    hits = [f"{page.relative_to(REPO)}:{i}: {m.group(0)!r}"
            for i, line in enumerate(text.splitlines(), 1) for m in HISTORY.finditer(line)]
    assert not hits, "user docs say what the tool does; history goes to docs/design/:\n" + "\n".join(hits)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_local_links_resolve(page: Path) -> None:
    text = _prose(page.read_text(encoding="utf-8"))
    broken = []
    for m in [*LINK.finditer(text), *IMAGE.finditer(text)]:
        target = m.group(1).strip("<>")
        if _external(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor.lower() not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(REPO)}")
    for m in DOC_PATH.finditer(text):
        rel = m.group(1)
        base = page.parent if rel.startswith("../") else REPO
        if not (base / rel).resolve().exists():
            broken.append(f"`{rel}`: no such file")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_every_design_page_is_linked_from_a_user_doc() -> None:
    """A design page a user cannot reach from the docs it explains is lost: each is named in a user doc (README,
    docs/*.md, an example's README), not only in another design page."""
    design = sorted((REPO / "docs" / "design").glob("*.md"))
    assert design
    user = [p.read_text(encoding="utf-8") for p in PAGES if p.parent.name != "design"]
    orphans = [d.name for d in design if not any(f"design/{d.name}" in t for t in user)]
    assert not orphans, f"design pages no doc links to: {orphans}"


def _num(text: str) -> float:
    return float(text.replace("−", "-").replace("+", ""))


def test_the_mixture_example_table_is_its_check_json() -> None:
    """examples/mixture_probe/README.md's predicted-vs-measured table quotes ``analyze.py check``'s ``check.json``:
    every predicted objective, interval, paired regret interval and measured objective, to the printed digits."""
    readme = (REPO / "examples" / "mixture_probe" / "README.md").read_text(encoding="utf-8")
    rows = {r["name"]: r for r in json.loads((REPO / "examples" / "mixture_probe" / "check.json").read_text())["rows"]}
    num = r"([+−-]?\d+\.\d+)"
    checked = 0
    for name, r in rows.items():
        m = re.search(rf"^\| {re.escape(name)} [^|]*\| ([^|]*)\| {num} \[{num}, {num}\] \| ([^|]*)\| \**{num}\** \|",
                      readme, re.MULTILINE)
        assert m, f"no row for {name} in the table"
        w = [float(x) for x in re.findall(r"\d\.\d+", m.group(1))]
        if len(w) == 5:
            assert w == pytest.approx(list(r["weights"].values()), abs=5.1e-4), name
        assert _num(m.group(2)) == pytest.approx(r["objective"], abs=5.1e-4), name
        assert [_num(m.group(3)), _num(m.group(4))] == pytest.approx(r["objective_interval"], abs=5.1e-4), name
        assert _num(m.group(6)) == pytest.approx(r["measured"][0], abs=5.1e-5), name
        if "regret_interval" in r:
            reg = re.fullmatch(rf"\s*{num} \[{num}, {num}\]\s*", m.group(5))
            assert reg, name
            got = [_num(reg.group(i)) for i in (1, 2, 3)]
            assert got == pytest.approx([r["regret"], *r["regret_interval"]], abs=5.1e-4), name
        checked += 1
    assert checked == 4


CODE_REF = re.compile(r"`(mixlaw(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
NOT_CODE = {"mixlaw.decisions", "mixlaw.db"}  # an entry-point group and the default store file, named in the docs


def _resolves(ref: str) -> bool:
    parts = ref.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_code_named_in_the_docs_exists() -> None:
    """Every `mixlaw.module.name` in backticks names a module or an attribute that exists, so that moving code
    without its docs fails here."""
    stale = sorted({f"{p.relative_to(REPO)}: {m.group(1)}" for p in PAGES
                    for m in CODE_REF.finditer(_prose(p.read_text(encoding="utf-8")))
                    if m.group(1) not in NOT_CODE and not _resolves(m.group(1))})
    assert not stale, "docs name code that does not exist:\n" + "\n".join(stale)
