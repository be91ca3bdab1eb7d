"""Tags: a name for a version, read in SQL and the DataFrame reader, kept through expiration."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError

pytestmark = pytest.mark.spark

V1 = [(1, "a"), (2, "b")]
V3 = [(2, "B"), (3, "c")]


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


@pytest.fixture
def tagged(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    arctic.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")
    arctic.sql("DELETE FROM db.t WHERE id = 1")
    arctic.sql("ALTER TABLE db.t CREATE TAG first_load AS OF VERSION 1")
    arctic.sql("ALTER TABLE db.t CREATE TAG q3 RETAIN 30 DAYS")  # the newest version, 3
    return arctic


def test_a_tag_reads_its_version_in_sql_and_the_dataframe_reader(tagged):
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'first_load'") == V1
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'q3'") == V3
    assert _rows(tagged, "SELECT id, v FROM db.t VERSION BETWEEN 'first_load' AND 'q3'") == [
        (1, None),
        (2, "B"),
        (3, "c"),
    ]
    read = tagged.spark.read.format("arctic").option("versionAsOf", "first_load").load("db.t")
    assert sorted(tuple(r) for r in read.select("id", "v").collect()) == V1
    refs = {r["name"]: r for r in tagged.sql("SELECT * FROM db.t.refs").collect()}
    assert {n: (r["type"], r["version"]) for n, r in refs.items()} == {
        "main": ("BRANCH", 3),
        "first_load": ("TAG", 1),
        "q3": ("TAG", 3),
    }
    kept_days = (refs["q3"]["retained_until"] - refs["q3"]["created_at"]).total_seconds() / 86400
    assert kept_days == 30 and refs["first_load"]["retained_until"] is None


def test_tags_are_created_replaced_and_dropped_as_iceberg_says(tagged):
    with pytest.raises(
        InvalidArgumentError, match=r"^Tag 'q3' of db.t already exists \(version 3\); REPLACE TAG"
    ):
        tagged.sql("ALTER TABLE db.t CREATE TAG q3 AS OF VERSION 2")
    tagged.sql("ALTER TABLE db.t CREATE TAG IF NOT EXISTS q3 AS OF VERSION 2")  # kept as it was
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'q3'") == V3
    tagged.sql("ALTER TABLE db.t REPLACE TAG q3 AS OF VERSION 1")
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'q3'") == V1
    with pytest.raises(
        VersionNotFoundError, match=r"^Tag 'nope' of db.t does not exist; CREATE TAG makes it"
    ):
        tagged.sql("ALTER TABLE db.t REPLACE TAG nope")
    tagged.sql("ALTER TABLE db.t CREATE OR REPLACE TAG nope AS OF VERSION 2")
    tagged.sql("ALTER TABLE db.t DROP TAG nope")
    tagged.sql("ALTER TABLE db.t DROP TAG IF EXISTS nope")
    with pytest.raises(
        VersionNotFoundError, match=r"^Tag 'nope' of db.t does not exist \(tags: first_load, q3; "
    ):
        tagged.sql("SELECT * FROM db.t VERSION AS OF 'nope'").collect()
    with pytest.raises(VersionNotFoundError, match=r"^Version 9 of db.t does not exist"):
        tagged.sql("ALTER TABLE db.t CREATE TAG later AS OF VERSION 9")
    with pytest.raises(InvalidArgumentError, match=r"^'main' is not a tag name"):
        tagged.sql("ALTER TABLE db.t CREATE TAG main")
    with pytest.raises(InvalidArgumentError, match=r"^Table property 'arctic.tag.q3' is reserved"):
        tagged.sql("ALTER TABLE db.t SET TBLPROPERTIES ('arctic.tag.q3' = '{}')")
    assert [r["name"] for r in tagged.sql("SELECT name FROM db.t.refs").collect()] == [
        "main",
        "first_load",
        "q3",
    ]


def test_rollback_to_a_tag_makes_its_rows_current(tagged):
    tagged.sql("CALL system.rollback_to_version('db.t', 'first_load')")
    assert _rows(tagged, "SELECT * FROM db.t") == V1
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'q3'") == V3  # the tags stay where they were
    with pytest.raises(
        InvalidArgumentError,
        match=r"^system.rollback_to_version: parameter 'version' must be a "
        r"version number or a tag's name, got '1x'",
    ):
        tagged.sql("CALL system.rollback_to_version('db.t', '1x')")


def test_expiration_keeps_a_tagged_version_until_the_tag_goes(tagged):
    from arctic_sql.table.writing import tag_writes

    tagged.sql("INSERT INTO db.t VALUES (4, 'd')")
    tagged.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    tagged.sql("ALTER TABLE db.t DROP TAG q3")
    expire = "CALL system.expire_snapshots(table => 'db.t', older_than => now() + INTERVAL 1 DAY, retain_last => 1)"
    tagged.sql(expire)
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'first_load'") == V1
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 2") == [(1, "a"), (2, "B"), (3, "c")]
    # A tag whose retention has ended is dropped by the next expiration, and its version with it.
    tag_writes.create(tagged.table("db.t"), "brief", 4, retain_ms=1)
    tagged.sql("ALTER TABLE db.t DROP TAG first_load")
    tagged.sql("INSERT INTO db.t VALUES (5, 'e')")  # the tag's millisecond has passed by now
    tagged.sql(expire)
    assert [r["name"] for r in tagged.sql("SELECT name FROM db.t.refs").collect()] == ["main"]
    with pytest.raises(VersionNotFoundError, match=r"^Version 4 of db.t has expired"):
        tagged.sql("SELECT * FROM db.t VERSION AS OF 4").collect()
    assert _rows(tagged, "SELECT * FROM db.t") == [(2, "B"), (3, "c"), (4, "d"), (5, "e")]


def test_the_change_feed_and_a_stream_start_and_end_at_tags(tagged, tmp_path):
    feed = (
        tagged.spark.read.format("arctic")
        .option("readChangeFeed", "true")
        .option("startingVersion", "first_load")
        .option("endingVersion", "q3")
        .load("db.t")
    )
    by_number = (
        tagged.spark.read.format("arctic")
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .option("endingVersion", 3)
        .load("db.t")
    )
    assert sorted(map(tuple, feed.collect())) == sorted(map(tuple, by_number.collect()))
    assert {(r["id"], r["_change_type"]) for r in feed.collect()} == {
        (1, "delete"),
        (2, "upsert"),
        (3, "upsert"),
    }

    stream = (
        tagged.spark.readStream.format("arctic")
        .option("readChangeFeed", "true")
        .option("startingVersion", "q3")
        .load("db.t")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("from_tag")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    query.awaitTermination()
    assert [(r["id"], r["_change_type"]) for r in tagged.spark.table("from_tag").collect()] == [(1, "delete")]

    with pytest.raises(
        Exception, match=r"Tag 'nope' of db.t does not exist \(tags: first_load, q3"
    ):  # Spark wraps it
        (
            tagged.spark.read.format("arctic")
            .option("readChangeFeed", "true")
            .option("startingVersion", "nope")
            .load("db.t")
            .collect()
        )


def test_a_tag_waits_for_a_running_expiration_and_an_expiration_keeps_all_while_a_tag_is_made(
    tagged, monkeypatch
):
    from arctic_sql.errors import CommitConflictError
    from arctic_sql.table.maintenance import expiration
    from arctic_sql.table.reading import tags
    from arctic_sql.table.records import leases
    from arctic_sql.table.writing import tag_writes

    table = tagged.table("db.t")
    tagged.sql("ALTER TABLE db.t DROP TAG first_load")
    tagged.sql("ALTER TABLE db.t DROP TAG q3")
    # An expiration in flight (its lease written, its plan made without the tag): the tag does not
    # land beside it, since the expiration would remove its version.
    monkeypatch.setattr(tag_writes, "WAIT_FOR_EXPIRATION_S", 0.0)
    with leases.writing(table, tags.EXPIRING):
        with pytest.raises(
            CommitConflictError, match=r"^Tag 'audit' of db.t: an expiration of the table has run"
        ):
            tagged.sql("ALTER TABLE db.t CREATE TAG audit AS OF VERSION 1")
    assert [r["name"] for r in tagged.sql("SELECT name FROM db.t.refs").collect()] == ["main"]

    # A tag being made (its lease written, its version not yet recorded): the expiration keeps every version.
    monkeypatch.setattr(expiration, "TAG_WAIT_S", 0.0)
    with leases.writing(table, tags.TAGGING):
        kept = expiration.expire_snapshots(
            tagged.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1
        )
    assert kept.expired_snapshots == 0 and kept.oldest_version == 1
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 1") == V1

    tagged.sql("ALTER TABLE db.t CREATE TAG audit AS OF VERSION 1")  # no expiration runs now
    assert _rows(tagged, "SELECT * FROM db.t VERSION AS OF 'audit'") == V1
