"""Keyed work costs what its keys cost (issue 35): UPDATE and DELETE that name keys, and point
lookups, read only those keys' tree nodes and the files whose key bounds hold them; an INSERT of a
few VALUES runs no Spark job. Asserted from the read's plan (the merge step names the files it
reads) and from Spark's own job tracker, never from timing.
"""

from __future__ import annotations

import datetime
import decimal
import re

import pytest

from arctic_sql.parser import parse_one
from arctic_sql.statements import dml
from arctic_sql.table.format.keyhash import spark_xxhash64
from arctic_sql.table.format.tree import DataTreeNode

pytestmark = pytest.mark.spark

BASE_BUCKETS, CHANGE_BUCKETS = 8, 4


def _files_read(plan: str) -> int:
    """Files a read opens, by its plan: the merge by node names them; a base-only read is a Parquet scan."""
    merged = re.findall(r"base_files=(\d+), change_files=(\d+)\]", plan)
    scanned = re.findall(r"InMemoryFileIndex\((\d+) paths?\)", plan)
    assert merged or scanned, plan
    return sum(int(b) + int(c) for b, c in merged) + sum(int(n) for n in scanned)


def _node(key: int, buckets: int) -> DataTreeNode:
    from pyiceberg.types import LongType

    return DataTreeNode(buckets - 1, spark_xxhash64((key,), (LongType(),)) & (buckets - 1))


def _holding(arctic, keys: list[int]) -> int:
    """The live, unmerged files whose node lies on a key's path and whose key bounds hold it."""
    rows = arctic.sql("SELECT node, key_min, key_max FROM db.kv.files WHERE NOT merged").collect()
    return sum(
        1
        for r in rows
        if any(
            int(r.key_min) <= k <= int(r.key_max)
            and DataTreeNode.of_id(r.node).is_related(_node(k, BASE_BUCKETS))
            for k in keys
        )
    )


@pytest.fixture
def kv(arctic, spark):
    """2,000 keys in 8 base nodes, then two change commits over every change node."""
    arctic.sql(
        "CREATE TABLE db.kv (k BIGINT, v STRING, n BIGINT, PRIMARY KEY (k)) TBLPROPERTIES ("
        f"'base.file-index.hash-bucket' = '{BASE_BUCKETS}', 'change.file-index.hash-bucket' = '{CHANGE_BUCKETS}')"
    )
    spark.range(2000).selectExpr("id AS k", "CAST(id AS STRING) AS v", "id AS n").createOrReplaceTempView(
        "kv_src"
    )
    arctic.sql("INSERT OVERWRITE db.kv SELECT * FROM kv_src")
    arctic.sql("INSERT INTO db.kv SELECT k, 'c1', n FROM kv_src WHERE k % 7 = 0")
    arctic.sql("INSERT INTO db.kv SELECT k, 'c2', n FROM kv_src WHERE k % 11 = 0")
    return arctic


def _same_node_keys(count: int) -> list[int]:
    """``count`` keys of one base node: their read must open that node's files only."""
    wanted = _node(0, BASE_BUCKETS)
    return [k for k in range(2000) if _node(k, BASE_BUCKETS) == wanted][:count]


def _version(arctic) -> int:
    return arctic.sql("SELECT max(version) FROM db.kv.history").collect()[0][0]


def _read_by_lookup(kv, keys: list[int]) -> int:
    """Files the driver's lookup of ``keys`` opens (table/reading/lookup.py)."""
    from arctic_sql.table.reading import lookup

    read = lookup.plan_lookup(kv.table("db.kv"), _version(kv), [(k,) for k in keys])
    return len(read.base_files) + len(read.change_files)


