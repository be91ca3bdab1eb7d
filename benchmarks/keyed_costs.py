"""Keyed work costs what its keys cost (issue 35): MERGE forms, a keyed UPDATE and lookups, against the floors.

    .venv/bin/python -m benchmarks.keyed_costs                                  # 200,000 rows (about 3 min)
    .venv/bin/python -m benchmarks.keyed_costs --rows 1000000                   # 1M rows
    .venv/bin/python -m benchmarks.keyed_costs --rows 1000000,10000000 --rounds 5   # 10M / 1M (long: loads 11M rows)

One process, one ``orders`` table per size (the upsert-stream columns, ``order_id`` the primary key,
loaded with INSERT OVERWRITE), then ``--rounds`` rounds. In each round every size gets, in an order
that rotates from round to round so a shared machine's load hits them alike:

- ``merge star``: a ``--batch``-row CDC batch (70% updates, 20% new keys, 10% deletes; a temp view
  over a Parquet file) by ``MERGE ... WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN
  UPDATE SET * WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *`` (the blind path: no target read);
- ``merge listed``: another batch, every column listed (``UPDATE SET x.a = b.a, ...``, ``INSERT
  (...) VALUES (b....)``): the same meaning, so it must take the same path;
- ``merge partial``: another batch, ``UPDATE SET x.status = b.status`` (reads the target, by a
  point lookup of the batch's keys);
- ``update``: ``UPDATE ... SET status = 'paid' WHERE order_id IN (<batch> keys)``;
- ``point``: ``SELECT * ... WHERE order_id = k``, collected;
- ``in lookup``: ``SELECT * ... WHERE order_id IN (<batch> keys)``, collected;
- ``parquet floor``: Spark reading the one base file that holds ``k`` as a plain Parquet file,
  ``WHERE order_id = k``, collected: what the point lookup costs at best.

Prints the medians with the issue's ratios (targets: listed/star <= 1.1, partial/star <= 2,
largest/smallest size <= 1.3 where two sizes ran, point/parquet floor <= 2) and the files each
lookup's plan opens, and writes ``benchmarks/results/keyed_costs.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import arctic_sql
from arctic_sql.spark import local_session
from benchmarks.datagen import REGIONS, STATUSES

RESULTS = os.path.join(os.path.dirname(__file__), "results")
FIGURES = ("merge star", "merge listed", "merge partial", "update", "point", "in lookup", "parquet floor")
COLUMNS = ("order_id", "customer_id", "status", "amount", "region", "updated_at")
CDC = (
    "WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN {update} "
    "WHEN NOT MATCHED AND s.op <> 'D' THEN {insert}"
)
MERGES = {
    "merge star": CDC.format(update="UPDATE SET *", insert="INSERT *"),
    "merge listed": CDC.format(
        update="UPDATE SET " + ", ".join(f"t.{c} = s.{c}" for c in COLUMNS if c != "order_id"),
        insert=f"INSERT ({', '.join(COLUMNS)}) VALUES ({', '.join('s.' + c for c in COLUMNS)})",
    ),
    "merge partial": CDC.format(update="UPDATE SET t.status = s.status", insert="INSERT *"),
}
TARGETS = {"listed/star": 1.1, "partial/star": 2.0, "largest/smallest": 1.3, "point/parquet": 2.0}


class Orders:
    """One size's table, its next new key, and the CDC batches it is given."""

    def __init__(self, session, rows: int, work: str, rng: np.random.Generator) -> None:  # noqa: ANN001
        self.session, self.rows, self.work, self.rng = session, rows, work, rng
        self.name = f"bench.orders_{rows}"
        self.next_key = rows
        session.sql(
            f"CREATE TABLE {self.name} (order_id BIGINT, customer_id BIGINT, status STRING, amount DOUBLE, "
            "region STRING, updated_at TIMESTAMP, PRIMARY KEY (order_id))"
        )
        statuses = ", ".join(f"'{s}'" for s in STATUSES)
        regions = ", ".join(f"'{r}'" for r in REGIONS)
        session.spark.range(rows).selectExpr(
            "id AS order_id",
            "id % 100000 AS customer_id",
            f"element_at(array({statuses}), CAST(id % 5 + 1 AS INT)) AS status",
            "CAST(id % 10000 AS DOUBLE) AS amount",
            f"element_at(array({regions}), CAST(id % 8 + 1 AS INT)) AS region",
            "TIMESTAMP '2023-11-14 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS updated_at",
        ).createOrReplaceTempView("load")
        session.sql(f"INSERT OVERWRITE {self.name} SELECT * FROM load")

    def batch(self, size: int, index: int) -> None:
        """A CDC batch as the temp view ``batch`` over a Parquet file (the way a pipeline gets one)."""
        updates, inserts = int(size * 0.7), int(size * 0.2)
        old = self.rng.choice(self.rows, size - inserts, replace=False)
        new = np.arange(self.next_key, self.next_key + inserts)
        self.next_key += inserts
        ids = np.concatenate([old, new]).astype(np.int64)
        ops = ["U"] * updates + ["D"] * (size - inserts - updates) + ["U"] * inserts
        table = pa.table(
            {
                "order_id": ids,
                "customer_id": self.rng.integers(1, 100_001, size),
                "status": STATUSES[self.rng.integers(0, len(STATUSES), size)],
                "amount": self.rng.integers(100, 10_000_000, size) / 100.0,
                "region": REGIONS[self.rng.integers(0, len(REGIONS), size)],
                "updated_at": pa.array(
                    np.full(size, 1_700_000_000_000_000) + self.rng.integers(0, 3_600_000_000, size),
                    pa.timestamp("us", tz="UTC"),
                ),
                "op": ops,
            }
        )
        path = os.path.join(self.work, f"batch-{self.rows}-{index}.parquet")
        pq.write_table(table, path)
        self.session.spark.read.parquet(path).createOrReplaceTempView("batch")

    def merge(self, form: str) -> None:
        self.session.sql(f"MERGE INTO {self.name} t USING batch s ON t.order_id = s.order_id {MERGES[form]}")

    def existing(self, count: int) -> list[int]:
        """``count`` keys of the loaded rows (a merge may have deleted a few since: a lookup's miss costs alike)."""
        return [int(k) for k in self.rng.choice(self.rows, count, replace=False)]

    def floor_file(self, key: int) -> str:
        """The base file that holds ``key``: its node's, with the key in its bounds."""
        from pyiceberg.types import LongType

        from arctic_sql.table.format.keyhash import spark_xxhash64
        from arctic_sql.table.format.tree import DataTreeNode

        key_hash = spark_xxhash64((key,), (LongType(),))
        rows = self.session.sql(
            f"SELECT path, node, key_min, key_max FROM {self.name}.files WHERE store = 'base'"
        ).collect()
        return next(
            r.path
            for r in rows
            if int(r.key_min) <= key <= int(r.key_max)
            and key_hash & DataTreeNode.of_id(r.node).mask == DataTreeNode.of_id(r.node).index
        )


