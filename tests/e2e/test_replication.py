"""A table replicated by its change stream written into the arctic sink: no column juggling, rounds
of availableNow restarted from the same checkpoint, random upserts and deletes with optimizing
interleaved. After every round the copy equals the source, and the copy gained at most one version
per micro-batch."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.spark


def _replicate(spark, checkpoint: str) -> None:
    """One availableNow run of source -> sink from ``checkpoint``."""
    changes = spark.readStream.format("arctic").option("readChangeFeed", "true").load("db.src")
    query = (
        changes.writeStream.format("arctic")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start("db.copy")
    )
    query.awaitTermination()


def _rows(arctic, table: str) -> set[tuple]:
    return {tuple(r) for r in arctic.sql(f"SELECT id, v, n FROM {table}").collect()}


def _round(arctic, rng: random.Random) -> None:
    for _ in range(3):
        if rng.random() < 0.7:
            keys = rng.sample(range(40), 5)
            rows = ", ".join(f"({k}, 'v{rng.randrange(1000)}', {rng.randrange(100)})" for k in keys)
            arctic.sql(
                f"MERGE INTO db.src t USING (SELECT * FROM VALUES {rows} AS s(id, v, n)) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        else:
            doomed = ", ".join(str(k) for k in rng.sample(range(40), 4))
            arctic.sql(f"DELETE FROM db.src WHERE id IN ({doomed})")
    if rng.random() < 0.5:
        arctic.sql("CALL system.optimize(table => 'db.src', mode => 'minor')")


def test_a_change_stream_into_the_sink_replicates_the_table_across_restarts(arctic, spark, tmp_path):
    rng = random.Random(13)
    for name in ("src", "copy"):
        arctic.sql(f"CREATE TABLE db.{name} (id BIGINT, v STRING, n INT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.src VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)")
    checkpoint = str(tmp_path / "checkpoint")
    for _ in range(3):
        _round(arctic, rng)
        before = len(arctic.sql("SELECT * FROM db.copy.history").collect())
        _replicate(spark, checkpoint)
        assert _rows(arctic, "db.copy") == _rows(arctic, "db.src")
        batches = len(arctic.sql("SELECT * FROM db.copy.history").collect()) - before
        assert 0 < batches <= 4  # one version per micro-batch that carried changes
    _replicate(spark, checkpoint)  # nothing new: no batch, no version
    assert _rows(arctic, "db.copy") == _rows(arctic, "db.src")


def test_a_table_without_a_key_replicates_through_its_insert_changes(arctic, spark, tmp_path):
    for name in ("src", "copy"):
        arctic.sql(f"CREATE TABLE db.{name} (id BIGINT, v STRING, n INT)")
    checkpoint = str(tmp_path / "checkpoint")
    arctic.sql("INSERT INTO db.src VALUES (1, 'a', 1), (1, 'a', 1), (2, 'b', 2)")  # duplicates are rows too
    _replicate(spark, checkpoint)
    arctic.sql("INSERT INTO db.src VALUES (3, 'c', 3), (1, 'a', 1)")
    _replicate(spark, checkpoint)

    def rows(table: str) -> list[tuple]:
        return sorted(tuple(r) for r in arctic.sql(f"SELECT id, v, n FROM {table}").collect())

    assert rows("db.copy") == rows("db.src") == [(1, "a", 1)] * 3 + [(2, "b", 2), (3, "c", 3)]
    deletes = spark.createDataFrame(
        [(9, "z", 9, "delete")], "id BIGINT, v STRING, n INT, _change_type STRING"
    )
    with pytest.raises(Exception, match="db.copy has no primary key: _change_type 'delete' needs one"):
        deletes.write.format("arctic").mode("append").save("db.copy")
    assert rows("db.copy") == rows("db.src")
