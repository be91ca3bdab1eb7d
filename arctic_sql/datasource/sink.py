"""``df.write.format("arctic")`` and ``df.writeStream.format("arctic")``: Arrow writers.

Spark calls ``write`` in a Python worker per task: it takes a write lease, writes the task's files
with pyarrow (table/writing/arrow_tasks.py) and sends their paths back. The driver-side ``commit`` runs in
another Python process (kept for the session, so its catalog stays open): it makes keys unique
across tasks and commits one version with pyiceberg (table/writing/arrow_commit.py). No Spark job runs
beyond the write itself.

``abort`` runs after failed tasks and also after a failed ``commit``. It deletes a task's files
only while that task's lease shows no commit was sent; a commit that may have landed keeps them
(orphan removal takes them if it did not).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from arctic_sql.errors import CommitStateUnknownError
from arctic_sql.faults import fault_point
from arctic_sql.table.files import storage
from arctic_sql.table.records import leases
from arctic_sql.table.writing.arrow_files import WrittenFile
from arctic_sql.table.writing.arrow_tasks import OVERWRITE, WritePlan, discard, write_task

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass
class TaskFiles(WriterCommitMessage):
    """What one task wrote, under which lease, for which streaming query (None in a batch write)."""

    files: list[WrittenFile] = field(default_factory=list)
    lease_id: str | None = None
    query_id: str | None = None


def _task_write(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> TaskFiles:
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    first = next(batches, None)
    if first is None:
        return TaskFiles(query_id=query_id)
    lease = leases.take(plan.table_root, plan.operation)  # before any file of the task exists
    try:
        files = write_task(plan, _chain(first, batches), task)
    except BaseException:
        leases.release(plan.table_root, lease.lease_id)
        raise
    return TaskFiles(files, lease.lease_id, query_id)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _messages(messages: list[WriterCommitMessage | None]) -> list[TaskFiles]:
    return [m for m in messages if isinstance(m, TaskFiles)]


def _mark_committing(plan: WritePlan, tasks: list[TaskFiles]) -> None:
    for task in tasks:
        if task.lease_id is None:
            continue
        lease = leases.find(plan.table_root, task.lease_id)
        if lease is not None:
            leases.save(plan.table_root, replace(lease, committing=True))


def _release(plan: WritePlan, tasks: list[TaskFiles]) -> None:
    for task in tasks:
        if task.lease_id is not None:
            leases.release(plan.table_root, task.lease_id)


def commit_tasks(plan: WritePlan, load_table, tasks: list[TaskFiles], stream=None) -> None:  # noqa: ANN001
    """Commit what the tasks wrote as one version (nothing if they wrote nothing, unless an overwrite
    of an unpartitioned table: that empties it, as INSERT OVERWRITE does)."""
    from arctic_sql.table.writing.arrow_commit import commit_write, empties_table

    files = [f for t in tasks for f in t.files]
    table = load_table() if files or plan.mode == OVERWRITE else None
    if not files and (table is None or not empties_table(table, plan)):
        _release(plan, tasks)
        return
    assert table is not None  # loaded, as there are files
    _mark_committing(plan, tasks)
    try:
        commit_write(table, plan, files, stream, fresh=True)
        fault_point("sink-after-commit")
    except CommitStateUnknownError:
        raise  # the leases run out on their own
    except BaseException:
        _release(plan, tasks)
        raise
    _release(plan, tasks)


def abort_tasks(plan: WritePlan, tasks: list[TaskFiles]) -> None:
    """Delete the files of tasks whose commit was never sent; keep the rest (see the module doc)."""
    for task in tasks:
        if task.lease_id is None:
            continue
        lease = leases.find(plan.table_root, task.lease_id)
        if lease is None or lease.committing:  # commit() ran: it deleted what did not land, or kept it
            log.info("abort leaves %d file(s) to the commit that ran for them", len(task.files))
            continue
        discard(task.files)
        leases.release(plan.table_root, task.lease_id)


class ArcticBatchWriter(DataSourceArrowWriter):
    """``df.write.format("arctic").mode("append" | "overwrite").save("db.t")``: one version."""

    def __init__(self, plan: WritePlan, load_table, files: storage.StorageConfig) -> None:  # noqa: ANN001
        self.plan = plan
        self.load_table = load_table
        self.files = files

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskFiles:
        storage.configure(self.files)  # a task: this process may never have opened the catalog
        return _task_write(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_tasks(self.plan, self.load_table, _messages(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_tasks(self.plan, _messages(messages))


class ArcticStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("arctic").option("checkpointLocation", c).start("db.t")``: each micro-batch
    is one version, committed once (see table/writing/arrow_commit.py)."""

    def __init__(
        self,
        plan: WritePlan,
        load_table,
        files: storage.StorageConfig,  # noqa: ANN001
        checkpoint: str | None,
    ) -> None:
        self.plan = plan
        self.load_table = load_table
        self.files = files
        self.checkpoint = checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskFiles:
        storage.configure(self.files)  # a task: this process may never have opened the catalog
        return _task_write(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        from arctic_sql.table.writing.arrow_commit import StreamBatch

        tasks = _messages(messages)
        query_id = self.query_id(tasks)
        stream = StreamBatch(query_id, batchId) if query_id else None
        commit_tasks(self.plan, self.load_table, tasks, stream)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        abort_tasks(self.plan, _messages(messages))

    def query_id(self, tasks: list[TaskFiles]) -> str | None:
        """The streaming query's id, which its checkpoint keeps across restarts: what the tasks saw
        as the local property, else the checkpoint's ``metadata`` file."""
        for task in tasks:
            if task.query_id:
                return task.query_id
        return checkpoint_query_id(self.checkpoint) if self.checkpoint else None


def checkpoint_query_id(checkpoint: str) -> str | None:
    fs, path = storage.filesystem(f"{checkpoint.rstrip('/')}/metadata")
    try:
        with fs.open_input_stream(path) as stream:
            return json.loads(stream.read().decode().splitlines()[0]).get("id")
    except (FileNotFoundError, ValueError, IndexError):
        return None
