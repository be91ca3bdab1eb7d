"""arctic-sql on the upsert stream: one MERGE INTO statement per commit, merge-on-read for R1.

Also measures, in the same Spark session, the R1 baseline: the final rows written once as one plain
Parquet dataset and read back by Spark with the same aggregate.

With ``--data2`` (W2, interleaved) it loads a second table from that larger workload and runs each
commit on both tables back to back, so both scales are measured in the same JVM under the same
machine load; the second table's figures carry the suffix ``_large``.

With ``--optimize`` (figures O1 and R2 of ``benchmarks/optimizing.py``), after R1 and the checksum it
runs ``CALL system.optimize(table => 'bench.orders', mode => 'full')`` once (timed), then the R1
query again (R2) and the checksum of the optimized table; the plain Parquet copy follows as usual.
"""

from __future__ import annotations

import json
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
OPTIMIZE = f"CALL system.optimize(table => '{TABLE}', mode => 'full')"
CHECKSUM_SQL = (
    "SELECT count(*) AS n, sum(order_id) AS sum_order_id, "
    "sum(CAST(round(amount * 100) AS BIGINT)) AS sum_amount_cents FROM {table}"
)
STATUS_SQL = "SELECT status, count(*) AS n FROM {table} GROUP BY status"


def checksum(s, table: str) -> dict:
    row = s.sql(CHECKSUM_SQL.format(table=table)).collect()[0]
    by_status = {r["status"]: int(r["n"]) for r in s.sql(STATUS_SQL.format(table=table)).collect()}
    return {
        "count": int(row["n"]),
        "sum_order_id": int(row["sum_order_id"] or 0),
        "sum_amount_cents": int(row["sum_amount_cents"] or 0),
        "count_by_status": by_status,
    }


def merge(s, table: str, batch_file: str) -> float:
    """Run one commit's MERGE on ``table``; return its seconds."""
    # The batch view: exactly the table's columns plus `op` (UPDATE SET * / INSERT * go by name).
    s.spark.read.parquet(batch_file).select(*datagen.COLUMNS, "op").createOrReplaceTempView("batch")
    with stopwatch() as t:
        s.sql(MERGE.replace(TABLE, table))
    return t()


def start(result: Result, work: str, data: str, *, optimize: bool = False):
    """A session on a fresh warehouse under ``work``, warmed up (untimed): returns it."""
    import pyspark

    import arctic_sql

    result["versions"] = {"arctic_sql": arctic_sql.__version__, "pyspark": pyspark.__version__}
    with stopwatch() as t:
        s = arctic_sql.connect(warehouse=os.path.join(work, "warehouse"))
        s.spark.range(10).selectExpr("sum(id)").collect()  # start the JVM and run a first job
    result["startup_s"] = t()
    spark = s.spark
    # The first CREATE, parse, MERGE, read (and CALL) pay one-off JIT/class loading.
    warm = os.path.join(work, "warm.parquet")
    spark.read.parquet(datagen.batch_path(data, 0)).limit(100).write.parquet(warm)
    spark.read.parquet(warm).createOrReplaceTempView("batch")
    statements = [
        "CREATE DATABASE IF NOT EXISTS warm",
        CREATE.replace(TABLE, "warm.orders"),
        MERGE.replace(TABLE, "warm.orders"),
        MERGE.replace(TABLE, "warm.orders"),
        R1_SQL.format(table="warm.orders"),
    ]
    if optimize:
        statements.append(OPTIMIZE.replace(TABLE, "warm.orders"))
    for statement in statements:
        s.sql(statement).collect()
    # warm.orders stays: it lives in this run's own warehouse, which the orchestrator removes.
    s.sql("CREATE DATABASE IF NOT EXISTS bench")
    return s


def load(s, result: Result, table: str, data: str, suffix: str = "") -> None:
    """CREATE ``table`` and load it from ``data``'s initial rows (timed: ``load_s{suffix}``)."""
    s.sql(CREATE.replace(TABLE, table))
    with stopwatch() as t:
        s.spark.read.parquet(datagen.load_path(data)).createOrReplaceTempView("load")
        s.sql(LOAD.replace(TABLE, table))
    result["load_s" + suffix] = t()
    print(f"[arctic-sql] load {table}: {result['load_s' + suffix]:.2f} s", flush=True)


