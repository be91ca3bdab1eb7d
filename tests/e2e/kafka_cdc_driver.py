"""The Kafka CDC stream as its own process, for tests/e2e/test_kafka_cdc.py to SIGKILL and restart.

    python kafka_cdc_driver.py <warehouse> <bootstrap> <topic> <checkpoint> [--forever]

Streams the topic's Debezium events into db.orders with the optimizer service running in a thread:
until killed (``--forever``), or with ``availableNow`` and a final optimizing round, then ``DONE``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import arctic_sql
from arctic_sql.jars import spark_jars
from arctic_sql.optimizer.service import Service
from arctic_sql.spark import local_session

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "kafka"))
from orders_cdc import CREATE, start_stream  # noqa: E402


def main(warehouse: str, bootstrap: str, topic: str, checkpoint: str, forever: bool) -> None:
    conf = {
        "spark.master": "local[2]",
        "spark.sql.shuffle.partitions": "2",
        "spark.jars": spark_jars("kafka"),
    }
    session = arctic_sql.connect(warehouse=warehouse, spark=local_session(warehouse, conf))
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    session.sql(CREATE)
    service = Service(session.spark, session.catalog)
    optimizer = threading.Thread(target=service.run, args=(1.0,), name="optimizer", daemon=True)
    optimizer.start()
    query = start_stream(session, bootstrap, topic, checkpoint, available_now=not forever)
    print("STARTED", flush=True)
    query.awaitTermination()
    service.stopping.set()
    optimizer.join()
    service.run_once()
    print("DONE", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5], "--forever" in sys.argv)
