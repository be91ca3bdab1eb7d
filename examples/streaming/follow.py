"""Follow one arctic table's changes into another with a stream, ``foreachBatch`` and SQL MERGE.

    python examples/streaming/follow.py [warehouse]

The source stream (``readStream.format("arctic")``) hands each micro-batch's changes over as rows
with ``_change_type`` ('upsert' or 'delete') and ``_change_version``: per key, its last change in the
batch's versions. A MERGE on the key applies them. That is idempotent (applying a key's last change
twice leaves the same row), so a micro-batch that Spark replays after a crash changes nothing twice:
with the checkpoint, the copy ends exactly equal to the source. Each run with ``availableNow`` picks
up where the last one stopped; a long-running follower uses ``trigger(processingTime="1 minute")``.
"""

from __future__ import annotations

import sys
import tempfile

import arctic_sql

MERGE = """
MERGE INTO shop.orders_copy AS t
USING global_temp.batch_changes AS s
ON t.id = s.id
WHEN MATCHED AND s._change_type = 'delete' THEN DELETE
WHEN MATCHED THEN UPDATE SET t.status = s.status, t.amount = s.amount
WHEN NOT MATCHED AND s._change_type = 'upsert' THEN INSERT (id, status, amount) VALUES (s.id, s.status, s.amount)
"""


def follow(session: arctic_sql.session.Session, checkpoint: str) -> int:
    """One availableNow run of the follower; returns how many micro-batches it applied."""
    spark = session.spark
    applied = []

    def apply_changes(changes, batch_id: int) -> None:
        # A micro-batch's DataFrame lives in a clone of the SparkSession: a global view is what
        # the session's SQL sees of it.
        changes.createOrReplaceGlobalTempView("batch_changes")
        session.sql(MERGE)
        applied.append(batch_id)

    query = (
        spark.readStream.format("arctic")
        .option("readChangeFeed", "true")
        .option("maxVersionsPerTrigger", 10)
        .load("shop.orders")
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(apply_changes)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return len(applied)


def main(warehouse: str) -> None:
    session = arctic_sql.connect(warehouse=warehouse)
    session.sql("CREATE DATABASE IF NOT EXISTS shop")
    for name in ("orders", "orders_copy"):
        session.sql(
            f"CREATE TABLE IF NOT EXISTS shop.{name} (id BIGINT, status STRING, amount DOUBLE, "
            "PRIMARY KEY (id))"
        )
    checkpoint = f"{warehouse}/checkpoints/orders_copy"

    session.sql("INSERT INTO shop.orders VALUES (1, 'new', 10.0), (2, 'new', 20.0), (3, 'new', 30.0)")
    print("batches applied:", follow(session, checkpoint))  # the table's rows, as upserts

    session.sql("UPDATE shop.orders SET status = 'paid' WHERE id = 2")
    session.sql("DELETE FROM shop.orders WHERE id = 3")
    session.sql("INSERT INTO shop.orders VALUES (4, 'new', 40.0)")
    print("batches applied:", follow(session, checkpoint))  # only the three new versions

    source = sorted(session.sql("SELECT * FROM shop.orders").collect())
    copy = sorted(session.sql("SELECT * FROM shop.orders_copy").collect())
    print("copy equals source:", source == copy)
    for row in copy:
        print(" ", row)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="arctic-follow-"))
