"""The house habits hold on the whole repository: ruff's lint rules and its format (pyproject.toml
says which rules, and why some are left out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("command", [("check",), ("format", "--check")], ids=["lint", "format"])
def test_the_repository_passes_ruff(command):
    result = _ruff(*command)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def test_no_two_test_files_share_a_name():
    # pytest imports test modules by their base name (no __init__.py in tests/): a second file of the
    # same name fails the whole run at collection, and only when both are collected together.
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
