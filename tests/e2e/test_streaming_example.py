"""examples/streaming/ingest.py runs as a script and ends with the table equal to the changes it sent."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "streaming", "ingest.py")


def test_the_ingest_example_streams_debezium_files_with_the_optimizer_beside_it(tmp_path):
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, SCRIPT, "--files", "4", "--rows", "200", "--warehouse", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "matches the changes sent: True" in done.stdout
    assert "|stream" in done.stdout  # the history shows the sink's versions
