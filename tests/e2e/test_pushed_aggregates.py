"""Aggregates pushed into the merge by node give what Spark's own aggregates of the merged rows give."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.spark

QUERIES = [
    "SELECT status, count(*) AS n, sum(amount) AS amount FROM db.o GROUP BY status",
    "SELECT count(*), count(note), sum(qty), min(qty), max(note), min(day), max(ts) FROM db.o",
    (
        "SELECT o.region, status, sum(qty) / count(*) AS mean, max(qty) FROM db.o o GROUP BY o.region, status "
        "HAVING count(*) > 1 ORDER BY mean DESC, region, status LIMIT 5"
    ),
    "SELECT region, sum(big), min(big) FROM db.o GROUP BY region",
]


def _rows(arctic, sql):
    return sorted((tuple(r) for r in arctic.sql(sql).collect()), key=repr)


def test_pushed_aggregates_agree_with_spark_aggregating_the_merged_rows(arctic):
    arctic.sql(
        "CREATE TABLE db.o (id BIGINT, region STRING, status STRING, amount DOUBLE, qty INT, big BIGINT, "
        "note STRING, day DATE, ts TIMESTAMP, PRIMARY KEY (id, region)) PARTITIONED BY (region) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '4', 'change.file-index.hash-bucket' = '2')"
    )
    rng = random.Random(5)

    def values(ids):
        rows = []
        for i in ids:
            status, note = rng.choice(["NULL", "'new'", "'paid'"]), rng.choice(["NULL", "'a'", "'b'"])
            amount = rng.choice(["NULL", str(round(rng.uniform(0, 100), 2))])
            rows.append(
                f"({i}, '{rng.choice(['eu', 'us'])}', {status}, {amount}, {rng.randint(-9, 9)}, "
                f"{rng.choice([4_000_000_000_000_000, -5])}, {note}, "
                f"DATE '2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}', "
                f"TIMESTAMP '2024-03-0{rng.randint(1, 9)} 1{rng.randint(0, 9)}:00:00 UTC')"
            )
        return ", ".join(rows)

    arctic.sql(f"INSERT OVERWRITE db.o VALUES {values(range(60))}")  # the base
    arctic.sql(f"INSERT INTO db.o VALUES {values(range(40, 90))}")  # upserts: change files
    arctic.sql("DELETE FROM db.o WHERE id % 7 = 0")
    arctic.sql("UPDATE db.o SET qty = qty + 100, note = NULL WHERE id % 5 = 1")
    # A table this small merges and aggregates in the driver (merge-on-read.driver-max-bytes); with
    # that set to 0, in Spark tasks. Both give what Spark's own aggregate of the merged rows gives.
    got = {where: _pushed(arctic, where) for where in ("driver", "tasks")}
    arctic.sql("ALTER TABLE db.o SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '0')")
    _agree(arctic, got)


def _pushed(arctic, where):
    """Each query's rows, pushed into the merge in the driver or in Spark tasks, as its plan shows."""
    arctic.sql(
        "ALTER TABLE db.o SET TBLPROPERTIES ('merge-on-read.driver-max-bytes' = "
        f"'{33554432 if where == 'driver' else 0}')"
    )
    pushed = {}
    for sql in QUERIES:
        plan = arctic.sql("EXPLAIN " + sql).collect()[0][0]
        assert "arctic_aggregate_by_node" in plan, sql
        in_driver = "arctic_aggregate_by_node_in_driver[" in plan and "LocalTableScan" in plan
        assert in_driver == (where == "driver") and ("MapInArrow" in plan) == (where == "tasks"), plan
        pushed[sql] = arctic.sql(sql)
    # An unaliased aggregate keeps the name Spark gives it.
    assert pushed[QUERIES[1]].columns == [
        "count(1)",
        "count(note)",
        "sum(qty)",
        "min(qty)",
        "max(note)",
        "min(day)",
        "max(ts)",
    ]
    return {sql: sorted((tuple(r) for r in df.collect()), key=repr) for sql, df in pushed.items()}


def _agree(arctic, got):
    """``got`` (per way, per query) is what the statements give over the merged rows, aggregated by Spark."""
    for sql in QUERIES:
        assert "arctic_aggregate_by_node" not in arctic.sql("EXPLAIN " + sql).collect()[0][0]
        expected = _rows(arctic, sql)
        for rows in got.values():
            assert len(rows[sql]) == len(expected) and expected, sql
            for mine, theirs in zip(rows[sql], expected, strict=True):
                assert [pytest.approx(v) if isinstance(v, float) else v for v in theirs] == list(mine), sql


def test_an_optimized_table_aggregates_in_the_driver_too(arctic):
    """No change data to merge: a small read still aggregates in the driver (no Spark task reads the
    base), and gives what Spark's plain Parquet read of the base gives."""
    arctic.sql(
        "CREATE TABLE db.o (id BIGINT, region STRING, status STRING, amount DOUBLE, qty INT, big BIGINT, "
        "note STRING, day DATE, ts TIMESTAMP, PRIMARY KEY (id, region)) PARTITIONED BY (region)"
    )
    paid, note = "'paid'", "'n'"
    rows = [
        f"({i}, '{'eu' if i % 2 == 0 else 'us'}', {paid if i % 3 == 0 else 'NULL'}, {i * 1.25}, {i - 4}, "
        f"{-5 if i % 4 == 0 else 4_000_000_000_000_000}, {note if i % 2 else 'NULL'}, DATE '2024-01-1{i}', "
        f"TIMESTAMP '2024-03-01 1{i}:00:00')"
        for i in range(10)
    ]
    arctic.sql(f"INSERT INTO db.o VALUES {', '.join(rows)}")
    arctic.sql("UPDATE db.o SET qty = qty + 100 WHERE id = 3")
    arctic.sql("DELETE FROM db.o WHERE id = 1")
    arctic.sql("CALL system.optimize(table => 'db.o', mode => 'full')")
    got = {"driver": _pushed(arctic, "driver")}
    assert "change_files=0]" in arctic.sql("EXPLAIN " + QUERIES[0]).collect()[0][0]
    # Set to 0, an optimized table's aggregate is Spark's own over a Parquet read of the base.
    arctic.sql("ALTER TABLE db.o SET TBLPROPERTIES ('merge-on-read.driver-max-bytes' = '0')")
    _agree(arctic, got)


def test_a_statement_that_needs_the_rows_merges_them_first(arctic):
    arctic.sql("CREATE TABLE db.k (id BIGINT, v BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.k VALUES (1, 10), (2, 20), (3, 30)")
    arctic.sql("INSERT INTO db.k VALUES (2, 21)")
    for sql in ("SELECT avg(v) FROM db.k", "SELECT sum(v) FROM db.k WHERE id > 1"):
        plan = arctic.sql("EXPLAIN " + sql).collect()[0][0]
        assert "arctic_merge_by_node" in plan and "arctic_aggregate_by_node" not in plan, sql
    assert arctic.sql("SELECT avg(v), sum(v) FROM db.k").collect()[0][:] == (61 / 3, 61)
    assert arctic.sql("SELECT sum(v) FROM db.k WHERE id > 1").collect()[0][0] == 51
