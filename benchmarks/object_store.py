"""W0 small commits and R1 reads on an S3 API server next to local disk, with request counts.

    .venv/bin/python -m benchmarks.object_store [--rows 200000] [--batch 1000] [--commits 9] [--reads 5]

One process, one SparkSession, two arctic catalogs (SQL on SQLite) with the same table: one whose
warehouse is on moto's S3 server on loopback (tests/s3_harness.py: a real S3 API over HTTP,
counting every request it answers; in a process of its own unless ``--moto-in-process``), one on
local disk. Then, interleaved, the order alternating
(S3, local, local, S3, ...):

- W0: ``--commits`` upsert commits of ``--batch`` rows (``INSERT INTO bench.t SELECT * FROM batch``:
  70% keys that exist, 30% new), the same rows on both;
- R1: ``--reads`` runs of the full-scan aggregate ``SELECT status, count(*), sum(amount) FROM bench.t
  GROUP BY status`` over the merged table (base and change files, nothing optimized).

Prints the medians, the ratio S3/local and the requests per commit and per read (with where they
go), and writes ``benchmarks/results/object_store.json``. moto is a Python server on the same two
cores: its latency is not a real store's (lower per request than S3 over a network, but it shares
this machine's cores; in this process it would also take the driver's GIL).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import arctic_sql
from arctic_sql.spark import local_session

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3_harness import catalog_properties, s3_server  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")
R1 = "SELECT status, count(*) AS n, round(sum(amount), 2) AS s FROM bench.t GROUP BY status ORDER BY status"
STORES = ("s3", "local")


def _load(session, rows: int) -> None:
    spark = session.spark
    session.sql("CREATE DATABASE bench")
    session.sql("CREATE TABLE bench.t (id BIGINT, status STRING, amount DOUBLE, PRIMARY KEY (id))")
    spark.range(rows).selectExpr(
        "id",
        "element_at(array('open','paid','shipped'), cast(id % 3 + 1 AS INT)) AS status",
        "cast(id % 1000 AS DOUBLE) AS amount",
    ).createOrReplaceTempView("load")
    session.sql("INSERT OVERWRITE bench.t SELECT * FROM load")


def _batch_view(spark, rows: int, batch: int, commit: int) -> None:
    """``batch``: ``batch`` rows, 70% of them keys of the loaded table, the rest new keys."""
    old = int(batch * 0.7)
    start = (commit * 7919) % max(1, rows - old)
    spark.sql(
        f"SELECT id, 'paid' AS status, cast({commit} AS DOUBLE) AS amount FROM range({start}, {start + old}) "
        f"UNION ALL SELECT id, 'open', 1.0 FROM range({rows + commit * batch}, {rows + commit * batch + batch - old})"
    ).createOrReplaceTempView("batch")


def _timed(server, store: str, action):  # noqa: ANN001
    with server.log.measure() as requests:
        started = time.perf_counter()
        result = action()
        elapsed = time.perf_counter() - started
    return elapsed, (requests if store == "s3" else None), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=9)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument(
        "--moto-in-process",
        action="store_true",
        help="run the S3 server in this process (as before session 24)",
    )
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        del os.environ[name]  # the catalog's properties alone reach the store
    work = tempfile.mkdtemp(prefix="object-store-bench-")
    spark = local_session(f"{work}/spark", {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    with s3_server(own_process=not args.moto_in_process) as server:
        # Both catalogs carry the same storage properties: only where their warehouses are differs.
        sessions = {
            "s3": arctic_sql.connect(
                spark=spark,
                catalog_properties=catalog_properties(f"{work}/s3.db", server.endpoint, "s3://lake/wh"),
            ),
            "local": arctic_sql.connect(
                spark=spark,
                catalog_properties=catalog_properties(
                    f"{work}/local.db", server.endpoint, f"file://{work}/wh"
                ),
            ),
        }
        for session in sessions.values():
            _load(session, args.rows)
        _batch_view(spark, args.rows, args.batch, 0)
        for session in sessions.values():  # warm-up: the first commit and read of each
            session.sql("INSERT INTO bench.t SELECT * FROM batch")
            session.sql(R1).collect()

        times: dict[str, dict[str, list[float]]] = {s: {"W0": [], "R1": []} for s in STORES}
        counts: dict[str, list[int]] = {"W0": [], "R1": []}
        where: dict[str, dict] = {}
        answers: dict[str, list] = {}
        for i in range(1, args.commits + 1):
            _batch_view(spark, args.rows, args.batch, i)
            for store in STORES if i % 2 else STORES[::-1]:
                elapsed, requests, _ = _timed(
                    server, store, lambda s=sessions[store]: s.sql("INSERT INTO bench.t SELECT * FROM batch")
                )
                times[store]["W0"].append(elapsed)
                if requests is not None:
                    counts["W0"].append(len(requests))
                    where["W0"] = requests.summary()
        for i in range(args.reads):
            for store in STORES if i % 2 == 0 else STORES[::-1]:
                elapsed, requests, rows = _timed(server, store, lambda s=sessions[store]: s.sql(R1).collect())
                times[store]["R1"].append(elapsed)
                answers[store] = [tuple(r) for r in rows]
                if requests is not None:
                    counts["R1"].append(len(requests))
                    where["R1"] = requests.summary()
    spark.stop()
    if answers["s3"] != answers["local"]:
        print(f"MISMATCH: S3 {answers['s3']} != local {answers['local']}")
        sys.exit(1)

    print(
        f"\n{args.batch}-row upsert commits (W0) and full-scan aggregate reads (R1), {args.rows} rows loaded; "
        f"moto {'in this process' if args.moto_in_process else 'in its own process'}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'figure':6s} {'S3 (moto)':>11s} {'local':>9s} {'S3/local':>9s} {'requests (median, min-max)':>28s}"
    )
    for figure in ("W0", "R1"):
        s3, local = statistics.median(times["s3"][figure]), statistics.median(times["local"][figure])
        n = counts[figure]
        print(
            f"{figure:6s} {s3 * 1000:9.0f}ms {local * 1000:7.0f}ms {s3 / local:8.2f}x "
            f"{statistics.median(n):>14.0f} ({min(n)}-{max(n)})"
        )
    for figure in ("W0", "R1"):
        print(f"\nrequests of the last {figure} on S3, by method and key pattern:")
        for (method, pattern), n in where[figure].items():
            print(f"{n:5d} {method:6s} {pattern}")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "object_store.json"), "w") as out:
        json.dump(
            {
                "parameters": vars(args),
                "load_average": os.getloadavg(),
                "seconds": times,
                "requests": counts,
                "where": {f: [[m, p, n] for (m, p), n in w.items()] for f, w in where.items()},
            },
            out,
            indent=1,
        )


if __name__ == "__main__":
    main()
