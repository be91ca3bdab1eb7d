"""One peer table format inside its own Spark (Delta or Iceberg), driven step by step over stdin/stdout.

Run by ``benchmarks/spark_peers.py`` with the python of the virtual environment whose pyspark the
peer's runtime is built for (scripts/jars.lock), the peer's jars on ``spark.jars``. Only pyspark and
the standard library are imported here: that environment has nothing else.

The line protocol: the orchestrator writes one JSON object a line to stdin, the worker answers each
with one JSON line on stdout (the JVM's and Spark's output go to stderr)::

    -> {"cmd": "create", "table": "orders_1000"}                  CREATE TABLE as the peer's docs advise
    -> {"cmd": "load", "table": "orders_1000", "path": "load.parquet"}    INSERT the rows (timed)
    -> {"cmd": "merge", "table": ..., "path": "batch-000.parquet", "sql": "MERGE INTO {table} ..."}
                                         the batch as temp view ``batch`` (untimed), then the SQL (timed)
    -> {"cmd": "query", "table": ..., "sql": "SELECT ... FROM {table}"}   rows as dicts (timed)
    -> {"cmd": "optimize", "table": ...}                          full compaction (timed)
    -> {"cmd": "files", "table": ...}                             data and delete files (untimed)
    -> {"cmd": "quit"}
    <- {"ok": true, "seconds": 0.41, ...}   or   {"ok": false, "error": "<traceback>"}

The first line the worker writes, before reading anything, is ``{"ok": true, "ready": ...}`` with
the peer's versions and its start-up time. ``{table}`` in SQL is replaced by the table's full name.

usage: spark_peer_worker.py delta|iceberg WORK_DIR JARS CONF_JSON
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

# The columns of benchmarks/datagen.py's orders table (the orchestrator checks they agree).
COLUMNS_DDL = (
    "order_id BIGINT NOT NULL, customer_id BIGINT, status STRING, amount DOUBLE, region STRING, "
    "updated_at TIMESTAMP"
)
COLUMNS = "order_id, customer_id, status, amount, region, updated_at"


class Peer:
    """What differs between the formats: session settings, the table's DDL, its full compaction."""

    name = ""

    def __init__(self, work: str) -> None:
        self.work = work

    def conf(self) -> dict[str, str]: ...
    def full_name(self, table: str) -> str: ...
    def create(self, spark, table: str) -> None: ...
    def optimize(self, spark, table: str) -> list[dict]: ...
    def files(self, spark, table: str) -> dict: ...


