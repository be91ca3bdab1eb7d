"""streaming.lookup_join: a running stream meets the dimension as it stands when each micro-batch is
planned (updates, inserts and deletes), a batch planned before the dimension's first version waits
for it, a join on other columns finds every matching row, a restart from the checkpoint rebuilds
the caches at the pinned version, and every fact's dimension values equal a time-travel read of
the version it met."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from host_load import scaled

from arctic_sql.errors import InvalidArgumentError, UnsupportedOperationError
from arctic_sql.streaming import lookup_join

pytestmark = pytest.mark.spark


class Facts:
    """A folder of Parquet fact files, streamed one file per micro-batch."""

    def __init__(self, spark, folder: str, schema: str = "fid BIGINT, id BIGINT") -> None:
        self.spark, self.folder, self.schema, self.count = spark, folder, schema, 0
        os.makedirs(folder, exist_ok=True)

    def add(self, **columns: list) -> None:
        first = self.count * 1000
        count = len(next(iter(columns.values())))
        table = pa.table(
            {
                "fid": pa.array(range(first, first + count), pa.int64()),
                **{k: pa.array(v, pa.int64()) for k, v in columns.items()},
            }
        )
        path = os.path.join(self.folder, f"f{self.count:04d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.rename(path + ".tmp", path)  # the file source must never see half a file
        self.count += 1

    def stream(self):
        return self.spark.readStream.schema(self.schema).option("maxFilesPerTrigger", 1).parquet(self.folder)


def _start(joined, checkpoint: str, batches: list):
    return (
        joined.writeStream.option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .foreachBatch(lambda df, batch_id: batches.append((batch_id, sorted(tuple(r) for r in df.collect()))))
        .start()
    )


def _rows(batches: list) -> list[tuple]:
    return sorted(row for _, rows in batches for row in rows)


def test_a_running_stream_meets_every_dimension_change(arctic, spark, tmp_path):
    arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, tier INT, PRIMARY KEY (id)) USING arctic")
    facts = Facts(spark, str(tmp_path / "facts"))
    batches: list = []
    query = _start(
        lookup_join(
            facts.stream(), "db.dim", on="id", how="left", version_column="v", options={"lookup.buckets": "4"}
        ),
        str(tmp_path / "ck"),
        batches,
    )
    try:
        facts.add(id=[1, 2, 3])
        waiting = threading.Thread(target=query.processAllAvailable)
        waiting.start()
        tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + scaled(120)
        while not tracker.getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the batch's job to start, not timing anything
        assert tracker.getActiveJobsIds(), "the facts' batch never started"
        # The batch was planned before the dimension had a version: its facts wait for the first one.
        assert waiting.is_alive() and _rows(batches) == []

        arctic.sql("INSERT INTO db.dim VALUES (1, 'a', 1), (2, 'b', 2)")
        waiting.join(timeout=scaled(120))
        assert not waiting.is_alive()
        first = arctic.sql("SELECT max(version) FROM db.dim.history").collect()[0][0]
        assert _rows(batches) == [(0, 1, "a", 1, first), (1, 2, "b", 2, first), (2, 3, None, None, first)]

        arctic.sql("INSERT INTO db.dim VALUES (1, 'a2', 10), (3, 'c', 3)")  # an update and an insert
        arctic.sql("DELETE FROM db.dim WHERE id = 2")
        newest = arctic.sql("SELECT max(version) FROM db.dim.history").collect()[0][0]
        facts.add(id=[1, 2, 3, 4])
        query.processAllAvailable()
        later = sorted(r for r in _rows(batches) if r[0] >= 1000)
        assert later == [
            (1000, 1, "a2", 10, newest),
            (1001, 2, None, None, newest),
            (1002, 3, "c", 3, newest),
            (1003, 4, None, None, newest),
        ]
    finally:
        query.stop()


def test_two_tasks_catch_up_together_and_an_overwrite_reloads_the_caches(arctic, spark, tmp_path):
    """Two fact files per micro-batch (usually: they land a moment apart) are two tasks sharing the
    buckets' caches, each catching up the buckets the other does not hold; an INSERT OVERWRITE of the dimension carries no per-key
    changes, so the caches are loaded again from the table at the batch's version."""
    arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, PRIMARY KEY (id)) USING arctic")
    arctic.sql("INSERT INTO db.dim SELECT id, concat('a', id) FROM range(100)")
    facts = Facts(spark, str(tmp_path / "facts"))
    batches: list = []
    stream = spark.readStream.schema(facts.schema).option("maxFilesPerTrigger", 2).parquet(facts.folder)
    query = _start(
        lookup_join(
            stream, "db.dim", on="id", how="left", version_column="v", options={"lookup.buckets": "8"}
        ),
        str(tmp_path / "ck"),
        batches,
    )
    try:
        for step, change in enumerate(
            [
                "INSERT INTO db.dim SELECT id, concat('b', id) FROM range(0, 100, 3)",
                "INSERT OVERWRITE db.dim SELECT id, concat('c', id) FROM range(50, 150)",
                "DELETE FROM db.dim WHERE id % 2 = 0",
            ]
        ):
            arctic.sql(change)
            version = arctic.sql("SELECT max(version) FROM db.dim.history").collect()[0][0]
            expected = {r.id: r.name for r in arctic.sql("SELECT id, name FROM db.dim").collect()}
            facts.add(id=list(range(0, 150, 2)))
            facts.add(id=list(range(1, 150, 2)))
            before = len(batches)
            query.processAllAvailable()
            rows = [row for _, rows in batches[before:] for row in rows]
            assert sorted((r[1], r[2], r[3]) for r in rows) == [
                (k, expected.get(k), version) for k in range(150)
            ], step
    finally:
        query.stop()


