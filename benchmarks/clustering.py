"""Clustering (issue 34): a filter on a date column, after a full optimize with and without an order.

    .venv/bin/python -m benchmarks.clustering                      # 500,000 rows, 16 nodes (about 3 min)
    .venv/bin/python -m benchmarks.clustering --rows 1000000 --rounds 7

One process, two keyed tables holding the same rows (``order_id`` the key; ``day`` one of 365 days,
uncorrelated with the key; ``customer_id``, ``amount``, ``status``) in ``--nodes`` tree nodes: one
in key order, one ``WRITE ORDERED BY (day)``; both loaded by INSERT and then ``ALTER TABLE ...
COMPACT FULL``. ``--target-size`` is scaled down with the table so that each node holds many files,
as a large table's nodes do at the default 128 MB. Then ``--rounds`` rounds, each running
``SELECT * ... WHERE day BETWEEN d AND d + 3`` (about 1% of the rows, collected) on both tables in
an order that alternates, so a shared machine's load hits both alike.

Prints, per table: files and bytes the read opens (from the read's own plan: the files pyiceberg's
bounds leave, as EXPLAIN counts them), the median latency, and the ratios clustered / unordered
(the issue's targets: files <= 10%, latency <= 0.3x); writes ``benchmarks/results/clustering.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import tempfile
import time

from pyiceberg import expressions as ie

import arctic_sql
from arctic_sql.spark import local_session
from arctic_sql.table.reading.scan import plan_read

RESULTS = os.path.join(os.path.dirname(__file__), "results")
START = datetime.date(2025, 1, 1)
LOW, HIGH = datetime.date(2025, 6, 1), datetime.date(2025, 6, 4)  # 4 of 365 days
WHERE = f"day BETWEEN DATE'{LOW}' AND DATE'{HIGH}'"
TABLES = {"unordered": "db.unordered", "clustered": "db.clustered"}


def load(session, name: str, rows: int, nodes: int, target: int, ordered: bool) -> None:
    session.sql(
        f"CREATE TABLE {name} (order_id BIGINT, day DATE, customer_id BIGINT, amount BIGINT, status STRING, "
        f"PRIMARY KEY (order_id)) TBLPROPERTIES ('base.file-index.hash-bucket' = '{nodes}', "
        f"'self-optimizing.target-size' = '{target}', 'self-optimizing.enabled' = 'false')"
    )
    if ordered:
        session.sql(f"ALTER TABLE {name} WRITE ORDERED BY (day)")
    session.sql(
        f"INSERT INTO {name} SELECT id, date_add(DATE'{START}', CAST(pmod(xxhash64(id, 7), 365) AS INT)), "
        f"pmod(xxhash64(id, 11), 10000), pmod(id * 37, 1000), "
        f"element_at(array('new', 'paid', 'shipped', 'done'), CAST(pmod(id, 4) + 1 AS INT)) FROM range({rows})"
    )
    session.sql(f"ALTER TABLE {name} COMPACT FULL")


def opened(session, name: str) -> dict:
    """Files and bytes the filtered read opens, from its plan, checked against EXPLAIN's count."""
    table = session.table(name)
    condition = ie.And(
        ie.GreaterThanOrEqual("day", LOW.isoformat()), ie.LessThanOrEqual("day", HIGH.isoformat())
    )
    plan = plan_read(table, base_filter=condition)
    everything = plan_read(table)
    explained = session.sql(f"EXPLAIN SELECT * FROM {name} WHERE {WHERE}").collect()[0][0]
    counts = [
        int(n) for n in re.findall(r"InMemoryFileIndex\((\d+) paths?\)|base_files=(\d+)", explained)[0] if n
    ]
    files = len(plan.base_files) + len(plan.change_files)
    assert counts == [files], (counts, files)
    return {
        "files": files,
        "files_total": len(everything.base_files),
        "bytes": sum(f.file_size for f in (*plan.base_files, *plan.change_files)),
        "bytes_total": sum(f.file_size for f in everything.base_files),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument(
        "--target-size", type=int, default=64 * 1024, help="bytes; scaled down with the table"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(RESULTS, "clustering.json"))
    args = parser.parse_args()

    spark = local_session(
        tempfile.mkdtemp(prefix="clustering-spark-"),
        {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"},
    )
    session = arctic_sql.connect(warehouse=tempfile.mkdtemp(prefix="clustering-bench-"), spark=spark)
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    for label, name in TABLES.items():
        started = time.monotonic()
        load(session, name, args.rows, args.nodes, args.target_size, label == "clustered")
        print(f"loaded and fully optimized {name} in {time.monotonic() - started:.1f} s")

    expected = None
    times: dict[str, list[float]] = {label: [] for label in TABLES}
    for r in range(args.rounds + 1):  # round 0 warms up and checks the rows agree
        order = list(TABLES.items()) if r % 2 == 0 else list(reversed(TABLES.items()))
        for label, name in order:
            started = time.perf_counter()
            rows = session.sql(f"SELECT * FROM {name} WHERE {WHERE}").collect()
            elapsed = time.perf_counter() - started
            if r == 0:
                found = sorted(tuple(row) for row in rows)
                assert expected is None or found == expected, "the two tables disagree"
                expected = found
            else:
                times[label].append(elapsed)

    figures = {
        label: {**opened(session, name), "median_s": statistics.median(times[label])}
        for label, name in TABLES.items()
    }
    u, c = figures["unordered"], figures["clustered"]
    ratios = {
        "files": c["files"] / u["files"],
        "bytes": c["bytes"] / u["bytes"],
        "latency": c["median_s"] / u["median_s"],
    }
    print(f"{args.rows:,} rows in {args.nodes} nodes; filter {WHERE}: {len(expected or [])} rows")
    print(f"{'table':<10} {'files':>12} {'bytes read':>20} {'median s':>9}")
    for label, f in figures.items():
        print(
            f"{label:<10} {f['files']:>5} of {f['files_total']:<5} {f['bytes']:>9,} of {f['bytes_total']:<9,}"
            f" {f['median_s']:>9.3f}"
        )
    print("clustered / unordered: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as out:
        json.dump(
            {
                "rows": args.rows,
                "nodes": args.nodes,
                "target_size": args.target_size,
                "rounds": args.rounds,
                "matching_rows": len(expected or []),
                "figures": figures,
                "ratios": ratios,
            },
            out,
            indent=2,
        )
    spark.stop()


if __name__ == "__main__":
    main()
