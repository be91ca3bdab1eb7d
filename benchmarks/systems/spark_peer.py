"""The systems ``benchmarks/spark_peers.py`` drives step by step: arctic-sql and Spark's floor in the
orchestrator's own Spark session, each peer format in its own Spark in a worker process.

Every system answers the same steps, each returning the seconds it took where it ran: ``load`` (B1),
``merge`` (one W0/W1 commit), ``query`` (R1/R2), ``optimize`` (O1). A system that cannot do a step
(Spark's floor has no table to compact) returns None.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import datagen
from benchmarks.systems import arctic
from benchmarks.systems.spark_peer_worker import COLUMNS

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("spark_peer_worker.py")
MERGE_SQL = arctic.MERGE.replace(arctic.TABLE, "{table}")  # one statement for every system


class StepError(RuntimeError):
    """A system failed a step: its traceback (from the worker, or the exception here)."""


@dataclass(frozen=True)
class PeerRuntime:
    """A peer format's Spark runtime: its jar groups (scripts/jars.lock) and the venv of its pyspark."""

    name: str
    label: str
    groups: tuple[str, ...]
    venv: str
    settings: str  # what the worker configures, for the report

    def python(self) -> Path:
        return REPO / self.venv / "bin" / "python"


PEERS = {
    "delta": PeerRuntime(
        "delta",
        "Delta/Spark",
        ("delta",),
        ".venv-spark4.2",
        "USING delta, delta.enableDeletionVectors = true, spark.databricks.delta.snapshotPartitions = nproc; "
        "MERGE INTO; OPTIMIZE",
    ),
    "iceberg": PeerRuntime(
        "iceberg",
        "Iceberg/Spark",
        ("iceberg",),
        ".venv-spark4.1",
        "format v2, write.merge/update/delete.mode = merge-on-read, Hadoop catalog; MERGE INTO; "
        "rewrite_data_files + rewrite_position_delete_files (rewrite-all)",
    ),
}


def unserved_peers(lock: Path = REPO / "scripts" / "jars.lock") -> dict[str, str]:
    """Groups scripts/jars.lock marks unserved (the reachable Maven Central did not serve them)."""
    found: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields and not line.startswith("#") and "unserved" in fields:
            found[fields[0]] = fields[1]
    return found


class System:
    name = ""
    label = ""

    def __init__(self) -> None:
        self.tables: dict[str, str] = {}  # short name -> the system's full table name
        self.error: str | None = None
        self.info: dict = {}

    def load(self, table: str, data: str) -> float | None: ...
    def merge(self, table: str, batch_file: str) -> float | None: ...
    def query(self, table: str, sql: str) -> tuple[list, float]: ...
    def optimize(self, table: str) -> float | None: ...
    def files(self, table: str) -> dict | None: ...
    def close(self) -> None: ...

    def checksum(self, table: str) -> dict:
        """The checksum fields of ``datagen.checksum_of``, by the SQL arctic-sql's own check runs."""
        system = self

        class Rows:  # what arctic.checksum needs of a session: .sql(q).collect()
            def sql(self, sql: str):  # noqa: ANN202
                rows = system.query(table, sql)[0]
                return type("Collected", (), {"collect": lambda _: rows})()

        return arctic.checksum(Rows(), self.tables[table])


class Arctic(System):
    """arctic-sql in the orchestrator's process: the statements ``benchmarks/systems/arctic.py`` runs."""

    name, label = "arctic", "arctic-sql"

    def __init__(self, work: str, warm_data: str) -> None:
        super().__init__()
        self.work = work
        self.session = arctic.start(self.info, work, warm_data, optimize=True)

    def load(self, table: str, data: str) -> float:
        self.tables[table] = f"bench.{table}"
        arctic.load(self.session, self.info, self.tables[table], data, suffix=f"_{table}")
        return self.info.pop(f"load_s_{table}")

    def merge(self, table: str, batch_file: str) -> float:
        return arctic.merge(self.session, self.tables[table], batch_file)

    def query(self, table: str, sql: str) -> tuple[list, float]:
        started = time.perf_counter()
        rows = self.session.sql(sql.format(table=self.tables[table])).collect()
        return rows, time.perf_counter() - started

    def optimize(self, table: str) -> float:
        started = time.perf_counter()
        self.session.sql(arctic.OPTIMIZE.replace(arctic.TABLE, self.tables[table])).collect()
        return time.perf_counter() - started

    def files(self, table: str) -> dict:
        from arctic_sql.table.reading.scan import plan_read

        plan = plan_read(self.session.table(self.tables[table]))
        return {"base_files": len(plan.base_files), "change_files": len(plan.change_files)}