def test_a_join_on_other_columns_finds_every_matching_row(arctic, spark, tmp_path):
    arctic.sql("CREATE TABLE db.products (id BIGINT, grp BIGINT, name STRING, PRIMARY KEY (id)) USING arctic")
    arctic.sql("INSERT INTO db.products VALUES (1, 10, 'p1'), (2, 10, 'p2'), (3, 20, 'p3')")
    facts = Facts(spark, str(tmp_path / "facts"), "fid BIGINT, grp BIGINT")
    batches: list = []
    query = _start(
        lookup_join(
            facts.stream(), "db.products", on="grp", columns=["name"], options={"lookup.buckets": "2"}
        ),
        str(tmp_path / "ck"),
        batches,
    )
    try:
        facts.add(grp=[10, 20, 30])
        query.processAllAvailable()
        assert _rows(batches) == [(0, 10, "p1"), (0, 10, "p2"), (1, 20, "p3")]

        arctic.sql("UPDATE db.products SET grp = 20 WHERE id = 1")  # p1 leaves group 10 for group 20
        facts.add(grp=[10, 20])
        query.processAllAvailable()
        assert sorted(r for r in _rows(batches) if r[0] >= 1000) == [
            (1000, 10, "p2"),
            (1001, 20, "p1"),
            (1001, 20, "p3"),
        ]
    finally:
        query.stop()


def test_a_composite_key_of_a_date_and_a_string_meets_its_own_rows(arctic, spark, tmp_path):
    """Keys that SQLite does not store as they are (a date) encode alike on both sides: the facts'
    values cast to the dimension's types, the dimension's read from its files and its changes."""
    arctic.sql(
        "CREATE TABLE db.rates (day DATE, cur STRING, rate DOUBLE, PRIMARY KEY (day, cur)) USING arctic"
    )
    arctic.sql(
        "INSERT INTO db.rates VALUES (DATE'2026-01-30', 'EUR', 1.0), (DATE'2026-01-31', 'EUR', 1.1), "
        "(DATE'2026-01-31', 'USD', 0.9)"
    )
    folder = str(tmp_path / "facts")
    os.makedirs(folder)
    batches: list = []
    stream = (
        spark.readStream.schema("fid BIGINT, day STRING, cur STRING")
        .option("maxFilesPerTrigger", 1)
        .json(folder)
    )
    query = _start(
        lookup_join(stream, "db.rates", on=["day", "cur"], how="left", options={"lookup.buckets": "2"}),
        str(tmp_path / "ck"),
        batches,
    )

    def land(name, facts):
        with open(os.path.join(folder, name + ".tmp"), "w") as f:
            f.writelines(f'{{"fid": {i}, "day": "{d}", "cur": "{c}"}}\n' for i, d, c in facts)
        os.rename(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))

    try:
        land("a.json", [(1, "2026-01-31", "EUR"), (2, "2026-01-31", "GBP"), (3, "2026-01-30", "EUR")])
        query.processAllAvailable()
        arctic.sql("UPDATE db.rates SET rate = 1.2 WHERE day = DATE'2026-01-31' AND cur = 'EUR'")
        land("b.json", [(4, "2026-01-31", "EUR"), (5, "2026-01-31", "USD")])
        query.processAllAvailable()
        assert _rows(batches) == [
            (1, "2026-01-31", "EUR", 1.1),
            (2, "2026-01-31", "GBP", None),
            (3, "2026-01-30", "EUR", 1.0),
            (4, "2026-01-31", "EUR", 1.2),
            (5, "2026-01-31", "USD", 0.9),
        ]
    finally:
        query.stop()


