"""The Kafka CDC pipeline's parts: Debezium change events, their producer, the model, the stream.

Shared by examples/kafka/pipeline.py and the end-to-end test (tests/e2e/test_kafka_cdc.py and its
driver), so the test checks exactly what the example runs.
"""

from __future__ import annotations

import json
import random
from typing import Any

TABLE = "db.orders"
CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (order_id BIGINT, status STRING, amount DOUBLE, "
    "PRIMARY KEY (order_id)) TBLPROPERTIES ('self-optimizing.minor.trigger.file-count' = '3')"
)
# Debezium's JSON converter with schemas off: the envelope at the top level of each message's value.
ENVELOPE = (
    "op STRING, before STRUCT<order_id: BIGINT, status: STRING, amount: DOUBLE>, "
    "after STRUCT<order_id: BIGINT, status: STRING, amount: DOUBLE>, "
    "source STRUCT<ts_ms: BIGINT, lsn: BIGINT>"
)

Row = tuple[str, float]


def change_events(
    seed: int, transactions: int, keys: int, first_lsn: int = 0, state: dict[int, Row] | None = None
) -> list[dict[str, Any]]:
    """Debezium envelopes of ``transactions`` source transactions over ``keys`` order ids: creates,
    updates (a key often changes several times, within one transaction too) and deletes. The events of
    one transaction share ``source.ts_ms`` and carry increasing ``source.lsn``; keyed by order id, they
    spread over the topic's partitions. ``state`` (the rows before these events) is updated in place."""
    rng, lsn = random.Random(seed), first_lsn
    state = {} if state is None else state
    events = []
    for t in range(transactions):
        ts_ms = 1_700_000_000_000 + (first_lsn + t) * 1000
        for _ in range(rng.randint(1, 6)):
            lsn += 1
            key = rng.randrange(keys)
            before = _image(key, state[key]) if key in state else None
            if before is not None and rng.random() < 0.2:
                op, after = "d", None
                del state[key]
            else:
                op = "u" if before else "c"
                after = {
                    "order_id": key,
                    "status": rng.choice(["new", "paid", "shipped"]),
                    "amount": float(rng.randrange(10_000)),
                }
                state[key] = (after["status"], after["amount"])
            events.append(
                {
                    "op": op,
                    "before": before,
                    "after": after,
                    "source": {"ts_ms": ts_ms, "lsn": lsn},
                    "transaction": {"id": f"tx{first_lsn + t}"},
                }
            )
    return events


def _image(key: int, row: Row) -> dict[str, Any]:
    return {"order_id": key, "status": row[0], "amount": row[1]}


def produce(bootstrap: str, topic: str, events: list[dict[str, Any]]) -> None:
    """Send the events keyed by order id (a key's changes stay in order in one partition), acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for event in events:
        key = (event["after"] or event["before"])["order_id"]
        producer.send(topic, key=str(key).encode(), value=json.dumps(event).encode())
    producer.flush()
    producer.close()


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    admin.close()


def start_stream(
    session: Any,
    bootstrap: str,
    topic: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    max_offsets: int = 60,
) -> Any:
    """``readStream.format("kafka")`` -> the envelopes -> ``arctic_sql.cdc.debezium`` -> the arctic sink."""
    from pyspark.sql import functions as F

    import arctic_sql

    messages = (
        session.spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
    )
    envelopes = messages.select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e")).select("e.*")
    writer = (
        arctic_sql.cdc.debezium(envelopes)
        .writeStream.format("arctic")
        .option("sequenceColumn", arctic_sql.cdc.SEQUENCE)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start(TABLE)