class SparkFloor(System):
    """What Spark alone costs in the orchestrator's session: its own Parquet write of the load (B1), the
    batch written into a Python data source that only counts rows (W0), a plain Parquet read (R1/R2)."""

    name, label = "floor", "Spark floor"

    def __init__(self, session, work: str) -> None:  # noqa: ANN001 - arctic-sql's session
        super().__init__()
        from benchmarks.stream_sink import register_noop_sink

        self.session, self.spark, self.work = session, session.spark, work
        register_noop_sink(self.spark)
        self.spark.range(10).write.format("noop_arrow").mode("append").save(
            "noop"
        )  # its Python worker's start

    def load(self, table: str, data: str) -> float:
        path = os.path.join(self.work, f"{table}-load.parquet")
        started = time.perf_counter()
        self.spark.read.parquet(datagen.load_path(data)).write.mode("overwrite").parquet(path)
        return time.perf_counter() - started

    def merge(self, table: str, batch_file: str) -> float:
        frame = self.spark.read.parquet(batch_file).select(*COLUMNS.split(", "), "op")
        started = time.perf_counter()
        frame.write.format("noop_arrow").mode("append").save("noop")
        return time.perf_counter() - started

    def plain_copy_of(self, system: Arctic, table: str) -> None:
        """The R1/R2 floor's data: ``system``'s current rows as one plain Parquet dataset (untimed)."""
        path, _ = arctic.write_plain_copy(
            system.session, system.tables[table], os.path.join(self.work, f"{table}-plain.parquet")
        )
        self.spark.read.parquet(path).createOrReplaceTempView(f"plain_{table}")
        self.tables[table] = f"plain_{table}"

    def query(self, table: str, sql: str) -> tuple[list, float]:
        started = time.perf_counter()
        rows = self.spark.sql(sql.format(table=self.tables[table])).collect()
        return rows, time.perf_counter() - started

    def optimize(self, table: str) -> None:
        return None


class Peer(System):
    """A peer format in a worker process (``spark_peer_worker.py``), one request at a time."""

    def __init__(self, runtime: PeerRuntime, work: str, conf: dict[str, str], timeout: float) -> None:
        super().__init__()
        from arctic_sql.jars import spark_jars

        self.name, self.label, self.timeout = runtime.name, runtime.label, timeout
        jars = spark_jars(*runtime.groups, root=os.environ.get("ARCTIC_SQL_JARS") or REPO / "jars")
        python = runtime.python()
        if not python.exists():
            raise StepError(f"No {python}: make it with 'bash scripts/jars.sh {runtime.venv.lstrip('.')}'")
        os.makedirs(work, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYTHONPATH", "PYSPARK_PYTHON")}
        env.update(PYTHONSAFEPATH="1", SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(python))
        self.log_path = os.path.join(work, "worker.log")
        with open(self.log_path, "w", encoding="utf-8") as log:
            # Own session: on a timeout the worker's whole process group (its JVM too) is killed.
            self.process = subprocess.Popen(
                [str(python), str(WORKER), runtime.name, work, jars, json.dumps(conf)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                start_new_session=True,
            )
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(
            {"ok": False, "error": f"the worker exited (code {self.process.wait()}); see {self.log_path}"}
        )

    def call(self, **request) -> dict:
        if request:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        try:
            answer = self.answers.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise StepError(
                f"no answer to {request.get('cmd', 'start')} in {self.timeout:.0f} s: worker killed"
            ) from None
        if not answer.pop("ok"):
            raise StepError(answer["error"])
        return answer

    def ready(self) -> None:
        self.info.update(self.call())

    def load(self, table: str, data: str) -> float:
        self.tables[table] = self.call(cmd="create", table=table)["table"]
        return self.call(cmd="load", table=table, path=datagen.load_path(data))["seconds"]

    def merge(self, table: str, batch_file: str) -> float:
        return self.call(cmd="merge", table=table, path=batch_file, sql=MERGE_SQL)["seconds"]

    def query(self, table: str, sql: str) -> tuple[list, float]:
        answer = self.call(cmd="query", table=table, sql=sql.format(table=self.tables[table]))
        return answer["rows"], answer["seconds"]

    def optimize(self, table: str) -> float:
        answer = self.call(cmd="optimize", table=table)
        self.info.setdefault("optimize_output", {})[table] = answer["output"]
        return answer["seconds"]

    def files(self, table: str) -> dict:
        answer = self.call(cmd="files", table=table)
        answer.pop("seconds")
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
                self.process.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