def files_opened(session, sql: str) -> int:  # noqa: ANN001
    """Files the read's plan opens: the merge by node names them; a base-only read is a Parquet scan."""
    plan = session.sql("EXPLAIN " + sql).collect()[0][0]
    merged = re.findall(r"base_files=(\d+), change_files=(\d+)\]", plan)
    scanned = re.findall(r"InMemoryFileIndex\((\d+) paths?\)", plan)
    return sum(int(b) + int(c) for b, c in merged) + sum(int(n) for n in scanned)


def _timed(fn) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_round(spark, orders: Orders, batch: int, index: int, order: list[str]) -> dict[str, float]:  # noqa: ANN001
    session = orders.session
    times: dict[str, float] = {}
    point = orders.existing(1)[0]
    for figure in order:
        if figure.startswith("merge"):
            orders.batch(batch, index * 10 + FIGURES.index(figure))  # untimed: writing the batch file
            times[figure] = _timed(lambda: orders.merge(figure))
            continue
        listed = ", ".join(map(str, orders.existing(batch)))
        if figure == "update":
            times[figure] = _timed(
                lambda: session.sql(f"UPDATE {orders.name} SET status = 'paid' WHERE order_id IN ({listed})")
            )
        elif figure == "point":
            times[figure] = _timed(
                lambda: session.sql(f"SELECT * FROM {orders.name} WHERE order_id = {point}").collect()
            )
        elif figure == "in lookup":
            times[figure] = _timed(
                lambda: session.sql(f"SELECT * FROM {orders.name} WHERE order_id IN ({listed})").collect()
            )
        else:
            path = orders.floor_file(point)  # untimed: finding the file
            times[figure] = _timed(lambda: spark.read.parquet(path).where(f"order_id = {point}").collect())
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="200000", help="table sizes, comma-separated")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(RESULTS, "keyed_costs.json"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.rows.split(",")]
    work = tempfile.mkdtemp(prefix="keyed-costs-")
    spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
    session.sql("CREATE DATABASE bench")
    rng = np.random.default_rng(42)
    tables = {}
    for rows in sizes:
        start = time.perf_counter()
        tables[rows] = Orders(session, rows, work, rng)
        print(f"loaded {rows:,} rows in {time.perf_counter() - start:.0f} s", flush=True)
    for rows in sizes:  # first jobs, Python workers, imports: not timed
        run_round(spark, tables[rows], 10, 99, list(FIGURES))
    times = {rows: {f: [] for f in FIGURES} for rows in sizes}
    for index in range(args.rounds):
        order = list(FIGURES[index % len(FIGURES) :] + FIGURES[: index % len(FIGURES)])
        for rows in sizes if index % 2 == 0 else sizes[::-1]:
            for figure, seconds in run_round(spark, tables[rows], args.batch, index, order).items():
                times[rows][figure].append(seconds)
        print(f"round {index + 1}/{args.rounds} done; load {os.getloadavg()[0]:.1f}", flush=True)
    opened = {}
    for rows in sizes:
        name, keys = tables[rows].name, tables[rows].existing(args.batch)
        opened[rows] = {
            "point": files_opened(session, f"SELECT * FROM {name} WHERE order_id = {keys[0]}"),
            "in lookup": files_opened(
                session, f"SELECT * FROM {name} WHERE order_id IN ({', '.join(map(str, keys))})"
            ),
            "table": files_opened(session, f"SELECT * FROM {name} WHERE status <> ''"),
        }
    medians = {rows: {f: statistics.median(v) for f, v in times[rows].items()} for rows in sizes}
    ratios = {rows: _ratios(m) for rows, m in medians.items()}
    if len(sizes) > 1:
        for figure in FIGURES:
            ratios.setdefault("largest/smallest", {})[figure] = (
                medians[sizes[-1]][figure] / medians[sizes[0]][figure]
            )
    _print(sizes, medians, ratios, opened, args.batch)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "sizes": sizes,
                "batch": args.batch,
                "rounds": args.rounds,
                "times": times,
                "medians": medians,
                "ratios": ratios,
                "files_opened": opened,
                "targets": TARGETS,
            },
            f,
            indent=2,
            default=str,
        )
    spark.stop()


