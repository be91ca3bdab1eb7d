"""The names users type still reach the front ends in ``arctic_sql/frontends/``: the ``arctic-sql``
console script and the documented ``python -m arctic_sql.demo``."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_console_script_names_the_shells_main() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attribute = scripts["arctic-sql"].partition(":")
    assert module == "arctic_sql.frontends.cli"
    assert getattr(importlib.import_module(module), attribute).__doc__.startswith(
        "Run the ``arctic-sql`` command"
    )


def test_python_m_arctic_sql_demo_runs_the_demo(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "arctic_sql.demo", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m arctic_sql.demo [-h] [--fresh]")
    assert "A walk through arctic-sql" in result.stdout