def test_a_key_widened_from_int_finds_the_rows_its_int_hash_placed(arctic, spark, tmp_path):
    # Rows written before the widening sit in the tree nodes of the int's hash; the facts' buckets
    # and the caches' must follow them there (format/keyhash.py), and a key past an int's range too.
    big = 5_000_000_000
    arctic.sql(
        "CREATE TABLE db.wide (id INT, name STRING, PRIMARY KEY (id)) USING arctic "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '4')"
    )
    arctic.sql("INSERT INTO db.wide VALUES " + ", ".join(f"({i}, 'n{i}')" for i in range(1, 9)))
    arctic.sql("CALL system.optimize(table => 'db.wide', mode => 'full')")
    arctic.sql("ALTER TABLE db.wide ALTER COLUMN id TYPE BIGINT")
    arctic.sql(f"INSERT INTO db.wide VALUES (2, 'm2'), ({big}, 'big')")
    facts = Facts(spark, str(tmp_path / "facts"))
    batches: list = []
    query = _start(
        lookup_join(facts.stream(), "db.wide", on="id", how="left", options={"lookup.buckets": "4"}),
        str(tmp_path / "ck"),
        batches,
    )
    try:
        facts.add(id=[1, 2, 5, 8, 9, big])
        query.processAllAvailable()
        names = {1: "n1", 2: "m2", 5: "n5", 8: "n8", 9: None, big: "big"}
        assert _rows(batches) == [(i, k, names[k]) for i, k in enumerate([1, 2, 5, 8, 9, big])]
    finally:
        query.stop()


def test_a_restart_from_the_checkpoint_joins_against_the_pinned_versions(arctic, spark, tmp_path):
    """The second run has new (empty) caches: each bucket is rebuilt from the table at the version
    the checkpoint pinned, and every fact's values equal that version read by time travel."""
    arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, PRIMARY KEY (id)) USING arctic")
    arctic.sql("INSERT INTO db.dim SELECT id, concat('n', id) FROM range(200)")
    facts = Facts(spark, str(tmp_path / "facts"))
    checkpoint, batches = str(tmp_path / "ck"), []
    for run in range(2):
        query = _start(
            lookup_join(
                facts.stream(),
                "db.dim",
                on="id",
                version_column="v",
                options={"lookup.buckets": "4", "lookup.cache-dir": str(tmp_path / f"cache{run}")},
            ),
            checkpoint,
            batches,
        )
        try:
            for step in range(2):
                arctic.sql(
                    f"INSERT INTO db.dim SELECT id, concat('r{run}s{step}_', id) FROM range({run * 50}, "
                    f"{run * 50 + 40})"
                )
                arctic.sql(f"DELETE FROM db.dim WHERE id = {152 + run * 10 + step}")
                facts.add(id=list(range(0, 200, 7)) + [152 + run * 10 + step])
                query.processAllAvailable()
        finally:
            query.stop()
    rows = _rows(batches)
    assert sorted({r[0] for r in rows}) == sorted(r[0] for r in rows)  # every fact once (inner: matches only)
    assert len(rows) == 4 * len(range(0, 200, 7))  # every fact met a dimension that had its key
    for version in sorted({r[3] for r in rows}):
        expected = {
            r.id: r.name for r in arctic.sql(f"SELECT id, name FROM db.dim VERSION AS OF {version}").collect()
        }
        assert all(expected[r[1]] == r[2] for r in rows if r[3] == version)


