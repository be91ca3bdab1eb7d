"""The docs site builds: ``mkdocs build --strict`` fails on a page missing from the nav, a link to a
page that does not exist or to a heading a page does not have (``validation`` in ``mkdocs.yml``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mkdocs_build_strict_succeeds(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    built = {p.relative_to(site).as_posix() for p in site.rglob("index.html")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert {f"{page}/index.html" for page in pages - {"index"}} | {"index.html"} <= built


# A fenced block right after this marker runs in tests/e2e/test_docs_examples.py.
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_blocks(markdown: Path) -> list[tuple[str, str]]:
    """``[(language, code)]`` of the blocks ``markdown`` marks as runnable."""
    return RUNNABLE.findall(markdown.read_text(encoding="utf-8"))


def test_the_readme_example_is_the_runnable_getting_started_example():
    # The README repeats the example the docs run, so it is tested too.
    [(language, code)] = runnable_blocks(ROOT / "docs" / "getting-started.md")
    assert language == "python" and "arctic_sql.connect(" in code
    assert f"```python\n{code}```" in (ROOT / "README.md").read_text(encoding="utf-8")


CONFLICT = re.compile(r"^(?:<{7} |>{7} |={7}$)", re.MULTILINE)


def test_no_page_or_module_keeps_a_merge_conflict():
    # A merge once left both sides of a conflict in docs/deployment.md; the site built anyway.
    files = [
        *ROOT.glob("*.md"),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "benchmarks").glob("*.md"),
        *(ROOT / "arctic_sql").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "scripts").glob("*"),
    ]
    kept = [
        str(p.relative_to(ROOT))
        for p in files
        if p.is_file() and CONFLICT.search(p.read_text(errors="replace"))
    ]
    assert kept == []
