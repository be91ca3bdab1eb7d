"""F1 end-to-end freshness: how long after a change file lands are its rows readable, with the optimizer on.

    .venv/bin/python -m benchmarks.freshness [--files 30] [--rows 10000] [--every 2.0] [--base 200000]

A "30-minute stream" squeezed in time: ``--files`` change files (one per simulated minute, 70%
updates of existing keys, 20% new keys, 10% deletes) land every ``--every`` seconds. Each file lands
in two folders at the same moment (the order alternating), one per system:

- ``arctic``: a Structured Streaming query (``trigger(processingTime="1 second")``) reads its folder
  and writes with the ``arctic`` sink, while the self-optimizing service runs in a thread of the same
  process (as ``examples/streaming/ingest.py`` and ``arctic-sql optimizer`` run it);
- ``delta-rs``: a thread polls its folder every second, as the trigger does, and merges each new file
  (delete when matched and ``op = 'D'``, update, insert); every 10 commits it compacts
  (``optimize.compact()``), its own way of keeping files in check, in the same loop.

A file's freshness is the time from its landing to the commit that made its rows readable: for
arctic, the commit time (``db.t.history``) of the version holding the file's marker row (found in
the table's change feed afterwards); for delta-rs, the moment its merge returned. Prints p50/p99/max
per system with the ratio, rows/s over the stream, and the table's files at the end; checks both
tables against the rows sent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import arctic_sql
from arctic_sql.optimizer.service import Service
from arctic_sql.spark import local_session
from arctic_sql.table.reading import metadata_rows
from benchmarks.stream_sink import delta_merge

MARKER_BASE = 1 << 40  # one marker row per file: id MARKER_BASE + file number
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("amount", pa.float64()), ("op", pa.string())])


def _file(
    rng: np.random.Generator, n: int, live: np.ndarray, next_key: int, rows: int
) -> tuple[pa.Table, int]:
    updates, inserts = int(rows * 0.7), int(rows * 0.2)
    deletes = rows - updates - inserts - 1
    old = rng.choice(live, updates + deletes, replace=False)
    ids = np.concatenate([old, np.arange(next_key, next_key + inserts), [MARKER_BASE + n]]).astype(np.int64)
    ops = ["U"] * updates + ["D"] * deletes + ["U"] * (inserts + 1)
    table = pa.table(
        {
            "id": ids,
            "v": [f"f{n}" for _ in ids],
            "amount": rng.integers(0, 10_000, len(ids)).astype(np.float64),
            "op": ops,
        },
        schema=SCHEMA,
    )
    return table, next_key + inserts


def _land(folder: str, name: str, table: pa.Table) -> None:
    temporary = os.path.join(folder, f".{name}.tmp")
    pq.write_table(table, temporary)
    os.replace(temporary, os.path.join(folder, name))  # appear whole


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


class DeltaLoop(threading.Thread):
    """Poll a folder every second; merge each new file into a delta-rs table; compact every 10 commits."""

    def __init__(self, folder: str, path: str) -> None:
        super().__init__(name="delta-rs", daemon=True)
        self.folder, self.path, self.done = folder, path, threading.Event()
        self.committed: dict[str, float] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        from deltalake import DeltaTable

        try:
            while True:
                finishing = self.done.is_set()
                new = sorted(
                    n for n in os.listdir(self.folder) if not n.startswith(".") and n not in self.committed
                )
                for name in new:
                    delta_merge(self.path, pq.read_table(os.path.join(self.folder, name)))
                    self.committed[name] = time.time()
                    if len(self.committed) % 10 == 0:
                        DeltaTable(self.path).optimize.compact()
                if finishing:
                    return
                self.done.wait(1.0)
        except BaseException as error:  # reported by the main thread
            self.error = error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--rows", type=int, default=10_000, help="changes per file")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between files")
    parser.add_argument("--base", type=int, default=200_000, help="rows in the table before the stream")
    args = parser.parse_args()
    from deltalake import DeltaTable, write_deltalake

    work = tempfile.mkdtemp(prefix="freshness-")
    spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
    session.sql("CREATE DATABASE db")
    session.sql("CREATE TABLE db.t (id BIGINT, v STRING, amount DOUBLE, PRIMARY KEY (id))")
    load = pa.table(
        {"id": np.arange(args.base, dtype=np.int64), "v": ["base"] * args.base, "amount": np.zeros(args.base)}
    )
    spark.createDataFrame(load).write.format("arctic").mode("overwrite").save("db.t")
    delta = os.path.join(work, "delta")
    write_deltalake(delta, load)
    folders = {system: os.path.join(work, f"landing-{system}") for system in ("arctic", "delta-rs")}
    for folder in folders.values():
        os.makedirs(folder)

    service = Service(spark, session.catalog)
    optimizer = threading.Thread(target=service.run, args=(2.0,), name="optimizer", daemon=True)
    optimizer.start()
    changes = (
        spark.readStream.schema("id BIGINT, v STRING, amount DOUBLE, op STRING")
        .option("maxFilesPerTrigger", 1)
        .parquet(folders["arctic"])
        .selectExpr("id", "v", "amount", "CASE WHEN op = 'D' THEN 'delete' ELSE 'upsert' END AS _change_type")
    )
    query = (
        changes.writeStream.format("arctic")
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .trigger(processingTime="1 second")
        .start("db.t")
    )
    delta_loop = DeltaLoop(folders["delta-rs"], delta)
    delta_loop.start()

    rng = np.random.default_rng(7)
    expected = {int(i): ("base", 0.0) for i in range(args.base)}
    live, next_key, landed = np.arange(args.base, dtype=np.int64), args.base, {}
    for n in range(args.files):
        table, next_key = _file(rng, n, live, next_key, args.rows)
        for row_id, v, amount, op in zip(*(table.column(c).to_pylist() for c in ("id", "v", "amount", "op"))):
            if op == "D":
                expected.pop(row_id, None)
            else:
                expected[row_id] = (v, amount)
        live = np.fromiter((k for k in expected if k < MARKER_BASE), dtype=np.int64)
        name = f"changes-{n:04d}.parquet"
        order = ("arctic", "delta-rs") if n % 2 == 0 else ("delta-rs", "arctic")
        for system in order:
            _land(folders[system], name, table)
        landed[name] = time.time()
        time.sleep(args.every)  # the stream's pace: files arrive over time
    query.processAllAvailable()
    delta_loop.done.set()
    delta_loop.join()
    query.stop()
    service.stopping.set()
    optimizer.join()
    if delta_loop.error is not None:
        raise delta_loop.error
    stream_end = time.time()

    table = session.table("db.t")
    committed_at = {row["version"]: row["committed_at_ms"] / 1000 for row in metadata_rows.history(table)}
    # version 1 is the load (an overwrite): the stream's versions follow it
    markers = (
        spark.read.format("arctic")
        .option("readChangeFeed", "true")
        .option("startingVersion", 2)
        .load("db.t")
        .where(f"id >= {MARKER_BASE}")
        .select("id", "_change_version")
        .collect()
    )
    freshness = {
        "arctic": [
            committed_at[r["_change_version"]] - landed[f"changes-{r['id'] - MARKER_BASE:04d}.parquet"]
            for r in markers
        ],
        "delta-rs": [delta_loop.committed[name] - landed[name] for name in landed],
    }
    assert len(freshness["arctic"]) == args.files, "every file's marker reached the table"

    arctic_rows = {
        r["id"]: (r["v"], r["amount"]) for r in session.sql("SELECT id, v, amount FROM db.t").collect()
    }
    delta_table = DeltaTable(delta).to_pyarrow_table()
    delta_rows = dict(
        zip(
            delta_table.column("id").to_pylist(),
            zip(delta_table.column("v").to_pylist(), delta_table.column("amount").to_pylist()),
        )
    )
    print(f"rows match what was sent: arctic {arctic_rows == expected}, delta-rs {delta_rows == expected}")
    files = session.sql("SELECT store, count(*) AS n FROM db.t.files GROUP BY store ORDER BY store").collect()
    optimized = session.sql("SELECT count(*) FROM db.t.optimizing").collect()[0][0]
    print(
        f"arctic at the end: {', '.join(f'{r.store} {r.n} files' for r in files)}; "
        f"{optimized} optimizing processes; delta-rs: {len(DeltaTable(delta).file_uris())} files"
    )
    rows_sent = args.files * args.rows
    elapsed = stream_end - min(landed.values())
    print(
        f"{args.files} files of {args.rows:,} changes, one every {args.every:g} s, on {args.base:,} rows; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    p50 = {s: statistics.median(v) for s, v in freshness.items()}
    p99 = {s: _percentile(v, 99) for s, v in freshness.items()}
    for system, values in freshness.items():
        print(f"  {system:>8}: p50 {p50[system]:.2f} s, p99 {p99[system]:.2f} s, max {max(values):.2f} s")
    print(
        f"  arctic / delta-rs: p50 {p50['arctic'] / p50['delta-rs']:.2f}x, p99 {p99['arctic'] / p99['delta-rs']:.2f}x;"
        f" {rows_sent / elapsed:,.0f} rows/s offered over {elapsed:.0f} s"
    )
    if arctic_rows != expected or delta_rows != expected:
        raise SystemExit(1)
    spark.stop()


if __name__ == "__main__":
    main()
