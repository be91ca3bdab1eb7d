"""DDL end to end: partition transforms, CTAS, schema evolution, properties, DESCRIBE, SHOW, DROP."""

from __future__ import annotations

import datetime
import os

import pytest
from pyiceberg.catalog import load_catalog

pytestmark = pytest.mark.spark


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def test_partition_transforms_place_rows_in_iceberg_partitions(arctic, warehouse):
    arctic.sql(
        "CREATE TABLE db.events (id BIGINT, ts TIMESTAMP, name STRING, d DATE, payload STRING, "
        "PRIMARY KEY (id, ts, name, d)) PARTITIONED BY (days(ts), bucket(4, id), truncate(2, name), months(d))"
    )
    arctic.sql(
        "INSERT INTO db.events VALUES "
        "(1, TIMESTAMP '2024-01-01 10:00:00 UTC', 'alpha', DATE '2024-01-31', 'x'), "
        "(2, TIMESTAMP '2024-01-01 23:59:59 UTC', 'alps', DATE '2024-02-01', 'y'), "
        "(3, TIMESTAMP '2024-01-02 00:00:00 UTC', 'beta', DATE '2024-02-29', 'z')"
    )
    arctic.sql(
        "INSERT OVERWRITE db.events SELECT id, ts, name, d, upper(payload) FROM db.events WHERE id < 3"
    )
    assert [r[4] for r in sorted(arctic.sql("SELECT * FROM db.events").collect())] == ["X", "Y", "z"]
    # pyiceberg itself sees the base files in the right partitions, as any Iceberg reader would.
    catalog = load_catalog(
        "arctic", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    base = catalog.load_table(("db", "events"))
    partitions = sorted(
        (f.partition[0], f.partition[2], f.partition[3]) for f in (t.file for t in base.scan().plan_files())
    )
    days = (datetime.date(2024, 1, 1) - datetime.date(1970, 1, 1)).days
    assert partitions == [(days, "al", 648), (days, "al", 649)]
    assert sorted(base.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    later = "FROM db.events WHERE ts >= TIMESTAMP '2024-01-02 00:00:00 UTC'"
    # The base files of 2024-01-01 are pruned by the days(ts) partition: only id 3's change file is read.
    assert "base_files=0, change_files=1]" in arctic.sql(f"EXPLAIN SELECT * {later}").collect()[0][0]
    assert [r[0] for r in arctic.sql(f"SELECT id {later}").collect()] == [3]


def test_ctas_and_schema_evolution_keep_old_files_readable(arctic):
    arctic.sql("CREATE TABLE db.src (id BIGINT, v STRING, n INT) TBLPROPERTIES ('owner' = 'team')")
    arctic.sql("INSERT INTO db.src VALUES (1, 'a', 10), (2, 'b', 20)")
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, n INT, PRIMARY KEY (id)) AS SELECT * FROM db.src")
    arctic.sql("INSERT INTO db.t VALUES (3, 'c', 30)")
    arctic.sql("ALTER TABLE db.t ADD COLUMNS (extra DOUBLE)")
    arctic.sql("ALTER TABLE db.t RENAME COLUMN v TO label")
    arctic.sql("ALTER TABLE db.t DROP COLUMN n")
    arctic.sql("INSERT INTO db.t VALUES (4, 'd', 4.5)")
    arctic.sql("UPDATE db.t SET extra = 1.0 WHERE id = 1")
    assert _rows(arctic, "SELECT * FROM db.t") == [
        (1, "a", 1.0),
        (2, "b", None),
        (3, "c", None),
        (4, "d", 4.5),
    ]
    assert [f.name for f in arctic.table("db.t").schema.fields] == ["id", "label", "extra"]
    assert _rows(arctic, "SELECT * FROM db.src") == [(1, "a", 10), (2, "b", 20)]


def test_an_added_string_or_nested_column_reads_across_old_and_new_files(arctic):
    # Old files lack the column: their rows are read file by file (pyiceberg's scan, large strings)
    # and must join the rows of new files (plain strings) in one node's merge.
    arctic.sql("CREATE TABLE db.added (id INT, v INT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.added VALUES (1, 1), (2, 2)")
    arctic.sql("ALTER TABLE db.added ADD COLUMNS (s STRING, m MAP<STRING, INT>, a ARRAY<STRING>)")
    arctic.sql("INSERT INTO db.added VALUES (3, 3, 's', map('k', 1), array('x'))")
    arctic.sql("UPDATE db.added SET v = 10 WHERE id = 1")
    expected = [(1, 10, None, None, None), (2, 2, None, None, None), (3, 3, "s", {"k": 1}, ["x"])]
    assert _rows(arctic, "SELECT * FROM db.added") == expected
    arctic.sql("ALTER TABLE db.added COMPACT FULL")
    assert _rows(arctic, "SELECT * FROM db.added") == expected


def test_properties_describe_and_show(arctic):
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, region STRING, PRIMARY KEY (id, region)) PARTITIONED BY (region) "
        "TBLPROPERTIES ('write.bucket.num' = '8', 'self-optimizing.quota' = '0.2')"
    )
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('self-optimizing.enabled' = 'false', 'team' = 'x')")
    arctic.sql("ALTER TABLE db.t UNSET TBLPROPERTIES ('team')")
    described = {r[0]: r[1] for r in arctic.sql("DESCRIBE EXTENDED db.t").collect()}
    assert described["Primary Key"] == "id, region"
    assert described["Partitioning"] == "identity(region)"
    assert described["Table Properties"] == (
        "[base.file-index.hash-bucket=8, self-optimizing.enabled=false, self-optimizing.quota=0.2]"
    )
    assert described["id"] == "bigint"
    assert [tuple(r) for r in arctic.sql("SHOW TABLES IN db").collect()] == [("db", "t", False)]


