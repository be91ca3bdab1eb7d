"""SELECT over arctic tables together with plain Spark tables; pruning and pushdown seen in EXPLAIN."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture
def orders(arctic):
    arctic.sql(
        "CREATE TABLE db.orders (id BIGINT, region STRING, amount DOUBLE, PRIMARY KEY (id, region)) "
        "PARTITIONED BY (region)"
    )
    arctic.sql(
        "INSERT OVERWRITE db.orders VALUES (1, 'eu', 10.0), (2, 'us', 20.0), (3, 'eu', 30.0), (4, 'ap', 5.0)"
    )
    arctic.sql("INSERT INTO db.orders VALUES (1, 'eu', 11.0), (5, 'us', 50.0)")
    arctic.sql("DELETE FROM db.orders WHERE id = 2")
    arctic.spark.createDataFrame(
        [("eu", "Europe"), ("us", "Americas")], "code string, name string"
    ).createOrReplaceTempView("regions")
    return arctic


def test_joins_ctes_and_aggregates_mix_arctic_and_spark_tables(orders):
    rows = orders.sql(
        """
        WITH big AS (SELECT * FROM db.orders WHERE amount > 10)
        SELECT r.name, count(*) AS n, sum(b.amount) AS total
        FROM big b JOIN regions r ON b.region = r.code
        GROUP BY r.name ORDER BY r.name
        """
    ).collect()
    assert [tuple(r) for r in rows] == [("Americas", 1, 50.0), ("Europe", 2, 41.0)]
    self_join = orders.sql(
        "SELECT a.id, a.amount, b.amount FROM db.orders a JOIN db.orders VERSION AS OF 1 b "
        "ON a.id = b.id AND a.region = b.region ORDER BY a.id"
    ).collect()
    assert [tuple(r) for r in self_join] == [(1, 11.0, 10.0), (3, 30.0, 30.0), (4, 5.0, 5.0)]


def test_select_star_keeps_the_declared_column_order(orders):
    assert orders.sql("SELECT * FROM db.orders").columns == ["id", "region", "amount"]
    assert orders.sql("SELECT * FROM db.orders VERSION AS OF 1").columns == ["id", "region", "amount"]


def test_plain_spark_statements_pass_through(orders):
    assert orders.sql("SELECT upper(name) FROM regions WHERE code = 'us'").collect()[0][0] == "AMERICAS"
    orders.sql("CREATE TEMPORARY VIEW eu AS SELECT id, amount FROM db.orders WHERE region = 'eu'")
    assert sorted(tuple(r) for r in orders.sql("SELECT * FROM eu").collect()) == [(1, 11.0), (3, 30.0)]


def _scanned_paths(plan: str) -> list[int]:
    return [int(n) for n in re.findall(r"InMemoryFileIndex\((\d+) paths?\)", plan)]


def _merged_files(plan: str) -> int:
    """How many files the by-node merges of an EXPLAIN read (base and change)."""
    return sum(int(b) + int(c) for b, c in re.findall(r"base_files=(\d+), change_files=(\d+)\]", plan))


def test_explain_shows_the_files_a_merge_by_node_reads_after_pruning(orders):
    # In Spark tasks: a table this small would merge in the driver (merge-on-read.driver-rows-max-bytes).
    orders.sql("ALTER TABLE db.orders SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    everything = orders.sql("EXPLAIN SELECT * FROM db.orders").collect()[0][0]
    pruned = orders.sql("EXPLAIN SELECT id FROM db.orders WHERE region = 'eu' AND amount > 20").collect()[0][
        0
    ]
    assert "MapInArrow" in pruned and not _scanned_paths(pruned)  # merged by node, no Parquet scan in Spark
    assert 0 < _merged_files(pruned) < _merged_files(everything)
    assert [
        r[0] for r in orders.sql("SELECT id FROM db.orders WHERE region = 'eu' AND amount > 20").collect()
    ] == [3]


def test_explain_shows_partition_pruning_and_pushed_filters_in_the_spark_plan(orders):
    # Node groups over merge-on-read.in-memory-max-bytes merge in a Spark plan with Parquet scans.
    orders.sql("ALTER TABLE db.orders SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '0')")
    everything = orders.sql("EXPLAIN SELECT * FROM db.orders WHERE amount > 0").collect()[0][0]
    pruned = orders.sql("EXPLAIN SELECT id FROM db.orders WHERE region = 'eu' AND amount > 20").collect()[0][
        0
    ]
    # Fewer files are handed to Spark when the partition predicate is known...
    assert sum(_scanned_paths(pruned)) < sum(_scanned_paths(everything))
    # ...and the remaining predicate reaches the Parquet reader for row-group skipping,
    pushed = re.findall(r"PushedFilters: \[([^\]]*)\]", pruned)
    assert any("GreaterThan(amount,20.0)" in p and "EqualTo(region,eu)" in p for p in pushed), pushed
    # ...while only the needed columns are read from the base files.
    assert re.search(r"ReadSchema: struct<id:bigint,region:string,amount:double>", pruned)
    rows = orders.sql("SELECT id FROM db.orders WHERE region = 'eu' AND amount > 20").collect()
    assert [r[0] for r in rows] == [3]


def test_filters_on_non_key_columns_never_resurrect_old_rows(orders):
    # id 1 was 10.0 in the base and is 11.0 in the change store: a filter matching only the old
    # value must not return the old row, even though the change file is not pruned by amount.
    assert orders.sql("SELECT * FROM db.orders WHERE amount = 10.0").collect() == []
    assert orders.sql("SELECT * FROM db.orders WHERE id = 2").collect() == []


def test_python_key_hash_matches_spark_xxhash64(arctic):
    import datetime

    from pyiceberg import types as it

    from arctic_sql.table.format.keyhash import spark_xxhash64

    cases = [
        ((5,), (it.LongType(),), "CAST(5 AS BIGINT)"),
        ((-7,), (it.IntegerType(),), "CAST(-7 AS INT)"),
        (("abc",), (it.StringType(),), "'abc'"),
        (
            ("a string longer than thirty-two bytes, with ünïcode",),
            (it.StringType(),),
            "'a string longer than thirty-two bytes, with ünïcode'",
        ),
        ((1, "eu"), (it.LongType(), it.StringType()), "CAST(1 AS BIGINT), 'eu'"),
        ((None, "x"), (it.LongType(), it.StringType()), "CAST(NULL AS BIGINT), 'x'"),
        ((datetime.date(2024, 1, 2),), (it.DateType(),), "DATE '2024-01-02'"),
    ]
    for values, types, sql in cases:
        spark_hash = arctic.spark.sql(f"SELECT xxhash64({sql})").collect()[0][0] & ((1 << 64) - 1)
        assert spark_xxhash64(values, types) == spark_hash, sql


def test_point_lookups_read_only_their_tree_nodes(arctic):
    arctic.sql(
        "CREATE TABLE db.kv (k BIGINT, v STRING, PRIMARY KEY (k)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '8', 'change.file-index.hash-bucket' = '4')"
    )
    arctic.spark.range(200).selectExpr("id AS k", "CAST(id AS STRING) AS v").createOrReplaceTempView("kv_src")
    arctic.sql("INSERT OVERWRITE db.kv SELECT * FROM kv_src")
    arctic.sql("INSERT INTO db.kv SELECT k, concat(v, '!') FROM kv_src WHERE k % 2 = 0")
    everything = _merged_files(arctic.sql("EXPLAIN SELECT * FROM db.kv WHERE v <> ''").collect()[0][0])
    lookup = "SELECT * FROM db.kv WHERE k IN (10, 11)"
    narrowed = _merged_files(arctic.sql("EXPLAIN " + lookup).collect()[0][0])
    assert 0 < narrowed < everything
    assert sorted(tuple(r) for r in arctic.sql(lookup).collect()) == [(10, "10!"), (11, "11")]


def test_full_scans_merge_by_node_in_memory_and_agree_with_the_spark_plan(orders):
    query = (
        "SELECT region, count(*) AS n, sum(amount) AS total FROM db.orders GROUP BY region ORDER BY region"
    )
    # A table this small merges and aggregates in the driver (merge-on-read.driver-max-bytes); 0: in tasks.
    in_driver = [tuple(r) for r in orders.sql(query).collect()]
    orders.sql("ALTER TABLE db.orders SET TBLPROPERTIES ('merge-on-read.driver-max-bytes' = '0')")
    in_memory = orders.sql("EXPLAIN " + query).collect()[0][0]
    assert "MapInArrow" in in_memory and not _scanned_paths(in_memory)  # no Parquet scan, no shuffle of rows
    by_node = [tuple(r) for r in orders.sql(query).collect()]
    orders.sql("ALTER TABLE db.orders SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '0')")
    spark_plan = orders.sql("EXPLAIN " + query).collect()[0][0]
    assert "MapInArrow" not in spark_plan and _scanned_paths(spark_plan)
    assert (
        [tuple(r) for r in orders.sql(query).collect()]
        == by_node
        == in_driver
        == [("ap", 1, 5.0), ("eu", 2, 41.0), ("us", 1, 50.0)]
    )


def test_a_small_merge_on_read_runs_in_the_driver_and_agrees_with_the_tasks(arctic):
    # Eight change buckets for three keys: most node groups merge to no row. pyspark's createDataFrame
    # of Arrow rows keeps only those before the first empty batch, which lost every key but one.
    arctic.sql(
        "CREATE TABLE db.s (id BIGINT, v STRING, x DOUBLE, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('change.file-index.hash-bucket' = '8')"
    )
    arctic.sql("INSERT INTO db.s VALUES (0, 'a', 0.0), (1, 'b', 1.5), (2, 'c', 3.0), (3, 'd', 4.5)")
    arctic.sql("UPDATE db.s SET v = 'B' WHERE id = 1")
    arctic.sql("DELETE FROM db.s WHERE id = 3")
    queries = [
        "SELECT * FROM db.s",
        "SELECT id, v FROM db.s WHERE x >= 0",
        "SELECT * FROM db.s VERSION AS OF 1",
    ]
    in_driver = [sorted(tuple(r) for r in arctic.sql(q).collect()) for q in queries]
    plan = arctic.sql("EXPLAIN " + queries[0]).collect()[0][0]
    assert "== Merged in the driver ==" in plan and "arctic_merge_by_node_in_driver" in plan, plan
    assert "MapInArrow" not in plan and "LocalTableScan" in plan, plan
    arctic.sql("ALTER TABLE db.s SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    assert "MapInArrow" in arctic.sql("EXPLAIN " + queries[0]).collect()[0][0]
    in_tasks = [sorted(tuple(r) for r in arctic.sql(q).collect()) for q in queries]
    assert in_driver == in_tasks
    assert in_driver[0] == [(0, "a", 0.0), (1, "B", 1.5), (2, "c", 3.0)]
    assert len(in_driver[2]) == 4


def test_a_merge_hands_spark_only_the_rows_its_where_keeps_after_merging_in_the_driver_or_a_task(arctic):
    from pyiceberg.expressions import EqualTo

    arctic.sql("CREATE TABLE db.w (id BIGINT, v STRING, x DOUBLE, PRIMARY KEY (id))")
    arctic.sql(
        "INSERT INTO db.w VALUES (0, 'a', 0.0), (1, 'b', 1.0), (2, 'a', CAST('NaN' AS DOUBLE)), (3, NULL, 3.0), "
        "(4, 'a', 4.0)"
    )
    # Newer rows that fail the WHERE over older ones that pass it, and the reverse: the filter runs
    # on merged rows, so neither the old 'a' of 0 nor the deleted 4 comes back.
    arctic.sql("UPDATE db.w SET v = CASE id WHEN 0 THEN 'z' ELSE 'a' END WHERE id IN (0, 1)")
    arctic.sql("DELETE FROM db.w WHERE id = 4")
    queries = {
        "SELECT id FROM db.w WHERE v = 'a'": [(1,), (2,)],
        "SELECT id FROM db.w WHERE v = 'a' AND x > 0.5": [(1,), (2,)],  # Spark orders NaN above all
        "SELECT id FROM db.w WHERE v IS NULL OR v = 'z'": [(0,), (3,)],
        "SELECT id, v FROM db.w WHERE v <> 'a'": [(0, "z")],
        "SELECT id FROM db.w VERSION AS OF 1 WHERE v = 'a'": [(0,), (2,), (4,)],
    }
    plan = arctic.sql("EXPLAIN SELECT id FROM db.w WHERE v = 'a'").collect()[0][0]
    assert "arctic_merge_by_node_in_driver" in plan, plan
    in_driver = {q: sorted(tuple(r) for r in arctic.sql(q).collect()) for q in queries}
    assert in_driver == queries
    table = arctic.context.table("db.w")
    # What crosses to Spark: only the merged rows that pass the filter given, after the merge.
    handed = arctic.read_table(table, rows_filter=EqualTo("v", "a"), base_filter=EqualTo("v", "a"))
    assert sorted(r.id for r in handed.collect()) == [1, 2]
    assert arctic.read_table(table).count() == 4
    arctic.sql("ALTER TABLE db.w SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    assert {q: sorted(tuple(r) for r in arctic.sql(q).collect()) for q in queries} == queries
    # Merged in Python tasks, the rows are dropped there, before they cross to the JVM.
    table = arctic.context.table("db.w")
    handed = arctic.read_table(table, rows_filter=EqualTo("v", "a"), base_filter=EqualTo("v", "a"))
    assert "arctic_merge_by_node[" in handed._jdf.queryExecution().executedPlan().toString()
    assert sorted(r.id for r in handed.collect()) == [1, 2]
    assert arctic.read_table(table).count() == 4


def test_files_written_before_a_column_was_added_read_it_as_null_in_a_full_scan(orders):
    orders.sql("ALTER TABLE db.orders ADD COLUMNS (note STRING)")
    orders.sql("INSERT INTO db.orders VALUES (6, 'ap', 60.0, 'new')")
    # No WHERE: the node merge reads every file by field id; the older ones have no `note`.
    rows = orders.sql("SELECT id, note FROM db.orders ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, None), (3, None), (4, None), (5, None), (6, "new")]


def test_spark_statements_arctics_parser_cannot_read_pass_to_spark(orders, tmp_path):
    orders.sql(f"SET spark.sql.warehouse.test.dir=/{tmp_path}/x")
    assert orders.spark.conf.get("spark.sql.warehouse.test.dir") == f"/{tmp_path}/x"
    out = tmp_path / "out"
    orders.sql(f"INSERT OVERWRITE DIRECTORY '{out}' USING csv SELECT 1 AS a, 'x' AS b")
    written = [p for p in out.iterdir() if p.name.endswith(".csv")]
    assert [p.read_text().strip() for p in written if p.read_text().strip()] == ["1,x"]


def test_unparsable_statements_on_arctic_tables_keep_arctics_error(orders, tmp_path):
    from arctic_sql.errors import SqlParseError

    before = sorted(tuple(r) for r in orders.sql("SELECT * FROM db.orders").collect())
    # Spark would parse this one (an INSERT OVERWRITE DIRECTORY reading an arctic table), but it
    # names an arctic table, so arctic's own error stands and nothing runs, not even the first statement.
    with pytest.raises(SqlParseError, match=r"line 2, column \d+"):
        orders.sql(
            f"DELETE FROM db.orders WHERE id = 1;\nINSERT OVERWRITE DIRECTORY '{tmp_path}/o' USING csv "
            "SELECT * FROM db.orders"
        )
    assert sorted(tuple(r) for r in orders.sql("SELECT * FROM db.orders").collect()) == before
    with pytest.raises(SqlParseError, match=r"line 1, column \d+"):
        orders.sql("CALL system.optimize(table => ")
    # Neither sqlglot nor Spark parses it: one error, the dialect's, with its position.
    with pytest.raises(SqlParseError) as raised:
        orders.sql("SELECT * FROM regions WHERE (code = 'eu'")
    assert str(raised.value) == "Invalid SQL: Expecting ) (line 1, column 37)"


def test_a_join_broadcasts_a_merged_read_only_if_its_files_are_under_the_threshold(arctic, spark):
    # Spark sizes a merge by node from the task numbers it runs over: it used to look like a few bytes
    # whatever the table held, and a join broadcast it, pulling the whole table into the driver.
    arctic.sql("CREATE TABLE db.big (id BIGINT, v STRING, PRIMARY KEY (id))")
    spark.range(50_000).selectExpr("id", "uuid() AS v").write.format("arctic").mode("overwrite").save(
        "db.big"
    )
    arctic.sql("INSERT INTO db.big VALUES (1, 'changed')")  # a change file: the read merges by node
    # ... in Spark tasks: its 2 MB would merge in the driver (merge-on-read.driver-rows-max-bytes).
    arctic.sql("ALTER TABLE db.big SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    spark.range(200_000).createOrReplaceTempView("facts")  # sized at 1.6 MB: over the threshold too
    query = "SELECT count(*), max(b.v) FROM facts f JOIN db.big b ON f.id = b.id"
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(100_000))  # the table's files: about 2 MB
    try:
        over = arctic.sql(query)
        over_plan = over._jdf.queryExecution().executedPlan().toString()
        assert over.collect()[0][0] == 50_000
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)
    under_plan = arctic.sql(query)._jdf.queryExecution().executedPlan().toString()
    assert "arctic_merge_by_node" in over_plan and "BroadcastHashJoin" not in over_plan, over_plan
    assert "BroadcastHashJoin" in under_plan, under_plan  # under the default 10 MB it still may


def test_nested_columns_of_a_keyed_table_merge_read_and_optimize(arctic):
    # A struct, an array and a map beside the key: merged reads select top-level columns, and a
    # MERGE may name the target by its full name (`db.t.id`) when it has no alias.
    arctic.sql(
        "CREATE TABLE db.nested (id INT, st STRUCT<a: INT, b: STRING>, arr ARRAY<INT>, m MAP<STRING, INT>, "
        "PRIMARY KEY (id))"
    )
    arctic.sql(
        "INSERT INTO db.nested VALUES (1, named_struct('a', 1, 'b', 'x'), array(1, 2), map('k', 1)), "
        "(2, named_struct('a', 2, 'b', 'y'), array(3), map('j', 2))"
    )
    arctic.sql("UPDATE db.nested SET st = named_struct('a', 9, 'b', 'z') WHERE id = 1")
    arctic.sql("DELETE FROM db.nested WHERE id = 2")
    arctic.sql("INSERT INTO db.nested VALUES (3, named_struct('a', 3, 'b', 'w'), array(7), map('q', 3))")
    arctic.sql(
        "MERGE INTO db.nested USING (SELECT 3 AS id, named_struct('a', 30, 'b', 'v') AS st) src "
        "ON db.nested.id = src.id WHEN MATCHED THEN UPDATE SET st = src.st"
    )
    arctic.sql(
        "CREATE TABLE db.nested_src (id INT, st STRUCT<a: INT, b: STRING>, arr ARRAY<INT>, "
        "m MAP<STRING, INT>, PRIMARY KEY (id))"
    )
    arctic.sql(
        "INSERT INTO db.nested_src VALUES (3, NULL, NULL, NULL), (4, named_struct('a', 4, 'b', 'u'), "
        "array(4), map('r', 4))"
    )
    arctic.sql(
        "MERGE INTO db.nested USING db.nested_src ON db.nested.id = db.nested_src.id "
        "WHEN NOT MATCHED AND db.nested_src.id > 3 THEN INSERT *"
    )
    expected = [(1, (9, "z"), [1, 2], {"k": 1}), (3, (30, "v"), [7], {"q": 3}), (4, (4, "u"), [4], {"r": 4})]

    def rows(sql: str) -> list[tuple]:
        return [tuple(r) for r in arctic.sql(sql).collect()]

    assert rows("SELECT * FROM db.nested ORDER BY id") == expected
    assert rows("SELECT id, st.b FROM db.nested WHERE st.a > 5 ORDER BY id") == [(1, "z"), (3, "v")]
    assert rows("SELECT * FROM db.nested VERSION AS OF 2 ORDER BY id") == [
        (1, (9, "z"), [1, 2], {"k": 1}),
        (2, (2, "y"), [3], {"j": 2}),
    ]
    arctic.sql("ALTER TABLE db.nested COMPACT MINOR")
    assert rows("SELECT * FROM db.nested ORDER BY id") == expected
    arctic.sql("ALTER TABLE db.nested COMPACT FULL")
    assert rows("SELECT * FROM db.nested ORDER BY id") == expected


def test_columns_may_name_their_table_in_full(orders):
    # What BI tools and generated SQL write: `db.orders.id`, even `spark_catalog.db.orders.id`.
    rows = orders.sql(
        "SELECT db.orders.id FROM db.orders WHERE db.orders.region = 'eu' ORDER BY spark_catalog.db.orders.id"
    ).collect()
    assert [r[0] for r in rows] == [1, 3]
    orders.sql("UPDATE db.orders SET amount = 12.0 WHERE db.orders.id = 1")
    orders.sql("DELETE FROM db.orders WHERE db.orders.id = 3")
    rows = orders.sql("SELECT id, amount FROM db.orders WHERE region = 'eu'").collect()
    assert [tuple(r) for r in rows] == [(1, 12.0)]


def test_cache_uncache_refresh_and_analyze_of_an_arctic_table(orders):
    from arctic_sql.errors import UnsupportedOperationError

    # Caching the table itself would pin one version under its name: a one-line error says what to do.
    with pytest.raises(UnsupportedOperationError, match=r"CACHE TABLE name AS SELECT \* FROM db.orders"):
        orders.sql("CACHE TABLE db.orders")
    with pytest.raises(UnsupportedOperationError, match="ANALYZE TABLE db.orders"):
        orders.sql("ANALYZE TABLE db.orders COMPUTE STATISTICS")
    orders.sql("REFRESH TABLE db.orders")  # every statement reads the newest version: nothing to do
    orders.sql("UNCACHE TABLE IF EXISTS db.orders")
    # A cached query of it is Spark's, and keeps the rows it cached.
    orders.sql("CACHE TABLE eu_orders AS SELECT id, amount FROM db.orders WHERE region = 'eu'")
    orders.sql("INSERT INTO db.orders VALUES (6, 'eu', 60.0)")
    try:
        assert sorted(tuple(r) for r in orders.sql("SELECT * FROM eu_orders").collect()) == [
            (1, 11.0),
            (3, 30.0),
        ]
    finally:
        orders.sql("UNCACHE TABLE eu_orders")


def test_nan_matches_spark_comparisons_before_and_after_optimizing(arctic):
    # Spark orders NaN above every number; file and row-group bounds leave NaN out, so they must not
    # prune FLOAT or DOUBLE filters (nor may the optimizer's files carry such bounds for Spark's reader).
    arctic.sql(
        "CREATE TABLE db.nan (id INT, d DOUBLE, f FLOAT, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '1', 'change.file-index.hash-bucket' = '1')"
    )
    arctic.sql("INSERT INTO db.nan VALUES (1, double('NaN'), float('NaN')), (2, 0.5, 0.5), (3, -0.0, 1.0)")
    queries = ["d > 1.0", "d = double('NaN')", "d IN (double('NaN'), 7.0)", "f >= 2"]
    for step in ("merge on read", "optimized"):
        for where in queries:
            assert [r[0] for r in arctic.sql(f"SELECT id FROM db.nan WHERE {where}").collect()] == [1], (
                step,
                where,
            )
            rows = arctic.spark.read.format("arctic").load("db.nan").where(where).collect()
            assert [r["id"] for r in rows] == [1], (step, where)
        arctic.sql("ALTER TABLE db.nan COMPACT FULL")
