"""The work the service does on request: optimize (on Spark, in a background thread) and expire
snapshots (metadata and file deletes only, answered at once). Each is recorded where every other
front end records it: optimizing in the table's process records, expiration as a maintenance run.

Spark starts only here, for the first optimize asked for (or at once with ``--optimizer``): reads never
need it. A cancel reaches any optimize running in this process, the ``--optimizer``'s included
(``optimizer/cancellation.py``): its Spark jobs are cancelled, no retry starts, nothing is committed
and the process records ``CANCELLED``. An optimize already committing is not stopped.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from arctic_sql.errors import ArcticError, InvalidArgumentError, failure_summary
from arctic_sql.optimizer import cancellation, process
from arctic_sql.table.maintenance import actions
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.records import optimizing_processes as state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class ConflictError(ArcticError):
    """The request is valid but the table's state does not allow it now (HTTP 409)."""


@dataclass
class OptimizeJob:
    job_id: str
    table: str
    mode: str
    started_ms: int
    thread: threading.Thread
    error: str | None = None  # why it failed, or that nothing was due (no process then)
    done: bool = False
    finished: threading.Event = field(default_factory=threading.Event)


class Jobs:
    """Optimizes started through the API, one at a time per table."""

    def __init__(self, spark: Callable[[], SparkSession], on_change: Callable[[str], None]) -> None:
        self._spark = spark
        self._on_change = on_change
        self._running: dict[str, OptimizeJob] = {}
        self._lock = threading.Lock()

    def optimize(self, table: ArcticTable, mode: str) -> OptimizeJob:
        """Start optimizing ``table`` in ``mode`` in the background; refuses a second one on the table."""
        mode = (mode or process.AUTO).lower()
        if mode not in process.MODES:
            raise InvalidArgumentError(
                f"Unknown optimizing mode '{mode}'; use one of {', '.join(process.MODES)}"
            )
        name = str(table.identifier)
        with self._lock:
            current = self._running.get(name)
            if current is not None and not current.done:
                raise ConflictError(
                    f"An optimize of {name} started by this service is still running (job {current.job_id})"
                )
            if any(r.is_running for r in state.processes(table)):
                raise ConflictError(f"{name} is being optimized by another process; try again when it ends")
            job = OptimizeJob(uuid.uuid4().hex[:12], name, mode, state.now_ms(), threading.Thread())
            job.thread = threading.Thread(
                target=self._run, args=(job, table), name=f"arctic-optimize-{name}", daemon=True
            )
            self._running[name] = job
        job.thread.start()
        return job

    def _run(self, job: OptimizeJob, table: ArcticTable) -> None:
        try:
            spark = self._spark()
            if not process.optimize(spark, table, job.mode, trigger="service-api"):
                job.error = "nothing was due (no partition's trigger fired)"
        except Exception as e:  # noqa: BLE001 - recorded in the process record; logged here
            job.error = failure_summary(e)
            log.error("optimize %s (job %s) failed: %s", job.table, job.job_id, job.error)
        finally:
            job.done = True
            job.finished.set()
            self._on_change(job.table)

    def cancel(self, table: ArcticTable, process_id: str) -> dict[str, Any]:
        """Cancel a running optimizing process of this service process (started through the API or by
        its ``--optimizer``); it ends ``CANCELLED`` having committed nothing."""
        name = str(table.identifier)
        record = next((r for r in state.processes(table) if r.process_id == process_id), None)
        if record is None:
            raise LookupError(f"No optimizing process {process_id} of {name}")
        if not record.is_running:
            raise ConflictError(
                f"Optimizing process {process_id} of {name} has already ended ({record.effective_status})"
            )
        answer = cancellation.request(process_id)
        if answer == cancellation.COMMITTING:
            raise ConflictError(
                f"Optimizing process {process_id} of {name} is committing; it can no longer be cancelled"
            )
        if answer == cancellation.ELSEWHERE:
            raise ConflictError(
                f"Optimizing process {process_id} of {name} runs in another process "
                "(another service or a session); stop it there"
            )
        return {"process_id": process_id, "table": name, "cancelling": True}

    def running(self) -> list[OptimizeJob]:
        return [j for j in self._running.values() if not j.done]

    def recent(self, table: str) -> list[OptimizeJob]:
        """The optimize of ``table`` this service runs, or the last one if it failed or found nothing due."""
        job = self._running.get(table)
        return [job] if job is not None and (not job.done or job.error) else []


def expire_snapshots(
    table: ArcticTable, older_than_ms: int | None, retain_last: int | None
) -> dict[str, Any]:
    """Expire now (the table's retention properties fill what is not given); the action records the run.
    The answer's keys are the action's result fields, as ``CALL system.expire_snapshots`` names its columns."""
    try:
        older_than = (
            None if older_than_ms is None else actions.EPOCH + datetime.timedelta(milliseconds=older_than_ms)
        )
    except OverflowError:
        raise InvalidArgumentError(f"older_than_ms is out of range: {older_than_ms}") from None
    result = actions.expire_snapshots(
        table, older_than=older_than, retain_last=retain_last, trigger="service-api"
    )
    return {"table": str(table.identifier), **dataclasses.asdict(result)}
