"""Merge engines (``merge-engine``) and ``sequence.field``: every place rows meet gives the engine's
answer: merge-on-read in memory and as a Spark plan, minor/major/full optimizing, time travel, the
change feed's post-images, driver lookups (point reads, MERGE), aggregate pushdown, streams that
replay a batch, and out-of-order CDC batches."""

from __future__ import annotations

import itertools
import os

import pytest

from arctic_sql.errors import InvalidArgumentError

pytestmark = pytest.mark.spark

COLUMNS = "id BIGINT, a BIGINT, b STRING, c DOUBLE, s BIGINT"


def _create(arctic, properties: str, columns: str = COLUMNS) -> None:
    arctic.sql(f"CREATE TABLE db.t ({columns}, PRIMARY KEY (id)) TBLPROPERTIES ({properties})")


def _rows(arctic, query: str = "SELECT * FROM db.t") -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(query).collect())


def _version(arctic) -> int:
    return arctic.sql("SELECT get_latest_version('db.t')").collect()[0][0]


def _every_read_agrees(arctic, expected: list[tuple]) -> None:
    """Merge-on-read in memory and as a Spark plan, then a full optimize through the executor's
    Spark query (the tests run a minor one, in memory, between their writes), all give ``expected``."""
    assert _rows(arctic) == expected
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '1')")
    assert _rows(arctic) == expected  # the Spark plan: a shuffle by key and the fold per partition
    arctic.sql("ALTER TABLE db.t UNSET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes')")
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('self-optimizing.execute.in-memory-max-bytes' = '1')")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    arctic.sql("ALTER TABLE db.t UNSET TBLPROPERTIES ('self-optimizing.execute.in-memory-max-bytes')")
    assert _rows(arctic) == expected
    assert arctic.sql("SELECT sum(change_files) FROM db.t.partitions").collect()[0][0] in (0, None)


def test_partial_update_through_sql_dataframes_optimizing_time_travel_and_the_change_feed(arctic):
    _create(arctic, "'merge-engine' = 'partial-update'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 1), (2, 20, 'y', NULL, 1), (3, 30, 'z', 3.0, 1)")
    first = _version(arctic)
    arctic.sql("INSERT INTO db.t VALUES (1, NULL, 'x2', NULL, NULL), (2, NULL, NULL, 2.5, 2)")
    arctic.sql(
        "CALL system.optimize(table => 'db.t', mode => 'minor')"
    )  # a stored row the next changes fold into
    arctic.spark.createDataFrame([(1, 11, None, None, None)], COLUMNS).write.format("arctic").mode(
        "append"
    ).save("db.t")
    arctic.sql("UPDATE db.t SET c = 9.0 WHERE id = 3")
    arctic.sql("DELETE FROM db.t WHERE id = 2")
    arctic.sql(
        "MERGE INTO db.t USING (SELECT 3 AS id, 33 AS a UNION ALL SELECT 4 AS id, 40 AS a) src ON db.t.id = src.id "
        "WHEN MATCHED THEN UPDATE SET a = src.a WHEN NOT MATCHED THEN INSERT (id, a) VALUES (src.id, src.a)"
    )
    expected = [(1, 11, "x2", 1.5, 1), (3, 33, "z", 9.0, 1), (4, 40, None, None, None)]
    assert _rows(arctic, "SELECT * FROM db.t WHERE id = 1") == expected[:1]  # a driver lookup
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {first}") == [
        (1, 10, "x", 1.5, 1),
        (2, 20, "y", None, 1),
        (3, 30, "z", 3.0, 1),
    ]
    changes = arctic.sql(f"SELECT * FROM db.t VERSION BETWEEN {first} AND {_version(arctic)}")
    feed = sorted((r["id"], r["a"], r["b"], r["c"], r["_change_type"]) for r in changes.collect())
    # post-images are the folded rows, not the change rows (which carry NULLs for untouched columns)
    assert feed == [
        (1, 11, "x2", 1.5, "upsert"),
        (2, None, None, None, "delete"),
        (3, 33, "z", 9.0, "upsert"),
        (4, 40, None, None, "upsert"),
    ]
    # aggregate pushdown aggregates the folded rows
    assert _rows(arctic, "SELECT count(*), sum(a), max(c) FROM db.t") == [(3, 84, 9.0)]
    _every_read_agrees(arctic, expected)


