"""A single-node Apache Kafka broker in KRaft mode (no ZooKeeper) on loopback, from the jars of
``bash scripts/jars.sh broker``: a combined broker and controller on two free ports, its own folder.

    python examples/kafka/broker.py [FOLDER]    # prints the bootstrap address, runs until Ctrl-C

Used by examples/kafka/pipeline.py and by the tests (tests/e2e/test_kafka_cdc.py) as ``KafkaBroker``.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from arctic_sql.jars import group_jars

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class KafkaBroker:
    """``with KafkaBroker(folder) as broker:`` formats the storage, starts ``kafka.Kafka`` and waits until
    it accepts connections; leaving the block stops it (SIGTERM, then SIGKILL after a grace period)."""

    def __init__(
        self, folder: str | os.PathLike[str], partitions: int = 3, jars_root: str | None = None
    ) -> None:
        self.folder = Path(folder)
        self.port, self.controller_port = free_port(), free_port()
        self.partitions = partitions
        jars = group_jars("broker", jars_root or os.environ.get("ARCTIC_SQL_JARS") or ROOT / "jars")
        self.classpath = os.pathsep.join(jars)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> Path:
        path = self.folder / "server.properties"
        path.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={self.folder / 'data'}",
                    f"num.partitions={self.partitions}",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=false",
                    "",
                ]
            )
        )
        return path

    def _java(self, main_class: str, *args: str) -> list[str]:
        return ["java", "-Xmx384m", "-cp", self.classpath, main_class, *args]

    def start(self, timeout_s: float = 90) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self._properties()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
            check=True,
            capture_output=True,
        )
        log = open(self.folder / "broker.log", "wb")  # noqa: SIM115 - the broker's for its lifetime
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(config)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}): see {log.name}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"the Kafka broker did not listen on {self.bootstrap} within {timeout_s} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    with KafkaBroker(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kafka-")) as running:
        print(f"Kafka broker on {running.bootstrap} (folder {running.folder}); Ctrl-C stops it", flush=True)
        try:
            running.process.wait()
        except KeyboardInterrupt:
            pass
