"""Which merge-on-read plan: the measurement behind ``arctic_sql/table/reading/merge_on_read.py``.

    python -m benchmarks.merge_on_read [--rows 2000000] [--commits 20] [--batch 20000]

Builds one primary-key table (a base of ``--rows`` rows loaded with INSERT OVERWRITE, then
``--commits`` blind MERGE commits of ``--batch`` rows: 70% updates, 20% inserts, 10% deletes), then
runs the same full-scan aggregate over its current version with each candidate plan, on the same
planned files, in the same process:

- ``arctic by node``: what the reader does while every node group is within
  ``merge-on-read.in-memory-max-bytes``: each tree-node group merged in pyarrow inside a Spark task
  (``mapInArrow``), reading only the aggregate's columns (a SQL aggregate like this one goes
  further, aggregating per group: figure R1 of ``benchmarks/optimizing.py``);
- ``arctic by node, all columns``: the same, reading every column (a ``SELECT *``);
- ``arctic Spark plan``: what the reader does for larger groups (broadcast anti-join of the base with the
  distinct changed keys, newest change per key by a window over the change rows only, union);
- ``max_by``: the same, but the newest change per key by a ``max_by`` aggregate;
- ``window-all``: one window over base and change rows together (shuffles the base);
- ``pyarrow``: one Python process reading the same files with pyarrow and merging in Arrow.

Figures are printed as ratios against reading the base files alone with Spark (the floor), and
written to ``benchmarks/results/merge_on_read.json``. Every plan must return the same aggregate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa

from benchmarks import arrow_merge

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def build_table(s, rows: int, commits: int, batch: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    spark = s.spark
    s.sql("CREATE DATABASE IF NOT EXISTS bench")
    s.sql("DROP TABLE IF EXISTS bench.mor PURGE")
    s.sql("CREATE TABLE bench.mor (id BIGINT, status STRING, amount DOUBLE, PRIMARY KEY (id))")
    spark.range(rows).selectExpr(
        "id",
        "element_at(array('open','paid','shipped'), cast(id % 3 + 1 AS INT)) AS status",
        "cast(id % 1000 AS DOUBLE) AS amount",
    ).createOrReplaceTempView("mor_load")
    s.sql("INSERT OVERWRITE bench.mor SELECT * FROM mor_load")
    next_id = rows
    for _ in range(commits):
        updates = rng.choice(rows, size=int(batch * 0.8), replace=False)
        ids = np.concatenate([updates, np.arange(next_id, next_id + int(batch * 0.2))])
        next_id += int(batch * 0.2)
        ops = np.where(np.arange(len(ids)) < int(batch * 0.1), "D", "U")
        frame = pa.table(
            {
                "id": ids.astype("int64"),
                "status": rng.choice(["open", "paid", "shipped"], len(ids)),
                "amount": rng.random(len(ids)) * 1000,
                "op": ops,
            }
        )
        spark.createDataFrame(frame.to_pandas()).createOrReplaceTempView("mor_batch")
        s.sql(
            "MERGE INTO bench.mor t USING mor_batch s ON t.id = s.id WHEN MATCHED AND s.op = 'D' THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"
        )


def _aggregate_spark(df) -> list[tuple]:
    from pyspark.sql import functions as F

    rows = df.groupBy("status").agg(F.count(F.lit(1)).alias("n"), F.round(F.sum("amount"), 2).alias("s"))
    return sorted(tuple(r) for r in rows.collect())


def plans(s, table, plan):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from arctic_sql.table.reading.merge_on_read import IS_DELETE, TXN, merged_dataframe, read_files

    spark, keys = s.spark, table.primary_key

    def by_node():
        return merged_dataframe(spark, table, plan, columns=["status", "amount"])

    def by_node_all():
        return merged_dataframe(spark, table, plan)

    def spark_plan():
        return merged_dataframe(spark, table, plan, in_memory=False)

    def max_by():
        base = read_files(spark, plan.schema, plan.base_files)
        rows = read_files(spark, plan.schema, plan.change_files, all_nullable=True)
        changed = F.broadcast(rows.select(*keys).distinct())
        tagged = _tagged(spark, plan, rows)
        values = [c for c in tagged.columns if c not in keys and c != TXN]
        newest = (
            tagged.groupBy(*keys).agg(F.max_by(F.struct(*values), F.col(TXN)).alias("n")).select(*keys, "n.*")
        )
        return base.join(changed, on=keys, how="left_anti").unionByName(
            newest.where(~F.col(IS_DELETE)).select(*base.columns)
        )

    def window_all():
        base = read_files(spark, plan.schema, plan.base_files)
        rows = read_files(spark, plan.schema, plan.change_files, all_nullable=True)
        everything = (
            base.withColumn(TXN, F.lit(0).cast("long"))
            .withColumn(IS_DELETE, F.lit(False))
            .unionByName(_tagged(spark, plan, rows))
        )
        newest_first = Window.partitionBy(*keys).orderBy(F.col(TXN).desc())
        return (
            everything.withColumn("_r", F.row_number().over(newest_first))
            .where(f"_r = 1 AND NOT {IS_DELETE}")
            .select(*base.columns)
        )

    def floor():
        return read_files(spark, plan.schema, plan.base_files)

    return {
        "floor (base only)": floor,
        "arctic by node": by_node,
        "arctic by node, all columns": by_node_all,
        "arctic Spark plan": spark_plan,
        "max_by": max_by,
        "window-all": window_all,
    }


def _tagged(spark, plan, rows):
    from pyspark.sql import functions as F

    from arctic_sql.table.files import storage
    from arctic_sql.table.reading.merge_on_read import FILE, IS_DELETE, TXN

    files = spark.createDataFrame(
        [(storage.spark_path(f.path), f.sequence_number, f.is_delete) for f in plan.change_files],
        f"{FILE} string, {TXN} long, {IS_DELETE} boolean",
    )
    return rows.withColumn(FILE, F.col("_metadata.file_path")).join(F.broadcast(files), on=FILE).drop(FILE)


def pyarrow_merge(plan) -> list[tuple]:
    """One process: read base and change files with pyarrow, keep the newest change per key."""
    merged = arrow_merge.merge(
        [f.path for f in plan.base_files],
        [(f.path, f.sequence_number, f.is_delete) for f in plan.change_files],
        "id",
        ["id", "status", "amount"],
    )
    grouped = merged.group_by("status").aggregate([("id", "count"), ("amount", "sum")])
    return sorted((r["status"], r["id_count"], round(r["amount_sum"], 2)) for r in grouped.to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default=os.path.join(RESULTS, "work", "merge_on_read"))
    args = parser.parse_args()

    import arctic_sql
    from arctic_sql.table.reading.scan import plan_read

    shutil.rmtree(args.work, ignore_errors=True)
    s = arctic_sql.connect(warehouse=args.work)
    build_table(s, args.rows, args.commits, args.batch)
    table = s.table("bench.mor")
    plan = plan_read(table)
    print(
        f"base files {len(plan.base_files)}, change files {len(plan.change_files)}, "
        f"change rows {plan.change_rows}"
    )
    times: dict[str, float] = {}
    answers: dict[str, list[tuple]] = {}
    candidates = {
        name: (lambda build=build: _aggregate_spark(build())) for name, build in plans(s, table, plan).items()
    }
    candidates["pyarrow (one process)"] = lambda: pyarrow_merge(plan)
    for name, run in candidates.items():
        samples = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            answers[name] = run()
            samples.append(time.perf_counter() - started)
        times[name] = statistics.median(samples)
    floor = times["floor (base only)"]
    reference = answers["arctic Spark plan"]
    print(f"{'plan':28} {'median s':>9} {'x floor':>8}  same rows")
    for name, seconds in times.items():
        same = "-" if name.startswith("floor") else ("yes" if answers[name] == reference else "NO")
        print(f"{name:28} {seconds:9.2f} {seconds / floor:8.2f}  {same}")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "merge_on_read.json"), "w") as f:
        json.dump(
            {
                "rows": args.rows,
                "commits": args.commits,
                "batch": args.batch,
                "nproc": os.cpu_count(),
                "median_s": times,
                "agree": {k: answers[k] == reference for k in answers},
            },
            f,
            indent=1,
        )
    s.stop()
    if any(answers[k] != reference for k in answers if not k.startswith("floor")):
        raise SystemExit("plans disagree: a merge-on-read bug")


if __name__ == "__main__":
    main()