def test_an_update_of_ten_keys_reads_only_the_files_that_can_hold_them(kv, spark_jobs):
    keys = _same_node_keys(10)
    listed = ", ".join(map(str, keys))
    sql = f"UPDATE db.kv SET v = 'u' WHERE k IN ({listed}) AND n >= 0"
    statement = parse_one(sql)
    table = kv.table("db.kv")
    rows = dml.updated_rows(
        kv.context, statement, table, statement.this, _version(kv), {"v": parse_one("'u'")}
    )
    # The keys' rows were read in the driver: Spark's plan is a local relation, no file scan.
    assert rows._jdf.queryExecution().executedPlan().getClass().getSimpleName() == "LocalTableScanExec"
    opened = _read_by_lookup(kv, keys)
    everything = _files_read(kv.sql("EXPLAIN SELECT * FROM db.kv WHERE v <> ''").collect()[0][0])
    assert 0 < opened <= _holding(kv, keys) < everything, (opened, everything)
    assert spark_jobs(lambda: kv.sql(sql)) == []
    assert sorted(tuple(r) for r in kv.sql("SELECT k, v FROM db.kv WHERE v = 'u'").collect()) == [
        (k, "u") for k in sorted(keys)
    ]
    assert kv.sql("SELECT count(*) FROM db.kv").collect()[0][0] == 2000


def test_a_delete_of_one_key_reads_one_node(kv):
    (key,) = _same_node_keys(1)
    sql = f"DELETE FROM db.kv WHERE k = {key}"
    statement = parse_one(sql)
    doomed = dml.deleted_keys(kv.context, statement, kv.table("db.kv"), statement.this, _version(kv))
    assert doomed._jdf.queryExecution().executedPlan().getClass().getSimpleName() == "LocalTableScanExec"
    assert 0 < _read_by_lookup(kv, [key]) <= _holding(kv, [key])
    kv.sql(sql)
    assert kv.sql(f"SELECT count(*) FROM db.kv WHERE k = {key}").collect()[0][0] == 0
    assert kv.sql("SELECT count(*) FROM db.kv").collect()[0][0] == 1999


def test_explain_of_a_point_lookup_shows_the_one_node_and_its_files(kv, spark_jobs):
    (key,) = _same_node_keys(1)
    assert spark_jobs(lambda: kv.sql(f"SELECT * FROM db.kv WHERE k = {key}").collect()) == []
    plan = kv.sql(f"EXPLAIN SELECT * FROM db.kv WHERE k = {key}").collect()[0][0]
    assert re.search(r"groups=1, nodes=\d+, base_files=\d+, change_files=\d+\]", plan), plan
    assert "Read by key in the driver" in plan and "LocalTableScan" in plan, plan
    assert 0 < _files_read(plan) <= _holding(kv, [key])
    assert [tuple(r) for r in kv.sql(f"SELECT k, v FROM db.kv WHERE k = {key}").collect()] == [
        (key, "c2" if key % 11 == 0 else "c1" if key % 7 == 0 else str(key))
    ]


