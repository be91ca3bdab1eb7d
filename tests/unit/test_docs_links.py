"""The Markdown a reader of the repository sees links only to files the repository holds.

A link that leaves the repository (``../shared/DESIGN.md``) is broken in every clone; so is one to a
file that does not exist, or to a heading (``#the-workload``) that a Markdown file does not have.
Paths written in code spans that start with ``../`` or ``/work/`` are held to the same rule.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    {ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"}
    | set((ROOT / "docs").rglob("*.md"))
    | set((ROOT / "examples").rglob("*.md"))
)

# [text](target) and ![alt](target), with an optional "title"; and [label]: target definitions.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)", re.MULTILINE)
CODE_PATH = re.compile(r"`((?:\.\./|/work/)[^`\s]*)`")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def links(text: str) -> list[str]:
    prose = FENCE.sub("", text)
    return INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)


def anchors(markdown: Path) -> set[str]:
    """GitHub's ids for the headings of ``markdown``."""
    found = set()
    text = FENCE.sub("", markdown.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


def problem(doc: Path, target: str) -> str | None:
    """What is wrong with a link from ``doc`` to ``target``, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
        return None
    path_part, _, fragment = target.partition("#")
    path = (doc.parent / path_part).resolve() if path_part else doc
    if path_part.startswith("/") or not path.is_relative_to(ROOT):
        return "points outside the repository"
    if not path.exists():
        return "names a file that does not exist"
    if fragment and path.suffix == ".md" and fragment not in anchors(path):
        return f"names a heading #{fragment} that {path.relative_to(ROOT)} does not have"
    return None


def test_the_documents_are_found():
    names = {str(doc.relative_to(ROOT)) for doc in DOCS}
    assert {"README.md", "benchmarks/README.md", "docs/design.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_links_stay_inside_the_repository_and_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    bad = [f"{target}: {why}" for target in links(text) if (why := problem(doc, target))]
    bad += [
        f"`{path}`: a path outside the repository"
        for path in CODE_PATH.findall(text)
        if problem(doc, path) == "points outside the repository" or path.startswith("/work/")
    ]
    assert not bad, f"{doc.relative_to(ROOT)}: " + "; ".join(bad)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("../shared/DESIGN.md", "points outside the repository"),
        ("/etc/passwd", "points outside the repository"),
        ("docs/nope.md", "names a file that does not exist"),
        (
            "benchmarks/README.md#no-such-heading",
            "names a heading #no-such-heading that benchmarks/README.md does not have",
        ),
        ("docs/design.md", None),
        ("benchmarks/README.md#the-workload", None),
        ("https://iceberg.apache.org", None),
    ],
)
def test_the_check_itself(target, why):
    assert problem(ROOT / "README.md", target) == why
