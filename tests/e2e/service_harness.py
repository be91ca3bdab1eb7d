"""A warehouse with tables in every state the management service must show, and ways to run the
service over it: as the real ``arctic-sql service`` subprocess, or in a thread of the test process
(sharing the test's Spark, so an optimize asked for from a page runs without a second JVM).

The warehouse is built once per test run (:func:`warehouse_with_every_state`) and shared by the API
and the browser tests; each test changes only tables of its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN = "service-test-token-0123"
TABLES = {
    "db.empty": "a primary-key table without data",
    "db.raw": "un-optimized: change files only, one delete",
    "db.done": "fully optimized",
    "db.failed": "its optimize failed (a change file vanished)",
    "db.expired": "history to expire through the API",
    "db.logs": "append-only",
    "db.clicked": "un-optimized, optimized from the dashboard by the browser test",
    "db.auto": "optimizer group 'svc' (minor at 2 small files), optimized by `service --optimizer --group svc`",
}
_BUILT: dict[str, str] = {}


def warehouse_with_every_state(spark: Any, root: str) -> str:
    """Build (once per run) the tables of :data:`TABLES` under ``root``; returns the warehouse."""
    if "warehouse" in _BUILT:
        return _BUILT["warehouse"]
    import arctic_sql
    from arctic_sql.table.files import storage

    warehouse = os.path.join(root, "warehouse")
    s = arctic_sql.connect(warehouse=warehouse, spark=spark)
    s.sql("CREATE DATABASE IF NOT EXISTS db")
    keyed = "(id BIGINT, v STRING, PRIMARY KEY (id))"
    for name in ("empty", "raw", "done", "failed", "expired", "clicked"):
        s.sql(f"CREATE TABLE db.{name} {keyed} TBLPROPERTIES ('self-optimizing.execute.num-retries' = '0')")
    s.sql(
        f"CREATE TABLE db.auto {keyed} TBLPROPERTIES ('self-optimizing.group' = 'svc', "
        "'self-optimizing.minor.trigger.file-count' = '2', 'base.file-index.hash-bucket' = '1', "
        "'change.file-index.hash-bucket' = '1')"
    )
    s.sql("CREATE TABLE db.logs (id BIGINT, v STRING)")
    s.sql("INSERT INTO db.logs VALUES (1, 'x'), (2, 'y')")
    for name in ("raw", "done", "failed", "expired", "clicked", "auto"):
        s.sql(f"INSERT INTO db.{name} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    for name in ("raw", "expired", "clicked", "auto"):
        s.sql(f"INSERT INTO db.{name} VALUES (5, 'e'), (2, 'B')")
    s.sql("DELETE FROM db.raw WHERE id = 3")
    s.sql("CALL system.optimize(table => 'db.done', mode => 'full')")
    failed = s.table("db.failed")
    doomed = storage.list_files(failed.change.location())[0]
    storage.delete_files([doomed])
    with contextlib.suppress(Exception):  # the failure is the state we want
        s.sql("CALL system.optimize(table => 'db.failed', mode => 'full')")
    _BUILT["warehouse"] = warehouse
    return warehouse


@dataclass
class RunningService:
    url: str
    process: subprocess.Popen[str] | None = None


def token_file(folder: str) -> str:
    path = os.path.join(folder, "token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, 0o600)
    return path


@contextmanager
def service_process(
    warehouse: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[RunningService]:
    """``python -m arctic_sql.frontends.cli service --warehouse W --port 0 ARGS``; yields once it listens.
    ``env``: more environment for it (a fault to inject, say)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    with tempfile.NamedTemporaryFile("w+", prefix="arctic-service-", suffix=".log") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "arctic_sql.frontends.cli",
                "service",
                "--warehouse",
                warehouse,
                "--port",
                "0",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        try:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert "listening on http://" in line, (line, Path(log.name).read_text())
            url = line.split("listening on ", 1)[1].split()[0]
            yield RunningService(url, proc)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def service_thread(warehouse: str, spark: Any, token: str | None = TOKEN) -> Iterator[RunningService]:
    """The same app in a thread of this process, optimizing on the test's Spark."""
    import uvicorn

    from arctic_sql.options import load_catalog
    from arctic_sql.service.api import ServiceContext, create_app
    from arctic_sql.table.catalog import ArcticCatalog

    catalog = ArcticCatalog(load_catalog(warehouse, "arctic", None, None))
    ctx = ServiceContext(catalog, token=token, spark=lambda: spark)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(create_app(ctx), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield RunningService(f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
