"""SQL DML's change-store writer (table/writing/change_rows.py), both ways it runs.

Rows Spark estimates under its broadcast threshold are collected as Arrow and written by the driver;
larger ones (or any with a Python step, such as a merged read of an arctic table) are written by a
``mapInArrow`` job whose tasks' keys the commit checks across tasks. Each statement's test runs both ways
(``driver``: the default threshold; ``tasks``: the threshold off).
"""

from __future__ import annotations

import pytest

from arctic_sql.errors import PrimaryKeyViolationError

pytestmark = pytest.mark.spark

CDC_MERGE = (
    "MERGE INTO db.t t USING src s ON t.id = s.id WHEN MATCHED AND s.op = 'D' THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"
)


@pytest.fixture(params=["driver", "tasks"])
def way(request, arctic, spark):
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    if request.param == "tasks":
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('change.file-index.hash-bucket' = '4')"
    )
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    yield request.param
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)


def _rows(arctic, sql: str = "SELECT id, v FROM db.t") -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _source(spark, rows: list[tuple], partitions: int = 1) -> None:
    """A temp view ``src`` of ``rows`` (a LocalRelation, which Spark sizes exactly)."""
    values = ", ".join("(" + ", ".join("NULL" if v is None else repr(v) for v in row) + ")" for row in rows)
    frame = spark.sql(f"SELECT * FROM VALUES {values} AS s(id, v, op)").selectExpr(
        "CAST(id AS BIGINT) AS id", "v", "op"
    )
    (frame.repartition(partitions) if partitions > 1 else frame).createOrReplaceTempView("src")


def test_a_cdc_merge_needs_one_spark_job_and_no_read_of_the_table(arctic, spark, way, spark_jobs):
    _source(spark, [(1, None, "D"), (2, "b2", "U"), (9, "i", "U"), (8, None, "D")])
    # The driver holds the rows (a VALUES source folds into a local relation): it writes them with no
    # Spark job at all. The tasks way writes in a mapInArrow job.
    assert spark_jobs(lambda: arctic.sql(CDC_MERGE)) == ([] if way == "driver" else ["collect"])
    assert _rows(arctic) == [(2, "b2"), (3, "c"), (9, "i")]


def test_a_merge_whose_outcome_depends_on_the_table_is_refused_blind_and_joined(arctic, spark, way):
    # Delete what is there, insert what is not: the blind write must not guess.
    _source(spark, [(1, "x", "U"), (7, "y", "U")])
    arctic.sql(
        "MERGE INTO db.t t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *"
    )
    assert _rows(arctic) == [(2, "b"), (3, "c"), (7, "y")]
    versions = arctic.sql("SELECT count(*) FROM db.t.history").collect()[0][0]
    assert versions == 2  # one statement, one version, whichever way it went


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_key_given_twice_is_one_line_naming_it_and_commits_nothing(arctic, spark, way, partitions):
    # With two partitions the two rows of key 5 go to different tasks in the tasks way: the commit finds them.
    _source(spark, [(5, "p", "U"), (6, "q", "U"), (5, "r", "U")], partitions)
    with pytest.raises(
        PrimaryKeyViolationError,
        match=r"^MERGE into db.t writes primary key \(id=5\) 2 times in one "
        r"statement$",
    ):
        arctic.sql(CDC_MERGE)
    assert _rows(arctic) == [(1, "a"), (2, "b"), (3, "c")]
    assert arctic.sql("SELECT count(*) FROM db.t.history").collect()[0][0] == 1


def test_a_null_key_is_one_line_and_commits_nothing(arctic, way):
    with pytest.raises(
        PrimaryKeyViolationError, match=r"^INSERT into db.t writes a null primary key \(id=NULL\)$"
    ):
        arctic.sql("INSERT INTO db.t VALUES (4, 'd'), (NULL, 'n')")
    assert _rows(arctic) == [(1, "a"), (2, "b"), (3, "c")]


def test_update_delete_and_insert_select_from_an_arctic_table(arctic, way):
    arctic.sql("CREATE TABLE db.s (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.s SELECT id + 10, upper(v) FROM db.t")  # a merged read: the tasks write it
    arctic.sql("UPDATE db.s SET v = 'z' WHERE id = 12")
    arctic.sql("DELETE FROM db.s WHERE id = 11")
    assert _rows(arctic, "SELECT id, v FROM db.s") == [(12, "z"), (13, "C")]
    files = arctic.sql("SELECT path FROM db.s.files WHERE store = 'change'").collect()
    assert all("/arctic_node=" in r[0] for r in files), files


def test_change_rows_take_the_tables_types_by_spark_casts_nested_names_quoted(spark):
    from pyspark.sql import types as t

    from arctic_sql.table.writing.change_rows import _in_table_types

    rows = spark.sql("SELECT CAST(1 AS INT) AS ID, named_struct('a b', CAST(5 AS SMALLINT)) AS st, 'x' AS v")
    fields = [
        t.StructField("id", t.LongType()),
        t.StructField("st", t.StructType([t.StructField("a b", t.IntegerType())])),
        t.StructField("v", t.StringType()),
    ]
    upserts = _in_table_types(rows, fields, op="upsert")
    assert upserts.schema.simpleString() == "struct<id:bigint,st:struct<a b:int>,v:string,arctic_op:string>"
    assert [tuple(r) for r in upserts.collect()] == [(1, (5,), "x", "upsert")]
    deletes = _in_table_types(rows, fields, op="delete", only={"id"})
    assert [tuple(r) for r in deletes.collect()] == [(1, None, None, "delete")]


