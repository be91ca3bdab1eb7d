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
    pushed = {}
    for sql in QUERIES:
        plan = arctic.sql("EXPLAIN " + sql).collect()[0][0]
        assert "arctic_aggregate_by_node" in plan, sql
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
    got = {sql: sorted((tuple(r) for r in df.collect()), key=repr) for sql, df in pushed.items()}
    # The same statements over the merged rows, aggregated by Spark: the Spark plan merges them.
    arctic.sql("ALTER TABLE db.o SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '0')")
    for sql in QUERIES:
        assert "arctic_aggregate_by_node" not in arctic.sql("EXPLAIN " + sql).collect()[0][0]
        expected = _rows(arctic, sql)
        assert len(got[sql]) == len(expected) and expected, sql
        for mine, theirs in zip(got[sql], expected, strict=True):
            assert [pytest.approx(v) if isinstance(v, float) else v for v in theirs] == list(mine), sql


def test_a_statement_that_needs_the_rows_merges_them_first(arctic):
    arctic.sql("CREATE TABLE db.k (id BIGINT, v BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.k VALUES (1, 10), (2, 20), (3, 30)")
    arctic.sql("INSERT INTO db.k VALUES (2, 21)")
    for sql in ("SELECT avg(v) FROM db.k", "SELECT sum(v) FROM db.k WHERE id > 1"):
        plan = arctic.sql("EXPLAIN " + sql).collect()[0][0]
        assert "arctic_merge_by_node" in plan and "arctic_aggregate_by_node" not in plan, sql
    assert arctic.sql("SELECT avg(v), sum(v) FROM db.k").collect()[0][:] == (61 / 3, 61)
    assert arctic.sql("SELECT sum(v) FROM db.k WHERE id > 1").collect()[0][0] == 51
