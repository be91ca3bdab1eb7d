"""Invariant 5: a writer killed between writing its files and committing leaves the table readable
at its last committed version, and only unreferenced files behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from arctic_sql.table.reading.scan import live_files

pytestmark = pytest.mark.spark

CRASHING_WRITER = textwrap.dedent(
    """
    import sys, arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    s.sql(sys.argv[2])
    """
)


def _parquet_files(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".parquet")}


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO db.t VALUES (3, 'c'), (1, 'z')",
        "INSERT OVERWRITE db.t VALUES (9, 'q')",
        "UPDATE db.t SET v = 'u' WHERE id = 2",
    ],
)
def test_crash_before_commit_changes_nothing_but_orphans(arctic, warehouse, statement):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    before = sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.t").collect())
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ARCTIC_FAULT": "before-commit"}
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, warehouse, statement],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 86, done.stderr[-2000:]

    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.t").collect()) == before
    assert [r[0] for r in arctic.sql("SELECT version FROM db.t.history").collect()] == [1]
    table = arctic.table("db.t")
    referenced = {
        f.path.removeprefix("file://")
        for store, name in ((table.base, "base"), (table.change, "change"))
        for snapshot in store.snapshots()
        for f in live_files(store, snapshot, name)
    }
    orphans = _parquet_files(warehouse) - referenced
    assert orphans, "the crashed writer had written files before the commit point"
    # The table keeps working after the crash.
    arctic.sql("INSERT INTO db.t VALUES (4, 'd')")
    assert len(arctic.sql("SELECT * FROM db.t").collect()) == len(before) + 1
