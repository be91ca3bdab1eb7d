"""``writeStream.format("arctic")``: each micro-batch one version, exactly once, across replays,
failed commits and a killed driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from host_load import scaled

from arctic_sql.table.format import versions

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, v STRING, seq BIGINT, _change_type STRING"
DRIVER = os.path.join(os.path.dirname(__file__), "stream_sink_driver.py")


def _write_files(folder, batches, first=0):
    """One JSON-lines file per batch, modification times in batch order (the file source's order)."""
    os.makedirs(folder, exist_ok=True)
    for number, rows in enumerate(batches, start=first):
        path = os.path.join(folder, f"b{number:04d}.json")
        with open(path, "w") as f:
            f.write(
                "\n".join(
                    json.dumps(dict(zip(("id", "v", "seq", "_change_type"), r, strict=True))) for r in rows
                )
            )
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))


def _apply(model, rows):
    newest = {}
    for row in rows:
        if row[0] not in newest or row[2] > newest[row[0]][2]:
            newest[row[0]] = row
    for key, (_, v, seq, kind) in newest.items():
        if kind == "delete":
            model.pop(key, None)
        else:
            model[key] = (v, seq)


def _batches(count, keys=40, first_seq=0):
    import random

    rng = random.Random(count * 1000 + first_seq)
    out = []
    for b in range(count):
        ids = rng.sample(range(keys), 12)
        out.append(
            [(i, f"v{b}-{i}", first_seq + b, "delete" if n % 4 == 3 else "upsert") for n, i in enumerate(ids)]
        )
    return out


def _run(arctic, source, checkpoint, *, sequence=True, partitions=None, table="db.t"):
    stream = arctic.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
    if partitions:
        stream = stream.repartition(partitions)
    writer = (
        stream.writeStream.format("arctic")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    if sequence:
        writer = writer.option("sequenceColumn", "seq")
    query = writer.start(table)
    query.awaitTermination()
    return query


def _rows(arctic, table="db.t"):
    return {r[0]: (r[1], r[2]) for r in arctic.sql(f"SELECT id, v, seq FROM {table}").collect()}


def _stream_commits(arctic, table="db.t"):
    store = arctic.table(table).change
    summaries = [versions.summary_of(s) for s in versions.snapshots_in_order(store)]
    return [
        (s[versions.STREAM_QUERY_ID], int(s[versions.STREAM_BATCH_ID]))
        for s in summaries
        if versions.STREAM_QUERY_ID in s
    ]


@pytest.fixture
def keyed(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))")
    return arctic