def test_drop_purge_removes_both_stores(arctic, warehouse):
    arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1)")
    location = arctic.table("db.t").base.location().removeprefix("file://").removesuffix("/base")
    assert os.path.isdir(location)
    arctic.sql("DROP TABLE db.t PURGE")
    assert not os.path.exists(os.path.join(location, "base"))
    assert not os.path.exists(os.path.join(location, "change"))
    assert arctic.sql("SHOW TABLES IN db").collect() == []


def test_metadata_tables_describe_versions_files_and_partitions(arctic):
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, p STRING, PRIMARY KEY (id, p)) PARTITIONED BY (p) "
        "TBLPROPERTIES ('change.file-index.hash-bucket' = '2')"
    )
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    arctic.sql("DELETE FROM db.t WHERE id = 3")
    history = [
        tuple(r)
        for r in arctic.sql(
            "SELECT version, operation, store, rows_added, rows_removed FROM db.t.history"
        ).collect()
    ]
    assert history == [(1, "insert", "change", 3, 0), (2, "delete", "change", 0, 1)]
    files = arctic.sql(
        "SELECT store, partition, node, kind, rows, key_min, key_max FROM db.t.files"
    ).collect()
    assert {r["kind"] for r in files} == {"upsert", "delete"}
    assert all(r["node"] in (2, 3) for r in files)  # two change buckets: node ids 2 and 3
    assert sum(r["rows"] for r in files if r["kind"] == "upsert") == 3
    partitions = {
        r["partition"]: (r["change_files"], r["change_rows"])
        for r in arctic.sql("SELECT * FROM db.t.partitions").collect()
    }
    assert sum(rows for _, rows in partitions.values()) == 4
    assert set(partitions) == {"p=a", "p=b"}
    snapshots = arctic.sql("SELECT store, operation FROM db.t.snapshots").collect()
    assert [(r[0], r[1]) for r in snapshots if r[0] == "change"] == [
        ("change", "insert"),
        ("change", "delete"),
    ]


def test_column_and_table_comments_are_kept(arctic):
    """CREATE TABLE's COMMENTs (dbt's persist_docs writes them) were dropped without a word."""
    arctic.sql(
        "CREATE TABLE db.commented (id INT COMMENT 'the key', v STRING COMMENT 'it''s a value', "
        "PRIMARY KEY (id)) COMMENT 'a table'"
    )
    rows = [tuple(r) for r in arctic.sql("DESCRIBE TABLE EXTENDED db.commented").collect()]
    assert rows[:2] == [("id", "int", "the key"), ("v", "string", "it's a value")]
    assert ("Comment", "a table", "") in rows
    created = arctic.sql("SHOW CREATE TABLE db.commented").collect()[0][0]
    assert "COMMENT 'the key'" in created and "'comment' = 'a table'" in created
    assert arctic.table("db.commented").spark_schema["v"].metadata["comment"] == "it's a value"
