"""Every relative link in the README and docs/ reaches a file, and a `#anchor` one a heading there.

Text moves between the README and docs/ pages; a link left pointing at the old place would send a
reader nowhere, and GitHub says nothing about it. Anchors follow GitHub's rule for headings:
lowercase, markup and punctuation dropped, spaces to `-`, a repeated heading numbered `-1`, `-2`.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "clients").glob("*/README.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+).*?\1")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a `# comment` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = (
        char
        for char in text
        if char in " -_" or unicodedata.category(char)[0] in "LNM" or unicodedata.category(char) == "Pc"
    )
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of each relative link in the page's prose."""
    found = []
    for number, line in enumerate(prose_lines(page.read_text(encoding="utf-8")), 1):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                found.append((number, target))
    return found


def test_the_slug_follows_githubs_rule() -> None:
    assert slug("Errors: the reason catalogue") == "errors-the-reason-catalogue"
    assert slug("Operations: the SQLite files") == "operations-the-sqlite-files"
    assert slug("The server (ENVIRONMENT §11–§12)") == "the-server-environment-1112"
    assert slug("`ThreadService` and `max_events`") == "threadservice-and-max_events"
    assert slug("Durable threads: (g) turns, (h) the store") == "durable-threads-g-turns-h-the-store"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for number, target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{number}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{number}: {target} (no heading #{anchor} in {file.relative_to(REPO)})")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)
