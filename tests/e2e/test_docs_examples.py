"""The code blocks the docs mark as runnable (``<!-- runnable -->`` before the fence) run as written,
each as a script in a fresh folder, the way a reader pastes it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
BLOCKS = [
    pytest.param(code, id=f"{page.name}:{number}")
    for page in sorted((ROOT / "docs").glob("*.md"))
    for number, (language, code) in enumerate(RUNNABLE.findall(page.read_text(encoding="utf-8")), 1)
    if language == "python"
]


def test_the_getting_started_example_is_marked_runnable():
    assert any("getting-started.md" in block.id for block in BLOCKS)


@pytest.mark.parametrize("code", BLOCKS)
def test_a_runnable_block_runs(code, tmp_path):
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"the block failed:\n{code}\n{output}"
    assert (tmp_path / "warehouse" / "catalog.db").is_file()  # ./warehouse: here, the test's folder
    if "shop.orders VERSION AS OF 1" in code:  # the getting-started example shows what the page says
        before_update = re.search(r"^\|\s*1\|\s*new\|\s*9\.5\|\s*eu\|$", result.stdout, re.MULTILINE)
        assert before_update, output
        operations = re.findall(r"^\|\s*(\d+)\|[^|]*\|\s*(\w+)\|", result.stdout, re.MULTILINE)
        assert operations == [("1", "insert"), ("2", "update")], output
