"""A Hive metastore (thrift) server for tests and benchmarks, run from the Hive jars the pyspark wheel
ships over an embedded Derby database in a folder of the caller's: the "remote metastore" that an
arctic session and a plain Spark both reach by ``hive.metastore.uris``.

>>> with metastore_server(tmp_path) as uris:  # doctest: +SKIP
...     spark.conf.set("spark.hadoop.hive.metastore.uris", uris)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

STARTUP_SECONDS = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def metastore_server(folder: Path) -> Iterator[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    port = _free_port()
    command = [
        "java",
        "-Xmx512m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-cp",
        f"{jars}/*",
        # Hive's own log4j setup would pick an async logger whose jar Spark does not ship.
        "-Dhive.async.log.enabled=false",
        f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        "-Ddatanucleus.schema.autoCreateAll=true",
        "-Dhive.metastore.schema.verification=false",
        f"-Dhive.metastore.warehouse.dir={folder}/warehouse",
        "-Dhive.metastore.bind.host=127.0.0.1",
        "org.apache.hadoop.hive.metastore.HiveMetaStore",
        "-p",
        str(port),
    ]
    log = open(folder / "metastore.log", "wb")  # noqa: SIM115
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder, env=dict(os.environ))
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"The Hive metastore did not start; see {folder}/metastore.log")
            time.sleep(0.5)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)
        log.close()
