"""Interop: Iceberg's own Spark runtime reads the base store of an optimized arctic table as a plain table.

After a full optimize every row of a keyed table is in its base store, an Iceberg table registered in
pyiceberg's SQL catalog (SQLite inside the warehouse by default). A reader that knows nothing of
arctic-sql, Iceberg's SparkCatalog over Iceberg's JDBC catalog on that same SQLite file, must get
exactly the table's rows, and the arctic table must read the same afterwards.

Iceberg's newest Spark runtime (scripts/jars.lock) is built for Spark 4.1 and fails on our pyspark 4.3,
and one JVM holds one SparkContext (the suite's has no Iceberg jar), so the reader runs in a subprocess
of the virtual environment with pyspark 4.1 that ``bash scripts/jars.sh iceberg venv-spark4.1`` makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from arctic_sql.jars import MissingJarsError, spark_jars

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
READER = Path(__file__).with_name("iceberg_reader_driver.py")
PEER_PYTHON = ROOT / ".venv-spark4.1" / "bin" / "python"
ROWS = "SELECT id, p, amount, day, note FROM db.t"


def _rows(frame_rows) -> list[tuple]:
    return sorted(tuple(str(v) if v is not None else None for v in row) for row in frame_rows)


def test_icebergs_spark_runtime_reads_an_optimized_base_store_as_a_plain_table(arctic, warehouse):
    jars = _runtime_jars()
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, p STRING, amount DOUBLE, day DATE, note STRING, PRIMARY KEY (id, p)) "
        "PARTITIONED BY (p)"
    )
    arctic.sql(
        "INSERT INTO db.t SELECT id, CASE WHEN id % 3 = 0 THEN 'a' ELSE 'b' END, id * 1.5, "
        "date_add(DATE'2026-01-01', CAST(id AS INT)), CASE WHEN id % 5 = 0 THEN NULL ELSE concat('n', id) END "
        "FROM range(1, 301)"
    )
    arctic.sql("UPDATE db.t SET amount = -amount, note = 'updated' WHERE id % 7 = 0")
    arctic.sql("DELETE FROM db.t WHERE id % 11 = 0")
    arctic.sql(
        "INSERT INTO db.t VALUES (1, 'b', 99.0, DATE'2027-01-01', 'upserted'), (1000, 'a', 0.5, NULL, 'new')"
    )
    arctic.sql("UPDATE db.t SET note = 'twice' WHERE id = 14")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    expected = _rows(arctic.sql(ROWS).collect())
    assert len(expected) == 300 - 27 + 1 and ("1", "b", "99.0", "2027-01-01", "upserted") in expected

    catalog = arctic.catalog.iceberg
    base = catalog.load_table(("db", "t"))
    assert not any(task.delete_files for task in base.scan().plan_files()), "the full optimize left deletes"

    header, rows = _read_with_icebergs_runtime(arctic, jars)
    assert header["columns"] == ["id", "p", "amount", "day", "note"]
    assert _rows(rows) == expected
    assert _rows(arctic.sql(ROWS).collect()) == expected  # the reader changed nothing


def _runtime_jars() -> str:
    """Iceberg's Spark runtime jars, with the virtual environment that runs them made."""
    jars = spark_jars("iceberg", root=os.environ.get("ARCTIC_SQL_JARS") or ROOT / "jars")
    if not PEER_PYTHON.exists():
        raise MissingJarsError(f"No {PEER_PYTHON}: make it with 'bash scripts/jars.sh venv-spark4.1'")
    return jars


def _read_with_icebergs_runtime(arctic, jars: str, table: str = "db.t") -> tuple[dict, list[list]]:
    """The base store of ``table`` read by Iceberg's own Spark runtime in a subprocess: its header
    (columns, Spark version) and rows."""
    catalog = arctic.catalog.iceberg
    sqlite_file = catalog.properties["uri"].removeprefix("sqlite:///")
    started = time.monotonic()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONSAFEPATH": "1"}
    done = subprocess.run(
        [
            str(PEER_PYTHON),
            str(READER),
            jars,
            catalog.name,
            "/" + sqlite_file.lstrip("/"),
            catalog.properties["warehouse"],
            table,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    header = json.loads(lines[0])
    print(f"Iceberg reader on Spark {header['spark']}: {time.monotonic() - started:.1f} s")
    return header, [json.loads(line) for line in lines[1:]]


def test_icebergs_spark_runtime_sees_no_tombstone(arctic):
    """Issue 31's tombstone files (table/files/tombstones.py: a base data file whose own
    position-delete file deletes every row of it) are invisible to a reader that knows nothing of
    arctic-sql, and hide no row of the table."""
    import pyarrow as pa

    from arctic_sql.table.files import tombstones
    from arctic_sql.table.format import versions
    from arctic_sql.table.writing import commit

    jars = _runtime_jars()
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v BIGINT NOT NULL, s BIGINT, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('sequence.field' = 's')"
    )
    arctic.sql("INSERT INTO db.t SELECT id, id * 10, 5 FROM range(1, 21)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    table = arctic.table("db.t")
    for task in table.base.scan().plan_files():  # a tombstone beside each base file; v gets a filler
        marks = pa.table({"id": pa.array([1, 1000], pa.int64()), "s": pa.array([3, 7], pa.int64())})
        written = tombstones.write(task.file.file_path.rsplit("/", 1)[0], table.schema, marks)
        files = commit.data_files(table.base, written)
        summary = {versions.OPERATION: versions.OPTIMIZE}
        commit.commit_base(table, lambda store, f=files: commit.BaseChange(add=f, summary=summary), written)
        table = arctic.table("db.t")
    expected = [[i, i * 10, 5] for i in range(1, 21)]
    header, rows = _read_with_icebergs_runtime(arctic, jars)
    assert header["columns"] == ["id", "v", "s"]
    assert sorted(rows) == expected
    assert sorted(list(r) for r in arctic.sql("SELECT * FROM db.t").collect()) == expected
