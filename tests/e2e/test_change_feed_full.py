"""The full change feed (changeFeedMode=full, table_changes): Delta's rows per change per version,
pre-images from the version before, nothing for optimizing, the stream equal to the batch read, and
one-line errors for a bad mode and for ranges crossing an overwrite."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.spark import translate

pytestmark = pytest.mark.spark


def _full(spark, **options) -> list[tuple]:
    reader = spark.read.format("arctic").option("readChangeFeed", "true").option("changeFeedMode", "full")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return _rows(reader.load("db.t"))


def _rows(df) -> list[tuple]:
    """(version, id, change type, v), in Delta's order within a version: pre-image before post-image."""
    order = {"update_preimage": 0, "update_postimage": 1}
    found = [(r["_change_version"], r["id"], r["_change_type"], r["v"]) for r in df.collect()]
    return sorted(found, key=lambda r: (r[0], r[1], order.get(r[2], 0)))


def _error(action) -> Exception:
    with pytest.raises(Exception) as caught:
        action()
    return translate(caught.value)


@pytest.fixture
def changed(arctic):
    """Six versions of inserts, updates, upserts, deletes and a MERGE, with optimizing between them."""
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")  # 1
    arctic.sql("UPDATE db.t SET v = 'b2' WHERE id = 2")  # 2
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # no version: moves data
    arctic.sql("DELETE FROM db.t WHERE id IN (3, 9)")  # 3: 9 was never there
    arctic.sql("INSERT INTO db.t VALUES (1, 'a2'), (4, 'd')")  # 4: an upsert of 1, an insert of 4
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    arctic.sql(
        "MERGE INTO db.t USING (SELECT * FROM VALUES (2, 'b3'), (4, NULL), (5, 'e') AS s(id, v)) s "
        "ON db.t.id = s.id WHEN MATCHED AND s.v IS NULL THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT *"
    )  # 5
    arctic.sql("INSERT INTO db.t VALUES (3, 'c2')")  # 6: deleted at 3, back again
    return arctic


EXPECTED = [
    (1, 1, "insert", "a"),
    (1, 2, "insert", "b"),
    (1, 3, "insert", "c"),
    (2, 2, "update_preimage", "b"),
    (2, 2, "update_postimage", "b2"),
    (3, 3, "delete", "c"),
    (4, 1, "update_preimage", "a"),
    (4, 1, "update_postimage", "a2"),
    (4, 4, "insert", "d"),
    (5, 2, "update_preimage", "b2"),
    (5, 2, "update_postimage", "b3"),
    (5, 4, "delete", "d"),
    (5, 5, "insert", "e"),
    (6, 3, "insert", "c2"),
]


def test_every_change_of_every_version_with_its_pre_image(changed, spark):
    assert _full(spark, startingVersion=1) == EXPECTED
    # A range starting later finds its first pre-images in the optimized base at its start.
    for start, end in ((2, 6), (4, 5), (5, 5), (3, 4)):
        assert _full(spark, startingVersion=start, endingVersion=end) == [
            r for r in EXPECTED if start <= r[0] <= end
        ]
    rows = spark.read.format("arctic").option("readChangeFeed", "true").option("changeFeedMode", "FULL")
    assert rows.load("db.t").columns == ["id", "v", "_change_type", "_change_version", "_commit_timestamp"]


def test_latest_stays_the_default_mode(changed, spark):
    reader = spark.read.format("arctic").option("readChangeFeed", "true").option("startingVersion", 4)
    latest = sorted((r["id"], r["_change_type"]) for r in reader.load("db.t").collect())
    assert latest == [(1, "upsert"), (2, "upsert"), (3, "upsert"), (4, "delete"), (5, "upsert")]
    explicit = reader.option("changeFeedMode", "latest").load("db.t")
    assert sorted((r["id"], r["_change_type"]) for r in explicit.collect()) == latest


def test_optimizing_gives_no_changes(changed, spark):
    changed.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _full(spark, startingVersion=1) == EXPECTED
    with pytest.raises(Exception) as caught:  # nothing after the newest version: optimizing made none
        _full(spark, startingVersion=7)
    assert isinstance(translate(caught.value), VersionNotFoundError)


def test_table_changes_in_sql_is_the_full_feed_with_inclusive_bounds(changed, spark):
    assert _rows(changed.sql("SELECT * FROM table_changes('db.t', 1, 6)")) == EXPECTED
    assert _rows(changed.sql("SELECT * FROM table_changes('db.t', 4)")) == [r for r in EXPECTED if r[0] >= 4]
    changed.sql("ALTER TABLE db.t CREATE TAG q AS OF VERSION 5")
    picked = changed.sql(
        "SELECT c.* FROM table_changes('db.t', 2, 'q') AS c WHERE _change_type = 'delete' ORDER BY id"
    )
    assert [(r["id"], r["v"], r["_change_version"]) for r in picked.collect()] == [(3, "c", 3), (4, "d", 5)]
    for sql, kind, words in (
        ("SELECT * FROM table_changes('db.t', 5, 2)", InvalidArgumentError, "start version 5 is after"),
        ("SELECT * FROM table_changes('db.t')", InvalidArgumentError, "takes a table name, a start"),
        ("SELECT * FROM table_changes('db.t', 1, 99)", VersionNotFoundError, "outside the table's history"),
    ):
        error = _error(lambda sql=sql: changed.sql(sql).collect())
        assert isinstance(error, kind) and words in str(error) and "\n" not in str(error)


