"""W0 small commits through the arctic sink's write path and SQL MERGE, against delta-rs ``merge`` of the same batches.

    .venv/bin/python -m benchmarks.stream_sink [--rows 200000] [--batches 1000,10000,100000] [--commits 5]

One process, one table of ``--rows`` rows per system, then for each batch size ``--commits`` batches
(70% updates of existing keys, 20% new keys, 10% deletes), applied commit by commit to both systems in
turn. Timed per commit:

- ``arctic df.write``: ``df.write.format("arctic").mode("append").save()`` of a cached DataFrame
  holding the batch with ``_change_type`` (the same write a micro-batch of the streaming sink makes:
  one Spark job whose tasks write with pyarrow, then the driver-side commit with pyiceberg);
- ``arctic MERGE``: the SQL a CDC pipeline would run instead, ``MERGE INTO db.merged t USING batch s
  ON t.id = s.id WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN UPDATE SET * WHEN NOT
  MATCHED AND s.op <> 'D' THEN INSERT *`` over a temp view of the same batch (cached);
- ``arctic arrow``: the same write path without Spark (the task's pyarrow write and the driver's
  commit called in this process), i.e. what the sink itself costs;
- ``delta-rs merge``: ``DeltaTable.merge`` (delete when matched and ``op = 'D'``, update, insert);
- ``no-op sink``: the same ``df.write`` into a Python data source whose tasks only count rows and whose
  commit does nothing: the floor Spark's Python data source API sets for any such writer.

Prints the median per batch size with the ratios against delta-rs and writes
``benchmarks/results/stream_sink.json``.

``--long N`` then makes N more commits of ``--long-rows`` rows, ``df.write`` and delta-rs merge in
turn, and prints the medians per window of 100 commits: what a stream that has run for hours pays
per commit once its tables hold hundreds of versions (Iceberg metadata grows with every snapshot
kept; Delta's log is checkpointed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

import arctic_sql
from arctic_sql.spark import local_session

SYSTEMS = ("arctic df.write", "arctic MERGE", "arctic arrow", "delta-rs merge", "no-op sink")

MERGE = (
    "MERGE INTO db.merged t USING batch s ON t.id = s.id WHEN MATCHED AND s.op = 'D' THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"
)


def _batch(rng: np.random.Generator, next_key: int, existing: int, rows: int) -> tuple[pa.Table, int]:
    updates, inserts = int(rows * 0.7), int(rows * 0.2)
    deletes = rows - updates - inserts
    old = rng.choice(existing, updates + deletes, replace=False)
    ids = np.concatenate([old, np.arange(next_key, next_key + inserts)])
    ops = ["U"] * updates + ["D"] * deletes + ["U"] * inserts
    table = pa.table(
        {
            "id": ids.astype(np.int64),
            "v": [f"v{i}" for i in ids],
            "amount": rng.integers(0, 10_000, len(ids)).astype(np.float64),
            "op": ops,
        }
    )
    return table, next_key + inserts


def delta_merge(path: str, batch: pa.Table) -> None:
    from deltalake import DeltaTable

    (
        DeltaTable(path)
        .merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.op = 'D'")
        .when_matched_update_all(except_cols=["op"])
        .when_not_matched_insert_all(predicate="s.op <> 'D'", except_cols=["op"])
        .execute()
    )


def _arrow_commit(session, batch: pa.Table) -> None:
    """The sink's path without Spark: a task's write and the driver's commit, in this process."""
    from arctic_sql.table.format.layout import table_root
    from arctic_sql.table.writing.arrow_commit import commit_write
    from arctic_sql.table.writing.arrow_files import WriteTarget
    from arctic_sql.table.writing.arrow_tasks import CHANGES, WritePlan, write_task

    table = session.table("db.arrow")
    target = WriteTarget.of(table, "change")
    plan = WritePlan(
        "db.arrow",
        table_root(table.base.location()),
        target,
        target.new_location(),
        CHANGES,
        None,
        "write",
        "in one write",
    )
    files = write_task(plan, _with_change_type(batch).to_batches(), 0)
    commit_write(table, plan, files, fresh=True)  # as the sink: the table was loaded just now


def _with_change_type(batch: pa.Table) -> pa.Table:
    import pyarrow.compute as pc

    kinds = pc.if_else(pc.equal(batch["op"], "D"), "delete", "upsert")
    return batch.drop_columns(["op"]).append_column("_change_type", kinds)


