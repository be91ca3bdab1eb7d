"""The package passes mypy (pyproject.toml's ``[tool.mypy]`` says how strictly, and which libraries
have no hints).

mypy checks the package as it is installed: ``parser/`` and ``procedures/`` at the top of the source
tree are ``arctic_sql.parser`` and ``arctic_sql.procedures``. So the three are copied into that
layout first, under a folder of this checkout's own (mypy keeps its cache there between runs).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where each source folder goes in the installed layout.
LAYOUT = {"arctic_sql": "arctic_sql", "parser": "arctic_sql/parser", "procedures": "arctic_sql/procedures"}


def _installed_layout(work: Path) -> Path:
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    for source, target in LAYOUT.items():
        shutil.copytree(ROOT / source, src / target, ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _source_path(line: str) -> str:
    """A line of mypy's output with the copy's paths given as the source tree's."""
    for source, target in sorted(LAYOUT.items(), key=lambda item: -len(item[1])):
        if line.startswith(f"{target}/"):
            return f"{source}/{line.removeprefix(target + '/')}"
    return line


def test_the_package_passes_mypy():
    work = (
        Path(tempfile.gettempdir()) / f"arctic_sql_mypy_{hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]}"
    )
    src = _installed_layout(work)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(work / "cache"),
            "-p",
            "arctic_sql",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = "\n".join(_source_path(line) for line in (result.stdout + result.stderr).splitlines())
    assert result.returncode == 0, output[-6000:]
    # It checked the whole package (a wrong layout or config could check next to nothing).
    checked = re.search(r"no issues found in (\d+) source files", output)
    assert checked is not None and int(checked.group(1)) >= len(list(src.rglob("*.py"))), output