def test_bad_input_is_a_one_line_error(arctic, spark, tmp_path):
    arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, PRIMARY KEY (id)) USING arctic")
    arctic.sql("CREATE TABLE db.plain (id BIGINT, name STRING) USING arctic")
    stream = Facts(spark, str(tmp_path / "facts")).stream()
    cases = [
        (lambda: lookup_join(spark.range(3), "db.dim", on="id"), InvalidArgumentError, "must be a streaming"),
        (lambda: lookup_join(stream, "db.dim", on="id", how="right"), InvalidArgumentError, 'how="inner"'),
        (
            lambda: lookup_join(stream, "db.dim", on="nope"),
            InvalidArgumentError,
            "nope is not a column of db.dim",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on="id", columns=["id", "fid"]),
            InvalidArgumentError,
            "fid is not a column",
        ),
        (
            lambda: lookup_join(stream.withColumnRenamed("fid", "name"), "db.dim", on="id"),
            InvalidArgumentError,
            "name is in both",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on="id", options={"lookup.bucket": "4"}),
            InvalidArgumentError,
            "Unknown lookup_join option lookup.bucket",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on="id", options={"lookup.buckets": "6"}),
            InvalidArgumentError,
            "power of two",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on="id", options={"lookup.reloading.interval": "soon"}),
            InvalidArgumentError,
            "duration",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on="id", options={"lookup.buckets": str(2**20)}),
            InvalidArgumentError,
            "power of two up to 4096",
        ),
        (
            lambda: lookup_join(stream, "db.dim", on=None),
            InvalidArgumentError,
            "must name one or more columns",
        ),
        (lambda: lookup_join(stream, "db.plain", on="id"), UnsupportedOperationError, "primary key"),
    ]
    for action, kind, words in cases:
        with pytest.raises(kind) as caught:
            action()
        assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_fact_key_the_dimension_type_cannot_hold_exactly_matches_nothing(arctic, spark, tmp_path):
    """As in a Spark join, which compares in the wider type: 1.7 is not BIGINT 1, and a BIGINT beyond
    INT is no INT key (it used to kill the stream with a cast overflow)."""
    arctic.sql("CREATE TABLE db.dim (k BIGINT, val STRING, PRIMARY KEY (k)) USING arctic")
    arctic.sql("CREATE TABLE db.narrow (k INT, val STRING, PRIMARY KEY (k)) USING arctic")
    arctic.sql("INSERT INTO db.dim VALUES (1, 'one'), (2, 'two')")
    arctic.sql("INSERT INTO db.narrow VALUES (1, 'one')")
    folder = tmp_path / "facts"
    folder.mkdir()
    pq.write_table(
        pa.table({"fid": pa.array([1, 2, 3], pa.int64()), "k": pa.array([1.0, 1.7, 2.0])}),
        str(folder / "f0.parquet"),
    )
    wide = tmp_path / "wide"
    wide.mkdir()
    pq.write_table(
        pa.table({"fid": pa.array([1, 2], pa.int64()), "k": pa.array([1, 2**32 + 1], pa.int64())}),
        str(wide / "f0.parquet"),
    )
    doubles = spark.readStream.schema("fid BIGINT, k DOUBLE").parquet(str(folder))
    bigints = spark.readStream.schema("fid BIGINT, k BIGINT").parquet(str(wide))
    batches: list = []
    for joined, checkpoint in [
        (lookup_join(doubles, "db.dim", on="k"), "ck1"),
        (lookup_join(bigints, "db.narrow", on="k", how="left"), "ck2"),
    ]:
        query = _start(joined, str(tmp_path / checkpoint), batches)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    assert _rows(batches) == [(1, 1, "one"), (1, 1.0, "one"), (2, 2**32 + 1, None), (3, 2.0, "two")]


