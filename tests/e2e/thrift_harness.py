"""An ``arctic-sql thriftserver`` subprocess on a free loopback port, for the tests of its real clients.

``shared_server()`` starts one server per test process (a Spark JVM costs seconds to start on this
machine) and stops it when the process exits; tests keep apart by using databases of their own.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

START_TIMEOUT_S = 300
_LISTENING = re.compile(r"listening on ([\d.]+):(\d+)")


class ServerProcess:
    def __init__(
        self, root: Path, auth: str = "NONE", password_file: Path | None = None, options: Sequence[str] = ()
    ) -> None:
        self.root = root
        self.options = list(options)
        self.warehouse = root / "warehouse"
        self.auth = auth
        self.password_file = password_file
        self.port: int | None = None
        self.process: subprocess.Popen[str] | None = None
        self.log_path = root / "server.log"

    def start(self) -> ServerProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "arctic_sql.frontends.cli",
            "thriftserver",
            "--port",
            "0",
            "--warehouse",
            str(self.warehouse),
            "--auth",
            self.auth,
            "--conf",
            "spark.master=local[2]",
            "--conf",
            "spark.sql.shuffle.partitions=4",
        ]
        if self.password_file is not None:
            command += ["--password-file", str(self.password_file)]
        command += self.options
        # The shared server stays up while later test modules run their own Spark: keep its heap small.
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
            "ARCTIC_DRIVER_MEMORY": "2g",
        }
        log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.root, env=env
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"thrift server exited with {self.process.returncode}:\n{self.log_tail()}")
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                match = _LISTENING.search(self.process.stdout.readline())
                if match:
                    self.port = int(match.group(2))
                    return self
        self.stop()
        raise RuntimeError(f"thrift server did not start in {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8").splitlines()[-lines:])
        except OSError:
            return ""

    def connect(self, database: str = "default", **kwargs):
        from pyhive import hive

        kwargs.setdefault("username", "tester")
        return hive.connect("127.0.0.1", self.port, database=database, **kwargs)


_shared: ServerProcess | None = None


def shared_server() -> ServerProcess:
    """The test process's one NONE-auth server, started on first use."""
    global _shared
    if _shared is None or not _shared.alive():
        root = Path(tempfile.mkdtemp(prefix="arctic-thrift-"))
        _shared = ServerProcess(root).start()
        atexit.register(_shared.stop)
    return _shared


def beeline() -> Path:
    """pyspark's ``bin/beeline`` (Hive's JDBC shell, shipped with the pyspark wheel)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "beeline"


def run_beeline(
    port: int, database: str, args: list[str], timeout: int = 300, user: str = "tester"
) -> subprocess.CompletedProcess:
    import pyspark

    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [str(beeline()), "-u", f"jdbc:hive2://127.0.0.1:{port}/{database}", "-n", user, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def rows(cursor) -> list[tuple]:
    return [tuple(r) for r in cursor.fetchall()]