def test_partial_update_ignore_delete_drops_deletes(arctic):
    _create(arctic, "'merge-engine' = 'partial-update', 'partial-update.ignore-delete' = 'true'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 1)")
    arctic.sql("DELETE FROM db.t WHERE id = 1")
    arctic.sql("INSERT INTO db.t VALUES (1, NULL, 'y', NULL, NULL)")
    _every_read_agrees(arctic, [(1, 10, "y", 1.5, 1)])


def test_first_row_keeps_the_first_row_whatever_comes_after(arctic):
    _create(arctic, "'merge-engine' = 'first-row'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 1), (2, 20, 'y', NULL, 1)")
    arctic.sql("INSERT INTO db.t VALUES (1, 11, 'later', 0.0, 2), (3, 30, 'z', 3.0, 1)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    arctic.spark.createDataFrame([(2, 21, "later", 0.0, 2)], COLUMNS).write.format("arctic").mode(
        "append"
    ).save("db.t")
    arctic.sql("DELETE FROM db.t WHERE id = 3")  # first-row ignores deletes, as Paimon does
    expected = [(1, 10, "x", 1.5, 1), (2, 20, "y", None, 1), (3, 30, "z", 3.0, 1)]
    assert _rows(arctic, "SELECT * FROM db.t WHERE id = 2") == [expected[1]]
    _every_read_agrees(arctic, expected)


def test_aggregation_folds_each_column_and_a_delete_removes_the_key(arctic):
    _create(
        arctic,
        "'merge-engine' = 'aggregation', 'fields.a.aggregate-function' = 'sum', "
        "'fields.c.aggregate-function' = 'max', 'fields.s.aggregate-function' = 'count'",
    )
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 0), (2, 20, 'y', NULL, 0)")
    first = _version(arctic)
    arctic.sql("INSERT INTO db.t VALUES (1, 5, NULL, 0.5, 0), (2, 1, 'y2', 7.0, 0)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    arctic.spark.createDataFrame([(1, 100, "x3", 2.0, 0)], COLUMNS).write.format("arctic").mode(
        "append"
    ).save("db.t")
    arctic.sql("INSERT INTO db.t VALUES (3, 3, 'z', 3.0, 0)")
    arctic.sql("DELETE FROM db.t WHERE id = 3")
    expected = [(1, 115, "x3", 2.0, 3), (2, 21, "y2", 7.0, 2)]
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {first}") == [
        (1, 10, "x", 1.5, 1),
        (2, 20, "y", None, 1),
    ]
    assert _rows(arctic, "SELECT * FROM db.t WHERE id = 1") == expected[:1]
    assert _rows(arctic, "SELECT sum(a), count(*) FROM db.t") == [(136, 2)]
    feed = arctic.sql(f"SELECT id, a, _change_type FROM db.t VERSION BETWEEN {first} AND {_version(arctic)}")
    assert sorted(tuple(r) for r in feed.collect()) == [
        (1, 115, "upsert"),
        (2, 21, "upsert"),
        (3, None, "delete"),
    ]
    _every_read_agrees(arctic, expected)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ("'merge-engine' = 'newest'", "must be one of deduplicate, partial-update, first-row, aggregation"),
        ("'merge-engine' = 'aggregation', 'fields.a.aggregate-function' = 'median'", "must be one of sum"),
        ("'sequence.field' = 'nope'", "names no column 'nope'"),
        ("'merge-engine' = 'first-row', 'sequence.field' = 's'", "not first-row"),
    ],
)
def test_bad_engine_properties_are_refused_and_create_nothing(arctic, properties, message):
    with pytest.raises(InvalidArgumentError, match=message):
        _create(arctic, properties)
    assert "t" not in [r[1] for r in arctic.sql("SHOW TABLES IN db").collect()]


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE db.t SET TBLPROPERTIES ('merge-engine' = 'deduplicate')",
        "ALTER TABLE db.t SET TBLPROPERTIES ('sequence.field' = 's')",
        "ALTER TABLE db.t SET TBLPROPERTIES ('fields.a.aggregate-function' = 'max')",
        "ALTER TABLE db.t UNSET TBLPROPERTIES ('merge-engine')",
    ],
)
def test_the_engine_is_fixed_at_create(arctic, statement):
    _create(arctic, "'merge-engine' = 'aggregation', 'fields.a.aggregate-function' = 'sum'")
    with pytest.raises(InvalidArgumentError, match="can only be set at CREATE TABLE"):
        arctic.sql(statement)
    assert arctic.table("db.t").properties["merge-engine"] == "aggregation"


