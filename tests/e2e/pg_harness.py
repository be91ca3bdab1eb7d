"""A real PostgreSQL server on loopback for the tests: the shared catalog of a deployment.

Debian's server binaries (package postgresql-NN, in ``/usr/lib/postgresql/NN/bin``, off PATH) run a
fresh cluster in a temporary folder, on a free port of 127.0.0.1 only, with trust authentication for
127.0.0.1 only and no Unix socket. ``initdb`` and ``postgres`` refuse to run as root, so as root the
server runs as the ``postgres`` system user (the package creates it) in a folder that user owns.
Where the binaries or the driver (``psycopg2``, from the ``postgres`` extra) are missing,
a test skips with the reason :func:`missing` gives.

>>> with PostgresServer() as pg:   # doctest: +SKIP
...     load_catalog("c", type="sql", uri=pg.uri("catalog"), warehouse="s3://lake/wh")
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from cluster_harness import Started, free_port

SERVER_USER = "postgres"


def server_bindir() -> str | None:
    """The folder of ``initdb`` and ``postgres``: on PATH, else Debian's newest versioned folder."""
    on_path = shutil.which("initdb")
    if on_path:
        return os.path.dirname(on_path)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    return os.path.dirname(found[-1]) if found else None


def missing() -> str | None:
    """Why a PostgreSQL server cannot be had here, or ``None``."""
    try:
        import psycopg2  # noqa: F401 - the driver pyiceberg's SQL catalog connects with
    except ImportError:
        return "psycopg2 is not installed (pip install 'arctic-sql[postgres]')"
    if server_bindir() is None:
        return "no PostgreSQL server binaries (initdb): install Debian's postgresql package (scripts/setup.sh does, as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no '{SERVER_USER}' user to run the server as"
    return None


class PostgresServer(Started):
    """One server, started by ``__enter__`` and stopped by ``__exit__`` (also when starting failed)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bindir = server_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="arctic-pg-"))
        self.data = self.root / "data"
        self._process: subprocess.Popen[bytes] | None = None

    def uri(self, database: str) -> str:
        """SQLAlchemy's URI of ``database``: the catalog property pyiceberg's SQL catalog takes."""
        return f"postgresql+psycopg2://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def _as_server_user(self) -> dict[str, object]:
        """Popen arguments that run a child as the ``postgres`` user when this process is root."""
        if os.geteuid() != 0:
            return {}
        user = pwd.getpwnam(SERVER_USER)
        return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def start(self, timeout_s: float = 60) -> None:
        as_user = self._as_server_user()
        if as_user:
            os.chown(self.root, int(as_user["user"]), int(as_user["group"]))  # type: ignore[call-overload]
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C", "LC_ALL": "C"}
        subprocess.run(
            [
                f"{self.bindir}/initdb",
                "-D",
                str(self.data),
                "-U",
                SERVER_USER,
                "-A",
                "trust",
                "--no-locale",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=self.root,
            **as_user,
        )  # type: ignore[call-overload]
        # Loopback TCP only: the default pg_hba.conf also trusts the Unix socket and ::1.
        (self.data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n")
        log = open(self.root / "server.log", "wb")  # noqa: SIM115 - the child holds it
        self._process = subprocess.Popen(
            [
                f"{self.bindir}/postgres",
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=60",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.root,
            start_new_session=True,
            **as_user,
        )
        log.close()
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        import psycopg2

        deadline = time.monotonic() + timeout_s
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                psycopg2.connect(
                    host="127.0.0.1", port=self.port, user=SERVER_USER, dbname="postgres"
                ).close()
                return
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"postgres did not accept connections within {timeout_s:.0f} s:\n" + self.log_tail()
                    ) from None
            time.sleep(0.2)

    def create_database(self, name: str) -> None:
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=SERVER_USER, dbname="postgres")
        connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
        try:
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()

    def log_tail(self, lines: int = 30) -> str:
        path = self.root / "server.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """A fast shutdown (SIGINT: disconnect the clients, stop), then the group killed, the folder removed."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=15)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # nothing of the server's group is left
        shutil.rmtree(self.root, ignore_errors=True)
