"""readStream.format("arctic"): a table's changes as a stream. Rounds of availableNow restarted
from their checkpoint deliver every change once (a dict of them is the table), rate limits cut
micro-batches at whole versions, and overwrites, expired starts and bad options are one-line errors."""

from __future__ import annotations

import random

import pytest

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.spark import translate

pytestmark = pytest.mark.spark

KEY = ["id"]


def _stream(spark, checkpoint: str, table: str = "db.t", **options) -> list[tuple[int, list]]:
    """One availableNow run from ``checkpoint``: the micro-batches it delivered, as (batch id, rows)."""
    batches: list[tuple[int, list]] = []
    reader = spark.readStream.format("arctic").option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (
        reader.load(table)
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(lambda df, batch_id: batches.append((batch_id, [r.asDict() for r in df.collect()])))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def _apply(state: dict, rows: list[dict]) -> None:
    for row in rows:
        key = row["id"]
        if row["_change_type"] == "delete":
            state.pop(key, None)
        else:
            state[key] = row["v"]


def _table(arctic) -> dict:
    return {r.id: r.v for r in arctic.sql("SELECT id, v FROM db.t").collect()}


def _error(action) -> Exception:
    with pytest.raises(Exception) as caught:
        action()
    return translate(caught.value)


def _random_round(arctic, rng: random.Random, commits: int) -> None:
    for _ in range(commits):
        if rng.random() < 0.7:
            rows = ", ".join(f"({k}, 'v{k}_{rng.randrange(1000)}')" for k in rng.sample(range(30), 4))
            arctic.sql(f"INSERT INTO db.t VALUES {rows}")
        else:
            arctic.sql(
                f"DELETE FROM db.t WHERE id IN ({', '.join(str(k) for k in rng.sample(range(30), 3))})"
            )


def test_rounds_from_a_checkpoint_deliver_every_change_once(arctic, spark, tmp_path):
    rng = random.Random(7)
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    _random_round(arctic, rng, 3)
    checkpoint = str(tmp_path / "ck")
    state: dict = {}
    seen: set[tuple[int, int]] = set()

    def consume(batches: list[tuple[int, list]]) -> None:
        for _, rows in batches:
            for row in rows:
                change = (row["id"], row["_change_version"])
                assert change not in seen, change  # nothing arrives twice across restarts
                seen.add(change)
            _apply(state, rows)
        assert state == _table(arctic)

    first = _stream(spark, checkpoint)
    assert len(first) == 1 and {r["_change_type"] for r in first[0][1]} == {"upsert"}  # the rows, as upserts
    consume(first)
    _random_round(arctic, rng, 2)
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")  # between changes
    _random_round(arctic, rng, 1)
    consume(_stream(spark, checkpoint))
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # moves data: no changes
    assert _stream(spark, checkpoint) == []
    _random_round(arctic, rng, 2)
    consume(_stream(spark, checkpoint))
    assert len(seen) > len(state)


@pytest.fixture
def five_versions(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    for version in range(1, 6):
        arctic.sql(f"INSERT INTO db.t VALUES ({version}, 'a'), ({version + 10}, 'b')")  # 2 rows a version
    return arctic


def test_rate_limits_take_whole_versions(five_versions, spark, tmp_path):
    def sizes(**options) -> list[list[int]]:
        batches = _stream(
            spark, str(tmp_path / str(len(list(tmp_path.iterdir())))), startingVersion=1, **options
        )
        return [sorted({r["_change_version"] for r in rows}) for _, rows in batches]

    assert sizes(maxVersionsPerTrigger=2) == [[1, 2], [3, 4], [5]]
    assert sizes(maxRowsPerTrigger=5) == [[1, 2], [3, 4], [5]]  # 2 rows a version: 4 fit, 6 do not
    assert sizes(maxFilesPerTrigger=1) == [[1], [2], [3], [4], [5]]  # at least one version, if over
    change_bytes = five_versions.sql(
        "SELECT sum(size_bytes) FROM db.t.files WHERE store = 'change'"
    ).collect()[0][0]
    two_and_a_half = str(change_bytes * 5 // 10)  # the five versions' files are alike in size
    assert sizes(maxBytesPerTrigger=two_and_a_half) == [[1, 2], [3, 4], [5]]
    assert sizes(maxBytesPerTrigger="1") == [[1], [2], [3], [4], [5]]


def test_starting_version_latest_and_timestamp(five_versions, spark, tmp_path):
    arctic = five_versions
    # Spark runs a first, empty micro-batch for a new checkpoint.
    assert [rows for _, rows in _stream(spark, str(tmp_path / "latest"), startingVersion="latest")] in (
        [],
        [[]],
    )
    arctic.sql("INSERT INTO db.t VALUES (99, 'new')")  # 6
    batches = _stream(spark, str(tmp_path / "latest"), startingVersion="latest")
    assert [(r["id"], r["_change_version"]) for _, rows in batches for r in rows] == [(99, 6)]
    ms = {
        r[0]: r[1]
        for r in arctic.sql("SELECT version, unix_millis(committed_at) FROM db.t.history").collect()
    }
    import datetime

    at = datetime.datetime.fromtimestamp(ms[5] / 1000, tz=datetime.UTC).isoformat()
    batches = _stream(spark, str(tmp_path / "ts"), startingTimestamp=at)
    assert sorted({r["_change_version"] for _, rows in batches for r in rows}) == [5, 6]


def test_overwrite_fails_the_stream_unless_skipped(five_versions, spark, tmp_path):
    arctic = five_versions
    arctic.sql("INSERT OVERWRITE db.t VALUES (1, 'over')")  # 6
    arctic.sql("INSERT INTO db.t VALUES (50, 'after')")  # 7
    error = _error(lambda: _stream(spark, str(tmp_path / "fail"), startingVersion=5))
    assert (
        isinstance(error, VersionNotFoundError)
        and "version 6" in str(error)
        and "skipOverwrites" in str(error)
    )
    assert "\n" not in str(error)
    batches = _stream(spark, str(tmp_path / "skip"), startingVersion=5, skipOverwrites="true")
    assert sorted((r["id"], r["_change_version"]) for _, rows in batches for r in rows) == [
        (5, 5),
        (15, 5),
        (50, 7),
    ]


def test_a_stream_fails_on_another_table_of_its_name_or_changed_columns(five_versions, spark, tmp_path):
    arctic = five_versions
    checkpoint = str(tmp_path / "c")
    assert len(_stream(spark, checkpoint)) == 1  # the table's rows
    # Renamed: the next changes would come out with v NULL. The stream fails; a restart reads on.
    arctic.sql("ALTER TABLE db.t RENAME COLUMN v TO label")
    arctic.sql("INSERT INTO db.t VALUES (1, 'renamed')")
    query = (
        spark.readStream.format("arctic")
        .option("readChangeFeed", "true")
        .load("db.t")
        .writeStream.option("checkpointLocation", checkpoint)
        .format("noop")
        .start()
    )
    arctic.sql("ALTER TABLE db.t ADD COLUMNS (extra INT)")
    arctic.sql("INSERT INTO db.t VALUES (2, 'added', 7)")
    error = _error(query.processAllAvailable)
    assert isinstance(error, InvalidArgumentError) and "columns of db.t changed" in str(error), error
    assert "\n" not in str(error)
    batches = _stream(spark, checkpoint)
    assert sorted((r["id"], r["label"], r["extra"]) for _, rows in batches for r in rows) == [
        (1, "renamed", None),
        (2, "added", 7),
    ]
    # Dropped and created again: its versions start over, and the checkpoint's offsets mean nothing.
    arctic.sql("DROP TABLE db.t PURGE")
    arctic.sql("CREATE TABLE db.t (id BIGINT, label STRING, extra INT, PRIMARY KEY (id))")
    for version in range(1, 8):
        arctic.sql(f"INSERT INTO db.t VALUES ({version}, 'new', 0)")
    error = _error(lambda: _stream(spark, checkpoint))
    assert isinstance(error, InvalidArgumentError) and "dropped and created again" in str(error), error


def test_expired_start_and_bad_options_are_one_line_errors(five_versions, spark, tmp_path):
    from arctic_sql.table.maintenance import expiration

    arctic = five_versions
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    error = _error(lambda: _stream(spark, str(tmp_path / "old"), startingVersion=1))
    assert isinstance(error, VersionNotFoundError) and "smallest startingVersion still readable is 6" in str(
        error
    )
    for options, names in (
        ({"maxRowsPerTrigger": -1}, "maxRowsPerTrigger must be a whole number of at least 1"),
        ({"endingVersion": 3}, "a stream does not take"),
        ({"startingVersion": "-2"}, "startingVersion must be a whole number"),
        ({"bogus": 1}, "Unknown option bogus"),
    ):
        error = _error(lambda options=options: _stream(spark, str(tmp_path / "bad"), **options))
        assert isinstance(error, InvalidArgumentError) and names in str(error) and "\n" not in str(error), (
            error
        )
    error = _error(
        lambda: _stream(spark, str(tmp_path / "tag"), startingVersion="soon")
    )  # a word names a tag
    assert isinstance(error, VersionNotFoundError) and "\n" not in str(error), error
    assert str(error).startswith("startingVersion 'soon': Tag 'soon' of db.t does not exist"), error
    error = _error(
        lambda: (
            spark.readStream.format("arctic")
            .load("db.t")
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "plain"))
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )
    )
    assert isinstance(error, InvalidArgumentError) and "readChangeFeed" in str(error)
    error = _error(lambda: _stream(spark, str(tmp_path / "missing"), table="db.nope"))
    assert "db.nope" in str(error) and "\n" not in str(error)


def test_a_consumer_keeps_its_unread_history_and_resumes_there(five_versions, spark, tmp_path):
    from arctic_sql.table.maintenance import expiration

    arctic = five_versions
    batches = _stream(
        spark, str(tmp_path / "a"), startingVersion=2, consumerId="copy", maxVersionsPerTrigger=1
    )
    assert [sorted({r["_change_version"] for r in rows}) for _, rows in batches] == [[2], [3], [4], [5]]
    listed = [tuple(r) for r in arctic.sql("SELECT consumer_id, version, live FROM db.t.consumers").collect()]
    assert len(listed) == 1 and listed[0][0] == "copy" and listed[0][2] is True
    recorded = listed[0][1]
    assert recorded in (4, 5)  # Spark reports a batch processed when it plans the next one
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    oldest = arctic.sql("SELECT min(version) FROM db.t.history").collect()[0][0]
    assert oldest == recorded  # everything the consumer has not read is still there
    arctic.sql("INSERT INTO db.t VALUES (77, 'x')")  # 6
    resumed = _stream(spark, str(tmp_path / "b"), consumerId="copy")  # a new checkpoint, the same consumer
    assert sorted({r["_change_version"] for _, rows in resumed for r in rows}) == list(range(recorded + 1, 7))


def test_a_table_without_a_key_streams_its_rows_then_its_appends(arctic, spark, tmp_path):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a'), (1, 'a')")  # 1: no key, duplicates stay
    first = _stream(spark, str(tmp_path / "ck"), table="db.log")
    assert sorted((r["id"], r["_change_type"], r["_change_version"]) for _, rows in first for r in rows) == [
        (1, "insert", 1),
        (1, "insert", 1),
    ]
    arctic.sql("INSERT INTO db.log VALUES (2, 'b')")  # 2
    then = _stream(spark, str(tmp_path / "ck"), table="db.log")
    assert [(r["id"], r["_change_type"], r["_change_version"]) for _, rows in then for r in rows] == [
        (2, "insert", 2)
    ]


def test_a_first_batch_of_an_empty_table_replays_after_a_crash(arctic, spark, tmp_path):
    """A kill between Spark's offset log and its commit log makes the restart replay the batch the
    offset log holds: for a stream started on an empty table, the batch of its rows at version 0."""
    import os

    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    checkpoint = tmp_path / "ck"
    assert [rows for _, rows in _stream(spark, str(checkpoint))] == [[]]  # the table's rows: none
    for name in ("0", ".0.crc"):  # the kill: batch 0 planned, never marked done
        os.remove(checkpoint / "commits" / name)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a')")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'b')")  # 2
    batches = _stream(spark, str(checkpoint))
    assert sorted((r["id"], r["v"], r["_change_version"]) for _, rows in batches for r in rows) == [
        (1, "a", 1),
        (2, "b", 2),
    ]


def test_an_available_now_follower_is_held_from_its_first_run(arctic, spark, tmp_path):
    """A consumer that reads now and then with availableNow (Spark never reports its last batch
    processed) keeps what it needs next from its first run on, through expiration between runs."""
    from arctic_sql.table.maintenance import expiration

    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a')")  # 1
    checkpoint = str(tmp_path / "ck")
    first = _stream(spark, checkpoint, consumerId="replica")
    assert [(r["id"], r["_change_type"]) for _, rows in first for r in rows] == [(1, "upsert")]
    assert [tuple(r) for r in arctic.sql("SELECT consumer_id, version FROM db.t.consumers").collect()] == [
        ("replica", 1)
    ]
    for version in (2, 3, 4):
        arctic.sql(f"INSERT INTO db.t VALUES ({version}, 'x')")
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    assert arctic.sql("SELECT min(version) FROM db.t.history").collect()[0][0] == 1  # held for the replica
    state: dict = {}
    for _, rows in first + _stream(spark, checkpoint, consumerId="replica"):
        _apply(state, rows)
    assert state == _table(arctic) == {1: "a", 2: "x", 3: "x", 4: "x"}
    # Spark asks for new data once more before an availableNow run stops: all it delivered is recorded.
    assert arctic.sql("SELECT version FROM db.t.consumers").collect()[0][0] == 4