def test_sequence_field_converges_whatever_order_cdc_batches_land_in(arctic):
    """Four batches of one source's changes, each key's changes spread over them: every order of
    delivery ends in the source's state, before and after optimizing."""
    batches = [
        [(1, 10, "a", 1.0, 1), (2, 20, "b", 2.0, 1), (3, 30, "c", 3.0, 2)],
        [(1, 11, "a2", 1.1, 2), (3, 31, "c2", 3.1, 5)],
        [(2, 22, "b3", 2.2, 4), (1, 12, "a3", 1.2, 3)],
        [(3, 32, "c4", 3.2, 3), (2, 21, "b4", 2.1, 2)],
    ]
    newest = {}
    for row in itertools.chain(*batches):
        if row[0] not in newest or row[4] > newest[row[0]][4]:
            newest[row[0]] = row
    expected = sorted(newest.values())
    for n, order in enumerate([(0, 1, 2, 3), (3, 2, 1, 0), (2, 0, 3, 1)]):
        arctic.sql("DROP TABLE IF EXISTS db.t")
        _create(arctic, "'merge-engine' = 'deduplicate', 'sequence.field' = 's'")
        for i, b in enumerate(order):
            arctic.spark.createDataFrame(batches[b], COLUMNS).write.format("arctic").mode("append").save(
                "db.t"
            )
            if i == 1 and n == 2:
                arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
        assert _rows(arctic) == expected, order
    # a partial-update table with a sequence: an older change is ignored whole, a newer one fills in
    arctic.sql("DROP TABLE db.t")
    _create(arctic, "'merge-engine' = 'partial-update', 'sequence.field' = 's'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', NULL, 5)")
    arctic.sql("INSERT INTO db.t VALUES (1, 99, NULL, 9.9, 4)")
    arctic.sql("INSERT INTO db.t VALUES (1, NULL, NULL, 1.0, 6)")
    _every_read_agrees(arctic, [(1, 10, "x", 1.0, 6)])


def test_sequence_field_is_the_writers_sequence_column_within_a_write(arctic):
    _create(arctic, "'sequence.field' = 's'")
    rows = [(1, 1, "new", 0.0, 9), (1, 2, "old", 0.0, 3)]
    arctic.spark.createDataFrame(rows, COLUMNS).write.format("arctic").mode("append").save("db.t")
    assert _rows(arctic) == [(1, 1, "new", 0.0, 9)]


