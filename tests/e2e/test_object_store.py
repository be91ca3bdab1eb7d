"""Tables on an S3-compatible object store: moto's S3 server on loopback, a real S3 API over HTTP.

The store is configured only by the catalog's properties (pyiceberg's ``s3.*`` names), with no
``AWS_*`` environment variable: arctic's file I/O and pyiceberg's metadata I/O both reach the bucket,
and the Spark tasks (other processes) get the settings in their plans.
"""

from __future__ import annotations

import json
import os

import pytest
from s3_harness import BUCKET, KEY_ID, SECRET, free_port, objects, s3_server
from s3_harness import catalog_properties as _catalog_properties

import arctic_sql
from arctic_sql.errors import ExecutionError

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def s3_counting():
    """An S3 server on a free loopback port with one bucket, counting the requests it answers."""
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def s3(s3_counting):
    """The server's endpoint and a boto3 client."""
    return s3_counting.endpoint, s3_counting.client()


@pytest.fixture
def no_aws_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)


def catalog_properties(tmp_path, endpoint: str, warehouse: str) -> dict[str, str]:
    return _catalog_properties(f"{tmp_path}/catalog.db", endpoint, warehouse)


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_a_keyed_table_lives_in_the_bucket(spark, tmp_path, s3, no_aws_environment):
    endpoint, client = s3
    session = arctic_sql.connect(
        warehouse="s3://lake/wh",
        spark=spark,
        catalog_properties=catalog_properties(tmp_path, endpoint, "s3://lake/wh"),
    )
    session.sql("CREATE DATABASE db")
    session.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    session.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    session.sql("UPDATE db.t SET v = 'B' WHERE id = 2")
    session.sql("DELETE FROM db.t WHERE id = 3")
    # Without a broadcast threshold the change rows are written by Spark tasks, not by the driver.
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        session.sql("INSERT INTO db.t VALUES (4, 'd'), (1, 'A')")
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")

    expected = [(1, "A"), (2, "B"), (4, "d")]
    assert rows(session.sql("SELECT id, v FROM db.t")) == expected
    assert rows(session.sql("SELECT id, v FROM db.t WHERE id > 1")) == expected[1:]
    assert rows(spark.read.format("arctic").load("db.t").select("id", "v")) == expected

    stored = objects(client, "wh/db/t/")
    data = [k for k in stored if k.endswith(".parquet")]
    assert any(k.startswith("wh/db/t/change/") for k in data), stored
    assert any(k.endswith(".metadata.json") for k in stored), stored
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.db"]  # nothing else on the local disk


def test_a_warehouse_whose_endpoint_does_not_answer_is_named_and_nothing_is_written(
    spark, tmp_path, no_aws_environment
):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(
        ExecutionError, match=rf"^Cannot reach the warehouse s3://lake/wh at {dead[7:]}: "
    ) as raised:
        arctic_sql.connect(
            warehouse="s3://lake/wh",
            spark=spark,
            catalog_properties=catalog_properties(tmp_path, dead, "s3://lake/wh"),
        )
    assert SECRET not in str(raised.value) and KEY_ID not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def in_bucket(spark, tmp_path, s3, no_aws_environment):
    """A session whose warehouse is in the bucket, and a function listing the bucket under it."""
    endpoint, client = s3
    warehouse = f"s3://{BUCKET}/{tmp_path.name}"
    session = arctic_sql.connect(
        warehouse=warehouse, spark=spark, catalog_properties=catalog_properties(tmp_path, endpoint, warehouse)
    )
    session.sql("CREATE DATABASE db")
    yield session, lambda table: objects(client, f"{tmp_path.name}/db/{table}/")
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.db"]


