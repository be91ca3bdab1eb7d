"""arctic-sql on the upsert stream: one MERGE INTO statement per commit, merge-on-read for R1.

Also measures, in the same Spark session, the R1 baseline: the final rows written once as one plain
Parquet dataset and read back by Spark with the same aggregate.

With ``--data2`` (W2, interleaved) it loads a second table from that larger workload and runs each
commit on both tables back to back, so both scales are measured in the same JVM under the same
machine load; the second table's figures carry the suffix ``_large``.
"""

from __future__ import annotations

import os
import shutil

from benchmarks import datagen
from benchmarks.systems.common import R1_SQL, Result, parse_args, run_commits, stopwatch, time_r1

TABLE = "bench.orders"
COLUMNS = ", ".join(datagen.COLUMNS)
CREATE = (
    f"CREATE TABLE {TABLE} (order_id BIGINT, customer_id BIGINT, status STRING, amount DOUBLE, "
    "region STRING, updated_at TIMESTAMP, PRIMARY KEY (order_id))"
)
LOAD = f"INSERT OVERWRITE {TABLE} SELECT {COLUMNS} FROM load"
MERGE = (
    f"MERGE INTO {TABLE} t USING batch s ON t.order_id = s.order_id "
    "WHEN MATCHED AND s.op = 'D' THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET * "
    "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"
)
CHECKSUM_SQL = (
    "SELECT count(*) AS n, sum(order_id) AS sum_order_id, "
    "sum(CAST(round(amount * 100) AS BIGINT)) AS sum_amount_cents FROM {table}"
)
STATUS_SQL = "SELECT status, count(*) AS n FROM {table} GROUP BY status"


def checksum(s, table: str) -> dict:
    row = s.sql(CHECKSUM_SQL.format(table=table)).collect()[0]
    by_status = {r["status"]: int(r["n"]) for r in s.sql(STATUS_SQL.format(table=table)).collect()}
    return {"count": int(row["n"]), "sum_order_id": int(row["sum_order_id"] or 0),
            "sum_amount_cents": int(row["sum_amount_cents"] or 0), "count_by_status": by_status}


def merge(s, table: str, batch_file: str) -> float:
    """Run one commit's MERGE on ``table``; return its seconds."""
    # The batch view: exactly the table's columns plus `op` (UPDATE SET * / INSERT * go by name).
    s.spark.read.parquet(batch_file).select(*datagen.COLUMNS, "op").createOrReplaceTempView("batch")
    with stopwatch() as t:
        s.sql(MERGE.replace(TABLE, table))
    return t()


def main() -> None:
    args = parse_args(__doc__, pairs=True)
    result = Result(args.out, "arctic-sql", args.data)
    step, statement = "connect", None
    try:
        import pyspark

        import arctic_sql

        result["versions"] = {"arctic_sql": arctic_sql.__version__, "pyspark": pyspark.__version__}
        with stopwatch() as t:
            s = arctic_sql.connect(warehouse=os.path.join(args.work, "warehouse"))
            s.spark.range(10).selectExpr("sum(id)").collect()  # start the JVM and run a first job
        result["startup_s"] = t()
        spark = s.spark

        step = "warm-up"  # untimed: the first CREATE, parse, MERGE and read pay one-off JIT/class loading
        warm = os.path.join(args.work, "warm.parquet")
        spark.read.parquet(datagen.batch_path(args.data, 0)).limit(100).write.parquet(warm)
        spark.read.parquet(warm).createOrReplaceTempView("batch")
        for statement in ("CREATE DATABASE IF NOT EXISTS warm",
                          CREATE.replace(TABLE, "warm.orders"),
                          MERGE.replace(TABLE, "warm.orders"),
                          MERGE.replace(TABLE, "warm.orders"),
                          R1_SQL.format(table="warm.orders")):
            s.sql(statement).collect()
        # warm.orders stays: it lives in this run's own warehouse, which the orchestrator removes.

        step, statement = "load", "CREATE DATABASE IF NOT EXISTS bench"
        s.sql(statement)
        tables = {"": (TABLE, args.data)}
        if args.data2:  # W2 interleaved: a second table, loaded from the larger workload
            tables["_large"] = (TABLE + "_large", args.data2)
        for suffix, (table, data) in tables.items():
            statement = CREATE.replace(TABLE, table)
            s.sql(statement)
            statement = LOAD.replace(TABLE, table)
            with stopwatch() as t:
                spark.read.parquet(datagen.load_path(data)).createOrReplaceTempView("load")
                s.sql(statement)
            result["load_s" + suffix] = t()
            print(f"[arctic-sql] load {table}: {result['load_s' + suffix]:.2f} s", flush=True)

        step, statement = "commits", MERGE

        def commit(index: int, path: str) -> float:
            if not args.data2:
                return merge(s, TABLE, path)
            # W2 interleaved: the same commit on both tables back to back, so both see the same machine;
            # which goes first alternates, so neither always follows the other.
            large = lambda: merge(s, TABLE + "_large", datagen.batch_path(args.data2, index))
            if index % 2:
                seconds_large, seconds = large(), merge(s, TABLE, path)
            else:
                seconds, seconds_large = merge(s, TABLE, path), large()
            result.doc.setdefault("commit_s_large", []).append(seconds_large)
            print(f"[arctic-sql] commit {index + 1} on {TABLE}_large: {seconds_large:.3f} s", flush=True)
            return seconds

        result["commit_notes"] = "one MERGE INTO statement per commit (one change-store transaction)."
        if args.data2:
            result.doc["commit_notes"] += f" Interleaved with the same commit on {TABLE}_large (commit_s_large)."
        run_commits(result, args.deadline, commit)

        if not args.commits_only:
            step, statement = "r1", R1_SQL.format(table=TABLE)
            time_r1(result, lambda: [tuple(r) for r in s.sql(R1_SQL.format(table=TABLE)).collect()])

        for suffix, (table, _) in tables.items():
            step, statement = "checksum", CHECKSUM_SQL.format(table=table)
            result["checksum" + suffix] = checksum(s, table)
        if args.commits_only:
            result.finish()
            return

        step, statement = "plain-parquet baseline", None
        plain = os.path.join(args.work, "plain.parquet")
        shutil.rmtree(plain, ignore_errors=True)
        partitions = max(2, os.cpu_count() or 2)
        s.sql(f"SELECT {COLUMNS} FROM {TABLE}").repartition(partitions).write.parquet(plain)
        spark.read.parquet(plain).createOrReplaceTempView("plain_orders")
        result["plain_parquet"] = {"path": plain, "files": partitions}
        time_r1(result, lambda: [tuple(r) for r in spark.sql(R1_SQL.format(table="plain_orders")).collect()],
                key="plain_spark_r1_s")
        result["plain_checksum"] = checksum(s, "plain_orders")
    except Exception:  # noqa: BLE001 - recorded in the result file, judged by the orchestrator
        result.error(step, statement)
    result.finish()


if __name__ == "__main__":
    main()