def optimize(s, result: Result, work: str) -> None:
    """O1 and R2: a full optimize of the table (timed once), then R1's query again and the checksum.

    First the files the optimize will read (the current version's base and change files, by tree
    node) go to ``work/optimize_plan.json`` for L1 (``benchmarks.arrow_merge``), which merges the
    same files in one pyarrow process after this process has exited.
    """
    from arctic_sql.table.format.tree import DataTreeNode
    from arctic_sql.table.reading.scan import plan_read

    plan = plan_read(s.table(TABLE))
    files = [*plan.base_files, *plan.change_files]
    levels = {DataTreeNode.of_id(f.node_id).level for f in files}
    nodes: dict[str, dict[str, list]] = {}
    for f in files:
        entry = nodes.setdefault(str(f.node_id), {"base": [], "change": []})
        if f.store == "base":
            entry["base"].append(f.path)
        else:
            entry["change"].append([f.path, f.sequence_number, f.is_delete])
    doc = {
        "key": "order_id",
        "compression": s.spark.conf.get("spark.sql.parquet.compression.codec", "snappy"),
        "same_level": len(levels) == 1,
        "base_files": len(plan.base_files),
        "change_files": len(plan.change_files),
        "input_bytes": sum(f.file_size for f in files),
        "nodes": nodes,
    }
    result["optimize_plan"] = os.path.join(work, "optimize_plan.json")
    with open(result["optimize_plan"], "w", encoding="utf-8") as f:
        json.dump(doc, f)
    result["optimize_input"] = {
        k: doc[k] for k in ("base_files", "change_files", "input_bytes", "same_level")
    }
    # R1's floor in Spark: the query over the same files read as plain Parquet, merging nothing (the
    # answer is wrong: old and deleted rows count too). What reading 160 small files costs any reader.
    s.spark.read.parquet(*[f.path for f in files]).createOrReplaceTempView("unmerged_orders")
    time_r1(
        result,
        lambda: [tuple(r) for r in s.spark.sql(R1_SQL.format(table="unmerged_orders")).collect()],
        key="unmerged_spark_r1_s",
    )
    with stopwatch() as t:
        rows = s.sql(OPTIMIZE).collect()
    result["o1_s"] = t()
    result["optimize_rows"] = [r.asDict() for r in rows]
    print(f"[arctic-sql] O1 full optimize: {result['o1_s']:.2f} s", flush=True)
    time_r1(result, lambda: [tuple(r) for r in s.sql(R1_SQL.format(table=TABLE)).collect()], key="r2_s")
    result["checksum_optimized"] = checksum(s, TABLE)


def write_plain_copy(s, table: str, plain: str) -> tuple[str, int]:  # noqa: ANN001 - a session
    """``table``'s current rows written once as one plain Parquet dataset of ``nproc`` files (untimed)."""
    shutil.rmtree(plain, ignore_errors=True)
    partitions = max(2, os.cpu_count() or 2)
    s.sql(f"SELECT {COLUMNS} FROM {table}").repartition(partitions).write.parquet(plain)
    return plain, partitions


def plain_baseline(s, result, work: str) -> None:  # noqa: ANN001 - a session and a Result (or dict)
    """R1's baseline: the final rows written once as one plain Parquet dataset, read back by Spark."""
    spark = s.spark
    plain, partitions = write_plain_copy(s, TABLE, os.path.join(work, "plain.parquet"))
    spark.read.parquet(plain).createOrReplaceTempView("plain_orders")
    result["plain_parquet"] = {"path": plain, "files": partitions}
    time_r1(
        result,
        lambda: [tuple(r) for r in spark.sql(R1_SQL.format(table="plain_orders")).collect()],
        key="plain_spark_r1_s",
    )
    result["plain_checksum"] = checksum(s, "plain_orders")


def main() -> None:
    args = parse_args(__doc__, pairs=True, optimize=True)
    result = Result(args.out, "arctic-sql", args.data)
    step, statement = "connect and warm-up", None
    try:
        s = start(result, args.work, args.data, optimize=args.optimize)

        step, statement = "load", LOAD
        tables = {"": (TABLE, args.data)}
        if args.data2:  # W2 interleaved: a second table, loaded from the larger workload
            tables["_large"] = (TABLE + "_large", args.data2)
        for suffix, (table, data) in tables.items():
            load(s, result, table, data, suffix)

        step, statement = "commits", MERGE

        def commit(index: int, path: str) -> float:
            if not args.data2:
                return merge(s, TABLE, path)

            # W2 interleaved: the same commit on both tables back to back, so both see the same machine;
            # which goes first alternates, so neither always follows the other.
            def large() -> float:
                return merge(s, TABLE + "_large", datagen.batch_path(args.data2, index))

            if index % 2:
                seconds_large, seconds = large(), merge(s, TABLE, path)
            else:
                seconds, seconds_large = merge(s, TABLE, path), large()
            result.doc.setdefault("commit_s_large", []).append(seconds_large)
            print(f"[arctic-sql] commit {index + 1} on {TABLE}_large: {seconds_large:.3f} s", flush=True)
            return seconds

        result["commit_notes"] = "one MERGE INTO statement per commit (one change-store transaction)."
        if args.data2:
            result.doc["commit_notes"] += (
                f" Interleaved with the same commit on {TABLE}_large (commit_s_large)."
            )
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
        if args.optimize:
            step, statement = "optimize", OPTIMIZE
            optimize(s, result, args.work)

        step, statement = "plain-parquet baseline", None
        plain_baseline(s, result, args.work)
    except Exception:  # noqa: BLE001 - recorded in the result file, judged by the orchestrator
        result.error(step, statement)
    result.finish()


if __name__ == "__main__":
    main()
