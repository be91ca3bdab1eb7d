"""A materialized view's incremental refresh against its full recompute, on the same table in one run.

``orders`` of N rows (default 200,000; the issue's 2,000,000 scaled down), optimized, and two
identical views ``SELECT status, region, count(*), sum(amount) FROM orders GROUP BY status,
region``. Each run commits 1% of N rows as upserts (80% updates of random keys, 20% new keys), then
refreshes one view incrementally (REFRESH MATERIALIZED VIEW) and recomputes the other in full
(materialized_views.recompute: the query over the whole table, written over the view), the order
alternating between runs; the first run warms up. Printed: the median seconds of each, and the ratio.
A third view is refreshed incrementally the way refreshes ran before session 24 (every change set
read by the Spark form of the change feed, the view's state read whole: ``preimages.MAX_CHANGE_ROWS``
set to 0 around it), in the same rotation, so before and after are measured in one run.
``--view join``: the views join ``orders`` with ``customers`` (N/20 rows, the issue's 100k for 2M)
on the customer's key instead, ``SELECT o.id, o.amount, c.name, c.tier FROM orders o JOIN customers
c ON o.customer_id = c.id``; each run also updates 0.1% of the customers.

    .venv/bin/python -m benchmarks.materialized_views                 # 200k rows, 5 runs
    .venv/bin/python -m benchmarks.materialized_views --rows 20000 --runs 3
    .venv/bin/python -m benchmarks.materialized_views --view join
    .venv/bin/python -m benchmarks.materialized_views --bound 1,5,10 --runs 2

``--bound P,...``: where ``preimages.MAX_CHANGE_ROWS`` belongs. For each P, commits of P% of the
keys as updates (random keys) are refreshed by two views, one with the change set in the driver
(the bound lifted) and one through Spark (the bound 0), each going first in turn; printed: the
median of each and their ratio per P.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

RESULTS = os.path.join(os.path.dirname(__file__), "results")
QUERIES = {
    "aggregate": "SELECT status, region, count(*) AS orders, sum(amount) AS amount FROM db.orders "
    "GROUP BY status, region",
    "join": "SELECT o.id, o.amount, c.name, c.tier FROM db.orders o JOIN db.customers c ON o.customer_id = c.id",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.materialized_views", description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="rows loaded (default 200,000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each (default 5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--view", choices=sorted(QUERIES), default="aggregate", help="the view's query")
    parser.add_argument("--bound", default=None, help="percentages of keys changed per commit (see above)")
    parser.add_argument(
        "--out", default=None, help="results file (default results/materialized_views[_join].json)"
    )
    return parser.parse_args(argv)


def upsert(session, rng: random.Random, next_key: int, batch: int, customers: int) -> int:
    """One commit of ``batch`` upserts; the next new key."""
    updates = rng.sample(range(next_key), batch * 4 // 5)
    new = list(range(next_key, next_key + batch - len(updates)))
    values = ", ".join(
        f"({k}, {rng.randrange(customers)}, 's{rng.randrange(5)}', 'r{rng.randrange(4)}', {rng.randrange(1000)})"
        for k in [*updates, *new]
    )
    session.sql(f"INSERT INTO db.orders VALUES {values}")
    return next_key + len(new)


def update_customers(session, rng: random.Random, customers: int) -> None:
    """One commit updating 0.1% of the customers (a join view re-joins the orders that reference them)."""
    keys = rng.sample(range(customers), max(1, customers // 1000))
    values = ", ".join(f"({k}, 'c{k}-{rng.randrange(100)}', {rng.randrange(3)})" for k in keys)
    session.sql(f"INSERT INTO db.customers VALUES {values}")


def spark_feed(refresh):
    """``refresh`` run with every change set too large for the driver (the path before session 24)."""
    from arctic_sql.table.reading import preimages

    def run():
        saved, preimages.MAX_CHANGE_ROWS = preimages.MAX_CHANGE_ROWS, 0
        try:
            return refresh()
        finally:
            preimages.MAX_CHANGE_ROWS = saved

    return run


def main(argv: list[str] | None = None) -> None:
    import arctic_sql
    from arctic_sql.statements.materialized_views import recompute
    from arctic_sql.table.model.identifiers import TableIdentifier

    args = parse_args(argv)
    query = QUERIES[args.view]
    customers = max(1, args.rows // 20)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as work:
        session = arctic_sql.connect(warehouse=os.path.join(work, "warehouse"))
        session.sql("CREATE DATABASE IF NOT EXISTS db")
        session.sql(
            "CREATE TABLE db.orders (id BIGINT, customer_id BIGINT, status STRING NOT NULL, "
            "region STRING NOT NULL, amount BIGINT, PRIMARY KEY (id))"
        )
        session.sql(
            f"INSERT INTO db.orders SELECT id, (id * 7919) % {customers}, CONCAT('s', id % 5), "
            f"CONCAT('r', id % 4), id % 1000 FROM range({args.rows})"
        )
        session.sql("CALL system.optimize(table => 'db.orders', mode => 'full')")
        if args.view == "join":
            session.sql("CREATE TABLE db.customers (id BIGINT, name STRING, tier INT, PRIMARY KEY (id))")
            session.sql(
                f"INSERT INTO db.customers SELECT id, CONCAT('c', id), id % 3 FROM range({customers})"
            )
            session.sql("CALL system.optimize(table => 'db.customers', mode => 'full')")
        if args.bound:
            return bound(session, args, query)
        session.sql(f"CREATE MATERIALIZED VIEW db.incremental AS {query}")
        session.sql(f"CREATE MATERIALIZED VIEW db.recomputed AS {query}")
        session.sql(f"CREATE MATERIALIZED VIEW db.before AS {query}")
        full_view = TableIdentifier("db", "recomputed")
        steps = {
            "incremental": lambda: session.sql("REFRESH MATERIALIZED VIEW db.incremental"),
            "full": lambda: recompute(session.context, full_view),
            "spark_feed": spark_feed(lambda: session.sql("REFRESH MATERIALIZED VIEW db.before")),
        }
        times: dict[str, list[float]] = {name: [] for name in steps}
        next_key, batch = args.rows, max(1, args.rows // 100)
        for run in range(args.runs + 1):
            next_key = upsert(session, rng, next_key, batch, customers)
            if args.view == "join":
                update_customers(session, rng, customers)
            names = list(steps)
            for name in names[run % 3 :] + names[: run % 3]:  # each goes first in turn
                began = time.perf_counter()
                steps[name]()
                if run:  # the first run of each warms up
                    times[name].append(time.perf_counter() - began)
        a = session.sql("SELECT * FROM db.incremental").exceptAll(session.sql("SELECT * FROM db.recomputed"))
        b = session.sql("SELECT * FROM db.recomputed").exceptAll(session.sql("SELECT * FROM db.incremental"))
        assert a.isEmpty() and b.isEmpty(), "the two views differ"
        before_rows, full_rows = (
            session.sql("SELECT * FROM db.before"),
            session.sql("SELECT * FROM db.recomputed"),
        )
        assert before_rows.exceptAll(full_rows).isEmpty() and full_rows.exceptAll(before_rows).isEmpty()
        incremental, full = statistics.median(times["incremental"]), statistics.median(times["full"])
        before = statistics.median(times["spark_feed"])
        load = os.getloadavg()
        info = dict(session.sql("DESCRIBE MATERIALIZED VIEW db.incremental").collect())
        result = {
            "view": args.view,
            "rows": args.rows,
            "runs": args.runs,
            "seconds": times,
            "median_s": {"incremental": incremental, "full": full, "spark_feed": before},
            "incremental_over_full": incremental / full,
            "spark_feed_over_full": before / full,
            "load_average": load,
            "last_refresh": info.get("last refresh"),
        }
        print(f"view {query!r} over {args.rows} rows, one 1% upsert commit per run")
        print(f"  incremental refresh: {incremental:.2f} s  ({info.get('last refresh')})")
        print(f"  full recompute:      {full:.2f} s")
        print(f"  incremental, Spark feed (before): {before:.2f} s")
        print(f"  incremental / full:  {incremental / full:.2f}x (median of {args.runs} interleaved runs)")
        print(
            f"  before / full:       {before / full:.2f}x; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
        )
        suffix = "" if args.view == "aggregate" else f"_{args.view}"
        out = args.out or os.path.join(RESULTS, f"materialized_views{suffix}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
        session.spark.stop()


def bound(session, args: argparse.Namespace, query: str) -> None:
    """``--bound``: driver against Spark for change sets of each given size."""
    from arctic_sql.table.reading import preimages

    session.sql(f"CREATE MATERIALIZED VIEW db.driver AS {query}")
    session.sql(f"CREATE MATERIALIZED VIEW db.spark AS {query}")

    def refresh(view: str, limit: int) -> float:
        saved, preimages.MAX_CHANGE_ROWS = preimages.MAX_CHANGE_ROWS, limit
        began = time.perf_counter()
        try:
            session.sql(f"REFRESH MATERIALIZED VIEW db.{view}")
        finally:
            preimages.MAX_CHANGE_ROWS = saved
        return time.perf_counter() - began

    result = {}
    for percent in [float(p) for p in args.bound.split(",")]:
        times: dict[str, list[float]] = {"driver": [], "spark": []}
        for run in range(args.runs + 1):
            seed = args.seed * 1000 + run + int(percent * 100)
            session.sql(
                f"INSERT INTO db.orders SELECT id, customer_id, CONCAT('s', (id + {run}) % 5), region, "
                f"(amount + {run + 1}) % 1000 FROM db.orders WHERE rand({seed}) < {percent / 100}"
            )
            steps = [("driver", 10**9), ("spark", 0)]
            for view, limit in steps[run % 2 :] + steps[: run % 2]:
                took = refresh(view, limit)
                if run:
                    times[view].append(took)
        driver, spark = statistics.median(times["driver"]), statistics.median(times["spark"])
        result[percent] = {"driver": times["driver"], "spark": times["spark"]}
        print(
            f"  {percent:g}% of {args.rows} keys: driver {driver:.2f} s, spark {spark:.2f} s: "
            f"{driver / spark:.2f}x; load average {os.getloadavg()[0]:.1f}"
        )
    a = session.sql("SELECT * FROM db.driver").exceptAll(session.sql("SELECT * FROM db.spark"))
    assert a.isEmpty(), "the two views differ"
    out = args.out or os.path.join(RESULTS, "materialized_views_bound.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(
            {"rows": args.rows, "runs": args.runs, "seconds": result, "load": os.getloadavg()}, f, indent=2
        )
    session.spark.stop()


if __name__ == "__main__":
    main()
