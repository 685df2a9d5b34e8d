"""The project speaks of itself alone, and its README stays short with links that resolve.

README, docs, source, scripts and result notes must not mention working sessions, issue numbers,
stop numbers or a GPU-lending tool: they describe the toolkit, its machines and dates.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FORBIDDEN = [
    re.compile(r"\bsessions?\b", re.IGNORECASE),
    re.compile(r"\bissue\s+#?\d+", re.IGNORECASE),
    re.compile(r"\b(the|this|an?) issue('s)?\b|\bissue's\b", re.IGNORECASE),
    re.compile(r"\bstop\s+\d+", re.IGNORECASE),
    re.compile(r"`device` tool", re.IGNORECASE),
    re.compile(r"\bdevice tool\b", re.IGNORECASE),
]

README_MAX_LINES = 250

# [text](target) and ![alt](target); the target ends at whitespace or ")"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def checked_files() -> list[Path]:
    files = [REPO / "README.md"]
    files += sorted((REPO / "docs").glob("*.md"))
    files += sorted((REPO / "src").rglob("*.py"))
    files += sorted(p for p in (REPO / "scripts").glob("*") if p.is_file())
    files += sorted((REPO / "results").rglob("*.md"))
    return [f for f in files if f.is_file()]


def forbidden_hits() -> list[str]:
    hits = []
    for path in checked_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if any(p.search(line) for p in FORBIDDEN):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    return hits


def test_no_session_issue_stop_or_device_tool_words():
    hits = forbidden_hits()
    assert not hits, "words about how the project was made, not about the toolkit:\n" + "\n".join(hits)


def test_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"


def relative_links(path: Path) -> list[tuple[int, str]]:
    links = []
    in_code = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # http:, https:, mailto:, or an anchor in the same file
            links.append((number, target))
    return links


def test_relative_links_resolve():
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for doc in docs:
        for number, target in relative_links(doc):
            file_part = target.split("#", 1)[0]
            if not (doc.parent / file_part).exists():
                broken.append(f"{doc.relative_to(REPO)}:{number}: {target}")
    assert docs[1:], "no docs/*.md found"
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)