def test_base_files_written_by_overwrite_ctas_and_full_optimize_are_read_from_the_bucket(in_bucket):
    session, listed = in_bucket
    session.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    session.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    session.sql("INSERT OVERWRITE db.t VALUES (5, 'e'), (6, 'f')")
    assert rows(session.sql("SELECT id, v FROM db.t")) == [(5, "e"), (6, "f")]  # base files only
    assert rows(session.sql("SELECT count(*) FROM db.t")) == [(2,)]
    session.sql("INSERT INTO db.t VALUES (7, 'g'), (5, 'E')")
    session.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert rows(session.sql("SELECT id, v FROM db.t")) == [(5, "E"), (6, "f"), (7, "g")]
    assert rows(session.sql("SELECT v FROM db.t VERSION AS OF 2")) == [("e",), ("f",)]
    session.sql(
        "CREATE TABLE db.c (id BIGINT, v STRING, PRIMARY KEY (id)) AS SELECT * FROM db.t WHERE id > 5"
    )
    assert rows(session.sql("SELECT id, v FROM db.c")) == [(6, "f"), (7, "g")]
    assert any("/base/" in k and k.endswith(".parquet") for k in listed("t"))
    session.sql("DELETE FROM db.t WHERE id = 6")
    session.sql("UPDATE db.t SET v = 'G' WHERE id = 7")
    assert rows(session.sql("SELECT * FROM db.t VERSION BETWEEN 3 AND 5")) == [
        (6, None, "delete", 4),
        (7, "G", "upsert", 5),
    ]
    spark = session.spark
    spark.createDataFrame([(8, "h"), (5, "e5")], "id long, v string").write.format("arctic").mode(
        "append"
    ).save("db.t")
    assert rows(spark.read.format("arctic").load("db.t").select("id", "v")) == [(5, "e5"), (7, "G"), (8, "h")]
    assert any("/base/" in k and k.endswith(".parquet") for k in listed("c"))