class Delta(Peer):
    """Delta Lake: MERGE with deletion vectors (Delta's docs for row-level changes), OPTIMIZE to compact."""

    name = "delta"

    def conf(self) -> dict[str, str]:
        return {
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.sql.warehouse.dir": os.path.join(self.work, "spark-warehouse"),
            # Rebuilding a snapshot after each commit shuffles the log into 50 partitions by default,
            # overkill for a small table's log (delta-io/delta#3351): 229 tasks a MERGE became 37,
            # and a 1,000-row MERGE took 23-33 s instead of 38-71 s at load 11 here.
            "spark.databricks.delta.snapshotPartitions": str(os.cpu_count() or 2),
        }

    def full_name(self, table: str) -> str:
        return f"bench.{table}"

    def create(self, spark, table: str) -> None:
        spark.sql("CREATE DATABASE IF NOT EXISTS bench")
        spark.sql(
            f"CREATE TABLE {self.full_name(table)} ({COLUMNS_DDL}) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )

    def optimize(self, spark, table: str) -> list[dict]:
        # OPTIMIZE bin-packs every file below minFileSize (1 GB): here all of them, with their
        # deletion vectors applied, so the table ends as clean files (files() shows what is left).
        return [row.asDict() for row in spark.sql(f"OPTIMIZE {self.full_name(table)}").collect()]

    def files(self, spark, table: str) -> dict:
        detail = spark.sql(f"DESCRIBE DETAIL {self.full_name(table)}").collect()[0]
        return {"data_files": int(detail["numFiles"]), "bytes": int(detail["sizeInBytes"])}


class Iceberg(Peer):
    """Iceberg format v2, merge-on-read for MERGE, UPDATE and DELETE (position delete files), in a Hadoop
    catalog in the work folder; full compaction = rewrite_data_files + rewrite_position_delete_files."""

    name = "iceberg"
    catalog = "peer"

    def conf(self) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{self.catalog}"
        return {
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": "hadoop",
            f"{prefix}.warehouse": "file://" + os.path.join(self.work, "iceberg-warehouse"),
        }

    def full_name(self, table: str) -> str:
        return f"{self.catalog}.bench.{table}"

    def create(self, spark, table: str) -> None:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.catalog}.bench")
        spark.sql(
            f"CREATE TABLE {self.full_name(table)} ({COLUMNS_DDL}) USING iceberg TBLPROPERTIES ("
            "'format-version' = '2', 'write.merge.mode' = 'merge-on-read', "
            "'write.update.mode' = 'merge-on-read', 'write.delete.mode' = 'merge-on-read')"
        )

    def optimize(self, spark, table: str) -> list[dict]:
        name = f"bench.{table}"
        rows = spark.sql(
            f"CALL {self.catalog}.system.rewrite_data_files(table => '{name}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        # Position deletes whose data files the rewrite replaced are dangling: drop them as well.
        rows += spark.sql(
            f"CALL {self.catalog}.system.rewrite_position_delete_files(table => '{name}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        return [row.asDict() for row in rows]

    def files(self, spark, table: str) -> dict:
        rows = spark.sql(
            f"SELECT content, count(*) AS n, sum(file_size_in_bytes) AS bytes "
            f"FROM {self.full_name(table)}.files GROUP BY content"
        ).collect()
        by = {int(r["content"]): r for r in rows}  # 0 data, 1 position deletes, 2 equality deletes
        return {
            "data_files": int(by[0]["n"]) if 0 in by else 0,
            "delete_files": sum(int(r["n"]) for c, r in by.items() if c),
            "bytes": sum(int(r["bytes"]) for r in rows),
        }


PEERS = {peer.name: peer for peer in (Delta, Iceberg)}


def start(peer: Peer, jars: str, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(f"spark-peer-{peer.name}")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={peer.work}")
    )
    for key, value in {**conf, **peer.conf()}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def handle(spark, peer: Peer, request: dict) -> dict:
    cmd, table = request["cmd"], request.get("table", "")
    full = peer.full_name(table) if table else ""
    reply: dict = {}
    if cmd == "create":
        peer.create(spark, table)
        return {"table": full}
    if cmd == "merge":
        spark.read.parquet(request["path"]).select(*COLUMNS.split(", "), "op").createOrReplaceTempView(
            "batch"
        )
    started = time.perf_counter()
    if cmd == "load":
        spark.read.parquet(request["path"]).createOrReplaceTempView("load")
        spark.sql(f"INSERT INTO {full} SELECT {COLUMNS} FROM load")
    elif cmd == "merge":
        spark.sql(request["sql"].format(table=full))
    elif cmd == "query":
        reply["rows"] = [row.asDict() for row in spark.sql(request["sql"].format(table=full)).collect()]
    elif cmd == "optimize":
        reply["output"] = peer.optimize(spark, table)
    elif cmd == "files":
        reply.update(peer.files(spark, table))
    else:
        raise ValueError(f"unknown command {cmd!r}")
    reply["seconds"] = time.perf_counter() - started
    return reply


def main(kind: str, work: str, jars: str, conf_json: str) -> None:
    # The answers get their own descriptor; everything else written to stdout (py4j, the JVM the
    # session starts, which inherits descriptor 1) goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def answer(doc: dict) -> None:
        answers.write(json.dumps(doc, default=str) + "\n")

    peer = PEERS[kind](work)
    started = time.perf_counter()
    try:
        spark = start(peer, jars, json.loads(conf_json))
        spark.range(10).selectExpr("sum(id)").collect()
    except Exception:  # noqa: BLE001 - reported to the orchestrator, which prints it
        answer({"ok": False, "error": traceback.format_exc()})
        return
    import pyspark

    answer(
        {
            "ok": True,
            "ready": True,
            "startup_s": time.perf_counter() - started,
            "versions": {
                "pyspark": pyspark.__version__,
                "spark": spark.version,
                "jars": [os.path.basename(j) for j in jars.split(",")],
            },
        }
    )
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "quit":
            break
        try:
            answer({"ok": True, **handle(spark, peer, request)})
        except Exception:  # noqa: BLE001 - reported to the orchestrator, which records the step as failed
            answer({"ok": False, "error": traceback.format_exc(limit=6)})
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