def test_a_replayed_micro_batch_adds_its_sums_once(arctic, tmp_path):
    import json

    _create(
        arctic, "'merge-engine' = 'aggregation', 'fields.a.aggregate-function' = 'sum'", "id BIGINT, a BIGINT"
    )
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "ck")
    os.makedirs(source)

    def add(number: int, rows: list[tuple]) -> None:
        path = os.path.join(source, f"b{number:04d}.json")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps({"id": i, "a": a}) for i, a in rows))
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))

    def run():
        stream = (
            arctic.spark.readStream.schema("id BIGINT, a BIGINT").option("maxFilesPerTrigger", 1).json(source)
        )
        query = stream.writeStream.format("arctic").option("checkpointLocation", checkpoint)
        query = query.trigger(availableNow=True).start("db.t")
        query.awaitTermination()

    add(0, [(1, 5), (2, 1)])
    add(1, [(1, 7)])
    run()
    assert _rows(arctic) == [(1, 12), (2, 1)]
    for name in ("1", ".1.crc"):  # Spark replays the batch whose commit it did not record
        os.remove(os.path.join(checkpoint, "commits", name))
    add(2, [(2, 10)])
    run()
    assert _rows(arctic) == [(1, 12), (2, 11)]


def test_a_folding_table_folds_several_changes_of_a_key_in_one_write(arctic, tmp_path):
    """SQL, a DataFrame (over several tasks) and a sink micro-batch may change a key more than once:
    the changes fold in the order the write gives them, as if committed one at a time."""
    _create(
        arctic, "'merge-engine' = 'aggregation', 'fields.a.aggregate-function' = 'sum'", "id BIGINT, a BIGINT"
    )
    rows = arctic.spark.createDataFrame([(1, 5), (2, 1), (1, 7), (1, 1), (2, 2)], "id BIGINT, a BIGINT")
    rows.repartition(3).write.format("arctic").mode("append").save("db.t")
    arctic.sql("INSERT INTO db.t VALUES (1, 100), (1, 200)")
    assert _rows(arctic) == [(1, 313), (2, 3)]
    with pytest.raises(Exception, match="Option sequenceColumn does not apply to db.t: aggregation tables"):
        rows.write.format("arctic").option("sequenceColumn", "a").mode("append").save("db.t")
    arctic.sql("DROP TABLE db.t")
    _create(arctic, "'merge-engine' = 'partial-update'")
    arctic.sql(
        "INSERT INTO db.t VALUES (1, 10, 'x', NULL, 1), (2, 20, NULL, NULL, 1), (1, NULL, 'y', 1.5, NULL)"
    )
    ordered = [
        (1, 11, None, None, None),
        (3, 30, "z", None, None),
        (1, None, None, 2.5, 7),
        (3, 31, None, None, 4),
    ]
    arctic.spark.createDataFrame(ordered, COLUMNS).coalesce(1).write.format("arctic").mode("append").save(
        "db.t"
    )
    expected = [(1, 11, "y", 2.5, 7), (2, 20, None, None, 1), (3, 31, "z", None, 4)]
    assert _rows(arctic) == expected
    source = tmp_path / "in"
    source.mkdir()
    (source / "b0.json").write_text('{"id": 2, "a": 21}\n{"id": 2, "b": "w"}\n{"id": 4, "a": 40}\n')
    query = (
        arctic.spark.readStream.schema(COLUMNS)
        .json(str(source))
        .writeStream.format("arctic")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start("db.t")
    )
    query.awaitTermination()
    expected[1] = (2, 21, "w", None, 1)
    _every_read_agrees(arctic, sorted([*expected, (4, 40, None, None, None)]))
    # what one change cannot say is refused, naming the key, and changes nothing
    changes = [(1, None, None, None, None, "delete"), (1, 5, "q", None, None, "insert")]
    frame = arctic.spark.createDataFrame(changes, COLUMNS + ", _change_type STRING").coalesce(1)
    with pytest.raises(Exception, match=r"primary key \(id=1\) more than once in one write.*after deleting"):
        frame.write.format("arctic").mode("append").save("db.t")
    assert _rows(arctic) == sorted([*expected, (4, 40, None, None, None)])


