"""spark.read.format("arctic"): the merged table, time travel, the change feed, pushed filters
pruning files, and options refused before any job runs."""

from __future__ import annotations

import datetime

import pytest
from pyspark.sql import datasource as sds

from arctic_sql.datasource import partitions
from arctic_sql.datasource.source import ArcticDataSource, CatalogSpec
from arctic_sql.errors import InvalidArgumentError, UnsupportedOperationError, VersionNotFoundError
from arctic_sql.spark import translate

pytestmark = pytest.mark.spark


def _sorted(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _read(spark, table: str = "db.t", **options):
    reader = spark.read.format("arctic")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(table)


def _fill(arctic):
    """Keyed on (id, p), partitioned by p, with change data not yet optimized."""
    arctic.sql("CREATE TABLE db.t (id BIGINT, p STRING, v STRING, PRIMARY KEY (id, p)) PARTITIONED BY (p)")
    arctic.sql("INSERT INTO db.t SELECT id, IF(id % 2 = 0, 'a', 'b'), CONCAT('v', id) FROM range(40)")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'a', 'two'), (3, 'b', 'three'), (100, 'c', 'new')")  # 2
    arctic.sql("DELETE FROM db.t WHERE id IN (4, 5)")  # 3
    arctic.sql("UPDATE db.t SET v = 'upd' WHERE id = 6")  # 4
    return arctic


@pytest.fixture(scope="module")
def shared(spark, tmp_path_factory):
    """A table the read-only tests share (a table costs seconds to write on this machine)."""
    import arctic_sql

    session = arctic_sql.connect(warehouse=str(tmp_path_factory.mktemp("dfread")), spark=spark)
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    return _fill(session)


@pytest.fixture
def table(arctic):
    return _fill(arctic)


def _commit_ms(arctic) -> dict[int, int]:
    return {
        r[0]: r[1]
        for r in arctic.sql("SELECT version, unix_millis(committed_at) FROM db.t.history").collect()
    }


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat()


def test_batch_read_equals_select_before_and_after_optimize(table, spark):
    df = _read(spark)
    assert df.columns == ["id", "p", "v"]
    assert _sorted(df) == _sorted(table.sql("SELECT * FROM db.t"))
    assert (4, "a", "v4") not in _sorted(df) and (6, "a", "upd") in _sorted(df)
    table.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    table.sql("INSERT INTO db.t VALUES (7, 'b', 'after')")  # change data over an optimized base
    assert _sorted(_read(spark)) == _sorted(table.sql("SELECT * FROM db.t"))
    assert _sorted(_read(spark, versionAsOf=3)) == _sorted(table.sql("SELECT * FROM db.t VERSION AS OF 3"))


def test_version_and_timestamp_as_of_equal_sql(shared, spark):
    table = shared
    ms = _commit_ms(table)
    for version in (1, 2, 3, 4):
        expected = _sorted(table.sql(f"SELECT * FROM db.t VERSION AS OF {version}"))
        assert _sorted(_read(spark, versionAsOf=version)) == expected
        assert _sorted(_read(spark, timestampAsOf=_iso(ms[version]))) == expected
    # Between two commits: the older one, as TIMESTAMP AS OF.
    assert _sorted(_read(spark, timestampAsOf=_iso(ms[3] + 1))) == _sorted(
        table.sql(f"SELECT * FROM db.t TIMESTAMP AS OF timestamp_millis({ms[3] + 1})")
    )


def test_change_feed_equals_sql_between_with_inclusive_start(shared, spark):
    table = shared
    ms = _commit_ms(table)
    for start, end in ((1, 4), (2, 3), (3, 4), (4, 4), (2, 2)):
        df = _read(spark, readChangeFeed="true", startingVersion=start, endingVersion=end)
        assert df.columns == ["id", "p", "v", "_change_type", "_change_version", "_commit_timestamp"]
        rows = _sorted(df)
        sql = _sorted(table.sql(f"SELECT * FROM db.t VERSION BETWEEN {start - 1} AND {end}"))
        assert [r[:5] for r in rows] == sql
        stamps = (
            {r[4]: int(r[5].replace(tzinfo=datetime.UTC).timestamp() * 1000) for r in rows}
            if spark.conf.get("spark.sql.session.timeZone") == "UTC"
            else None
        )
        if stamps is not None:
            assert stamps == {v: ms[v] for v in stamps}
    deletes = [r for r in _sorted(_read(spark, readChangeFeed="true", startingVersion=3)) if r[3] == "delete"]
    assert [(r[0], r[1], r[4]) for r in deletes] == [(4, "a", 3), (5, "b", 3)]
    by_time = _read(spark, readChangeFeed="true", startingTimestamp=_iso(ms[2]), endingTimestamp=_iso(ms[3]))
    assert [r[:5] for r in _sorted(by_time)] == _sorted(
        table.sql("SELECT * FROM db.t VERSION BETWEEN 1 AND 3")
    )


def test_change_feed_commit_timestamps_are_the_commits(shared, spark):
    table = shared
    ms = _commit_ms(table)
    rows = (
        _read(spark, readChangeFeed="true", startingVersion=1)
        .selectExpr("_change_version", "unix_millis(_commit_timestamp)")
        .distinct()
        .collect()
    )
    assert {r[0]: r[1] for r in rows} == {v: ms[v] for v in (1, 2, 3, 4)}


def _reader(table, options: dict[str, str]):
    """The reader Spark gets, planned on this side: the same code, and its files can be counted."""
    source = type("ArcticDataSource", (ArcticDataSource,), {"spec": CatalogSpec.of(table.catalog.iceberg)})
    instance = source({"path": "db.t", **options})
    return instance.reader(instance.schema())