def test_an_insert_of_a_few_values_runs_no_spark_job(arctic, spark_jobs):
    arctic.sql(
        "CREATE TABLE db.typed (id BIGINT, amount DECIMAL(10, 2), at TIMESTAMP, day DATE, tags ARRAY<STRING>, "
        "PRIMARY KEY (id))"
    )
    insert = (
        "INSERT INTO db.typed VALUES (1, 12.50, TIMESTAMP '2024-03-31 01:30:00 UTC', DATE '2024-02-29', "
        "array('a', 'b')), (2, NULL, NULL, NULL, NULL)"
    )
    assert spark_jobs(lambda: arctic.sql(insert)) == []
    rows = sorted(
        tuple(r) for r in arctic.sql("SELECT id, amount, unix_micros(at), day, tags FROM db.typed").collect()
    )
    at = datetime.datetime(2024, 3, 31, 1, 30, tzinfo=datetime.UTC)
    assert rows == [
        (
            1,
            decimal.Decimal("12.50"),
            int(at.timestamp()) * 1_000_000,
            datetime.date(2024, 2, 29),
            ["a", "b"],
        ),
        (2, None, None, None, None),
    ]
    # A bad row is still one line, and nothing is written.
    with pytest.raises(Exception, match="null primary key"):
        arctic.sql("INSERT INTO db.typed VALUES (3, 1.00, NULL, NULL, NULL), (NULL, 2.00, NULL, NULL, NULL)")
    assert arctic.sql("SELECT count(*) FROM db.typed").collect()[0][0] == 2
    # Rows Spark must compute (a query over a table merged in tasks) still take a Spark job; merged in
    # the driver (a table this small, merge-on-read.driver-rows-max-bytes), the rows are local: none.
    copy = "INSERT INTO db.typed SELECT id + {n}, amount, at, day, tags FROM db.typed WHERE id < 10"
    assert spark_jobs(lambda: arctic.sql(copy.format(n=10))) == []
    arctic.sql("ALTER TABLE db.typed SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    assert spark_jobs(lambda: arctic.sql(copy.format(n=20)))
    assert sorted(r[0] for r in arctic.sql("SELECT id FROM db.typed").collect()) == [1, 2, 11, 12, 21, 22]


def _batch(spark, keys: list[int]) -> None:
    """The MERGE source ``batch``: a row per key (``v`` = 'm<key>') and one new key, 5000."""
    spark.sql(
        "SELECT * FROM VALUES "
        + ", ".join(f"(CAST({k} AS BIGINT), 'm{k}')" for k in keys)
        + ", (CAST(5000 AS BIGINT), 'new') AS s(k, v)"
    ).createOrReplaceTempView("batch")


def test_a_partial_merge_broadcasts_its_keys_rows_instead_of_shuffling_both_sides(kv, spark):
    from arctic_sql.statements.merge_plan import MergePlan

    keys = _same_node_keys(3)
    _batch(spark, keys)
    merge = (
        "MERGE INTO db.kv AS t USING batch AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (k, v, n) VALUES (s.k, s.v, 0)"
    )
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # Spark's own sizing would never broadcast
    try:
        changes = MergePlan.of(parse_one(merge), kv.table("db.kv")).joined_changes(
            kv.context, parse_one(merge).this, _version(kv)
        )
        plan = changes._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan, plan
        kv.sql(merge)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)
    assert sorted(
        tuple(r) for r in kv.sql("SELECT k, v, n FROM db.kv WHERE v LIKE 'm%' OR k = 5000").collect()
    ) == [*[(k, f"m{k}", k) for k in sorted(keys)], (5000, "new", 0)]


def test_lookups_by_a_key_that_is_also_the_partition_find_their_rows(arctic):
    # A key that is also the partition column, with base files written by Spark's tasks: point
    # lookups, DELETE and UPDATE by keys find their rows (the cluster test's workload shape).
    arctic.sql("CREATE TABLE db.pk (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p)")
    arctic.sql("INSERT INTO db.pk VALUES (1, 'a', 10), (2, 'a', 20), (3, 'b', 30), (4, 'b', 40)")
    arctic.sql("CALL system.optimize(table => 'db.pk', mode => 'full')")
    assert [tuple(r) for r in arctic.sql("SELECT * FROM db.pk WHERE id = 3 AND p = 'b'").collect()] == [
        (3, "b", 30)
    ]
    arctic.sql("DELETE FROM db.pk WHERE id IN (1, 3, 4) AND p IN ('a', 'b')")
    arctic.sql("UPDATE db.pk SET v = 21 WHERE id IN (2) AND p IN ('a')")
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.pk").collect()) == [(2, "a", 21)]