def test_the_full_change_feed_shows_folded_images(arctic):
    _create(arctic, "'merge-engine' = 'partial-update'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 1)")
    start = _version(arctic)
    arctic.sql("INSERT INTO db.t VALUES (1, NULL, 'y', NULL, NULL)")
    arctic.sql("INSERT INTO db.t VALUES (1, 12, NULL, NULL, NULL), (2, 20, NULL, NULL, NULL)")
    arctic.sql("DELETE FROM db.t WHERE id = 1")
    feed = arctic.sql(f"SELECT * FROM table_changes('db.t', {start})").collect()
    got = sorted((r["_change_version"] - start, r["_change_type"], r["id"], r["a"], r["b"]) for r in feed)
    assert got == [
        (0, "insert", 1, 10, "x"),  # table_changes' start is inclusive
        (1, "update_postimage", 1, 10, "y"),
        (1, "update_preimage", 1, 10, "x"),
        (2, "insert", 2, 20, None),
        (2, "update_postimage", 1, 12, "y"),
        (2, "update_preimage", 1, 10, "y"),
        (3, "delete", 1, 12, "y"),
    ]


@pytest.mark.parametrize("engine", ["first-row", "aggregation"])
def test_updates_of_first_row_and_aggregation_tables_are_refused(arctic, engine):
    from arctic_sql.errors import UnsupportedOperationError

    _create(arctic, f"'merge-engine' = '{engine}'", "id BIGINT, a BIGINT")
    arctic.sql("INSERT INTO db.t VALUES (1, 5)")
    with pytest.raises(
        UnsupportedOperationError, match=f"UPDATE of db.t: a{'n' if engine[0] == 'a' else ''} {engine} table"
    ):
        arctic.sql("UPDATE db.t SET a = 6 WHERE id = 1")
    with pytest.raises(UnsupportedOperationError, match="MERGE ... WHEN MATCHED THEN UPDATE of db.t"):
        arctic.sql(
            "MERGE INTO db.t USING (SELECT 1 AS id, 7 AS a) s ON db.t.id = s.id WHEN MATCHED THEN UPDATE SET a = s.a"
        )
    assert _rows(arctic) == [(1, 5)]


def test_the_dataframe_change_feeds_of_a_folding_table_give_its_folded_rows(arctic):
    """The latest-change feed gives per key its folded row after the range (as SQL's VERSION
    BETWEEN), not the change row as written; the full feed gives every version's images."""
    _create(arctic, "'merge-engine' = 'partial-update'")
    arctic.sql("INSERT INTO db.t VALUES (1, 10, 'x', 1.5, 1), (2, 20, 'z', NULL, NULL)")
    first = _version(arctic)
    arctic.sql("INSERT INTO db.t VALUES (1, NULL, 'y', NULL, NULL)")
    arctic.sql("INSERT INTO db.t VALUES (3, 30, NULL, NULL, NULL), (1, 11, NULL, NULL, NULL)")
    arctic.sql("DELETE FROM db.t WHERE id = 2")
    reader = arctic.spark.read.format("arctic").option("readChangeFeed", "true")
    latest = reader.option("startingVersion", first + 1).load("db.t").collect()
    got = sorted((r["id"], r["_change_type"], r["a"], r["b"], r["_change_version"] - first) for r in latest)
    assert got == [(1, "upsert", 11, "y", 2), (2, "delete", None, None, 3), (3, "upsert", 30, None, 2)]
    sql = arctic.sql(f"SELECT * FROM db.t VERSION BETWEEN {first} AND {first + 3}").collect()
    assert (
        sorted((r["id"], r["_change_type"], r["a"], r["b"], r["_change_version"] - first) for r in sql) == got
    )
    full = reader.option("startingVersion", first + 1).option("changeFeedMode", "full").load("db.t")
    posts = full.where("_change_type = 'update_postimage'").collect()
    assert sorted((r["id"], r["a"], r["b"]) for r in posts) == [(1, 10, "y"), (1, 11, "y")]


def _cdc(arctic, rows: list[tuple]) -> None:
    """A CDC batch: the table's columns and ``_change_type``; deletes carry their sequence ``s``."""
    frame = arctic.spark.createDataFrame(rows, COLUMNS + ", _change_type STRING")
    frame.write.format("arctic").mode("append").save("db.t")


