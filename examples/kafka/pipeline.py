"""Debezium change events from Kafka into a primary-key table, with the optimizer service beside it.

    bash scripts/jars.sh kafka broker              # once: Spark's Kafka connector and a Kafka broker
    python examples/kafka/pipeline.py [--transactions 200] [--warehouse DIR]

What happens:

1. A Kafka broker starts in KRaft mode on loopback (examples/kafka/broker.py), in a temporary folder.
2. Debezium-format JSON change events of an ``orders`` table (creates, updates, deletes; source
   transactions whose changes spread over the topic's three partitions) are produced to a topic, keyed
   by the primary key as Debezium does.
3. ``spark.readStream.format("kafka")`` reads the topic, ``arctic_sql.cdc.debezium`` turns the envelopes
   into rows, and the ``arctic`` sink commits each micro-batch as one version of ``db.orders``, exactly
   once (the checkpoint survives restarts; tests/e2e/test_kafka_cdc.py kills it with SIGKILL).
4. The self-optimizing service runs in a thread and merges the stream's small change files.

At the end the script checks the table against the events and prints the history.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading

import arctic_sql
from arctic_sql.jars import spark_jars
from arctic_sql.optimizer.service import Service

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker import KafkaBroker  # noqa: E402
from orders_cdc import CREATE, TABLE, change_events, create_topic, produce, start_stream  # noqa: E402

TOPIC = "dbserver.inventory.orders"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--warehouse", default=None)
    args = parser.parse_args()
    root = args.warehouse or tempfile.mkdtemp(prefix="arctic-kafka-")
    jars = spark_jars("kafka")  # fails in one line, naming scripts/jars.sh, before anything starts

    with KafkaBroker(os.path.join(root, "kafka")) as broker:
        print(f"Kafka broker on {broker.bootstrap}")
        create_topic(broker.bootstrap, TOPIC, partitions=3)
        expected: dict = {}
        events = change_events(seed=7, transactions=args.transactions, keys=100, state=expected)
        produce(broker.bootstrap, TOPIC, events)
        print(f"produced {len(events)} change events to {TOPIC}")

        session = arctic_sql.connect(
            warehouse=os.path.join(root, "warehouse"),
            spark_conf={"spark.sql.shuffle.partitions": "2", "spark.jars": jars},
        )
        session.sql("CREATE DATABASE IF NOT EXISTS db")
        session.sql(CREATE)
        service = Service(session.spark, session.catalog)
        optimizer = threading.Thread(target=service.run, args=(2.0,), name="optimizer", daemon=True)
        optimizer.start()
        query = start_stream(session, broker.bootstrap, TOPIC, os.path.join(root, "checkpoints", "orders"))
        query.processAllAvailable()  # every event on the topic is committed
        query.stop()
        service.stopping.set()
        optimizer.join()
        service.run_once()  # one more optimizing round over what the stream left

    rows = {r.order_id: (r.status, r.amount) for r in session.sql(f"SELECT * FROM {TABLE}").collect()}
    print(f"{TABLE} has {len(rows)} rows; matches the events sent: {rows == expected}")
    session.sql(f"SELECT version, operation FROM {TABLE}.history").show(50, truncate=False)
    if rows != expected:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