def _ratios(m: dict[str, float]) -> dict[str, float]:
    return {
        "listed/star": m["merge listed"] / m["merge star"],
        "partial/star": m["merge partial"] / m["merge star"],
        "update/star": m["update"] / m["merge star"],
        "point/parquet": m["point"] / m["parquet floor"],
        "in lookup/parquet": m["in lookup"] / m["parquet floor"],
    }


def _print(sizes, medians, ratios, opened, batch: int) -> None:  # noqa: ANN001
    for rows in sizes:
        m = medians[rows]
        print(f"\n{rows:,} rows, {batch:,}-row batches (median seconds):")
        for figure in FIGURES:
            print(f"  {figure:<14} {m[figure]:7.3f} s")
        for name, value in ratios[rows].items():
            target = TARGETS.get(name)
            print(f"  {name:<18} {value:5.2f}x" + (f"  (target <= {target}x)" if target else ""))
        o = opened[rows]
        print(
            f"  files opened: point {o['point']}, {batch}-key IN {o['in lookup']}, whole table {o['table']}"
        )
    if len(sizes) > 1:
        print(f"\n{sizes[-1]:,} / {sizes[0]:,} rows (target <= {TARGETS['largest/smallest']}x):")
        for figure, value in ratios["largest/smallest"].items():
            print(f"  {figure:<14} {value:5.2f}x")


if __name__ == "__main__":
    main()
