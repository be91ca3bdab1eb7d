"""B1 bulk load: ``INSERT OVERWRITE`` and ``CREATE TABLE AS SELECT`` of the upsert-stream load.

    python -m benchmarks.bulk_load [--rows 2000000] [--repeats 3]

The rows are the standard workload's initial load (``datagen.py``: the ``orders`` table, ``--rows``
rows, seed 42), written once as Parquet. Each repeat times, in an order that rotates from repeat to
repeat so a shared machine's load hits all three alike:

- ``INSERT OVERWRITE bench.orders SELECT ... FROM load`` into the primary-key table (``load`` is a
  temp view over the Parquet file, so reading it is part of the statement);
- ``CREATE TABLE bench.orders_ctas (PRIMARY KEY (order_id)) AS SELECT ... FROM load`` (the table
  is dropped, untimed, before each repeat);
- delta-rs: ``write_deltalake`` of the same rows (read once into Arrow, untimed, as in
  ``benchmarks.upsert_stream``) into a fresh folder.

The arctic-sql session is started and warmed up (a first job, an INSERT OVERWRITE and a CTAS of a
tenth of the rows) before anything is timed. Printed: the median of each, the ratios arctic-sql /
delta-rs with the absolute times beside them, and the load average before and after every repeat; written to
``benchmarks/results/bulk_load.json``. Both arctic-sql tables are checked to hold exactly the load's
row count and key sum (the run exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time

from benchmarks import datagen
from benchmarks.upsert_stream import RESULTS, machine, source_tree, versions

TABLE, CTAS_TABLE = "bench.orders", "bench.orders_ctas"
COLUMNS = ", ".join(datagen.COLUMNS)
CREATE = (
    f"CREATE TABLE {TABLE} (order_id BIGINT, customer_id BIGINT, status STRING, amount DOUBLE, "
    "region STRING, updated_at TIMESTAMP, PRIMARY KEY (order_id))"
)
OVERWRITE = f"INSERT OVERWRITE {TABLE} SELECT {COLUMNS} FROM load"
CTAS = f"CREATE TABLE {CTAS_TABLE} PRIMARY KEY (order_id) USING arctic AS SELECT {COLUMNS} FROM load"
SYSTEMS = ("insert_overwrite", "ctas", "delta")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=datagen.ROWS_AT_SCALE_1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=os.path.join(RESULTS, "work", "bulk_load"))
    parser.add_argument("--out", default=os.path.join(RESULTS, "bulk_load.json"))
    return parser.parse_args(argv)


def timed(run) -> float:  # noqa: ANN001
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def key_sum(s, table: str) -> tuple[int, int]:
    row = s.sql(f"SELECT count(*) AS n, sum(order_id) AS k FROM {table}").collect()[0]
    return int(row["n"]), int(row["k"] or 0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    import arctic_sql

    data = datagen.generate(datagen.Workload(args.rows / datagen.ROWS_AT_SCALE_1, 0), args.work)
    rows = pq.read_table(datagen.load_path(data))
    expected = (rows.num_rows, int(rows.column("order_id").to_numpy().sum()))
    warehouse, delta_root = os.path.join(args.work, "warehouse"), os.path.join(args.work, "delta")
    shutil.rmtree(warehouse, ignore_errors=True)
    shutil.rmtree(delta_root, ignore_errors=True)
    s = arctic_sql.connect(warehouse=warehouse)
    s.spark.range(10).selectExpr("sum(id)").collect()
    s.sql("CREATE DATABASE IF NOT EXISTS bench")
    # Warm-up: a tenth of the rows each way, so the JVM has compiled the load's code before the timing.
    s.spark.read.parquet(datagen.load_path(data)).limit(max(1000, args.rows // 10)).createOrReplaceTempView(
        "load"
    )
    s.sql(CREATE)
    s.sql(OVERWRITE)
    s.sql(CTAS)
    s.sql(f"DROP TABLE {CTAS_TABLE} PURGE")
    s.spark.read.parquet(datagen.load_path(data)).createOrReplaceTempView("load")

    def ctas() -> None:
        s.sql(CTAS)

    runs = {
        "insert_overwrite": lambda: s.sql(OVERWRITE),
        "ctas": ctas,
        "delta": lambda: write_deltalake(
            os.path.join(delta_root, f"orders-{time.time_ns()}"), rows, mode="overwrite"
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    loads = []
    for repeat in range(args.repeats):
        s.sql(f"DROP TABLE IF EXISTS {CTAS_TABLE} PURGE")
        order = SYSTEMS[repeat % len(SYSTEMS) :] + SYSTEMS[: repeat % len(SYSTEMS)]
        before = os.getloadavg()
        for name in order:
            samples[name].append(timed(runs[name]))
        loads.append({"before": before, "after": os.getloadavg()})
        print(
            f"repeat {repeat + 1}: "
            + ", ".join(f"{n} {samples[n][-1]:.2f} s" for n in SYSTEMS)
            + f"  (load {before[0]:.1f} -> {loads[-1]['after'][0]:.1f})",
            flush=True,
        )
    found = {table: key_sum(s, table) for table in (TABLE, CTAS_TABLE)}
    s.stop()

    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratios = {name: medians[name] / medians["delta"] for name in ("insert_overwrite", "ctas")}
    print(f"\nB1 bulk load of {rows.num_rows:,} rows, median of {args.repeats} interleaved repeats")
    for name in ("insert_overwrite", "ctas"):
        print(
            f"  {name:17} / delta-rs write_deltalake = {ratios[name]:5.2f}  "
            f"({medians[name]:.2f} s vs {medians['delta']:.2f} s)"
        )
    load_1m = [entry["before"][0] for entry in loads] + [entry["after"][0] for entry in loads]
    print(
        f"  load average (1 min) during the run: {min(load_1m):.1f}-{max(load_1m):.1f} on {os.cpu_count()} cores"
    )
    ok = all(value == expected for value in found.values())
    print("  row count and key sum of both tables: " + ("ok" if ok else f"MISMATCH {found} != {expected}"))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "rows": rows.num_rows,
                "repeats": args.repeats,
                "samples_s": samples,
                "median_s": medians,
                "ratio_to_delta": ratios,
                "loadavg": loads,
                "checks_ok": ok,
                "machine": machine(),
                "versions": versions(),
                "source": source_tree(),
            },
            f,
            indent=1,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
