"""Commit and planning cost against the history a table keeps (issue 28, item 5).

    .venv/bin/python -m benchmarks.commit_history [--points 50,500,2000] [--rounds 5] [--rows 1000]

One process, one keyed table per point (``id BIGINT`` key, ``v STRING``, ``amount DOUBLE``; 100,000
rows loaded with ``df.write``), each given that many retained versions, committed through pyiceberg
as the sink's commits are (``arctic.operation = write``), ten versions per catalog commit so that
2,000 take minutes, not a quarter of an hour. By default those versions add no file: the history
grows and the files a read or a commit sees do not, so what the figures show is the cost of the
history alone. ``--history-files`` gives each of them a one-row file instead (a stream that nothing
optimizes: the live change files grow with the history too). Then ``--rounds`` rounds, the points
interleaved inside each round, timing per point:

- ``df.write``: ``df.write.format("arctic").mode("append").save()`` of a cached ``--rows``-row batch
  (70% updates, 20% new keys, 10% deletes): what one streaming micro-batch costs, Spark job included;
- ``arrow``: the same write without Spark (the task's pyarrow write and the driver's commit in this
  process): the sink's own cost;
- ``version as of``: planning ``SELECT * FROM t VERSION AS OF v`` (``session.sql``, no job run) for
  the version 10 commits back;
- ``stream plan``: what a change stream does to fix and plan one micro-batch of the last commit
  (``latestOffset`` and ``partitions`` of the ``readStream`` source; no job run);
- ``json write``/``json parse``: the change store's metadata (every retained snapshot) serialized
  and parsed once, by pyiceberg itself (the floor every commit paid before) and as arctic-sql does
  now (``table/files/metadata_cache.py``: each snapshot's JSON kept from earlier writes; the snapshots
  parsed before reused when another process wrote the file).

Prints the median per point, with the ratio to the first point, and writes
``benchmarks/results/commit_history.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid

import numpy as np
import pyarrow as pa

import arctic_sql
from arctic_sql.spark import local_session

TIMED = (
    "df.write",
    "arrow",
    "version as of",
    "stream plan",
    "json write pyiceberg",
    "json write kept",
    "json parse pyiceberg",
    "json parse reused",
)
LOADED_ROWS = 100_000
PER_CATALOG_COMMIT = (
    10  # versions staged per catalog commit while building history (more: staging costs more)
)


def _batch(rng: np.random.Generator, next_key: int, rows: int) -> tuple[pa.Table, int]:
    updates, inserts = int(rows * 0.7), int(rows * 0.2)
    deletes = rows - updates - inserts
    old = rng.choice(LOADED_ROWS, updates + deletes, replace=False)
    ids = np.concatenate([old, np.arange(next_key, next_key + inserts)]).astype(np.int64)
    kinds = ["upsert"] * updates + ["delete"] * deletes + ["upsert"] * inserts
    table = pa.table(
        {
            "id": ids,
            "v": [f"v{i}" for i in ids],
            "amount": rng.integers(0, 10_000, len(ids)).astype(np.float64),
            "_change_type": kinds,
        }
    )
    return table, next_key + inserts


def _write_plan(table):  # noqa: ANN001, ANN202 - ArcticTable -> WritePlan
    from arctic_sql.table.format.layout import table_root
    from arctic_sql.table.writing.arrow_files import WriteTarget
    from arctic_sql.table.writing.arrow_tasks import CHANGES, WritePlan

    target = WriteTarget.of(table, "change")
    return WritePlan(
        str(table.identifier),
        table_root(table.base.location()),
        target,
        target.new_location(),
        CHANGES,
        None,
        "write",
        "in one write",
    )


def arrow_commit(session, name: str, batch: pa.Table) -> None:  # noqa: ANN001
    """The sink's path without Spark: a task's write and the driver's commit, in this process."""
    from arctic_sql.table.writing.arrow_commit import commit_write
    from arctic_sql.table.writing.arrow_tasks import write_task

    table = session.table(name)
    plan = _write_plan(table)
    commit_write(table, plan, write_task(plan, batch.to_batches(), 0), fresh=True)


def grow(session, name: str, versions_kept: int, rng: np.random.Generator, *, files: bool) -> None:  # noqa: ANN001
    """Give ``name`` ``versions_kept`` retained versions, of one upserted row each with ``files``."""
    from arctic_sql.table.format import versions
    from arctic_sql.table.writing import commit
    from arctic_sql.table.writing.arrow_tasks import write_task

    done = len(session.table(name).change.snapshots())
    while done < versions_kept:
        table = session.table(name)
        count = min(PER_CATALOG_COMMIT, versions_kept - done)
        paths = []
        for _ in range(count if files else 0):
            key = int(rng.integers(0, LOADED_ROWS))
            row = pa.table({"id": [key], "v": [f"h{key}"], "amount": [1.0], "_change_type": ["upsert"]})
            paths.extend(f.path for f in write_task(_write_plan(table), row.to_batches(), 0))
        store = table.change
        tx = commit._Transaction(store)  # one staged metadata per snapshot, as the committer's own
        added = commit.data_files(store, paths) if files else [None] * count
        for data_file in added:
            properties = {
                versions.OPERATION: versions.Operation.WRITE,
                versions.UPSERTED_ROWS: str(int(files)),
                versions.DELETED_ROWS: "0",
                versions.COMMIT_ID: uuid.uuid4().hex,
            }
            with tx.update_snapshot(snapshot_properties=properties).merge_append() as append:
                if data_file is not None:
                    append.append_data_file(data_file)
        tx.commit_transaction()
        done += count