def test_a_delete_only_merge_takes_a_key_only_source_and_skips_null_keys(arctic, spark, way):
    """The blind write read every column of the source (a key-only one failed), and kept a NULL key's
    delete (refused as a null primary key), though a NULL key matches nothing."""
    spark.sql("SELECT * FROM VALUES (CAST(2 AS BIGINT)) AS s(id)").createOrReplaceTempView("keys_only")
    arctic.sql("MERGE INTO db.t t USING keys_only s ON t.id = s.id WHEN MATCHED THEN DELETE")
    _source(spark, [(None, "n", "D"), (3, "z", "D")])
    arctic.sql("MERGE INTO db.t t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert _rows(arctic) == [(1, "a")]


def test_a_merge_listing_every_column_from_the_source_is_blind(arctic, spark, way, spark_jobs):
    """Listed assignments that mean SET * / INSERT * (any order, identity casts) take the blind
    path: the same jobs as the star form (none, from a VALUES source), no read of the table. A partial update reads it."""
    listed = (
        "MERGE INTO db.t AS x USING src AS b ON x.id = b.id WHEN MATCHED AND b.op = 'D' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET x.v = CAST(b.v AS STRING) "
        "WHEN NOT MATCHED AND b.op <> 'D' THEN INSERT (v, id) VALUES (b.v, b.id)"
    )
    _source(spark, [(1, None, "D"), (2, "b2", "U"), (9, "i", "U"), (8, None, "D")])
    assert spark_jobs(lambda: arctic.sql(listed)) == ([] if way == "driver" else ["collect"])
    assert _rows(arctic) == [(2, "b2"), (3, "c"), (9, "i")]
    # The source's id into v is not SET *: it takes the path that reads the table (its source
    # collected for the keys' lookup: other jobs than the blind path's) and writes what it says.
    _source(spark, [(3, "z", "U")])
    other = listed.replace("SET x.v = CAST(b.v AS STRING)", "SET x.v = CAST(b.id AS STRING)")
    assert spark_jobs(lambda: arctic.sql(other)) != ([] if way == "driver" else ["collect"])
    assert _rows(arctic) == [(2, "b2"), (3, "3"), (9, "i")]


def test_a_partial_update_reads_only_the_tree_nodes_of_its_keys(arctic, spark, way):
    """A MERGE that must read the target (here: one column from the source, one from the table)
    reads the source's keys only: the plan's target read is their point lookup, which opens the
    files of their nodes, not the table's."""
    import re

    from arctic_sql.parser import parse_one, to_spark_sql
    from arctic_sql.statements.merge_plan import MergePlan

    arctic.sql(
        "CREATE TABLE db.kv (k BIGINT, v STRING, n BIGINT, PRIMARY KEY (k)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '8')"
    )
    spark.range(200).selectExpr("id AS k", "CAST(id AS STRING) AS v", "id AS n").createOrReplaceTempView(
        "kv_src"
    )
    arctic.sql("INSERT OVERWRITE db.kv SELECT * FROM kv_src")
    spark.sql(
        "SELECT * FROM VALUES (CAST(10 AS BIGINT), 'ten'), (CAST(11 AS BIGINT), 'eleven'), "
        "(CAST(500 AS BIGINT), 'new') AS s(k, v)"
    ).createOrReplaceTempView("batch")
    merge = (
        "MERGE INTO db.kv AS t USING batch AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + 1 "
        "WHEN NOT MATCHED THEN INSERT (k, v, n) VALUES (s.k, s.v, 0)"
    )
    plan = MergePlan.of(parse_one(merge), arctic.table("db.kv"))
    version = arctic.sql("SELECT max(version) FROM db.kv.history").collect()[0][0]
    target = to_spark_sql(plan.target_select(arctic.context, parse_one(merge).this, version))
    assert re.search(r"WHERE `k` IN \(10, 11, 500\)", target), target

    def files_read(sql: str) -> int:  # by a merge by node, or (base files only) by a Parquet scan
        explained = arctic.sql("EXPLAIN " + sql).collect()[0][0]
        merged = re.findall(r"base_files=(\d+), change_files=(\d+)\]", explained)
        scanned = re.findall(r"InMemoryFileIndex\((\d+) paths?\)", explained)
        return sum(int(b) + int(c) for b, c in merged) + sum(int(n) for n in scanned)

    assert 0 < files_read(target) <= 3 < files_read("SELECT * FROM db.kv WHERE v <> ''") == 8
    arctic.sql(merge)
    assert _rows(arctic, "SELECT k, v, n FROM db.kv WHERE k IN (9, 10, 11, 500)") == [
        (9, "9", 9),
        (10, "ten", 11),
        (11, "eleven", 12),
        (500, "new", 0),
    ]
    # NOT MATCHED BY SOURCE changes rows the source does not name: the whole table is read.
    by_source = merge + " WHEN NOT MATCHED BY SOURCE AND t.k = 0 THEN DELETE"
    plan = MergePlan.of(parse_one(by_source), arctic.table("db.kv"))
    assert "WHERE" not in to_spark_sql(plan.target_select(arctic.context, parse_one(by_source).this, version))