def test_stream_follows_the_model_one_version_per_batch_and_a_replay_is_skipped(keyed, tmp_path):
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "ck")
    batches = _batches(4)
    _write_files(source, batches)
    query = _run(keyed, source, checkpoint, partitions=2)
    model: dict = {}
    for rows in batches:
        _apply(model, rows)
    assert _rows(keyed) == model
    assert _stream_commits(keyed) == [(str(query.id), b) for b in range(4)]
    # Spark replays a batch whose commit it did not record: the table already holds it.
    for name in ("3", ".3.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))
    more = _batches(1, first_seq=10)
    _write_files(source, more, first=4)
    again = _run(keyed, source, checkpoint, partitions=2)
    assert again.id == query.id
    _apply(model, more[0])
    assert _rows(keyed) == model
    assert _stream_commits(keyed) == [(str(query.id), b) for b in range(5)]


def test_sequence_column_keeps_the_newest_change_of_a_key_across_tasks(keyed, tmp_path):
    source = str(tmp_path / "in")
    rows = [
        (1, "old", 5, "upsert"),
        (1, "newest", 9, "upsert"),
        (1, "middle", 7, "upsert"),
        (2, "kept", 3, "upsert"),
        (3, "gone", 1, "upsert"),
        (3, None, 2, "delete"),
    ]
    _write_files(source, [rows])
    _run(keyed, source, str(tmp_path / "ck"), partitions=3)
    assert _rows(keyed) == {1: ("newest", 9), 2: ("kept", 3)}


@pytest.mark.parametrize(
    ("rows", "sequence", "message"),
    [
        (
            [(1, "a", 1, "upsert"), (1, "b", 2, "upsert")],
            False,
            r"STREAM into db.t writes primary key \(id=1\) 2 times in one micro-batch",
        ),
        (
            [(1, "a", 4, "upsert"), (1, "b", 4, "upsert")],
            True,
            r"primary key \(id=1\) has two changes with the same sequence value 4",
        ),
    ],
)
def test_ambiguous_changes_of_a_key_stop_the_stream_and_write_nothing(
    keyed, tmp_path, rows, sequence, message
):
    source = str(tmp_path / "in")
    _write_files(source, [rows])
    with pytest.raises(Exception, match=message):
        _run(keyed, source, str(tmp_path / "ck"), sequence=sequence, partitions=2)
    assert _stream_commits(keyed) == []


def test_two_queries_write_one_table(keyed, tmp_path):
    a, b = [(i, "a", 1, "upsert") for i in range(10)], [(i, "b", 1, "upsert") for i in range(10, 20)]
    _write_files(str(tmp_path / "a"), [a])
    _write_files(str(tmp_path / "b"), [b])
    qa = _run(keyed, str(tmp_path / "a"), str(tmp_path / "cka"))
    qb = _run(keyed, str(tmp_path / "b"), str(tmp_path / "ckb"))
    assert _rows(keyed) == {i: (v, 1) for i, v, _, _ in a + b}
    assert _stream_commits(keyed) == [(str(qa.id), 0), (str(qb.id), 0)]


def test_a_table_without_a_key_gets_appends_and_a_replay_is_skipped_too(arctic, tmp_path):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "ck")
    _write_files(source, [[(1, "a", 1, "upsert")], [(1, "a", 2, "upsert")]])

    def run():
        stream = (
            arctic.spark.readStream.schema("id BIGINT, v STRING").option("maxFilesPerTrigger", 1).json(source)
        )
        query = (
            stream.writeStream.format("arctic")
            .option("checkpointLocation", checkpoint)
            .option("path", "db.log")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    run()
    for name in ("1", ".1.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))
    run()
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.log").collect()) == [(1, "a"), (1, "a")]
    assert [r[0] for r in arctic.sql("SELECT operation FROM db.log.history").collect()] == [
        "stream",
        "stream",
    ]


def test_complete_mode_is_refused(keyed, tmp_path):
    source = str(tmp_path / "in")
    _write_files(source, [[(1, "a", 1, "upsert")]])
    counts = (
        keyed.spark.readStream.schema(SCHEMA)
        .json(source)
        .groupBy("id")
        .count()
        .withColumnRenamed("count", "seq")
    )
    with pytest.raises(Exception, match="output mode append or update, not complete"):
        query = (
            counts.writeStream.format("arctic")
            .outputMode("complete")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start("db.t")
        )
        query.awaitTermination()


def test_debezium_envelopes_stream_into_the_table(keyed, tmp_path):
    import arctic_sql

    def event(op, before, after, ts, lsn):
        return {"payload": {"op": op, "before": before, "after": after, "source": {"ts_ms": ts, "lsn": lsn}}}

    row = lambda i, v, seq: {"id": i, "v": v, "seq": seq}  # noqa: E731
    files = [
        [
            event("r", None, row(1, "one", 1), 100, 1),
            event("c", None, row(2, "two", 1), 100, 2),
            event("c", None, row(3, "three", 1), 100, 3),
        ],
        # one key changed twice at the same ts_ms: the lsn orders them; a delete carries only `before`
        [
            event("u", row(1, "one", 1), row(1, "uno", 2), 200, 11),
            event("u", row(1, "uno", 2), row(1, "eins", 3), 200, 12),
            event("d", row(2, "two", 1), None, 200, 13),
            event("t", None, None, 200, 14),
        ],
    ]
    source = tmp_path / "cdc"
    source.mkdir()
    for n, events in enumerate(files):
        path = source / f"e{n}.json"
        path.write_text("\n".join(json.dumps(e) for e in events))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
    envelope = (
        "payload STRUCT<op: STRING, before: STRUCT<id: BIGINT, v: STRING, seq: BIGINT>, "
        "after: STRUCT<id: BIGINT, v: STRING, seq: BIGINT>, source: STRUCT<ts_ms: BIGINT, lsn: BIGINT>>"
    )
    changes = arctic_sql.cdc.debezium(
        keyed.spark.readStream.schema(envelope).option("maxFilesPerTrigger", 1).json(str(source))
    )
    query = (
        changes.writeStream.format("arctic")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .option("sequenceColumn", arctic_sql.cdc.SEQUENCE)
        .trigger(availableNow=True)
        .start("db.t")
    )
    query.awaitTermination()
    assert _rows(keyed) == {1: ("eins", 3), 3: ("three", 1)}
    assert [b for _, b in _stream_commits(keyed)] == [0, 1]


# --- a driver of its own: faults need their environment before the JVM starts -----------------


def _driver(warehouse, source, checkpoint, *extra, env=None):
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    return subprocess.Popen(
        [sys.executable, DRIVER, warehouse, source, checkpoint, *extra],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(process, timeout=240):
    out, _ = process.communicate(timeout=scaled(timeout))
    return process.returncode, out


def _table(warehouse):
    from arctic_sql.options import load_catalog
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.identifiers import TableIdentifier

    catalog = load_catalog(warehouse, "arctic", None, None)
    return ArcticCatalog(catalog).load_table(TableIdentifier("db", "t"))


def _committed_batches(table):
    summaries = [versions.summary_of(s) for s in versions.snapshots_in_order(table.change)]
    return [int(s[versions.STREAM_BATCH_ID]) for s in summaries if versions.STREAM_BATCH_ID in s]


def _read_rows(table):
    import pyarrow.parquet as pq

    from arctic_sql.table.reading.scan import plan_read

    plan = plan_read(table)
    rows: dict = {}
    changes = sorted(plan.change_files, key=lambda f: f.sequence_number)
    for entry in list(plan.base_files) + changes:
        for r in pq.read_table(entry.path.removeprefix("file:")).to_pylist():
            if entry.is_delete:
                rows.pop(r["id"], None)
            else:
                rows[r["id"]] = (r["v"], r["seq"])
    return rows


def test_a_failed_commit_then_a_killed_driver_leave_each_batch_committed_once(tmp_path):
    """Three drivers on one checkpoint: the first fails right after committing batch 0 (abort() must
    keep its files), the second is SIGKILLed mid-stream, the third finishes with availableNow."""
    warehouse, source, checkpoint = str(tmp_path / "wh"), str(tmp_path / "in"), str(tmp_path / "ck")
    batches = _batches(8)
    _write_files(source, batches)
    code, out = _finish(
        _driver(warehouse, source, checkpoint, env={"ARCTIC_FAULT": "raise:sink-after-commit"})
    )
    assert code != 0 and "injected fault at sink-after-commit" in out, out[-3000:]
    assert _committed_batches(_table(warehouse)) == [0]  # committed, then commit() failed and abort() ran

    process = _driver(warehouse, source, checkpoint, "--forever")
    deadline = time.monotonic() + scaled(180)
    while time.monotonic() < deadline and len(_committed_batches(_table(warehouse))) < 3:
        time.sleep(0.5)  # polling for the third commit, not timing anything
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)

    code, out = _finish(_driver(warehouse, source, checkpoint))
    assert code == 0 and "DONE" in out, out[-3000:]
    table = _table(warehouse)
    model: dict = {}
    for rows in batches:
        _apply(model, rows)
    # Spark may put two files in one batch after a restart: compare with its own commit log.
    logged = sorted(int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit())
    committed = _committed_batches(table)
    assert committed == logged == list(range(len(logged)))  # each batch once; batch 0's replay skipped
    assert _read_rows(table) == model  # and every committed file is still there
