"""``python -m arctic_sql.worker_zips``: the workers' zips get a ``.pyc`` per module that zipimport
really uses, sources unchanged, nothing for tests, nothing twice; a stale or foreign ``.pyc`` is
replaced, and one that no longer matches its source is never used."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from arctic_sql import worker_zips

SOURCES = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def answer():\n    return 42\n",
    "pkg/tests/test_mod.py": "def test_it():\n    pass\n",
    "pkg/broken.py": "def (:\n",
    "pkg/data.json": "{}",
}
# Importing with zipimport's compiler broken: succeeds only from a .pyc.
FROM_PYC_ONLY = (
    "import zipimport\n"
    "def refuse(*args): raise AssertionError('compiled a source')\n"
    "zipimport._compile_source = refuse\n"
    "import pkg.mod; print(pkg.mod.answer())\n"
)


def _home(tmp_path: Path, sources: dict[str, str] = SOURCES) -> Path:
    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as archive:
        for name, text in sources.items():
            archive.writestr(name, text)
    return tmp_path / "spark"


def _entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _import(zip_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program],
        check=False,
        env={"PYTHONPATH": str(zip_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_modules_get_a_pyc_that_zipimport_uses_and_the_sources_stay(tmp_path):
    zip_path = worker_zips.worker_zips(_home(tmp_path))[0]
    assert worker_zips.needs_compiling(zip_path)
    assert _import(zip_path, FROM_PYC_ONLY).returncode != 0  # the probe does fail on sources

    done = worker_zips.compile_zip(zip_path)

    entries = _entries(zip_path)
    assert (done.compiled, done.modules) == (2, 3)  # __init__ and mod; broken cannot be; not the tests
    assert sorted(n for n in entries if n.endswith(".pyc")) == ["pkg/__init__.pyc", "pkg/mod.pyc"]
    assert {n: entries[n].decode() for n in SOURCES} == SOURCES
    assert _import(zip_path, FROM_PYC_ONLY).stdout.strip() == "42"


def test_a_compiled_zip_is_left_alone(tmp_path):
    zip_path = worker_zips.worker_zips(_home(tmp_path))[0]
    worker_zips.compile_zip(zip_path)
    # the broken module never compiles; it does not make the zip look stale
    assert not worker_zips.needs_compiling(zip_path)
    before = zip_path.stat()

    assert worker_zips.compile_zip(zip_path).compiled == 0
    assert zip_path.stat().st_ino == before.st_ino and zip_path.stat().st_mtime_ns == before.st_mtime_ns


def test_a_stale_pyc_is_neither_used_nor_kept(tmp_path):
    home = _home(tmp_path)
    zip_path = worker_zips.worker_zips(home)[0]
    worker_zips.compile_zip(zip_path)
    entries = _entries(zip_path)
    entries["pkg/mod.py"] = b"def answer():\n    return 7\n"  # a new source beside the old .pyc
    with zipfile.ZipFile(zip_path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)

    assert _import(zip_path, "import pkg.mod; print(pkg.mod.answer())").stdout.strip() == "7"
    assert worker_zips.needs_compiling(zip_path)
    assert worker_zips.compile_zip(zip_path).compiled == 1
    assert _import(zip_path, FROM_PYC_ONLY).stdout.strip() == "7"
    assert sum(n == "pkg/mod.pyc" for n in zipfile.ZipFile(zip_path).namelist()) == 1


def test_main_compiles_then_checks(tmp_path, capsys):
    home = _home(tmp_path)
    assert worker_zips.main(["--check", str(home)]) == 1
    assert "run python -m arctic_sql.worker_zips" in capsys.readouterr().out
    assert worker_zips.main([str(home)]) == 0
    assert "compiled 2 of 3 modules" in capsys.readouterr().out
    assert worker_zips.main(["--check", str(home)]) == 0
    assert worker_zips.main([str(home)]) == 0
    assert "already compiled" in capsys.readouterr().out


def test_main_without_zips_says_where_it_looked(tmp_path, capsys):
    assert worker_zips.main([str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


@pytest.mark.parametrize("name", ["pkg/mod.py", "mod.py"])
def test_only_test_folders_are_skipped(name):
    assert worker_zips._compiles(name)
    assert not worker_zips._compiles("pkg/tests/" + name) and not worker_zips._compiles("tests/" + name)


RUNNER = "pyspark/sql/streaming/python_streaming_source_runner.py"


@pytest.mark.parametrize("compiled", [False, True])
def test_a_process_warns_once_when_its_pyspark_zip_is_not_compiled(tmp_path, monkeypatch, caplog, compiled):
    home = _home(tmp_path, {**SOURCES, RUNNER: "import os\n"})
    if compiled:
        worker_zips.compile_zip(worker_zips.worker_zips(home)[0])
    monkeypatch.setenv("SPARK_HOME", str(home))
    worker_zips.warn_if_uncompiled.cache_clear()
    try:
        worker_zips.warn_if_uncompiled()
        worker_zips.warn_if_uncompiled()
    finally:
        worker_zips.warn_if_uncompiled.cache_clear()
    warnings = [r.getMessage() for r in caplog.records if r.name == "arctic_sql.worker_zips"]
    assert len(warnings) == (0 if compiled else 1)
    if warnings:
        assert "run python -m arctic_sql.worker_zips" in warnings[0] and str(home) in warnings[0]


def test_no_warning_for_a_spark_without_the_zip(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    worker_zips.warn_if_uncompiled.cache_clear()
    try:
        worker_zips.warn_if_uncompiled()
    finally:
        worker_zips.warn_if_uncompiled.cache_clear()
    assert not [r for r in caplog.records if r.name == "arctic_sql.worker_zips"]