def _files_read(table, pushed: list[sds.Filter]) -> int:
    reader = _reader(table, {})
    assert list(reader.pushFilters(pushed)) == pushed  # every filter goes back to Spark
    return partitions.file_count(reader.partitions())


def test_pushed_filters_prune_files_and_give_the_same_rows(shared, spark):
    table = shared
    everything = _files_read(table, [])
    by_partition = _files_read(table, [sds.EqualTo(("p",), "a")])
    by_key = _files_read(table, [sds.EqualTo(("id",), 6), sds.EqualTo(("p",), "a")])
    by_range = _files_read(table, [sds.GreaterThan(("id",), 1000)])
    assert everything > by_partition > by_key >= 1
    assert by_range < everything
    for where in (
        "p = 'a'",
        "id = 6 AND p = 'a'",
        "id IN (2, 3, 100)",
        "id > 30",
        "v = 'upd'",
        "v IS NULL",
        "p LIKE 'b%'",
    ):
        assert _sorted(_read(spark).where(where)) == _sorted(
            table.sql(f"SELECT * FROM db.t WHERE {where}")
        ), where
    # Spark hands over the filters: a key lookup plans fewer partitions than the whole table.
    assert (
        _read(spark).where("id = 6 AND p = 'a'").rdd.getNumPartitions() <= _read(spark).rdd.getNumPartitions()
    )


def _error(action) -> Exception:
    with pytest.raises(Exception) as caught:
        action()
    return translate(caught.value)


BAD_OPTIONS = [
    ({"bogus": "1"}, InvalidArgumentError, "Unknown option bogus"),
    ({"versionAsOf": "-1"}, InvalidArgumentError, "versionAsOf must be a whole number"),
    ({"versionAsOf": "1", "timestampAsOf": "2026-01-01"}, InvalidArgumentError, "exclude each other"),
    ({"timestampAsOf": "yesterday"}, InvalidArgumentError, "timestampAsOf must be a timestamp"),
    ({"readChangeFeed": "yes"}, InvalidArgumentError, "readChangeFeed must be true or false"),
    ({"readChangeFeed": "true"}, InvalidArgumentError, "needs startingVersion"),
    ({"maxFilesPerTrigger": "2"}, InvalidArgumentError, "only a stream"),
    ({"versionAsOf": "99"}, VersionNotFoundError, "Version 99 of db.t does not exist"),
    ({"timestampAsOf": "2000-01-01"}, VersionNotFoundError, "before the oldest retained commit"),
    (
        {"readChangeFeed": "true", "startingVersion": "9"},
        VersionNotFoundError,
        "startingVersion 9 is after the newest version, 4",
    ),
    ({"readChangeFeed": "true", "startingVersion": "5"}, VersionNotFoundError, "after the newest version, 4"),
    (
        {"readChangeFeed": "true", "startingVersion": "3", "endingVersion": "2"},
        InvalidArgumentError,
        "startingVersion 3 is after endingVersion 2",
    ),
    (
        {"readChangeFeed": "true", "startingVersion": "1", "endingTimestamp": "2000-01-01"},
        InvalidArgumentError,
        "startingVersion 1 is after endingTimestamp 2000-01-01",
    ),
]


def test_bad_options_are_one_line_errors_before_any_job(shared, spark):
    tracker = spark.sparkContext.statusTracker()
    for options, kind, names in BAD_OPTIONS:
        jobs = tracker.getJobIdsForGroup()
        error = _error(lambda options=options: _read(spark, **options).collect())
        assert isinstance(error, kind) and names in str(error) and "\n" not in str(error), (options, error)
        assert tracker.getJobIdsForGroup() == jobs, options


def test_missing_table_expired_start_and_the_in_memory_limit(table, spark):
    from arctic_sql.table.maintenance import expiration

    error = _error(lambda: _read(spark, "db.nope").collect())
    assert "db.nope" in str(error) and "\n" not in str(error)
    table.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    expiration.expire_snapshots(table.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    error = _error(lambda: _read(spark, readChangeFeed="true", startingVersion=1).collect())
    assert isinstance(error, VersionNotFoundError) and "has expired" in str(error) and "\n" not in str(error)
    table.sql("ALTER TABLE db.t SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '10')")
    assert _sorted(_read(spark)) == _sorted(table.sql("SELECT * FROM db.t"))  # clean nodes: read file by file
    table.sql("INSERT INTO db.t VALUES (1, 'b', 'changed')")
    error = _error(lambda: _read(spark).collect())
    assert isinstance(error, UnsupportedOperationError) and "merge-on-read.in-memory-max-bytes" in str(error)


def test_a_table_without_a_key_reads_and_feeds_inserts(arctic, spark):
    arctic.sql("CREATE TABLE db.log (id BIGINT, msg STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a'), (2, 'b')")  # 1
    arctic.sql("INSERT INTO db.log VALUES (2, 'b'), (3, 'c')")  # 2: duplicates stay, there is no key
    assert _sorted(_read(spark, "db.log")) == _sorted(arctic.sql("SELECT * FROM db.log"))
    feed = _read(spark, "db.log", readChangeFeed="true", startingVersion=2)
    assert [r[:4] for r in _sorted(feed)] == _sorted(
        arctic.sql("SELECT * FROM db.log VERSION BETWEEN 1 AND 2")
    )
    assert {r[2] for r in _sorted(feed)} == {"insert"}
