"""A walk through arctic-sql on the embedded default: ``python -m arctic_sql.demo [--warehouse DIR]``
(or on any catalog and Spark master: the shell's options, ``--catalog-type``, ``--master``, ...).

Creates a primary-key table, upserts, deletes, updates, merges, reads it back, travels in time and
shows the table's history and files, printing each statement and its result; then what to try next
(optimize, an incremental read, time travel, the Thrift server), as command lines to copy.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import arctic_sql
from arctic_sql.options import add_connect_arguments, check_connect_args, command_line, connect_options

if TYPE_CHECKING:
    from arctic_sql.session import Session

STEPS = [
    "CREATE DATABASE IF NOT EXISTS demo",
    "DROP TABLE IF EXISTS demo.orders PURGE",
    """CREATE TABLE demo.orders (
         order_id BIGINT, customer_id BIGINT, status STRING, amount DOUBLE, region STRING,
         PRIMARY KEY (order_id, region))
       PARTITIONED BY (region)
       TBLPROPERTIES ('base.file-index.hash-bucket' = '4')""",
    """INSERT INTO demo.orders VALUES
         (1, 10, 'new', 25.0, 'eu'), (2, 11, 'new', 40.0, 'us'), (3, 10, 'new', 12.5, 'eu')""",
    "SELECT * FROM demo.orders ORDER BY order_id",
    "-- an INSERT on a primary-key table is an upsert: order 1 changes, order 4 is new",
    "INSERT INTO demo.orders VALUES (1, 10, 'paid', 25.0, 'eu'), (4, 12, 'new', 99.0, 'us')",
    "DELETE FROM demo.orders WHERE order_id = 3",
    "UPDATE demo.orders SET status = 'shipped' WHERE status = 'paid'",
    """MERGE INTO demo.orders t
       USING (SELECT 2 AS order_id, 11 AS customer_id, 'cancelled' AS status, 40.0 AS amount, 'us' AS region,
                     'D' AS op
              UNION ALL SELECT 5, 13, 'new', 7.0, 'eu', 'U') s
       ON t.order_id = s.order_id AND t.region = s.region
       WHEN MATCHED AND s.op = 'D' THEN DELETE
       WHEN MATCHED THEN UPDATE SET *
       WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *""",
    "SELECT * FROM demo.orders ORDER BY order_id",
    "SELECT region, count(*) AS orders, sum(amount) AS total FROM demo.orders GROUP BY region ORDER BY region",
    "SELECT version, operation, store, rows_added, rows_removed FROM demo.orders.history",
    "SELECT * FROM demo.orders VERSION AS OF 1 ORDER BY order_id",
    "SELECT store, partition, node, kind, rows, key_min, key_max FROM demo.orders.files ORDER BY store, partition",
    "DESCRIBE EXTENDED demo.orders",
]


# What to try next: (what it shows, the statement), run on the demo's table after the steps above.
TRY_NEXT = [
    (
        "optimize now: merge the change data into base files (the service does it in the background)",
        "CALL system.optimize(table => 'demo.orders', mode => 'full')",
    ),
    (
        "incremental read: each order changed after version 1, with its last change",
        "SELECT * FROM demo.orders VERSION BETWEEN 1 AND get_latest_version('demo.orders')",
    ),
    (
        "time travel: the table one commit before the newest",
        "SELECT * FROM demo.orders VERSION AS OF get_latest_version('demo.orders', 2)",
    ),
]


def run(session: Session, say: Callable[[str], None] = print) -> None:
    """Run the demo's statements on ``session``, printing each and its result."""
    for step in STEPS:
        if step.startswith("--"):
            say(f"\n{step}")
            continue
        say("\narctic> " + " ".join(step.split()))
        result = session.sql(step)
        if result.columns:
            result.show(truncate=False)


def try_next(warehouse: str, flags: Sequence[str] = ()) -> str:
    """Command lines to copy after the demo, on the same warehouse (and catalog and Spark ``flags``)."""
    shell = os.path.join(os.path.dirname(sys.executable), "arctic-sql")
    if not os.path.exists(shell):
        shell = "arctic-sql"
    elif not os.path.relpath(shell).startswith(".."):
        shell = os.path.relpath(shell)
    same = " ".join(shlex.quote(word) for word in ["--warehouse", warehouse, *flags])
    lines = ["", "What to try next (each line runs on the demo's table):"]
    for what, sql in TRY_NEXT:
        lines += [f"  # {what}", f'  {shell} {same} -e "{sql}"']
    lines += [
        "  # the Thrift server for JDBC/ODBC clients, BI tools and dbt-spark (the 'server' extra)",
        f"  {shell} thriftserver {same}   # listens on 127.0.0.1:10000",
        "More: docs/ (SQL, history, self-optimizing, Thrift server, dbt, Jupyter, design).",
    ]
    return "\n".join(lines)


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m arctic_sql.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--fresh", action="store_true", help="delete the warehouse folder first")
    add_connect_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(argv)
    check_connect_args(parser, args)
    if args.fresh:
        if "://" in args.warehouse:
            parser.error("--fresh deletes a warehouse folder; --warehouse is a URI")
        shutil.rmtree(args.warehouse, ignore_errors=True)
    started = time.time()
    session = arctic_sql.connect(**connect_options(args))
    spark = session.spark
    print(
        f"-- arctic-sql {arctic_sql.__version__}: Spark {spark.version} ({spark.sparkContext.master}), "
        f"warehouse {args.warehouse}"
    )
    run(session)
    print(f"-- demo finished in {time.time() - started:.1f} s")
    session.stop()
    print(try_next(args.warehouse, command_line(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