def test_a_lookup_whose_keys_miss_a_node_group_between_others_finds_all_its_rows(arctic):
    # A node group whose files' bounds hold a wanted key but none of its rows: it reads no row.
    # PySpark's createDataFrame of Arrow data stopped at the first empty batch, so a DELETE by keys in
    # two partitions deleted the first partition's rows only (the cluster test's failure).
    from pyiceberg.types import LongType, StringType

    from arctic_sql.table.format.keyhash import spark_xxhash64

    def bucket(i: int, p: str) -> int:
        return spark_xxhash64((i, p), (LongType(), StringType())) & 1

    arctic.sql(
        "CREATE TABLE db.pk2 (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '2', 'change.file-index.hash-bucket' = '2')"
    )
    arctic.sql(
        "INSERT INTO db.pk2 VALUES " + ", ".join(f"({i}, '{p}', {i})" for i in range(40) for p in "ab")
    )
    # Gone from partition a, within its second bucket's bounds: that group is read and holds none.
    gone = [i for i in range(10, 30) if bucket(i, "a") == 1][:3]
    held = [i for i in range(40) if bucket(i, "a") == 0][:3]
    arctic.sql(f"DELETE FROM db.pk2 WHERE id IN ({', '.join(map(str, gone))}) AND p = 'a'")
    arctic.sql("CALL system.optimize(table => 'db.pk2', mode => 'full')")
    wanted = ", ".join(map(str, held + gone))
    expected = sorted([(i, "a") for i in held] + [(i, "b") for i in held + gone])
    found = arctic.sql(f"SELECT id, p FROM db.pk2 WHERE id IN ({wanted}) AND p IN ('a', 'b')").collect()
    assert sorted(tuple(r) for r in found) == expected
    arctic.sql(f"DELETE FROM db.pk2 WHERE id IN ({wanted}) AND p IN ('a', 'b')")
    assert arctic.sql(f"SELECT count(*) FROM db.pk2 WHERE id IN ({wanted})").collect()[0][0] == 0
    assert arctic.sql("SELECT count(*) FROM db.pk2").collect()[0][0] == 80 - len(gone) - len(expected)


def test_a_partial_merge_reads_its_keys_rows_here_in_no_spark_job(kv, spark, spark_jobs, tmp_path):
    """A partial MERGE of a small source reads the target rows of the source's keys in the driver,
    from the files of their nodes whose bounds hold them, and joins them as a local relation: its
    Spark jobs are the source's collection and the change rows' collection, none reads the target.
    The source is read once: collected whole for its keys, the join reads that copy (its plan scans
    no file), and its values come through exactly."""
    from arctic_sql.statements.merge_plan import MergePlan
    from arctic_sql.table.reading import lookup

    keys = _same_node_keys(10)
    path = str(tmp_path / "batch.parquet")
    spark.createDataFrame(
        [(k, f"m{k}", 1) for k in keys] + [(5000, "new", 0)], "K BIGINT, v STRING, d BIGINT"
    ).write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("pbatch")
    # ON names the key in another case than the source's column: the collected rows are found by it.
    merge = (
        "MERGE INTO db.kv AS t USING pbatch AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + s.d "
        "WHEN NOT MATCHED THEN INSERT (k, v, n) VALUES (s.K, s.v, s.d)"
    )
    table = kv.table("db.kv")
    plan = MergePlan.of(parse_one(merge), table)
    source_keys = plan.source_keys(kv.context)
    assert sorted(source_keys.values) == sorted([(k,) for k in keys] + [(5000,)]) and source_keys.small
    assert source_keys.rows is not None and source_keys.rows.num_rows == len(keys) + 1
    read = lookup.plan_lookup(table, _version(kv), source_keys.values)
    opened = len(read.base_files) + len(read.change_files)
    assert 0 < opened <= _holding(kv, [*keys, 5000]), opened
    changes = plan.changes_by_lookup(kv.context, table, _version(kv), source_keys)
    physical = changes._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in physical and "FileScan" not in physical, physical
    jobs = spark_jobs(lambda: kv.sql(merge))
    # No mapInArrow task, no broadcast read: the source's collection (a limit: a job per partition
    # it scales up to) and the change rows'.
    assert jobs and all(j in ("collect", "toArrow") for j in jobs), jobs
    assert "toArrow" in jobs and len(jobs) <= 3, jobs
    assert sorted(
        tuple(r) for r in kv.sql("SELECT k, v, n FROM db.kv WHERE v LIKE 'm%' OR k = 5000").collect()
    ) == [*[(k, f"m{k}", k + 1) for k in sorted(keys)], (5000, "new", 0)]
    assert kv.sql("SELECT count(*) FROM db.kv").collect()[0][0] == 2001