def test_a_table_without_a_key_is_written_and_read_in_the_bucket(in_bucket):
    session, listed = in_bucket
    session.sql("CREATE TABLE db.p (id BIGINT, v STRING)")
    session.sql("INSERT INTO db.p VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    session.sql("DELETE FROM db.p WHERE id = 1")
    session.sql("UPDATE db.p SET v = 'Y' WHERE id = 2")
    assert rows(session.sql("SELECT id, v FROM db.p")) == [(2, "Y"), (3, "z")]
    assert rows(session.sql("SELECT count(*) FROM db.p")) == [(2,)]
    assert rows(session.sql("SELECT v FROM db.p WHERE id = 3")) == [("z",)]
    session.sql("INSERT INTO db.p VALUES (4, 'w')")
    assert rows(session.sql("SELECT * FROM db.p VERSION BETWEEN 3 AND 4")) == [(4, "w", "insert", 4)]
    session.sql("CALL system.optimize(table => 'db.p', mode => 'full')")
    assert rows(session.sql("SELECT id, v FROM db.p")) == [(2, "Y"), (3, "z"), (4, "w")]
    assert [r["rows"] for r in session.sql("SELECT * FROM db.p.files").collect()] == [3]  # one file now
    assert any(k.endswith(".parquet") for k in listed("p"))


def test_a_stream_writes_the_bucket_exactly_once_per_batch(in_bucket, tmp_path):
    """The sink's commit runs in another process than its tasks, with a writer made again there:
    it checks the files the tasks wrote where they wrote them (it listed another write's folder,
    found nothing, and failed every batch on an object store). With a sequence column, whose
    sidecars are written and removed in the bucket too."""
    session, listed = in_bucket
    spark = session.spark
    session.sql("CREATE TABLE db.s (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))")
    source = (
        tmp_path.parent / f"{tmp_path.name}-changes"
    )  # the fixture checks tmp_path holds only the catalog
    source.mkdir()
    for n in range(3):
        batch = [
            {"id": i, "v": f"v{n}", "seq": n, "op": "delete" if (i + n) % 5 == 0 else "upsert"}
            for i in range(8)
        ]
        (source / f"b{n}.json").write_text("\n".join(json.dumps(r) for r in batch))
        os.utime(source / f"b{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    changes = (
        spark.readStream.schema("id BIGINT, v STRING, seq BIGINT, op STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .withColumnRenamed("op", "_change_type")
    )
    query = (
        changes.writeStream.format("arctic")
        .option("checkpointLocation", str(source / "_checkpoint"))
        .option("sequenceColumn", "seq")
        .trigger(availableNow=True)
        .start("db.s")
    )
    query.awaitTermination()
    assert rows(session.sql("SELECT id, v FROM db.s")) == [(i, "v2") for i in range(8) if (i + 2) % 5 != 0]
    assert [r["version"] for r in session.sql("SELECT version FROM db.s.history").collect()] == [1, 2, 3]
    assert any(k.endswith(".parquet") and "/change/" in k for k in listed("s"))


def test_what_is_too_large_to_merge_in_memory_spills_in_spark_and_reads_and_writes_the_bucket(in_bucket):
    """With every in-memory limit at one byte, reads, VERSION BETWEEN and optimizing take the
    Spark plans that spill; their files still go through the catalog's file I/O (this Spark has no
    S3 connector at all), position deletes and change tags included."""
    session, listed = in_bucket
    spark = session.spark
    with pytest.raises(Exception, match="s3"):  # the premise: Spark itself cannot reach the bucket
        spark.read.parquet("s3://lake/none").collect()
    session.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) PARTITIONED BY (bucket(2, id)) "
        "TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '1', "
        "'self-optimizing.execute.in-memory-max-bytes' = '1')"
    )
    session.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    session.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # base files, written in tasks
    session.sql("INSERT INTO db.t VALUES (2, 'B'), (5, 'e')")
    session.sql("DELETE FROM db.t WHERE id = 3")
    expected = [(1, "a"), (2, "B"), (4, "d"), (5, "e")]
    assert rows(session.sql("SELECT id, v FROM db.t")) == expected
    assert rows(session.sql("SELECT v FROM db.t VERSION AS OF 1")) == [("a",), ("b",), ("c",), ("d",)]
    assert rows(session.sql("SELECT id, v, _change_type FROM db.t VERSION BETWEEN 1 AND 3")) == [
        (2, "B", "upsert"),
        (3, None, "delete"),
        (5, "e", "upsert"),
    ]
    session.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")  # position deletes on base files
    session.sql("UPDATE db.t SET v = 'E' WHERE id = 5")
    assert rows(session.sql("SELECT id, v FROM db.t")) == [(1, "a"), (2, "B"), (4, "d"), (5, "E")]
    session.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert rows(session.sql("SELECT id, v FROM db.t")) == [(1, "a"), (2, "B"), (4, "d"), (5, "E")]
    files = session.sql("SELECT path FROM db.t.files").collect()
    assert files and all(r["path"].startswith("s3://lake/") for r in files)
    assert any("/base/" in k and k.endswith(".parquet") for k in listed("t"))

    session.sql(
        "CREATE TABLE db.p (id BIGINT, v STRING) "
        "TBLPROPERTIES ('self-optimizing.execute.in-memory-max-bytes' = '1')"
    )
    session.sql("INSERT INTO db.p VALUES (1, 'x'), (2, 'y')")
    session.sql("INSERT INTO db.p VALUES (3, 'z')")
    assert rows(session.sql("SELECT * FROM db.p VERSION BETWEEN 1 AND 2")) == [(3, "z", "insert", 2)]
    session.sql("CALL system.optimize(table => 'db.p', mode => 'full')")
    assert rows(session.sql("SELECT id, v FROM db.p")) == [(1, "x"), (2, "y"), (3, "z")]
    assert len(session.sql("SELECT * FROM db.p.files").collect()) == 1


def test_two_catalogs_on_two_stores_work_side_by_side_in_one_driver(spark, tmp_path, s3, no_aws_environment):
    """Two catalogs whose warehouses are on two S3 servers (another endpoint, its own buckets: the
    second in a process of its own), opened in one driver: each table's files, written and read by
    the driver and by Spark tasks, reach the table's own store, whichever catalog was opened last."""
    endpoint, client = s3
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with s3_server("other", own_process=True) as other:
        first = arctic_sql.connect(
            spark=spark, catalog_properties=catalog_properties(tmp_path / "a", endpoint, "s3://lake/two")
        )
        second = arctic_sql.connect(
            spark=spark,
            catalog_properties=catalog_properties(tmp_path / "b", other.endpoint, "s3://other/wh"),
        )
        for session in (first, second):
            session.sql("CREATE DATABASE db")
            session.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
        first.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")  # the second catalog was opened last
        second.sql("INSERT INTO db.t VALUES (7, 'x')")
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # change rows written by tasks
        try:
            first.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")
        finally:
            spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        first.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # base files written in tasks
        first.sql("INSERT INTO db.t VALUES (4, 'd')")
        second.sql("UPDATE db.t SET v = 'X' WHERE id = 7")
        assert rows(first.sql("SELECT id, v FROM db.t")) == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
        assert rows(first.sql("SELECT id, v FROM db.t VERSION AS OF 1")) == [(1, "a"), (2, "b")]
        assert rows(second.sql("SELECT id, v FROM db.t")) == [(7, "X")]
        assert any(k.endswith(".parquet") for k in objects(client, "two/db/t/base/"))
        assert any(k.endswith(".parquet") for k in objects(other.client(), "wh/db/t/", bucket="other"))
        assert not [b["Name"] for b in client.list_buckets()["Buckets"] if b["Name"] == "other"]
        second.sql("DROP TABLE db.t PURGE")
        assert objects(other.client(), "wh/db/t/", bucket="other") == []
        first.sql("DROP TABLE db.t PURGE")
    assert objects(client, "two/db/t/") == []


