"""Stream Debezium change files into a primary-key table, with the optimizer service beside it.

    python examples/streaming/ingest.py [--files 6] [--rows 500] [--warehouse DIR]

What happens:

1. A producer thread drops Debezium-style JSON files (creates, updates and deletes of ``orders``,
   each change with ``source.ts_ms`` and ``source.lsn``) into a landing folder, one every moment.
2. A Structured Streaming query reads the folder, turns the envelopes into rows with
   ``arctic_sql.cdc.debezium`` and writes them with the ``arctic`` sink: each micro-batch is one
   version of ``db.orders``, committed exactly once (the checkpoint survives restarts).
3. The self-optimizing service runs in a thread on the same Spark session and merges the small
   change files the stream leaves into the base store, so reads stay fast.

At the end the script checks the table against what the producer sent and prints the history.
It runs on a temporary warehouse unless ``--warehouse`` names one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading

import arctic_sql
from arctic_sql.optimizer.service import Service

ENVELOPE = (
    "payload STRUCT<op: STRING, "
    "before: STRUCT<order_id: BIGINT, status: STRING, amount: DOUBLE>, "
    "after: STRUCT<order_id: BIGINT, status: STRING, amount: DOUBLE>, "
    "source: STRUCT<ts_ms: BIGINT, lsn: BIGINT>>"
)


def produce(
    landing: str, files: int, rows: int, expected: dict[int, tuple[str, float]], pause: threading.Event
) -> None:
    """Write change files the way a Debezium connector's file sink would; keep the expected table."""
    rng, lsn = random.Random(7), 0
    for n in range(files):
        pause.wait(0.5)  # files arrive over time, while the stream runs
        events = []
        for _ in range(rows):
            lsn += 1
            key = rng.randrange(rows * 2)
            before = (
                {"order_id": key, "status": expected[key][0], "amount": expected[key][1]}
                if key in expected
                else None
            )
            if before is not None and rng.random() < 0.15:
                events.append({"op": "d", "before": before, "after": None})
                del expected[key]
            else:
                after = {
                    "order_id": key,
                    "status": rng.choice(["new", "paid", "shipped"]),
                    "amount": float(rng.randrange(10_000)),
                }
                events.append({"op": "u" if before else "c", "before": before, "after": after})
                expected[key] = (after["status"], after["amount"])
            events[-1]["source"] = {"ts_ms": 1_700_000_000_000 + n * 1000, "lsn": lsn}
        temporary = os.path.join(landing, f".orders-{n:04d}.json.tmp")
        with open(temporary, "w") as f:
            f.write("\n".join(json.dumps({"payload": e}) for e in events))
        os.utime(temporary, (1_700_000_000 + n, 1_700_000_000 + n))
        os.replace(temporary, os.path.join(landing, f"orders-{n:04d}.json"))  # appear whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--rows", type=int, default=500, help="changes per file")
    parser.add_argument("--warehouse", default=None)
    args = parser.parse_args()
    root = args.warehouse or tempfile.mkdtemp(prefix="arctic-ingest-")
    landing, checkpoint = os.path.join(root, "landing"), os.path.join(root, "checkpoints", "orders")
    os.makedirs(landing, exist_ok=True)

    session = arctic_sql.connect(
        warehouse=os.path.join(root, "warehouse"), spark_conf={"spark.sql.shuffle.partitions": "2"}
    )
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    session.sql(
        "CREATE TABLE IF NOT EXISTS db.orders (order_id BIGINT, status STRING, amount DOUBLE, "
        "PRIMARY KEY (order_id)) TBLPROPERTIES ('self-optimizing.minor.trigger.file-count' = '4')"
    )

    # The optimizer, as `arctic-sql optimizer` runs it, in a thread here.
    service = Service(session.spark, session.catalog)
    optimizer = threading.Thread(target=service.run, args=(2.0,), name="optimizer", daemon=True)
    optimizer.start()

    changes = session.spark.readStream.schema(ENVELOPE).option("maxFilesPerTrigger", 1).json(landing)
    query = (
        arctic_sql.cdc.debezium(changes)
        .writeStream.format("arctic")
        .option("sequenceColumn", arctic_sql.cdc.SEQUENCE)
        .option("checkpointLocation", checkpoint)
        .start("db.orders")
    )
    expected: dict[int, tuple[str, float]] = {}
    producer = threading.Thread(
        target=produce, args=(landing, args.files, args.rows, expected, threading.Event())
    )
    producer.start()
    producer.join()
    query.processAllAvailable()  # every file that arrived is committed
    query.stop()
    service.run_once()  # one more optimizing round over what the stream left
    service.stopping.set()
    optimizer.join()

    rows = {r.order_id: (r.status, r.amount) for r in session.sql("SELECT * FROM db.orders").collect()}
    print(f"db.orders has {len(rows)} rows; matches the changes sent: {rows == expected}")
    session.sql("SELECT version, operation FROM db.orders.history").show(50, truncate=False)
    optimized = session.sql("SELECT count(*) FROM db.orders.optimizing").collect()[0][0]
    print(f"optimizing processes: {optimized}")
    if rows != expected:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