def test_table_changes_takes_timestamps_as_delta_does(changed, spark):
    """A start instant takes the versions committed at or after it, an end instant those at or
    before it: a string in the session's time zone, or any timestamp expression."""
    at = {
        r["version"]: r["at"]
        for r in changed.sql(
            "SELECT version, date_format(committed_at, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS at FROM db.t.history"
        ).collect()
    }
    between = changed.sql(f"SELECT * FROM table_changes('db.t', '{at[2]}', '{at[4]}')")
    assert _rows(between) == [r for r in EXPECTED if 2 <= r[0] <= 4]
    since = changed.sql(f"SELECT * FROM table_changes('db.t', timestamp'{at[5]}' - INTERVAL 1 MICROSECOND)")
    assert _rows(since) == [r for r in EXPECTED if r[0] >= 5]  # committed after the instant: 5 and 6
    early = changed.sql("SELECT * FROM table_changes('db.t', '2000-01-01', 2)")
    assert _rows(early) == [r for r in EXPECTED if r[0] <= 2]
    error = _error(lambda: changed.sql("SELECT * FROM table_changes('db.t', '2999-01-01')").collect())
    assert isinstance(error, InvalidArgumentError) and "no version was committed between its bounds" in str(
        error
    )


def _stream(spark, checkpoint: str, **options) -> list[tuple]:
    batches: list = []
    reader = (
        spark.readStream.format("arctic").option("readChangeFeed", "true").option("changeFeedMode", "full")
    )
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (
        reader.load("db.t")
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(lambda df, _: batches.extend(_rows(df)))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(
        batches, key=lambda r: (r[0], r[1], {"update_preimage": 0, "update_postimage": 1}.get(r[2], 0))
    )


def test_a_stream_in_full_mode_sees_the_batch_rows(changed, spark, tmp_path):
    # A micro-batch a version: every batch finds its pre-images at its own start.
    assert _stream(spark, str(tmp_path / "one"), startingVersion=1, maxVersionsPerTrigger=1) == EXPECTED
    assert _stream(spark, str(tmp_path / "all"), startingVersion=2) == _full(spark, startingVersion=2)
    # Without a start the stream begins with the table's rows, as inserts (Delta's stream does).
    first = _stream(spark, str(tmp_path / "rows"))
    assert first == [
        (6, 1, "insert", "a2"),
        (6, 2, "insert", "b3"),
        (6, 3, "insert", "c2"),
        (6, 5, "insert", "e"),
    ]


def test_an_overwrite_is_refused_unless_a_stream_skips_it(changed, spark, tmp_path):
    changed.sql("INSERT OVERWRITE db.t VALUES (1, 'over'), (7, 'g')")  # 7
    changed.sql("INSERT INTO db.t VALUES (1, 'after')")  # 8
    error = _error(lambda: _full(spark, startingVersion=6))
    assert isinstance(error, VersionNotFoundError) and "crosses the OVERWRITE at version 7" in str(error)
    assert _full(spark, startingVersion=8) == [
        (8, 1, "update_preimage", "over"),
        (8, 1, "update_postimage", "after"),
    ]
    # The skipped overwrite's rows are where the changes after it start from.
    assert _stream(spark, str(tmp_path / "skip"), startingVersion=6, skipOverwrites="true") == [
        (6, 3, "insert", "c2"),
        (8, 1, "update_preimage", "over"),
        (8, 1, "update_postimage", "after"),
    ]


def test_bad_modes_are_refused_in_one_line(changed, spark):
    reader = spark.read.format("arctic").option("readChangeFeed", "true").option("startingVersion", 1)
    error = _error(lambda: reader.option("changeFeedMode", "all").load("db.t").collect())
    assert isinstance(error, InvalidArgumentError)
    assert str(error) == "Option changeFeedMode must be latest or full, got 'all'"
    error = _error(
        lambda: spark.read.format("arctic").option("changeFeedMode", "full").load("db.t").collect()
    )
    assert isinstance(error, InvalidArgumentError) and "needs readChangeFeed=true" in str(error)


def test_a_table_without_a_key_feeds_its_appends_as_inserts(arctic, spark):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a')")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    expected = [(1, 1, "insert", "a"), (2, 1, "insert", "a"), (2, 2, "insert", "b")]
    assert _full(spark, startingVersion=1) == expected
    assert _rows(arctic.sql("SELECT * FROM table_changes('db.t', 1)")) == expected


def _table_changes(arctic, start: int, end: int):
    return arctic.sql(f"SELECT * FROM table_changes('db.t', {start}, {end})")


def _python_steps(df) -> bool:
    return "MapInArrow" in df._jdf.queryExecution().optimizedPlan().toString()


def test_a_small_change_set_looks_its_pre_images_up_by_key(arctic):
    """A few changed keys: the feed is computed in the driver (no Python task in table_changes'
    plan), and their pre-images read only the files of the changed keys' tree nodes, not every file
    of the range's start (preimages.py)."""
    from arctic_sql.table.format import versions
    from arctic_sql.table.reading import preimages
    from arctic_sql.table.reading.changes import Range
    from arctic_sql.table.reading.full_changes import plan_full

    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '8')"
    )
    arctic.sql("INSERT INTO db.t SELECT id, 'a' FROM range(400)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    arctic.sql("INSERT INTO db.t VALUES (7, 'b'), (1000, 'new')")
    table = arctic.context.table("db.t")
    history = versions.history(table.base, table.change)
    plan = plan_full(table, Range(history.commits[-2].version, history.latest), history)
    feed = preimages.read_local(table, plan, {})
    assert feed is not None
    read = [f for p in feed.lookups for f in p.base_files]
    before = [f for f in plan.before if f.store == "base"]
    assert len(before) == 8 and len(read) == 1 and read[0] in before  # key 7's node alone
    df = _table_changes(arctic, history.latest, history.latest)
    assert not _python_steps(df)
    found = sorted((r["id"], r["_change_type"], r["v"]) for r in df.collect())
    assert found == [(7, "update_postimage", "b"), (7, "update_preimage", "a"), (1000, "insert", "new")]


def test_many_keys_are_looked_up_with_one_plan_that_opens_what_chunked_lookups_open(arctic):
    """More changed keys than a point lookup takes (MAX_LOOKUP_KEYS): the feed's pre-images come from
    one lookup.plan_many, which opens the files the per-chunk plan_lookup of the same keys opens
    (their nodes' files whose key bounds hold one, a composite key) and gives the same rows."""
    from arctic_sql.table.format import versions
    from arctic_sql.table.format.keyhash import MAX_LOOKUP_KEYS
    from arctic_sql.table.reading import lookup, preimages
    from arctic_sql.table.reading.changes import Range
    from arctic_sql.table.reading.full_changes import plan_full

    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, part STRING, v STRING, PRIMARY KEY (id, part)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '8', 'change.file-index.hash-bucket' = '4')"
    )
    arctic.sql("INSERT INTO db.t SELECT id, CAST(id % 3 AS STRING), 'a' FROM range(6000)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    arctic.sql(
        "INSERT INTO db.t SELECT id, CAST(id % 3 AS STRING), 'b' FROM range(0, 6000, 3)"
    )  # in change files
    # 2,600 keys: 2,000 updated, 600 new (beyond every base file's bounds)
    arctic.sql("INSERT INTO db.t SELECT id, CAST(id % 3 AS STRING), 'c' FROM range(4000, 6600)")
    table = arctic.context.table("db.t")
    history = versions.history(table.base, table.change)
    plan = plan_full(table, Range(history.commits[-2].version, history.latest), history)
    feed = preimages.read_local(table, plan, {})
    assert feed is not None and len(feed.lookups) == 1  # one plan for all the keys
    keys = [(i, str(i % 3)) for i in range(4000, 6600)]
    assert len(keys) > 2 * MAX_LOOKUP_KEYS
    version = history.commits[-2].version
    many = lookup.plan_many(table, version, feed.rows.select(["id", "part"]))
    assert many is not None
    chunked, rows = set(), []
    for i in range(0, len(keys), MAX_LOOKUP_KEYS):
        chunk = lookup.plan_lookup(table, version, keys[i : i + MAX_LOOKUP_KEYS])
        assert chunk is not None
        chunked |= {f.path for f in [*chunk.base_files, *chunk.change_files]}
        rows += lookup.read_keys(table, chunk, keys[i : i + MAX_LOOKUP_KEYS]).to_pylist()
    opened = {f.path for f in [*many.plan.base_files, *many.plan.change_files]}
    assert opened == chunked == {f.path for f in [*feed.lookups[0].base_files, *feed.lookups[0].change_files]}
    found = lookup.read_many(table, many).to_pylist()
    assert sorted(found, key=repr) == sorted(rows, key=repr) and len(found) == 2000


def test_the_driver_and_the_spark_feed_give_the_same_rows(changed, monkeypatch):
    """Over deletes, MERGE, optimizing and a key coming back: the feed computed in the driver equals
    the one read in Spark tasks (what a change set over ``MAX_CHANGE_ROWS`` gets), range by range."""
    from arctic_sql.table.reading import preimages

    ranges = ((1, 6), (2, 6), (4, 5), (3, 4), (5, 6))
    local = {r: _rows(_table_changes(changed, *r)) for r in ranges}
    assert not _python_steps(_table_changes(changed, 1, 6))
    monkeypatch.setattr(preimages, "MAX_CHANGE_ROWS", 0)
    assert _python_steps(_table_changes(changed, 1, 6))
    assert {r: _rows(_table_changes(changed, *r)) for r in ranges} == local
    assert local[(1, 6)] == EXPECTED
