"""Kafka CDC end to end: a real Kafka broker (KRaft, loopback, its own folder), Debezium change events
on a three-partition topic, ``spark.readStream.format("kafka")`` -> ``arctic_sql.cdc.debezium`` -> the
arctic sink with the optimizer running, in a driver process that is SIGKILLed mid-stream and restarted.

The events (examples/kafka/orders_cdc.py, the example's own code) hold creates, updates, deletes,
several changes of one key, and transactions whose changes span partitions. The driver is killed
after its first commit, more events arrive, a second driver is killed after one more commit, and a
third finishes with availableNow: the table then equals the model built from the events, and every
micro-batch Spark logged is committed exactly once (the killed drivers' replays are skipped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_load import scaled

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "kafka"))
from broker import KafkaBroker  # noqa: E402
from orders_cdc import change_events, create_topic, produce  # noqa: E402

from arctic_sql.table.format import versions  # noqa: E402

pytestmark = pytest.mark.spark

DRIVER = str(Path(__file__).with_name("kafka_cdc_driver.py"))
TOPIC = "dbserver.inventory.orders"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


def _driver(warehouse, bootstrap, checkpoint, *extra):
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ARCTIC_DRIVER_MEMORY": "1g"}
    return subprocess.Popen(
        [sys.executable, DRIVER, warehouse, bootstrap, TOPIC, checkpoint, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _table(warehouse):
    from arctic_sql.options import load_catalog
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.identifiers import TableIdentifier

    return ArcticCatalog(load_catalog(warehouse, "arctic", None, None)).load_table(
        TableIdentifier("db", "orders")
    )


def _committed_batches(warehouse) -> list[int]:
    try:
        change = _table(warehouse).change
    except Exception:  # noqa: BLE001 - the driver has not created the table yet
        return []
    summaries = [versions.summary_of(s) for s in versions.snapshots_in_order(change)]
    return [int(s[versions.STREAM_BATCH_ID]) for s in summaries if versions.STREAM_BATCH_ID in s]


def _kill_after_commits(process, warehouse, commits: int, timeout_s: float = 240) -> None:
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while len(_committed_batches(warehouse)) < commits:
        if process.poll() is not None:
            raise AssertionError(f"the driver exited ({process.returncode}): {process.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"fewer than {commits} stream commits within {timeout_s} s")
        time.sleep(0.5)  # polling for commits, not timing anything
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _rows(spark, warehouse) -> dict[int, tuple]:
    import arctic_sql

    session = arctic_sql.connect(warehouse=warehouse, spark=spark)
    return {r.order_id: (r.status, r.amount) for r in session.sql("SELECT * FROM db.orders").collect()}


def test_debezium_events_from_kafka_survive_sigkills_and_land_once(kafka, spark, tmp_path):
    started = time.monotonic()
    warehouse, checkpoint = str(tmp_path / "wh"), str(tmp_path / "ck")
    create_topic(kafka.bootstrap, TOPIC, partitions=3)
    model: dict = {}
    first = change_events(seed=5, transactions=40, keys=30, state=model)
    produce(kafka.bootstrap, TOPIC, first)

    _kill_after_commits(_driver(warehouse, kafka.bootstrap, checkpoint, "--forever"), warehouse, 1)
    second = change_events(seed=6, transactions=40, keys=30, first_lsn=10_000, state=model)
    produce(kafka.bootstrap, TOPIC, second)
    before = len(_committed_batches(warehouse))
    _kill_after_commits(_driver(warehouse, kafka.bootstrap, checkpoint, "--forever"), warehouse, before + 1)

    final = _driver(warehouse, kafka.bootstrap, checkpoint)
    out, _ = final.communicate(timeout=300)
    assert final.returncode == 0 and "DONE" in out, out[-3000:]

    assert len(first) + len(second) > 200 and any(e["op"] == "d" for e in first + second)
    logged = sorted(int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit())
    committed = _committed_batches(warehouse)
    assert committed == logged == list(range(len(logged))), (committed, logged)  # each batch exactly once
    assert _rows(spark, warehouse) == model
    print(
        f"Kafka CDC: {len(first) + len(second)} events, {len(logged)} batches, "
        f"{time.monotonic() - started:.1f} s"
    )