def test_a_dimension_dropped_and_created_again_or_with_a_renamed_column_fails_the_query(
    arctic, spark, tmp_path
):
    """The caches hold the old table's rows in the old columns: a batch after either change would
    join wrong rows, or NULLs, so the query fails in one line; restarted, it joins the table as it is."""
    from pyspark.errors import StreamingQueryException

    for change in (
        [
            "DROP TABLE db.dim PURGE",
            "CREATE TABLE db.dim (id BIGINT, name STRING, PRIMARY KEY (id))",
            "INSERT INTO db.dim VALUES (1, 'new1')",
            "INSERT INTO db.dim VALUES (4, 'new4')",
            "INSERT INTO db.dim VALUES (4, 'new4b')",
        ],
        ["ALTER TABLE db.dim RENAME COLUMN name TO title", "UPDATE db.dim SET title = 'A' WHERE id = 1"],
    ):
        arctic.sql("DROP TABLE IF EXISTS db.dim PURGE")
        arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, PRIMARY KEY (id)) USING arctic")
        arctic.sql("INSERT INTO db.dim VALUES (1, 'old1'), (2, 'old2')")
        arctic.sql("INSERT INTO db.dim VALUES (3, 'old3')")
        facts = Facts(spark, str(tmp_path / f"facts{len(change)}"))
        batches: list = []
        query = _start(
            lookup_join(facts.stream(), "db.dim", on="id", how="left", options={"lookup.buckets": "1"}),
            str(tmp_path / f"ck{len(change)}"),
            batches,
        )
        try:
            facts.add(id=[1, 2])
            query.processAllAvailable()
            assert _rows(batches) == [(0, 1, "old1"), (1, 2, "old2")]
            for statement in change:
                arctic.sql(statement)
            facts.add(id=[1, 2])
            with pytest.raises(
                StreamingQueryException,
                match="dropped and created again" if len(change) > 2 else "column name .* was renamed",
            ):
                query.processAllAvailable()
            assert len(batches) == 1
        finally:
            query.stop()


def test_the_enrich_example_meets_each_customer_as_it_stood(arctic, spark, tmp_path):
    """examples/streaming/enrich.py in this process (its connect() finds the running SparkSession)."""
    import runpy

    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "streaming", "enrich.py")
    runpy.run_path(script)["main"](str(tmp_path / "shop"))
    rows = spark.read.format("arctic").load("shop.enriched_orders").orderBy("order_id").collect()
    assert [(r.order_id, r.name, r.tier) for r in rows] == [
        (100, "Ada", "gold"),
        (101, "Grace", "silver"),
        (102, None, None),  # customer 3 does not exist yet
        (103, None, None),
        (104, "Grace", "gold"),
        (105, "Linus", "bronze"),
    ]  # 1 deleted, 2 promoted, 3 new
    assert rows[0].customer_version < rows[3].customer_version


def test_an_aggregation_dimension_is_met_as_its_folded_rows(arctic, spark, tmp_path):
    """A dimension whose engine folds (sums and the last non-NULL name): each fact meets the folded
    row of the version it was planned at, equal to a time-travel read of that version, and a write
    changing a key twice adds both."""
    arctic.sql(
        "CREATE TABLE db.dim (id BIGINT, total BIGINT, name STRING, PRIMARY KEY (id)) USING arctic "
        "TBLPROPERTIES ('merge-engine' = 'aggregation', 'fields.total.aggregate-function' = 'sum')"
    )
    arctic.sql("INSERT INTO db.dim VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, NULL)")
    facts = Facts(spark, str(tmp_path / "facts"))
    batches: list = []
    query = _start(
        lookup_join(facts.stream(), "db.dim", on="id", version_column="v", options={"lookup.buckets": "2"}),
        str(tmp_path / "ck"),
        batches,
    )
    try:
        facts.add(id=[1, 2, 3])
        query.processAllAvailable()
        arctic.sql("INSERT INTO db.dim VALUES (1, 5, NULL), (3, 1, 'c'), (1, 100, 'a2')")
        arctic.sql("DELETE FROM db.dim WHERE id = 2")
        facts.add(id=[1, 2, 3])
        query.processAllAvailable()
    finally:
        query.stop()
    rows = _rows(batches)
    assert [r[1:4] for r in rows] == [(1, 10, "a"), (2, 20, "b"), (3, 30, None), (1, 115, "a2"), (3, 31, "c")]
    for version in sorted({r[4] for r in rows}):
        expected = {
            r.id: (r.total, r.name)
            for r in arctic.sql(f"SELECT id, total, name FROM db.dim VERSION AS OF {version}").collect()
        }
        assert all(expected[r[1]] == r[2:4] for r in rows if r[4] == version)
