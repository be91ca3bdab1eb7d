"""Compile the zips Spark's Python workers import pyspark from, so a worker starts in time on a busy host.

Spark starts some Python workers as one process each and waits a fixed 10 seconds (hard-coded in
``PythonWorkerFactory.createSimpleWorker``; no setting changes it) for the process to connect back:
the runner of a Python streaming source (``readStream.format("arctic")``) and the committer of a
Python streaming sink (``writeStream.format("arctic")``). A worker connects only after importing its
module, and Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the worker's ``PYTHONPATH``.
That zip holds only sources, so every worker compiles the pyspark modules it needs (with numpy,
pyarrow and pandas: about 2 s of CPU) before it connects; on a host at load 17 that took 7-9 s of
wall time and the stream failed to start with ``Python worker failed to connect back``.

Python's zipimport uses ``.pyc`` files that sit beside the sources inside the zip, so this module
rewrites each zip with the same sources plus one ``.pyc`` per module, compiled by this interpreter.
The ``.pyc`` files are checked-hash ones (PEP 552): the importer uses one only while it matches the
hash of the source beside it, and only in the Python version that wrote it (other versions fall back
to the source, as before). pyspark's own tests are left uncompiled. The rewrite is atomic (a new
file renamed over the old) and a second run finds nothing to do.

It changes the pyspark installation, so it runs only when asked: ``scripts/setup.sh`` runs it for
the project's virtual environment, and a deployment runs it once per Spark installation, with the
Python its workers use (``spark.pyspark.python``)::

    python -m arctic_sql.worker_zips              # the SPARK_HOME pyspark finds
    python -m arctic_sql.worker_zips /opt/spark   # a Spark distribution
    python -m arctic_sql.worker_zips --check      # exit 1 when a zip still needs compiling
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import marshal
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# PEP 552 flags: hash-based (bit 0), check the source (bit 1).
_CHECKED_HASH = (0b11).to_bytes(4, "little")
_HEADER = len(importlib.util.MAGIC_NUMBER) + 4 + 8
# The module whose .pyc tells a process whether its pyspark.zip was compiled: the source runner's.
_PROBE = "pyspark/sql/streaming/python_streaming_source_runner.py"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZipCompilation:
    """What compiling one zip did: ``compiled`` of its ``modules`` got a new ``.pyc``; 0 when all were current."""

    path: Path
    compiled: int
    modules: int


def spark_home() -> Path:
    """The Spark installation pyspark uses: ``$SPARK_HOME``, else the one pyspark finds (its own folder)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(os.environ.get("SPARK_HOME") or _find_spark_home())


def worker_zips(home: Path) -> list[Path]:
    """The zips Spark puts on its Python workers' path: ``python/lib/*.zip`` (pyspark and py4j)."""
    return sorted((home / "python" / "lib").glob("*.zip"))


def _compiles(name: str) -> bool:
    return name.endswith(".py") and "/tests/" not in f"/{name}"


def _pyc(zip_path: Path, name: str, source: bytes) -> bytes | None:
    """A checked-hash ``.pyc`` of ``source``, named the way zipimport names it when compiling the source."""
    try:
        code = compile(source, os.path.join(zip_path, name), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None  # zipimport would fail on it the same way, compiled or not
    return (
        importlib.util.MAGIC_NUMBER + _CHECKED_HASH + importlib.util.source_hash(source) + marshal.dumps(code)
    )


def _current(pyc: bytes | None, source: bytes) -> bool:
    """Whether ``pyc`` is this interpreter's checked-hash ``.pyc`` of ``source``."""
    return (
        pyc is not None
        and len(pyc) > _HEADER
        and pyc[:_HEADER] == importlib.util.MAGIC_NUMBER + _CHECKED_HASH + importlib.util.source_hash(source)
    )


def _has_current_pyc(archive: zipfile.ZipFile, names: set[str], module: str) -> bool:
    pyc = archive.read(module + "c")[: _HEADER + 1] if module + "c" in names else None
    return _current(pyc, archive.read(module))


def _stale_modules(archive: zipfile.ZipFile) -> tuple[list[str], int]:
    """The compilable modules without a current ``.pyc``, and how many compilable modules there are."""
    names = set(archive.namelist())
    modules = [n for n in names if _compiles(n)]
    return sorted(n for n in modules if not _has_current_pyc(archive, names, n)), len(modules)


def needs_compiling(path: Path) -> bool:
    """Whether some module in the zip at ``path`` lacks a ``.pyc`` this interpreter would use (and could write)."""
    with zipfile.ZipFile(path) as archive:
        return any(_pyc(path, name, archive.read(name)) is not None for name in _stale_modules(archive)[0])


def compile_zip(path: Path) -> ZipCompilation:
    """Rewrite the zip at ``path`` with a current ``.pyc`` beside each module; nothing when all are current."""
    with zipfile.ZipFile(path) as archive:
        stale, modules = _stale_modules(archive)
        compiled = {name: pyc for name in stale if (pyc := _pyc(path, name, archive.read(name))) is not None}
        if not compiled:
            return ZipCompilation(path, 0, modules)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as rewritten:
                for info in archive.infolist():
                    if info.filename.endswith(".pyc") and info.filename[:-1] in stale:
                        continue  # an outdated .pyc, replaced below (or dropped, if its source no longer compiles)
                    rewritten.writestr(info, archive.read(info))
                    if info.filename in compiled:
                        entry = zipfile.ZipInfo(info.filename + "c", info.date_time)
                        entry.compress_type = zipfile.ZIP_DEFLATED
                        rewritten.writestr(entry, compiled[info.filename])
            shutil.copymode(path, temporary)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return ZipCompilation(path, len(compiled), modules)


@functools.cache
def warn_if_uncompiled() -> None:
    """Log a warning, once per process, when this process's ``pyspark.zip`` was not compiled for it.

    Only the streaming source runner's module is looked at (a few milliseconds); a Spark without the
    zip, or without that module, gets no warning.
    """
    path = spark_home() / "python" / "lib" / "pyspark.zip"
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if _PROBE not in names or _has_current_pyc(archive, names, _PROBE):
                return
    except (OSError, zipfile.BadZipFile):
        return
    log.warning(
        "%s is not compiled for %s: on a busy host, streams from or to format('arctic') can fail to "
        "start with 'Python worker failed to connect back'; run python -m arctic_sql.worker_zips "
        "(docs/production.md, streams on a busy host)",
        path,
        sys.executable,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m arctic_sql.worker_zips",
        description="Add compiled modules to the zips Spark's Python workers import pyspark from, so streams "
        "start in time on a busy host. Run it with the Python the workers use.",
    )
    parser.add_argument(
        "spark_home",
        nargs="*",
        type=Path,
        help="Spark installations (default: $SPARK_HOME, else the one pyspark finds)",
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a zip needs compiling"
    )
    args = parser.parse_args(argv)
    homes = args.spark_home or [spark_home()]
    zips = [z for home in homes for z in worker_zips(home)]
    if not zips:
        print(f"no python/lib/*.zip under {', '.join(map(str, homes))}", file=sys.stderr)
        return 2
    if args.check:
        stale = [z for z in zips if needs_compiling(z)]
        for z in stale:
            print(f"{z}: not compiled for {sys.executable}; run python -m arctic_sql.worker_zips")
        return 1 if stale else 0
    for z in zips:
        done = compile_zip(z)
        what = f"compiled {done.compiled} of {done.modules} modules" if done.compiled else "already compiled"
        print(f"{z}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
