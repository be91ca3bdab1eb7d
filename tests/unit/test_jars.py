"""The pinned JVM artifacts: the lock file parses, and a group that was not fetched is a one-line error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from arctic_sql.jars import FETCHED_MARKER, MissingJarsError, group_jars, spark_jars

ROOT = Path(__file__).resolve().parents[2]


def _jars_script():
    spec = importlib.util.spec_from_file_location("jars_script", ROOT / "scripts" / "jars.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_lock_file_pins_every_group_once_with_a_version():
    script = _jars_script()
    pins = script.read_lock()
    groups = {pin.group for pin in pins}
    assert {"iceberg", "delta", "paimon", "hudi", "kafka", "broker", "s3", "venv-spark4.1"} <= groups
    assert script.MARKER == FETCHED_MARKER
    for pin in pins:
        version = pin.coordinate.split("==" if pin.coordinate.startswith("pyspark==") else ":")[-1]
        assert version[0].isdigit() and "LATEST" not in version, pin.line
    coordinates = [pin.coordinate.rsplit(":", 1)[0] for pin in pins]
    assert len(coordinates) == len(set(coordinates)), "an artifact is pinned twice"
    assert "<exclusions>" in pins[0].dependency_xml()  # "-" fetches the jar alone


def test_a_group_not_fetched_is_one_line_naming_the_script(tmp_path):
    with pytest.raises(MissingJarsError) as raised:
        group_jars("kafka", tmp_path)
    assert "\n" not in str(raised.value) and "bash scripts/jars.sh kafka" in str(raised.value)
    folder = tmp_path / "kafka"
    folder.mkdir()
    (folder / "b.jar").write_bytes(b"")
    (folder / "a.jar").write_bytes(b"")
    with pytest.raises(MissingJarsError):  # jars without the marker: a fetch that did not finish
        group_jars("kafka", tmp_path)
    (folder / FETCHED_MARKER).write_text("kafka x:y:1 - -\n")
    assert spark_jars("kafka", root=tmp_path) == f"{folder / 'a.jar'},{folder / 'b.jar'}"