def test_a_delete_with_a_sequence_applies_only_at_or_above_the_stored_one(arctic):
    """Issue 31: a delete carries ``sequence.field`` when its write has it (a CDC batch with
    ``_change_type``, a MERGE delete whose source has the column): below the key's stored sequence
    it is ignored, at or above it it applies; a SQL DELETE always applies. Time travel, the change
    feed and every read before and after optimizing agree."""
    _create(arctic, "'merge-engine' = 'deduplicate', 'sequence.field' = 's'")
    _cdc(arctic, [(k, k * 10, "r", 1.0, 5, "upsert") for k in (1, 2, 3, 4, 5)])
    first = _version(arctic)
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # the stored rows hold s = 5
    _cdc(arctic, [(1, None, None, None, 3, "delete"), (2, None, None, None, 5, "delete")])  # late; a tie
    second = _version(arctic)
    after_second = [(k, k * 10, "r", 1.0, 5) for k in (1, 3, 4, 5)]
    assert _rows(arctic) == after_second
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    arctic.sql(
        "MERGE INTO db.t t USING (SELECT * FROM VALUES (3, 4L), (4, 6L) AS v(id, s)) v "
        "ON t.id = v.id WHEN MATCHED THEN DELETE"
    )
    third = _version(arctic)
    arctic.sql("DELETE FROM db.t WHERE id = 5")  # no sequence: it applies whatever the stored one
    expected = [(1, 10, "r", 1.0, 5), (3, 30, "r", 1.0, 5)]
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {second}") == after_second
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {third}") == [*expected, (5, 50, "r", 1.0, 5)]
    feed = arctic.sql(f"SELECT * FROM db.t VERSION BETWEEN {first} AND {_version(arctic)}").collect()
    deleted = sorted(r["id"] for r in feed if r["_change_type"] == "delete")
    assert deleted == [2, 4, 5]  # the ignored deletes of 1 and 3 leave their rows: no delete
    assert all((r["id"], r["a"], r["s"]) in {(1, 10, 5), (3, 30, 5)} for r in feed if r["id"] in (1, 3))
    full = arctic.sql(f"SELECT * FROM table_changes('db.t', {first + 1})").collect()
    assert sorted((r["id"], r["_change_version"]) for r in full if r["_change_type"] == "delete") == [
        (2, second),
        (4, third),
        (5, third + 1),
    ]
    assert all(r["a"] == r["id"] * 10 for r in full if r["id"] in (1, 3))  # their rows stay as stored
    _every_read_agrees(arctic, expected)
    arctic.sql("DROP TABLE db.t")


def test_a_delete_that_applies_leaves_no_sequence_behind(arctic):
    """Until tombstones are built (issue 31), an applied delete leaves nothing: a later upsert below
    its sequence brings the key back, and it does so alike before and after optimizing folded the
    delete away (invariant 2)."""
    expected = [(1, 11, "back", 1.0, 2)]
    for optimize_between in (False, True):
        _create(arctic, "'merge-engine' = 'deduplicate', 'sequence.field' = 's'")
        _cdc(arctic, [(1, 10, "r", 1.0, 5, "upsert")])
        _cdc(arctic, [(1, None, None, None, 7, "delete")])
        if optimize_between:
            arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
        _cdc(arctic, [(1, 11, "back", 1.0, 2, "upsert")])
        _every_read_agrees(arctic, expected)
        arctic.sql("DROP TABLE db.t")


