"""How long the management service takes to list 1,000 tables: ``GET /api/v1/tables?page_size=1000``.

    .venv/bin/python -m benchmarks.service_list [--tables 1000] [--with-data 200] [--work DIR]

Creates the tables through the catalog (no Spark): half primary-key, half append-only, and gives
``--with-data`` of the append-only ones one commit of a small Parquet file (pyiceberg's append), so
their facts read manifests. Then serves them with the real app on loopback and times the listing over
HTTP: cold (every table's facts computed), warm (all cached: one catalog query and a cache look-up
per table), and warm after one table committed (one recomputed); and the warehouse's data size over
time (``GET /api/v1/overview/data-size``, from the cached snapshot summaries). Prints the times and writes
``benchmarks/results/service_list.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import tempfile
import threading
import time

import httpx
import pyarrow as pa
import uvicorn
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from arctic_sql.options import load_catalog
from arctic_sql.service.api import ServiceContext, create_app
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.model.identifiers import TableIdentifier

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def make_tables(catalog: ArcticCatalog, count: int, with_data: int) -> float:
    started = time.perf_counter()
    catalog.create_database("bench", if_not_exists=True)
    keyed = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", StringType()),
        identifier_field_ids=[1],
    )
    plain = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType()))
    data = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"v{i}" for i in range(100)]})
    for i in range(count):
        is_keyed = i % 2 == 0
        table = catalog.create_table(
            TableIdentifier("bench", f"t{i:04d}"), keyed if is_keyed else plain, PartitionSpec(), {}
        )
        if not is_keyed and i // 2 < with_data:
            table.base.append(data)
    return time.perf_counter() - started


def serve(catalog: ArcticCatalog) -> tuple[str, uvicorn.Server, threading.Thread]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(create_app(ServiceContext(catalog)), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def timed_list(client: httpx.Client, expected: int) -> float:
    started = time.perf_counter()
    answer = client.get("/api/v1/tables", params={"page_size": 1000})
    elapsed = time.perf_counter() - started
    answer.raise_for_status()
    assert answer.json()["total"] == expected, answer.json()["total"]
    return elapsed


def timed_data_size(client: httpx.Client) -> float:
    started = time.perf_counter()
    answer = client.get("/api/v1/overview/data-size")
    answer.raise_for_status()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--with-data", type=int, default=200)
    parser.add_argument("--work", default=None, help="warehouse folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="service-list-")
    catalog = ArcticCatalog(load_catalog(os.path.join(work, "warehouse"), "arctic", None, None))
    existing = len(catalog.list_tables("bench")) if catalog.database_exists("bench") else 0
    setup_s = make_tables(catalog, args.tables, args.with_data) if existing == 0 else 0.0
    url, server, thread = serve(
        ArcticCatalog(load_catalog(os.path.join(work, "warehouse"), "arctic", None, None))
    )
    with httpx.Client(base_url=url, timeout=600) as client:
        cold = timed_list(client, args.tables)
        warm = [timed_list(client, args.tables) for _ in range(3)]
        size = [timed_data_size(client) for _ in range(3)]
        catalog.load_table(TableIdentifier("bench", "t0001")).base.append(
            pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]})
        )
        after_commit = timed_list(client, args.tables)
    server.should_exit = True
    thread.join(timeout=30)
    figures = {
        "tables": args.tables,
        "tables_with_data": args.with_data,
        "setup_s": round(setup_s, 2),
        "cold_list_s": round(cold, 3),
        "warm_list_s": round(min(warm), 3),
        "list_after_one_commit_s": round(after_commit, 3),
        "data_size_warm_s": round(min(size), 3),
        "data_size_over_warm_list": round(min(size) / min(warm), 2),
        "cold_over_warm": round(cold / min(warm), 1),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    print(f"{args.tables} tables ({args.with_data} with data), created in {setup_s:.1f} s")
    print(
        f"GET /api/v1/tables?page_size=1000: cold {cold:.3f} s, warm {min(warm):.3f} s "
        f"({cold / min(warm):.0f}x), after one commit {after_commit:.3f} s"
    )
    print(
        f"GET /api/v1/overview/data-size: warm {min(size):.3f} s ({min(size) / min(warm):.2f}x the warm listing)"
    )
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "service_list.json"), "w") as f:
        json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