def test_a_partial_merge_of_a_source_arrow_cannot_hold_collects_its_keys_alone(kv, spark):
    # A year-month interval has no Arrow form: the source's keys are found by Spark's distinct and the
    # join reads the source itself.
    from arctic_sql.statements.merge_plan import MergePlan

    keys = _same_node_keys(2)
    spark.sql(
        "SELECT * FROM VALUES "
        + ", ".join(f"(CAST({k} AS BIGINT), 'i{k}', INTERVAL '1' MONTH)" for k in keys)
        + " AS s(k, v, span)"
    ).createOrReplaceTempView("ibatch")
    merge = "MERGE INTO db.kv AS t USING ibatch AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v"
    source_keys = MergePlan.of(parse_one(merge), kv.table("db.kv")).source_keys(kv.context)
    assert source_keys.rows is None and sorted(source_keys.values) == sorted((k,) for k in keys)
    kv.sql(merge)
    assert sorted(tuple(r) for r in kv.sql("SELECT k, v FROM db.kv WHERE v LIKE 'i%'").collect()) == [
        (k, f"i{k}") for k in sorted(keys)
    ]


def test_a_partial_merge_joins_in_the_driver_and_runs_only_the_sources_job(kv, spark, spark_jobs, tmp_path):
    """The source collected, the target's rows of its keys looked up, the join is made here in Arrow
    (statements/merge_join.py): Spark folds the statement into a local relation, so the MERGE's only
    job is the source's collection (with the join in Spark: a broadcast and a join job besides)."""
    keys = _same_node_keys(10)
    path = str(tmp_path / "jbatch.parquet")
    spark.createDataFrame(
        [(k, f"j{k}", 2, "D" if k == keys[0] else "U") for k in keys] + [(5001, "new", 0, "U")],
        "k BIGINT, v STRING, d BIGINT, op STRING",
    ).write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("jbatch")
    merge = (
        "MERGE INTO db.kv AS t USING jbatch AS s ON t.k = s.k WHEN MATCHED AND s.op = 'D' THEN DELETE "
        "WHEN MATCHED AND t.n >= 0 THEN UPDATE SET t.v = s.v, t.n = t.n + s.d "
        "WHEN NOT MATCHED THEN INSERT (k, v, n) VALUES (s.k, s.v, s.d)"
    )
    jobs = spark_jobs(lambda: kv.sql(merge))
    assert len(jobs) == 1, jobs
    assert sorted(
        tuple(r) for r in kv.sql("SELECT k, v, n FROM db.kv WHERE v LIKE 'j%' OR k = 5001").collect()
    ) == [*[(k, f"j{k}", k + 2) for k in sorted(keys[1:])], (5001, "new", 0)]
    assert kv.sql(f"SELECT count(*) FROM db.kv WHERE k = {keys[0]}").collect()[0][0] == 0


@pytest.fixture
def grouped(arctic, spark):
    """4,000 keys in 2 base nodes, written in row groups of 64 rows (``write.parquet.row-group-rows``)."""
    arctic.sql(
        "CREATE TABLE db.rg (k BIGINT, v STRING, PRIMARY KEY (k)) TBLPROPERTIES ("
        "'base.file-index.hash-bucket' = '2', 'write.parquet.row-group-rows' = '64')"
    )
    spark.range(4000).selectExpr("id AS k", "CAST(id AS STRING) AS v").createOrReplaceTempView("rg_src")
    arctic.sql("INSERT OVERWRITE db.rg SELECT * FROM rg_src")
    return arctic