def test_a_record_is_one_whole_object_put_with_no_folder_markers(s3, no_aws_environment, restore_storage):
    """Leases and process records are rewritten while others read them: on an object store one
    PUT replaces the object whole (a rename would be a copy and a delete, and folders are markers)."""
    from arctic_sql.table.files import storage

    endpoint, client = s3
    storage.configure(storage.StorageConfig.of(catalog_properties("/unused", endpoint, "s3://lake/records")))
    location = "s3://lake/records/t/optimizing/p-1.json"
    storage.replace_file(location, b'{"n": 1}')
    storage.replace_file(location, b'{"n": 2}')
    assert objects(client, "records/") == ["records/t/optimizing/p-1.json"]
    assert storage.json_records("s3://lake/records/t/optimizing") == [{"n": 2}]


def test_an_upsert_commit_and_a_full_read_make_few_requests(in_bucket, s3_counting):
    """Counted at the S3 server: a 1,000-row upsert commit (issue 27: about 95 requests before, 40 of
    them folder markers), its write lease, and a full read (a HEAD before every file's GET before)."""
    session, listed = in_bucket
    spark = session.spark
    session.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    spark.range(0, 3000).selectExpr("id", "cast(id AS STRING) AS v").createOrReplaceTempView("load")
    session.sql("INSERT OVERWRITE db.t SELECT * FROM load")
    spark.range(2500, 3500).selectExpr("id", "concat('u', id) AS v").createOrReplaceTempView("batch")
    session.sql(
        "INSERT INTO db.t SELECT * FROM batch"
    )  # change files for the read; its first commit warms up
    spark.range(2000, 3000).selectExpr("id", "concat('w', id) AS v").createOrReplaceTempView("batch")
    with s3_counting.log.measure() as commit:
        session.sql("INSERT INTO db.t SELECT * FROM batch")  # 1,000 rows, all of their keys exist
    # A PUT a file and nothing else, but the listing that finds the write's files before the commit
    # (14 requests before session 26: a HEAD and a LIST asking whether the new metadata file existed,
    # a HEAD and a GET of the parent's manifest list, which this process wrote itself).
    data = commit.count("PUT", "/change/data/")
    assert commit.count("PUT", "/writes/") == 2 and commit.count("DELETE") == 0, commit.table()
    assert commit.count("HEAD") == 0, commit.table()
    gets = [r for r in commit.requests if r.method == "GET"]
    assert len(gets) == 1 and "list-type=2" in gets[0].query, commit.table()  # the write's folder
    assert commit.count("PUT", "/change/metadata/") == 3, commit.table()  # manifest, list, metadata
    assert len(commit) == data + 6 <= 20, commit.table()
    assert not [r for r in commit.requests if r.path.endswith("/")], commit.table()  # no folder markers

    data_files = [k for k in listed("t") if k.endswith(".parquet")]  # nothing was optimized: all are live
    with s3_counting.log.measure() as read:
        assert session.sql("SELECT * FROM db.t").count() == 3500
    reads = [r for r in read.requests if r.path.endswith(".parquet")]
    assert read.count("HEAD", ".parquet") == 0, read.table()  # sizes come from the manifests
    assert {r.path.split("/", 2)[2] for r in reads} == set(data_files)
    assert len(reads) <= 2 * len(data_files), read.table()  # a footer and the columns of each
