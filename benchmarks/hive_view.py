"""The Hive view benchmark: figures H1 and H2 (docs/benchmarks.md), one interleaved run.

    python -m benchmarks.hive_view                 # 400,000 rows in 4 partitions, 3 rounds
    python -m benchmarks.hive_view --rows 40000    # quick

H1: ``CALL system.hive_sync`` of a table where one partition changed, against ``CALL
system.optimize(mode => 'full', where => "p = 'p0'")`` of the same partition of a twin table that
took the same writes and has no Hive view (target H1 <= 1.3). Each round writes the same update batch
to both, then times the two.

H2: a plain SparkSession with Hive support and no arctic-sql (its own process) reading the Hive view
through the metastore, against ``spark.read.parquet`` of the same folders in the same process,
alternating (target H2 <= 1.1). The metastore is a thrift server started from pyspark's jars
(tests/hive_metastore_server.py). Writes ``benchmarks/results/hive_view.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

READER = """
import json, sys, time
from pyspark.sql import SparkSession
uris, table, rounds, folders = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.hadoop.hive.metastore.uris", uris).enableHiveSupport().getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
def scan(frame):
    return frame.selectExpr("count(*)", "sum(hash(id, p, amount, note))").collect()[0]
hive = lambda: scan(spark.table(table))
from functools import reduce
# Each partition folder read with its parent as basePath (p=... gives the column), the folders unioned.
parquet = lambda: scan(reduce(lambda a, b: a.unionByName(b), [
    spark.read.option("basePath", f.rsplit("/", 1)[0]).parquet(f) for f in folders["folders"]]))
assert hive() == parquet(), "the Hive view and its folders disagree"
times = {"hive": [], "parquet": []}
for _ in range(rounds):
    for name, read in (("hive", hive), ("parquet", parquet)):
        start = time.perf_counter(); read(); times[name].append(time.perf_counter() - start)
print(json.dumps(times))
"""


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hive_view", description=__doc__)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default=str(ROOT / "benchmarks" / "results" / "hive_view_work"))
    args = parser.parse_args(argv)
    from hive_metastore_server import metastore_server

    import arctic_sql
    from arctic_sql.spark import local_session
    from arctic_sql.table.records import hive_syncs

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with metastore_server(work) as uris:
        spark = local_session(str(work / "wh"), {"spark.hadoop.hive.metastore.uris": uris})
        session = arctic_sql.connect(warehouse=str(work / "wh"), spark=spark)
        session.sql("CREATE DATABASE IF NOT EXISTS db")
        rows = (
            f"SELECT id, concat('p', id % 4) AS p, rand(1) * 100 AS amount, uuid() AS note "
            f"FROM range({args.rows})"
        )
        for name, hive in (("t", "true"), ("o", "false")):
            session.sql(
                f"CREATE TABLE db.{name} (id BIGINT, p STRING, amount DOUBLE, note STRING, PRIMARY KEY (id, p)) "
                f"PARTITIONED BY (p) TBLPROPERTIES ('hive.compatible' = '{hive}')"
            )
            session.sql(f"INSERT INTO db.{name} {rows}")
            session.sql(f"CALL system.optimize(table => 'db.{name}', mode => 'full')")
        times: dict[str, list[float]] = {"sync": [], "optimize": []}
        batch = max(args.rows // 100, 1)
        for round_ in range(args.rounds):
            update = (
                f"SELECT id, 'p0' AS p, {round_} + rand(2) AS amount, uuid() AS note "
                f"FROM range(0, {batch * 4}, 4)"
            )
            for name in ("t", "o"):
                session.sql(f"INSERT INTO db.{name} {update}")
            start = time.perf_counter()
            written = session.sql("CALL system.hive_sync(table => 'db.t')").collect()[0].written_partitions
            times["sync"].append(time.perf_counter() - start)
            assert written == 1, written
            start = time.perf_counter()
            session.sql(
                "CALL system.optimize(table => 'db.o', mode => 'full', where => \"p = 'p0'\")"
            ).collect()
            times["optimize"].append(time.perf_counter() - start)
        table = session.context.table("db.t")
        folders = {
            "base": hive_syncs.hive_root(table),
            "folders": [p.folder for p in hive_syncs.latest(table).partitions],
        }
        spark.stop()
        done = subprocess.run(
            [sys.executable, "-c", READER, uris, "db.t", str(args.rounds * 2), json.dumps(folders)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            print(json.dumps(times), done.stderr[-3000:], file=sys.stderr)
            return 1
        reads = json.loads(done.stdout.strip().splitlines()[-1])
    results = {
        "rows": args.rows,
        "rounds": args.rounds,
        "sync_s": median(times["sync"]),
        "optimize_s": median(times["optimize"]),
        "H1": median(times["sync"]) / median(times["optimize"]),
        "hive_read_s": median(reads["hive"]),
        "parquet_read_s": median(reads["parquet"]),
        "H2": median(reads["hive"]) / median(reads["parquet"]),
        "all": {"write": times, "read": reads},
    }
    out = ROOT / "benchmarks" / "results" / "hive_view.json"
    out.write_text(json.dumps(results, indent=2))
    print(
        f"H1 sync of one partition {results['sync_s']:.2f} s, full optimize of it {results['optimize_s']:.2f} s: "
        f"{results['H1']:.2f}x (target <= 1.3)"
    )
    print(
        f"H2 Hive read {results['hive_read_s']:.2f} s, plain Parquet read {results['parquet_read_s']:.2f} s: "
        f"{results['H2']:.2f}x (target <= 1.1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