def test_debezium_deletes_carry_the_sequence_of_their_before_image(arctic):
    """Through ``arctic_sql.cdc.debezium`` a delete is its row's before image, sequence column
    included: a late delete of an older image than the stored row is ignored, one of the stored
    image applies."""
    import arctic_sql

    _create(arctic, "'sequence.field' = 's'")
    row = "struct<id:bigint,a:bigint,b:string,c:double,s:bigint>"
    schema = f"before {row}, after {row}, op string, source struct<ts_ms:bigint>"

    def land(events: list[tuple]) -> None:
        envelopes = arctic.spark.createDataFrame(events, schema)
        rows = arctic_sql.cdc.debezium(envelopes).drop(arctic_sql.cdc.SEQUENCE)
        rows.write.format("arctic").mode("append").save("db.t")

    land([(None, (1, 10, "new", 1.0, 5), "c", (100,)), (None, (2, 20, "x", 2.0, 5), "c", (101,))])
    land([((1, 9, "old", 1.0, 3), None, "d", (90,)), ((2, 20, "x", 2.0, 5), None, "d", (102,))])
    _every_read_agrees(arctic, [(1, 10, "new", 1.0, 5)])


def test_no_reader_sees_a_tombstone_file(arctic, warehouse):
    """Issue 31's tombstones (table/files/tombstones.py) are base data files hidden by their own
    position-delete file: committed into a table's base store, no reader shows their rows or counts
    them: merge-on-read in memory and as a Spark plan, a point lookup, the DataFrame reader, time
    travel, the change feeds, aggregate pushdown, and pyiceberg's scan of the base store."""
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    from arctic_sql.table.files import tombstones
    from arctic_sql.table.format import versions
    from arctic_sql.table.writing import commit

    _create(arctic, "'sequence.field' = 's', 'base.file-index.hash-bucket' = '1'")
    _cdc(arctic, [(k, k * 10, "r", 1.0, 5, "upsert") for k in (1, 2, 3, 4)])
    first = _version(arctic)
    _cdc(arctic, [(4, None, None, None, 7, "delete")])
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    expected = [(k, k * 10, "r", 1.0, 5) for k in (1, 2, 3)]
    table = arctic.table("db.t")
    folder = table.base.scan().plan_files()[0].file.file_path.rsplit("/", 1)[0]
    # The tombstone of the applied delete of key 4, and one of key 2, which the table holds: a
    # tombstone never hides a row (its deletes name only its own file).
    marks = pa.table({"id": pa.array([2, 4], pa.int64()), "s": pa.array([3, 7], pa.int64())})
    written = tombstones.write(folder, table.schema, marks)
    files = commit.data_files(table.base, written)
    summary = {versions.OPERATION: versions.OPTIMIZE}
    commit.commit_base(table, lambda store: commit.BaseChange(add=files, summary=summary), written)
    last = _version(arctic)
    assert _rows(arctic) == expected
    assert _rows(arctic, "SELECT * FROM db.t WHERE id IN (2, 4)") == expected[1:2]
    assert _rows(arctic, "SELECT count(*), sum(a) FROM db.t") == [(3, 60)]
    assert sorted(tuple(r) for r in arctic.spark.read.format("arctic").load("db.t").collect()) == expected
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {last}") == expected
    feed = arctic.sql(f"SELECT id, _change_type FROM db.t VERSION BETWEEN {first} AND {last}").collect()
    assert sorted(tuple(r) for r in feed) == [(4, "delete")]
    full = arctic.sql(f"SELECT id, _change_type FROM table_changes('db.t', {first + 1})").collect()
    assert sorted(tuple(r) for r in full) == [(4, "delete")]
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes' = '1')")
    assert _rows(arctic) == expected
    catalog = load_catalog(
        "arctic", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    plain = catalog.load_table(("db", "t")).scan().to_arrow()
    assert sorted(plain.column("id").to_pylist()) == [1, 2, 3]
    # Until the folds read tombstones (lasting_deletes), optimizing takes the file for an empty base
    # file of its node: the rows stay as they are.
    arctic.sql("ALTER TABLE db.t UNSET TBLPROPERTIES ('merge-on-read.in-memory-max-bytes')")
    _cdc(arctic, [(1, 11, "r", 1.0, 6, "upsert")])
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(arctic) == [(1, 11, "r", 1.0, 6), *expected[1:]]
    arctic.sql("DROP TABLE db.t")