def register_noop_sink(spark) -> None:  # noqa: ANN001
    """Register `noop_arrow`: a Python data source whose writer only counts rows (the floor of such a sink)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Counted(DataSourceArrowWriter):
        def write(self, iterator) -> WriterCommitMessage:  # noqa: ANN001
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages) -> None:  # noqa: ANN001
            pass

    class NoOp(DataSource):
        @classmethod
        def name(cls) -> str:
            return "noop_arrow"

        def writer(self, schema, overwrite) -> Counted:  # noqa: ANN001
            return Counted()

    spark.dataSource.register(NoOp)


def _timed(fn) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batches", default="1000,10000,100000")
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--long", type=int, default=0, help="commits of the long run (0: none)")
    parser.add_argument("--long-rows", type=int, default=1000)
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "stream_sink.json")
    )
    args = parser.parse_args()
    from deltalake import write_deltalake

    work = tempfile.mkdtemp(prefix="stream-sink-")
    spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
    session.sql("CREATE DATABASE db")
    register_noop_sink(spark)
    rng = np.random.default_rng(42)
    load = pa.table(
        {
            "id": np.arange(args.rows, dtype=np.int64),
            "v": [f"v{i}" for i in range(args.rows)],
            "amount": np.zeros(args.rows),
        }
    )
    for name in ("sink", "arrow", "merged"):
        session.sql(f"CREATE TABLE db.{name} (id BIGINT, v STRING, amount DOUBLE, PRIMARY KEY (id))")
        spark.createDataFrame(load).write.format("arctic").mode("overwrite").save(f"db.{name}")
    delta = os.path.join(work, "delta")
    write_deltalake(delta, load)
    warm, _ = _batch(rng, args.rows, args.rows, 100)
    _run_one(spark, session, delta, warm)  # first Spark job, worker start-up, imports: not timed
    results, next_key = {}, args.rows
    for size in [int(s) for s in args.batches.split(",")]:
        times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
        for _ in range(args.commits):
            batch, next_key = _batch(rng, next_key, args.rows, size)
            for name, seconds in _run_one(spark, session, delta, batch).items():
                times[name].append(seconds)
        results[size] = {name: statistics.median(values) for name, values in times.items()}
        results[size]["all"] = times
        _print(size, results[size])
    long_run = _long_run(spark, session, delta, rng, next_key, args) if args.long else None
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {"rows": args.rows, "commits": args.commits, "results": results, "long": long_run}, f, indent=2
        )
    spark.stop()


def _run_one(spark, session, delta: str, batch: pa.Table) -> dict[str, float]:  # noqa: ANN001
    frame = spark.createDataFrame(_with_change_type(batch).to_pandas()).cache()
    frame.count()
    source = spark.createDataFrame(batch.to_pandas()).cache()
    source.count()
    source.createOrReplaceTempView("batch")
    out = {
        "arctic df.write": _timed(lambda: frame.write.format("arctic").mode("append").save("db.sink")),
        "arctic MERGE": _timed(lambda: session.sql(MERGE)),
        "arctic arrow": _timed(lambda: _arrow_commit(session, batch)),
        "delta-rs merge": _timed(lambda: delta_merge(delta, batch)),
        "no-op sink": _timed(lambda: frame.write.format("noop_arrow").mode("append").save("x")),
    }
    frame.unpersist()
    source.unpersist()
    return out


def _long_run(spark, session, delta: str, rng: np.random.Generator, next_key: int, args) -> list[dict]:  # noqa: ANN001
    """``args.long`` commits of ``args.long_rows`` rows, both systems in turn; medians per 100."""
    windows, times = [], {"arctic df.write": [], "delta-rs merge": []}
    for n in range(1, args.long + 1):
        batch, next_key = _batch(rng, next_key, args.rows, args.long_rows)
        frame = spark.createDataFrame(_with_change_type(batch).to_pandas()).cache()
        frame.count()
        times["arctic df.write"].append(
            _timed(lambda: frame.write.format("arctic").mode("append").save("db.sink"))
        )
        times["delta-rs merge"].append(_timed(lambda: delta_merge(delta, batch)))
        frame.unpersist()
        if n % 100 == 0 or n == args.long:
            arctic, deltars = (
                statistics.median(times[k][-100:]) for k in ("arctic df.write", "delta-rs merge")
            )
            versions = len(session.table("db.sink").change.snapshots())
            windows.append(
                {
                    "commits": n,
                    "arctic": arctic,
                    "delta": deltars,
                    "arctic_snapshots": versions,
                    "load": os.getloadavg()[0],
                }
            )
            print(
                f"commits {n - 99:>4}-{n:<4} ({versions} snapshots kept): arctic df.write {arctic * 1000:.0f} ms, "
                f"delta-rs merge {deltars * 1000:.0f} ms ({arctic / deltars:.2f}x); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    return windows


def _print(size: int, medians: dict) -> None:
    delta = medians["delta-rs merge"]
    parts = [
        f"{name} {medians[name] * 1000:.0f} ms ({medians[name] / delta:.2f}x)"
        for name in SYSTEMS
        if name != "delta-rs merge"
    ]
    print(f"{size:>7} rows/commit: delta-rs merge {delta * 1000:.0f} ms | " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