def _groups_holding(path: str, keys: list[int]) -> list[int]:
    """The row groups of the file at ``path`` whose rows hold one of ``keys``, by reading them."""
    import pyarrow.parquet as pq

    from arctic_sql.table.files import storage

    fs, local = storage.filesystem(path)
    with fs.open_input_file(local) as f:
        file = pq.ParquetFile(f)
        return [
            g
            for g in range(file.num_row_groups)
            if set(file.read_row_group(g, columns=["k"]).column("k").to_pylist()) & set(keys)
        ]


@pytest.mark.parametrize("count", [2, 300])
def test_a_lookup_of_keys_reads_only_the_row_groups_whose_statistics_hold_them(grouped, count):
    """Base files are written in row groups of ``write.parquet.row-group-rows``, sorted by key, and a
    lookup reads only the groups whose key statistics hold one of its keys: for a few keys (an
    ``IN`` pyarrow prunes by) and for 300, the lowest and highest of one node's keys (a set whose
    bounds span the file: pyarrow's own pruning keeps every group then)."""
    from arctic_sql.table.reading import lookup, node_merge
    from arctic_sql.table.reading.key_groups import KeySet

    table = grouped.table("db.rg")
    node = _node(0, 2)
    mine = [k for k in range(4000) if _node(k, 2) == node]
    keys = mine[: count // 2] + mine[-(count - count // 2) :]
    plan = lookup.plan_lookup(table, None, [(k,) for k in keys])
    assert plan is not None and len(plan.base_files) == 1
    path = plan.base_files[0].path
    dataset = node_merge.by_name(
        [plan.base_files[0].data_file], table.schema, key_set=KeySet.of(["k"], [(k,) for k in keys])
    )
    assert dataset is not None
    (fragment,) = dataset.get_fragments()
    read = [g.id for g in fragment.row_groups]
    assert fragment.metadata.num_row_groups >= 30  # about 2,000 rows in groups of 64
    assert read == _groups_holding(path, keys), (read, count)
    assert sorted(
        r.k for r in grouped.sql(f"SELECT k FROM db.rg WHERE k IN ({', '.join(map(str, keys))})").collect()
    ) == sorted(keys)


def test_a_write_of_rows_behind_a_shuffle_computes_each_row_once(arctic):
    """Under adaptive execution, building a DataFrame's RDD runs its shuffles; a writer that counted
    partitions that way before writing computed every row behind a shuffle twice."""
    from pyspark.sql import functions as F

    from arctic_sql.table.format.versions import Operation
    from arctic_sql.table.writing import change_rows, spark_files

    arctic.sql("CREATE TABLE db.once (id BIGINT, n BIGINT, PRIMARY KEY (id))")
    spark = arctic.spark
    computed = spark.sparkContext.accumulator(0)

    @F.udf("bigint")
    def counted(value):  # noqa: ANN001, ANN202
        computed.add(1)
        return value

    # A Python step below a shuffle: Spark cannot size these rows, so the write runs as a Spark job.
    source = spark.range(0, 1000, numPartitions=3).select(counted("id").alias("id"))
    rows = source.groupBy("id").agg(F.count(F.lit(1)).alias("n"))
    assert not spark_files.one_partition(rows)
    assert computed.value == 0  # asking ran nothing
    change_rows.write_changes(arctic.context.table("db.once"), upserts=rows, operation=Operation.INSERT)
    assert computed.value == 1000
    assert tuple(arctic.sql("SELECT count(*), sum(n) FROM db.once").collect()[0]) == (1000, 1000)
    # Without a stage to run, the partitions are counted from the plan.
    assert spark_files.one_partition(spark.range(0, 10, numPartitions=1))
    assert not spark_files.one_partition(spark.range(0, 10, numPartitions=2))
