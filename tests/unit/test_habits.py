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