def plan_version_as_of(session, name: str) -> float:  # noqa: ANN001
    version = session.sql(f"SELECT get_latest_version('{name}', 11)").collect()[0][0]
    start = time.perf_counter()
    session.sql(f"SELECT * FROM {name} VERSION AS OF {version}")
    return time.perf_counter() - start


def plan_stream_batch(session, name: str) -> float:  # noqa: ANN001
    """``latestOffset`` and ``partitions`` of the change stream for a batch holding the last commit."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from arctic_sql.datasource import read_options
    from arctic_sql.datasource.source import installed_spec
    from arctic_sql.datasource.stream_read import ArcticStreamReader
    from arctic_sql.table.format import versions

    spec = installed_spec(session.spark)
    options = read_options.parse({"readChangeFeed": "true"})
    table = spec.load_table(name)
    history = versions.history(table.base, table.change)
    reader = ArcticStreamReader(spec, name, options, read_options.output_schema(table, options))
    start = {"version": history.commits[-2].version, "table": str(table.base.metadata.table_uuid)}
    began = time.perf_counter()
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    took = time.perf_counter() - began
    assert end["version"] == history.latest and parts, "the stream planned no batch"
    return took


def metadata_json(session, name: str) -> dict[str, float]:  # noqa: ANN001
    from pyiceberg.table.metadata import TableMetadataUtil

    from arctic_sql.table.files import metadata_cache

    metadata = session.table(name).change.metadata
    text = metadata.model_dump_json(exclude_none=True)
    metadata_cache.metadata_json(metadata)  # the pieces of every snapshot, as after a commit
    metadata_cache.parse_metadata(text)  # every snapshot known, as after a load
    return {
        "json write pyiceberg": _timed(lambda: metadata.model_dump_json(exclude_none=True)),
        "json write kept": _timed(lambda: metadata_cache.metadata_json(metadata)),
        "json parse pyiceberg": _timed(lambda: TableMetadataUtil.parse_raw(text)),
        "json parse reused": _timed(lambda: metadata_cache.parse_metadata(text)),
    }


def _timed(fn) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--points", default="50,500,2000", help="retained versions per table (default 50,500,2000)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1000, help="rows per timed commit (default 1000)")
    parser.add_argument(
        "--history-files", action="store_true", help="a one-row file in every version of the history"
    )
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "commit_history.json")
    )
    args = parser.parse_args(argv)
    points = [int(p) for p in args.points.split(",")]
    work = tempfile.mkdtemp(prefix="commit-history-")
    spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
    session.sql("CREATE DATABASE db")
    rng = np.random.default_rng(42)
    load = pa.table(
        {
            "id": np.arange(LOADED_ROWS, dtype=np.int64),
            "v": [f"v{i}" for i in range(LOADED_ROWS)],
            "amount": np.zeros(LOADED_ROWS),
        }
    )
    names = {p: f"db.h{p}" for p in points}
    for point, name in names.items():
        session.sql(f"CREATE TABLE {name} (id BIGINT, v STRING, amount DOUBLE, PRIMARY KEY (id))")
        spark.createDataFrame(load.to_pandas()).write.format("arctic").mode("overwrite").save(name)
        began = time.perf_counter()
        grow(session, name, point, rng, files=args.history_files)
        print(f"{name}: {point} versions kept, built in {time.perf_counter() - began:.1f} s", flush=True)
    times: dict[int, dict[str, list[float]]] = {p: {k: [] for k in TIMED} for p in points}
    next_key = LOADED_ROWS
    for round_ in range(args.rounds + 1):  # round 0 warms up (first Spark jobs, imports): not kept
        for point, name in names.items():
            batch, next_key = _batch(rng, next_key, args.rows)
            frame = spark.createDataFrame(batch.to_pandas()).cache()
            frame.count()
            measured = {
                "df.write": _timed(lambda: frame.write.format("arctic").mode("append").save(name)),
                "arrow": _timed(lambda: arrow_commit(session, name, batch)),
                "version as of": plan_version_as_of(session, name),
                "stream plan": plan_stream_batch(session, name),
            }
            measured.update(metadata_json(session, name))
            frame.unpersist()
            if round_:
                for key, seconds in measured.items():
                    times[point][key].append(seconds)
        print(
            f"round {round_}{' (warm-up)' if not round_ else ''} done; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    medians = {p: {k: statistics.median(v) for k, v in times[p].items()} for p in points}
    first = points[0]
    print(f"\nmedians of {args.rounds} rounds, {args.rows}-row commits; ratio to {first} versions kept")
    print(f"{'':>22}" + "".join(f"{p:>22}" for p in points))
    for key in TIMED:
        cells = [
            f"{medians[p][key] * 1000:9.1f} ms ({medians[p][key] / medians[first][key]:4.2f}x)"
            for p in points
        ]
        print(f"{key:>22}" + "".join(f"{c:>22}" for c in cells))
    snapshots = {p: len(session.table(names[p]).change.snapshots()) for p in points}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "points": points,
                "rows": args.rows,
                "history_files": args.history_files,
                "rounds": args.rounds,
                "snapshots_after": snapshots,
                "medians_s": medians,
                "all_s": times,
                "load_after": os.getloadavg(),
            },
            f,
            indent=1,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
