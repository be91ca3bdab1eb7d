"""Optimizing processes: what each one did, kept as one JSON file per process beside the table.

A process record lives at ``{table}/optimizing/{process id}.json`` (outside both stores' ``data/``
and ``metadata/`` folders, so orphan cleaning never sees it). It is rewritten on every change of
status and, while the process runs, on every heartbeat, so maintenance can tell a running process
(whose inputs and outputs must not be deleted) from one that died.

Status is an explicit state machine::

    PLANNED ─► EXECUTING ─► COMMITTING ─► SUCCESS      (all partitions committed)
       │          │              ├──────► PARTIAL      (some partitions dropped: inputs moved)
       │          │              ├──────► DROPPED      (every partition dropped: nothing committed)
       │          │              └──────► FAILED       (the commit itself failed)
       │          ├──────────────────────► FAILED       (a task failed after its retries)
       └──────────┴──────────────────────► CANCELLED    (cancelled on request: nothing committed)

A process can be cancelled only before it commits (``optimizer/cancellation.py``).

A record left in an active status whose heartbeat is older than :data:`HEARTBEAT_TIMEOUT_MS`
belongs to a process that crashed; readers report it as ``ABANDONED``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from arctic_sql.errors import ArcticError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable


class Status(StrEnum):
    """Where an optimizing process is (a str: records store it as its value)."""

    PLANNED = "PLANNED"
    EXECUTING = "EXECUTING"
    COMMITTING = "COMMITTING"
    SUCCESS = "SUCCESS"
    PARTIAL = "PARTIAL"
    DROPPED = "DROPPED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    ABANDONED = "ABANDONED"  # never stored: an active record whose heartbeat stopped


PLANNED, EXECUTING, COMMITTING = Status.PLANNED, Status.EXECUTING, Status.COMMITTING
SUCCESS, PARTIAL, DROPPED, FAILED, CANCELLED, ABANDONED = (
    Status.SUCCESS,
    Status.PARTIAL,
    Status.DROPPED,
    Status.FAILED,
    Status.CANCELLED,
    Status.ABANDONED,
)
ACTIVE = frozenset({PLANNED, EXECUTING, COMMITTING})
TRANSITIONS: dict[str, frozenset[str]] = {
    PLANNED: frozenset({EXECUTING, FAILED, CANCELLED}),
    EXECUTING: frozenset({COMMITTING, FAILED, CANCELLED}),
    COMMITTING: frozenset({SUCCESS, PARTIAL, DROPPED, FAILED}),
}
# Amoro's optimizer.heart-beat-timeout is 1 min; a running process heartbeats every HEARTBEAT_MS.
HEARTBEAT_MS = 10_000
HEARTBEAT_TIMEOUT_MS = 60_000
_FAILURE_REASON_LIMIT = 4000  # as Amoro's failedReason
_FAILURE_DETAIL_LIMIT = 64_000  # a JVM stack trace or two


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ProcessRecord:
    """One optimizing process of one table (a row of ``db.t.optimizing``)."""

    process_id: str
    table: str
    mode: str
    trigger: str  # manual (CALL / ALTER TABLE COMPACT) or the service's reason
    status: str
    started_at_ms: int
    heartbeat_ms: int
    output_prefix: str  # every file the process writes lies under this folder
    base_snapshot_id: int | None = None  # the snapshots the plan read
    change_snapshot_id: int | None = None
    ended_at_ms: int | None = None
    partitions: list[str] = field(default_factory=list)
    input_files: int = 0
    input_bytes: int = 0
    output_files: int = 0
    output_bytes: int = 0
    task_time_ms: int = 0  # summed task execution time (what quota scheduling counts)
    retries: int = 0
    failure_reason: str | None = None  # one line: what the lists and the dashboard show
    failure_detail: str | None = None  # the whole message, causes included (the process's own page)

    @property
    def effective_status(self) -> str:
        if self.status in ACTIVE and now_ms() - self.heartbeat_ms > HEARTBEAT_TIMEOUT_MS:
            return ABANDONED
        return self.status

    @property
    def is_running(self) -> bool:
        return self.effective_status in ACTIVE


def table_root(table: ArcticTable) -> str:
    return layout.table_root(table.base.location())


def _folder(table: ArcticTable) -> str:
    return f"{table_root(table)}/optimizing"


def new_record(
    table: ArcticTable, mode: str, trigger: str, base_snapshot_id: int | None, change_snapshot_id: int | None
) -> ProcessRecord:
    process_id = f"{now_ms():013d}-{uuid.uuid4().hex[:8]}"  # sorts by start time
    started = now_ms()
    return ProcessRecord(
        process_id=process_id,
        table=str(table.identifier),
        mode=mode,
        trigger=trigger,
        status=PLANNED,
        started_at_ms=started,
        heartbeat_ms=started,
        output_prefix=f"{table.base.location().rstrip('/')}/data/optimize-{process_id}",
        base_snapshot_id=base_snapshot_id,
        change_snapshot_id=change_snapshot_id,
    )


def save(table: ArcticTable, record: ProcessRecord) -> None:
    """Write the record (whole-file replace: readers see the old or the new one)."""
    storage.replace_file(
        f"{_folder(table)}/{record.process_id}.json", json.dumps(asdict(record), sort_keys=True).encode()
    )


def transition(
    table: ArcticTable,
    record: ProcessRecord,
    status: str,
    *,
    failure: str | None = None,
    detail: str | None = None,
) -> None:
    """Move ``record`` to ``status`` (checked against the state machine) and save it; ``failure`` is the
    one-line reason, ``detail`` the full message behind it."""
    if status not in TRANSITIONS.get(record.status, frozenset()):
        raise ArcticError(
            f"Optimizing process {record.process_id} cannot go from {record.status} to {status}"
        )
    record.status = status
    record.heartbeat_ms = now_ms()
    if status not in ACTIVE:
        record.ended_at_ms = record.heartbeat_ms
    if failure is not None:
        record.failure_reason = failure[:_FAILURE_REASON_LIMIT]
    if detail is not None:
        record.failure_detail = detail[:_FAILURE_DETAIL_LIMIT]
    save(table, record)


def heartbeat(table: ArcticTable, record: ProcessRecord) -> None:
    record.heartbeat_ms = now_ms()
    save(table, record)


def processes(table: ArcticTable, *, strict: bool = True) -> list[ProcessRecord]:
    """Every recorded optimizing process of ``table``, oldest first.

    A record removed while we listed is skipped. Any other record that cannot be read (the store
    failed to answer, or the file is not a process record) raises, naming it: maintenance must not
    take a running process it cannot see for none (it would delete that process's inputs or
    outputs). ``strict=False`` skips such records instead, for callers that only order or show
    processes and must go on (the optimizer's scheduling, the service's dashboard).
    """
    fs, path = storage.filesystem(_folder(table))
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    known = {f.name for f in fields(ProcessRecord)}
    records = []
    for info in sorted(infos, key=lambda i: i.base_name):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                raw = json.loads(stream.read())
            records.append(ProcessRecord(**{k: v for k, v in raw.items() if k in known}))
        except FileNotFoundError:
            continue  # removed while we listed: that process is over
        except (OSError, ValueError, TypeError, AttributeError) as e:
            if not strict:
                continue
            from arctic_sql.errors import ExecutionError

            raise ExecutionError(
                f"Cannot read the optimizing record {storage.prefix(_folder(table), path)}"
                f"{info.path} ({type(e).__name__}: {e}); nothing was changed; "
                "retry, or remove or repair the record"
            ) from None
    return records


def running_processes(table: ArcticTable) -> list[ProcessRecord]:
    """The processes still running: maintenance must keep their input snapshots and output files."""
    return [r for r in processes(table) if r.is_running]
