"""A Spark standalone cluster on this machine for the tests: one master and N workers on 127.0.0.1.

The pip package of pyspark has no ``sbin/start-master.sh``, so each daemon is started with
``$SPARK_HOME/bin/spark-class`` (which ``exec``s java: the Popen pid is the JVM's). Every daemon runs
in a process group of its own, and the executors a worker launches inherit that group, so stopping
kills whatever is left of each group, even after a test failed halfway.

>>> with StandaloneCluster(tmp_path, workers=2) as cluster:   # doctest: +SKIP
...     finish_driver(start_driver([sys.executable, "app.py", cluster.master_url], log), log, 300)
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_aws(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` less every ``AWS_*`` variable: the tests prove that the drivers and executors reach an
    object store through the catalog's properties alone, shipped in arctic's task plans."""
    return {k: v for k, v in env.items() if not k.startswith("AWS_")}


def daemon_env() -> dict[str, str]:
    """Loopback only, small daemon heaps, and no REST submission server (its fixed port 6066 would
    clash with any other cluster on the machine). No AWS_* variable reaches the executors."""
    return {
        **without_aws(os.environ),
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
    }


class Started:
    """Servers a test starts: ``with`` starts one, and stops it also when starting failed halfway."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class StandaloneCluster(Started):
    """Master and workers as child processes of the test; ``stop()`` is safe to call at any point."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "768m") -> None:
        self.root = root
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_dirs = [root / f"worker-{i}" for i in range(workers)]
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120) -> None:
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        self._read_bound_ports(timeout_s)
        self._wait(lambda state: state.get("status") == "ALIVE", "the master to be ALIVE", timeout_s)
        for i, work_dir in enumerate(self.worker_dirs):
            work_dir.mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(work_dir),
                self.master_url,
            )
        self._wait(
            lambda state: state.get("aliveworkers") == self.workers,
            f"{self.workers} workers to register",
            timeout_s,
        )

    def _read_bound_ports(self, timeout_s: float) -> None:
        """The ports the master really bound, from its log. A port ``free_port`` picked can be taken by
        another process (another test worker's Spark) before the master binds it; Spark then moves on to
        the next port, and polling the port picked would read someone else's web page."""
        wanted = {"sparkMaster": "port", "MasterUI": "webui_port"}
        deadline = time.monotonic() + timeout_s
        while wanted and time.monotonic() < deadline:
            name, process = self._processes[0]
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {process.returncode} while starting:\n" + self.log_tail(name)
                )
            log = (self.root / "master.log").read_text(encoding="utf-8", errors="replace")
            for service, attribute in list(wanted.items()):
                bound = re.search(rf"Successfully started service '{service}' on port (\d+)", log)
                if bound:
                    setattr(self, attribute, int(bound.group(1)))
                    del wanted[service]
            time.sleep(0.25)
        if wanted:
            raise TimeoutError(
                f"the master did not bind {sorted(wanted)} within {timeout_s:.0f} s:\n"
                + self.log_tail("master")
            )

    def state(self) -> dict[str, Any]:
        """The master's JSON status: workers, apps, ``aliveworkers``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as response:
            return json.load(response)

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it
        command = [os.path.join(spark_home(), "bin", "spark-class"), main_class, *args]
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=daemon_env(), start_new_session=True
        )
        log.close()
        self._processes.append((name, process))

    def _wait(self, ready: Any, what: str, timeout_s: float) -> None:
        """Poll the master's JSON until ``ready(state)``; fail at once if a daemon exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode} while waiting for {what}:\n"
                        + self.log_tail(name)
                    )
            try:
                if ready(self.state()):
                    return
            except OSError:
                pass  # the web UI is not listening yet
            time.sleep(0.25)
        raise TimeoutError(f"no {what} within {timeout_s:.0f} s:\n" + self.log_tail("master"))

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Workers first (each kills its executors), then the master; then anything left in their groups."""
        for _, process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
        for _, process in reversed(self._processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
            _kill_group(process.pid)
        self._processes.clear()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty: nothing was left behind


def start_driver(
    command: list[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[str]:
    """Start a Spark driver program in its own process (one SparkContext per JVM: the test process has
    its own local session) and group, with no AWS_* variable; stdout to ``log``.out, stderr to
    ``log``.err (files, not pipes, so that drivers running side by side never block on a full pipe)."""
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=err,
            text=True,
            cwd=cwd,
            env=without_aws({**os.environ, **(env or {})}),
            start_new_session=True,
        )


def finish_driver(
    process: subprocess.Popen[str], log: Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Wait for a driver of :func:`start_driver`; a timeout also ends the JVM it started."""
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        process.wait()
        tail = Path(f"{log}.err").read_text(errors="replace")[-3000:]
        raise AssertionError(f"the driver did not finish within {timeout_s:.0f} s:\n{tail}") from None
    finally:
        _kill_group(process.pid)
    return subprocess.CompletedProcess(
        process.args,
        process.returncode,
        Path(f"{log}.out").read_text(),
        Path(f"{log}.err").read_text(errors="replace"),
    )


def executor_logs(work_dir: Path, app_id: str) -> list[Path]:
    """The stderr files of the executors a worker ran for ``app_id`` (``{work dir}/{app}/{executor}``)."""
    return sorted((work_dir / app_id).glob("*/stderr"))
